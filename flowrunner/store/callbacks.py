"""What each signed callback was answered: receipts and refusals, newest first.

``record_callback`` keeps one answer of an inbound endpoint — its name (None for a name
no inbound has), the sender's delivery key once the body was read, the status, the
reason, the event emitted, the tenant — and never the body, a header or a secret.
Answers alike (the same endpoint, key, status and reason) within one minute of the
clock fold into one row, counted, with the time of the first and of the last: a flood
of refused callbacks adds a row a minute for each reason it earns, not a row a request.
``callbacks_page`` lists one resource's rows, newest first; the prune
(``store.retention``) deletes those last answered before its cutoff.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowrunner.foundations import sanitize, sqltypes
from flowrunner.store import dialects, engine_tables, listing

# A reason is one sanitized line of at most this many characters.
MAX_REASON = 300
ACCEPTED = 204


@dataclass(frozen=True)
class CallbackRow:
    """One answer (or several alike in one minute) of an inbound endpoint."""

    id: int
    tenant: str | None
    resource: str
    endpoint: str | None
    """The inbound's name; None when the name called is no inbound's."""
    key: str | None
    """The sender's delivery key; None when the callback was refused before it was read."""
    status: int
    """The HTTP status answered: 204 received, anything else refused."""
    reason: str
    event_id: int | None
    """The event the callback emitted, if any."""
    fold: str
    count: int
    """How many callbacks were answered so within the minute of ``at``."""
    at: datetime
    last_at: datetime

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED


def record_callback(
    conn: sa.Connection,
    *,
    resource: str,
    endpoint: str | None,
    key: str | None,
    status: int,
    reason: str,
    event_id: int | None,
    tenant: object,
    now: datetime,
) -> None:
    """Keep one answer, folded into the row of the same answer in ``now``'s minute."""
    said = sanitize.sanitize_text(reason, MAX_REASON)
    minute = now.replace(second=0, microsecond=0).isoformat()
    parts = [resource, endpoint, key, status, said, None if tenant is None else str(tenant)]
    fold = hashlib.sha256(json.dumps([*parts, minute]).encode("utf-8")).hexdigest()
    table = engine_tables.callbacks
    dialects.upsert(
        conn,
        table,
        {
            "tenant": tenant,
            "resource": resource,
            "endpoint": endpoint,
            "key": key,
            "status": status,
            "reason": said,
            "event_id": event_id,
            "fold": fold,
            "count": 1,
            "at": now,
            "last_at": now,
        },
        conflict=["fold"],
        update={"count": table.c.count + 1, "last_at": now},
    )


def callbacks_page(
    conn: sa.Connection,
    *,
    resource: str,
    tenant: object,
    no_tenant: bool = False,
    refused: bool | None = None,
    endpoint: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> listing.Page[CallbackRow]:
    """``resource``'s answers (of ``tenant`` if named), newest first: only the refusals
    (``refused=True``), only the receipts (False) or both; of one ``endpoint`` if named;
    with ``no_tenant``, only those that name no tenant."""
    table = engine_tables.callbacks
    query = sa.select(table).where(table.c.resource == resource)
    if no_tenant:
        query = query.where(table.c.tenant.is_(None))
    elif tenant is not None:
        query = query.where(table.c.tenant == tenant)
    if refused is True:
        query = query.where(table.c.status != ACCEPTED)
    elif refused is False:
        query = query.where(table.c.status == ACCEPTED)
    if endpoint is not None:
        query = query.where(table.c.endpoint == endpoint)
    if before_id is not None:
        query = query.where(table.c.id < before_id)
    return listing.page_of(conn, query.order_by(table.c.id.desc()), _row, limit)


def callback_endpoints(conn: sa.Connection, *, resource: str, tenant: object) -> list[str]:
    """The names of ``resource``'s inbound endpoints that have answers kept, sorted."""
    table = engine_tables.callbacks
    query = (
        sa.select(table.c.endpoint)
        .distinct()
        .where(table.c.resource == resource, table.c.endpoint.is_not(None))
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    return sorted(str(name) for name in conn.execute(query).scalars())


def _row(row: sqltypes.ResultRow) -> CallbackRow:
    return engine_tables.from_row(CallbackRow, row)
