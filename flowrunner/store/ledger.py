"""What was done, for good: idempotency records of commands and the operator journal.

An idempotency record is created ``IN_PROGRESS`` before an effect and marked
``COMPLETED`` with its (sanitized) result in the transaction that commits the
effect, so a retry can tell a finished effect from an interrupted one. The journal
lists every operator action (start, cancel, retry, redrive) with the operator's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowrunner.foundations import sanitize, shapes
from flowrunner.store import dialects, engine_tables, prepared

IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"


@dataclass(frozen=True)
class IdemRow:
    """An idempotency record; ``created`` is True when this call made it."""

    key: str
    tenant: str | None
    status: str
    result: shapes.Json
    created_at: datetime
    updated_at: datetime
    created: bool = False

    @property
    def completed(self) -> bool:
        return self.status == COMPLETED


@dataclass(frozen=True)
class JournalRow:
    """One operator action."""

    id: int
    at: datetime
    operator: str
    action: str
    tenant: str | None
    run_id: int | None
    resource: str | None
    record_id: str | None
    detail: object


def find_idempotent(conn: sa.Connection, *, key: str) -> IdemRow | None:
    """The idempotency record of ``key``, or None."""
    table = engine_tables.idempotency
    row = conn.execute(sa.select(table).where(table.c.key == key)).one_or_none()
    if row is None:
        return None
    return engine_tables.from_row(IdemRow, row)


def results_under(conn: sa.Connection, *, prefix: str) -> list[IdemRow]:
    """The idempotency records whose key starts with ``prefix`` (``run-7/``: a run's
    commands), in key order; ``prefix`` is matched literally, as a bound parameter."""
    table = engine_tables.idempotency
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        sa.select(table).where(table.c.key.like(escaped + "%", escape="\\")).order_by(table.c.key)
    )
    return [engine_tables.from_row(IdemRow, row) for row in rows]


def begin_idempotent(
    conn: sa.Connection, *, key: str, tenant: object = None, now: datetime
) -> IdemRow:
    """Create ``key`` as IN_PROGRESS if it is new; otherwise return the existing record."""
    created = dialects.insert_ignore(
        conn,
        engine_tables.idempotency,
        {"key": key, "tenant": tenant, "status": IN_PROGRESS, "created_at": now, "updated_at": now},
        conflict=["key"],
    )
    row = find_idempotent(conn, key=key)
    assert row is not None
    return IdemRow(**{**row.__dict__, "created": created is not None})


def complete_idempotent(
    conn: sa.Connection, *, key: str, result: object = None, now: datetime
) -> bool:
    """Mark ``key`` COMPLETED with its sanitized result; False when there is no such key."""
    table = engine_tables.idempotency
    outcome = conn.execute(
        sa.update(table)
        .where(table.c.key == key)
        .values(status=COMPLETED, result=_result(result), updated_at=now)
    )
    return outcome.rowcount == 1


def record_idempotent(
    conn: sa.Connection, *, key: str, tenant: object = None, result: object = None, now: datetime
) -> None:
    """Record ``key`` as COMPLETED with its result, whether or not it was begun."""
    record_completed(conn, [Completed(key, tenant, result)], now=now)


@dataclass(frozen=True)
class Completed:
    """One finished effect to record: its idempotency key, its tenant and its result."""

    key: str
    tenant: object = None
    result: object = None


def record_completed(conn: sa.Connection, done: Sequence[Completed], *, now: datetime) -> None:
    """Record each of ``done`` as COMPLETED with its result, in one statement.

    A key recorded before (begun, or completed by an earlier attempt) gets the new
    result; its ``created_at`` stays. The worker records a step's commands this way,
    together with its history lines, in the transaction that commits their writes.
    """
    if not done:
        return
    table = engine_tables.idempotency

    def build() -> dialects.Upsertable:
        stmt = dialects.insert_statement(conn, table).values(
            {c.name: sa.bindparam(c.name, type_=c.type) for c in table.c}
        )
        offered = stmt.excluded
        return stmt.on_conflict_do_update(
            index_elements=["key"],
            set_={
                "status": offered.status,
                "result": offered.result,
                "updated_at": offered.updated_at,
            },
        )

    prepared.compiled(conn, "record_completed", build, many=True).execute_many(
        conn,
        {
            "key": [one.key for one in done],
            "tenant": [one.tenant for one in done],
            "result": [_result(one.result) for one in done],
        },
        shared={"status": COMPLETED, "created_at": now, "updated_at": now},
    )


def _result(result: object) -> object:
    return None if result is None else sanitize.sanitize_value(result)


def journal(
    conn: sa.Connection,
    *,
    operator: str,
    action: str,
    at: datetime,
    tenant: object = None,
    run_id: int | None = None,
    resource: str | None = None,
    record_id: str | None = None,
    detail: shapes.Payload | None = None,
) -> int:
    """Write an operator action to the journal; returns its id."""
    table = engine_tables.journal
    result = conn.execute(
        sa.insert(table)
        .values(
            at=at,
            operator=sanitize.sanitize_text(operator, 200),
            action=action,
            tenant=tenant,
            run_id=run_id,
            resource=resource,
            record_id=None if record_id is None else str(record_id),
            detail=None if detail is None else sanitize.sanitize_fields(detail),
        )
        .returning(table.c.id)
    )
    return int(result.scalar_one())


def journal_entries(
    conn: sa.Connection,
    *,
    run_id: int | None = None,
    tenant: object = None,
    resource: str | None = None,
    record_id: str | None = None,
    operator: str | None = None,
    limit: int = 100,
) -> list[JournalRow]:
    """Journal entries, oldest first, narrowed by any of the given fields."""
    table = engine_tables.journal
    query = sa.select(table)
    for column, value in (
        (table.c.run_id, run_id),
        (table.c.tenant, tenant),
        (table.c.resource, resource),
        (table.c.record_id, None if record_id is None else str(record_id)),
        (table.c.operator, operator),
    ):
        if value is not None:
            query = query.where(column == value)
    rows = conn.execute(query.order_by(table.c.id).limit(limit))
    return [engine_tables.from_row(JournalRow, row) for row in rows]
