"""The Operations room's Deliveries: what each signed callback was answered.

The receipts and the refusals of the runner's inbound endpoints, newest first, a page at
a time (``runner.operations.deliveries``): when, which endpoint, the sender's delivery
key, the answer and why, the event emitted; answers alike in one minute on one row,
counted. Filtered to the refused or the received, and to one endpoint. In the
``deliveries`` area, beside the notices outbox; on a tenant binding, the reader's
tenant's callbacks only (a callback refused before its body named a tenant is no
tenant's: only a reader of every tenant sees it).
"""

from __future__ import annotations

from starlette.responses import Response

from flowrunner import errors
from flowrunner.web.console.page import Page

PAGE_SIZE = 25
# The answers a reader may keep to, as the page's tabs say them.
SHOWN = {"refused": True, "received": False}


def deliveries(page: Page) -> Response:
    closed = page.outside("deliveries")
    if closed is not None:
        return closed
    shown = page.query.get("shown") or ""
    endpoint = page.query.get("endpoint") or ""
    before = page.query.get("before") or None
    if shown and shown not in SHOWN:
        return page.refusal(f"show the callbacks refused or received, not {shown!r}", status=422)
    try:
        found = page.runner.operations.deliveries(
            refused=SHOWN.get(shown),
            endpoint=endpoint or None,
            tenant=page.tenant,
            before_id=before,
            limit=PAGE_SIZE,
        )
    except errors.RowInvalid as refusal:
        return page.refusal(str(refusal), status=422)
    named = page.runner.operations.delivery_endpoints(tenant=page.tenant)
    return page.render(
        "deliveries.html",
        rows=found.rows,
        next_before=found.next_before,
        shown=shown,
        endpoint=endpoint,
        endpoints=sorted({*named, *page.runner.mounted.inbound}),
    )


ROUTES = [("GET", "/ops/deliveries", deliveries)]
