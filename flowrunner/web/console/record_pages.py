"""A record's page: its runs newest first (flow, status, where each waits and for what,
its diagram with the run drawn over it, its history in sentences), and the manual flows
an operator may start on it."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from flowrunner import errors
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import statuses
from flowrunner.store import records
from flowrunner.web.console import refresh, run_view
from flowrunner.web.console.page import Page


def lookup(page: Page) -> Response:
    """The header's "Record" box: to the record's page."""
    record_id = page.query.get("id", "").strip()
    if not record_id:
        return page.redirect("/")
    return page.redirect(f"/record/{record_id}")


def record_page(page: Page, *, refused: str | None = None) -> Response:
    runner = page.runner
    record_id = page.params["record_id"]
    key = _key(page, record_id)
    runs = runner.operations.runs(key, tenant=page.tenant)
    with page.reading() as conn:
        record = records.load_record(conn, runner.tables, runner.tables.key_value(key), page.tenant)
        if record is None and not runs:
            raise errors.OperatorError(
                f"there is no {runner.binding.resource} {record_id!r}",
                status_code=404,
                code="record_unknown",
            )
        views = [run_view.view(conn, page, run) for run in runs]
        manual = [
            flow
            for flow in TenantRows(runner.mounted).flows(conn, page.tenant)
            if flow.get("start") == "manual" and flow.get("active") in (True, 1, None)
        ]
    may_start = record is not None and page.console.access.may(page.reader, "start", None)
    return page.render(
        "record.html",
        status=409 if refused else 200,
        record_id=key,
        resource=runner.binding.resource,
        exists=record is not None,
        views=views,
        manual=manual if may_start else [],
        may_start=may_start,
        refused=refused,
        ended=statuses.ENDED,
        refresh=refresh.of(page, f"/record/{record_id}"),
    )


def _key(page: Page, record_id: str) -> str:
    """The record's key as runs keep it; an id its column cannot hold names no record."""
    try:
        return str(page.runner.tables.key_value(record_id))
    except errors.RecordRejected:
        raise errors.OperatorError(
            f"there is no {page.runner.binding.resource} {record_id!r}",
            status_code=404,
            code="record_unknown",
        ) from None


def start(page: Page) -> Response:
    """An operator starts a manual flow on the record; journaled with their name."""
    record_id = page.params["record_id"]
    flow: Any = page.form.get("flow")
    if not page.console.access.may(page.reader, "start", None):
        raise errors.OperatorError(
            f"{page.reader.name} may not start flows", status_code=403, code="not_allowed"
        )
    try:
        run_id = page.runner.start(
            flow, _key(page, record_id), operator=page.reader.name, tenant=page.tenant
        )
    except errors.OperatorError as refused:
        if refused.status_code == 404 and refused.code == "record_unknown":
            raise
        return record_page(page, refused=str(refused))
    return page.redirect(f"/record/{record_id}", said=f"Started run {run_id}.")


ROUTES = [
    ("GET", "/record", lookup),
    ("GET", "/record/{record_id}", record_page),
    ("POST", "/record/{record_id}/start", start),
]
