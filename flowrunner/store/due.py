"""The due-work index: one row per run that has something to do at or after a moment.

Timers, reminders and wake-ups all become a ``due_at`` on the run's row, so finding
what is due is an index range scan (``due_at <= now``) whose cost grows with what is
due, never with how many runs wait. Workers take due runs with ``claims.claim_due``.
Due times are read by the caller's clock; leases by the database's where it has one
(``leases``).

Each row carries its run's resource, so several runners (one per resource) share one
database: a runner's workers claim, count and wait for only their own resource's rows.

Wake-ups (``wake_record``) bump a counter on the row. A worker finishing a claim
passes the claim to ``set_due``; if the counter moved meanwhile the run was woken by
something the worker may not have seen, and it stays due instead of being postponed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowrunner.foundations import shapes, sqltypes, statuses
from flowrunner.store import dialects, engine_tables, prepared, wakeups


@dataclass(frozen=True)
class Claim:
    """A due run handed to one worker: work on it while holding ``run:<id>`` at ``epoch``.

    ``due_at`` is when it was due; ``held_until`` the due time the claim gave it (when it
    falls due again should the worker die), which ``hand_back`` looks for.
    """

    run_id: int
    epoch: int
    due_at: datetime
    wakes: int = 0
    tenant: str | None = None
    held_until: datetime | None = None


def set_due(
    conn: sa.Connection,
    *,
    run_id: int,
    due_at: datetime | None,
    tenant: object = None,
    claim: Claim | None = None,
) -> bool:
    """Make the run due at ``due_at`` (None: nothing to do); returns whether it was applied.

    A row written here takes its run's resource, read in the same statement, so no
    caller can file a run under another runner's resource.

    With ``claim`` (the worker's own), a run woken since it was claimed is not
    postponed or dropped: it stays due no later than the claim's due time, and
    False is returned.
    """
    if claim is not None:
        # The common case in one statement: not woken since the claim. The WHERE is
        # checked against the row under its lock, so a wake-up committing meanwhile
        # either came first (no match) or waits for us.
        done = prepared.compiled(
            conn, ("set_due", due_at is None), lambda: after_claim(due_at is None)
        ).execute(
            conn, after_claim_values(run_id=run_id, due_at=due_at, tenant=tenant, claim=claim)
        )
        if done.rowcount == 1:
            return True
        return not_as_claimed(conn, run_id=run_id, due_at=due_at, tenant=tenant, claim=claim)
    return _set(conn, run_id=run_id, due_at=due_at, tenant=tenant)


def first_due(started: sa.CTE) -> sa.Insert:
    """The due row of each run a statement just started (``started``: its ``id``,
    ``tenant`` and ``resource``), due at ``p_due``: a start and its due row in one
    statement (``runs.insert_run``, PostgreSQL)."""
    table = engine_tables.due
    return sa.insert(table).from_select(
        ["run_id", "tenant", "due_at", "wakes", "resource"],
        sa.select(
            started.c.id,
            started.c.tenant,
            prepared.param("p_due", table.c.due_at),
            sa.literal_column("0"),
            started.c.resource,
        ),
    )


def after_claim(dropped: bool) -> sa.Delete | sa.Update:
    """``set_due``'s statement for a claimed run not woken since its claim: the due row
    dropped (``dropped``) or moved on, its values named as ``after_claim_values`` names
    them. It changes no row of a run woken meanwhile (see ``not_as_claimed``)."""
    table = engine_tables.due
    unchanged = sa.and_(
        table.c.run_id == sa.bindparam("p_run"), table.c.wakes == sa.bindparam("p_wakes")
    )
    if dropped:
        return sa.delete(table).where(unchanged)
    return (
        sa.update(table)
        .where(unchanged)
        .values(
            due_at=prepared.param("p_due", table.c.due_at),
            tenant=prepared.param("p_tenant", table.c.tenant),
        )
    )


def after_claim_values(
    *, run_id: int, due_at: datetime | None, tenant: object, claim: Claim
) -> shapes.RowDict:
    values: shapes.RowDict = {"p_run": run_id, "p_wakes": claim.wakes}
    if due_at is not None:
        values |= {"p_due": due_at, "p_tenant": tenant}
    return values


def not_as_claimed(
    conn: sa.Connection, *, run_id: int, due_at: datetime | None, tenant: object, claim: Claim
) -> bool:
    """``set_due`` for a claimed run whose due row ``after_claim`` did not change: woken
    since its claim (it stays due no later than the claim's due time; False), or without
    a due row (made due at ``due_at``, or left without one)."""
    table = engine_tables.due
    woken = conn.execute(
        sa.select(table.c.wakes).where(table.c.run_id == run_id).with_for_update()
    ).scalar_one_or_none()
    if woken is not None and woken != claim.wakes:
        earliest = claim.due_at if due_at is None else min(due_at, claim.due_at)
        conn.execute(
            sa.update(table)
            .where(table.c.run_id == run_id, table.c.due_at > earliest)
            .values(due_at=earliest)
        )
        return False
    return _set(conn, run_id=run_id, due_at=due_at, tenant=tenant)


def _set(conn: sa.Connection, *, run_id: int, due_at: datetime | None, tenant: object) -> bool:
    table = engine_tables.due
    if due_at is None:
        prepared.compiled(
            conn,
            "drop_due",
            lambda: sa.delete(table).where(table.c.run_id == sa.bindparam("p_run")),
        ).execute(conn, {"p_run": run_id})
        return True

    def upsert() -> sa.ClauseElement:
        runs = engine_tables.runs
        stmt = dialects.insert_statement(conn, table).values(
            run_id=sa.bindparam("p_run"),
            tenant=prepared.param("p_tenant", table.c.tenant),
            due_at=prepared.param("p_due", table.c.due_at),
            wakes=0,
            resource=sa.select(runs.c.resource)
            .where(runs.c.id == sa.bindparam("p_run"))
            .scalar_subquery(),
        )
        offered = stmt.excluded
        stmt = stmt.on_conflict_do_update(
            index_elements=["run_id"],
            set_={"due_at": offered.due_at, "tenant": offered.tenant, "resource": offered.resource},
        )
        # Due outside a claim (a start, an operator's action): idle workers look at once.
        woken_by = wakeups.wake(conn.dialect, table.c.resource)
        return stmt if woken_by is None else stmt.returning(woken_by)

    prepared.compiled(conn, "upsert_due", upsert).execute(
        conn, {"p_run": run_id, "p_tenant": tenant, "p_due": due_at}
    )
    return True


def wake_record(
    conn: sa.Connection,
    *,
    resource: str,
    record_id: str,
    tenant: object = None,
    now: datetime,
    except_run: int | None = None,
) -> list[int]:
    """Make every run of the record that has not ended due now; returns their ids.

    Called in the transaction that changed the record or stored an event about it
    (``except_run``: the run whose own step changed it). A run already due earlier
    keeps its earlier time.
    """
    runs = engine_tables.runs

    def build() -> sqltypes.Query:
        query = sa.select(runs.c.id, runs.c.tenant)
        woken_by = wakeups.wake(conn.dialect, sa.bindparam("p_resource", type_=sa.Text))
        if woken_by is not None:
            # Sent for the runs found (made due now below), once, when the caller commits.
            query = query.add_columns(woken_by)
        query = query.where(
            runs.c.resource == sa.bindparam("p_resource"),
            runs.c.record_id == sa.bindparam("p_record"),
            runs.c.status.in_(sorted(s.value for s in statuses.OPEN)),
        )
        if tenant is not None:
            query = query.where(runs.c.tenant == prepared.param("p_tenant", runs.c.tenant))
        if except_run is not None:
            query = query.where(runs.c.id != sa.bindparam("p_except"))
        return query.order_by(runs.c.id)

    woken = conn.execute(
        prepared.statement(
            ("wake_record", conn.dialect.name, tenant is None, except_run is None), build
        ),
        {
            "p_resource": resource,
            "p_record": str(record_id),
            "p_tenant": tenant,
            "p_except": except_run,
        },
    ).all()
    if not woken:
        return []
    upsert = _waking(conn)
    for run_id, run_tenant, *_ in woken:
        conn.execute(
            upsert,
            {"p_run": run_id, "p_tenant": run_tenant, "p_now": now, "p_resource": resource},
        )
    return [int(row[0]) for row in woken]


def wake_run(conn: sa.Connection, *, run_id: int, now: datetime) -> bool:
    """Make one run that has not ended due now, as ``wake_record`` does a record's runs
    (a code workflow's child that ends wakes its parent); whether it was open.

    A run already due earlier keeps its earlier time; a worker that holds it meanwhile
    keeps it due (the wake counts, as ``set_due`` with a claim reads it).
    """
    runs = engine_tables.runs

    def build() -> sqltypes.Query:
        query = sa.select(runs.c.tenant, runs.c.resource).where(
            runs.c.id == sa.bindparam("p_run", type_=runs.c.id.type),
            runs.c.status.in_(sorted(s.value for s in statuses.OPEN)),
        )
        woken_by = wakeups.wake(conn.dialect, runs.c.resource)
        # Sent for the run found (made due now below) when the caller commits.
        return query if woken_by is None else query.add_columns(woken_by)

    found = conn.execute(
        prepared.statement(("wake_run", conn.dialect.name), build), {"p_run": run_id}
    ).first()
    if found is None:
        return False
    tenant, resource = found[0], found[1]
    conn.execute(
        _waking(conn),
        {"p_run": run_id, "p_tenant": tenant, "p_now": now, "p_resource": resource},
    )
    return True


def _waking(conn: sa.Connection) -> dialects.Upsertable:
    """The upsert that makes one run due no later than ``p_now`` and counts the wake."""
    table = engine_tables.due

    def wake() -> dialects.Upsertable:
        stmt = dialects.insert_statement(conn, table).values(
            run_id=sa.bindparam("p_run"),
            tenant=prepared.param("p_tenant", table.c.tenant),
            due_at=prepared.param("p_now", table.c.due_at),
            wakes=1,
            resource=sa.bindparam("p_resource"),
        )
        offered = stmt.excluded
        return stmt.on_conflict_do_update(
            index_elements=["run_id"],
            set_={
                "due_at": sa.case(
                    (table.c.due_at > offered.due_at, offered.due_at), else_=table.c.due_at
                ),
                "wakes": table.c.wakes + 1,
            },
        )

    return prepared.statement(("wake_due", conn.dialect.name), wake)


def scoped(query: sqltypes.Query, *, tenant: object, resource: object) -> sqltypes.Query:
    """``query`` over the due rows of one tenant and one resource, where given (as values
    or bound parameters)."""
    table = engine_tables.due
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    if resource is not None:
        query = query.where(table.c.resource == resource)
    return query


def due_count(
    conn: sa.Connection, *, now: datetime, tenant: object = None, resource: str | None = None
) -> int:
    """How many runs are due at ``now`` (of one tenant, of one resource, where given)."""
    table = engine_tables.due
    query = sa.select(sa.func.count()).select_from(table).where(table.c.due_at <= now)
    return int(conn.execute(scoped(query, tenant=tenant, resource=resource)).scalar_one())


def next_due(
    conn: sa.Connection, *, tenant: object = None, resource: str | None = None
) -> datetime | None:
    """The earliest due time of any run (the test driver's next stop), or None.

    ``resource`` keeps to one runner's runs, ``tenant`` to one tenant's.
    """
    table = engine_tables.due
    query = scoped(sa.select(sa.func.min(table.c.due_at)), tenant=tenant, resource=resource)
    value = conn.execute(query).scalar_one_or_none()
    if value is None:
        return None
    # min() loses the column type on SQLite; read it back through it.
    result: datetime | None = sqltypes.UTCDateTime().process_result_value(value, conn.dialect)
    return result
