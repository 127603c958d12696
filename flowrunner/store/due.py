"""The due-work index: one row per run that has something to do at or after a moment.

Timers, reminders and wake-ups all become a ``due_at`` on the run's row, so finding
what is due is an index range scan (``due_at <= now``) whose cost grows with what is
due, never with how many runs wait. ``claim_due`` hands due runs to a worker under
a lease and moves their ``due_at`` to the lease's expiry: if the worker dies, the
run falls due again when its lease has run out. A worker that lost its transaction
with its connection gives its claims back at once (``hand_back``). Due times are read
by the caller's clock; leases by the database's where it has one (``leases``).

Each row carries its run's resource, so several runners (one per resource) share one
database: a runner's workers claim, count and wait for only their own resource's rows.

Wake-ups (``wake_record``) bump a counter on the row. A worker finishing a claim
passes the claim to ``set_due``; if the counter moved meanwhile the run was woken by
something the worker may not have seen, and it stays due instead of being postponed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from flowrunner import sqltypes, statuses
from flowrunner.store import dialects, engine_tables, leases, prepared, wakeups


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
) -> dict[str, Any]:
    values: dict[str, Any] = {"p_run": run_id, "p_wakes": claim.wakes}
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

    def upsert() -> Any:
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

    def build() -> sa.Select[Any]:
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
    table = engine_tables.due

    def wake() -> Any:
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

    upsert = prepared.statement(("wake_due", conn.dialect.name), wake)
    for run_id, run_tenant, *_ in woken:
        conn.execute(
            upsert,
            {"p_run": run_id, "p_tenant": run_tenant, "p_now": now, "p_resource": resource},
        )
    return [int(row[0]) for row in woken]


def _scoped(query: sa.Select[Any], *, tenant: object, resource: object) -> sa.Select[Any]:
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
    return int(conn.execute(_scoped(query, tenant=tenant, resource=resource)).scalar_one())


def next_due(
    conn: sa.Connection, *, tenant: object = None, resource: str | None = None
) -> datetime | None:
    """The earliest due time of any run (the test driver's next stop), or None.

    ``resource`` keeps to one runner's runs, ``tenant`` to one tenant's.
    """
    table = engine_tables.due
    query = _scoped(sa.select(sa.func.min(table.c.due_at)), tenant=tenant, resource=resource)
    value = conn.execute(query).scalar_one_or_none()
    if value is None:
        return None
    # min() loses the column type on SQLite; read it back through it.
    result: datetime | None = sqltypes.UTCDateTime().process_result_value(value, conn.dialect)
    return result


def fair_candidates_query(
    *, now: datetime, limit: int, tenant: object, resource: str | None = None
) -> sa.Select[Any]:
    """Due runs (of one resource, where given), oldest first but taken from each tenant in turn.

    Each tenant's due runs are numbered by age (``row_number() over (partition by
    tenant order by due_at)``) and the list is ordered by that number first: every
    tenant's oldest, then every tenant's second oldest, and so on. So with ``limit``
    slots and ``k`` tenants that have due work, each tenant gets at least
    ``min(its due, floor(limit / k))`` slots and one tenant's backlog never holds up
    another's; a tenant alone gets all of them.

    The due rows are first found by a range search on ``due_at`` in a subquery of
    their own: with the window directly over the table, SQLite prefers walking the
    whole ``(tenant, due_at)`` index, which costs every waiting run, not just the due.
    With a ``resource`` the search is on the ``(resource, due_at)`` index: the fairness
    is among one resource's tenants.
    """
    ranked = _ranked(now=now, tenant=tenant, resource=resource).subquery("ranked")
    return (
        sa.select(ranked.c.run_id, ranked.c.tenant, ranked.c.due_at, ranked.c.wakes)
        .where(ranked.c.rank <= limit)
        .order_by(ranked.c.rank, ranked.c.due_at, ranked.c.run_id)
        .limit(limit)
    )


def _ranked(*, now: object, tenant: object, resource: object) -> sa.Select[Any]:
    """The due rows with each one's ``rank``: its place in its tenant's line, oldest first.

    ``now``, ``tenant`` and ``resource`` are values or bound parameters.
    """
    table = engine_tables.due
    found = _scoped(
        sa.select(table.c.run_id, table.c.tenant, table.c.due_at, table.c.wakes).where(
            table.c.due_at <= now
        ),
        tenant=tenant,
        resource=resource,
    )
    due_now = found.order_by(table.c.due_at).subquery("due_now")
    rank = (
        sa.func.row_number()
        .over(partition_by=due_now.c.tenant, order_by=(due_now.c.due_at, due_now.c.run_id))
        .label("rank")
    )
    return sa.select(due_now, rank)


@dataclass(frozen=True)
class _Picked:
    """A due row a claim picked: its due time and wake count as they were before."""

    run_id: int
    tenant: str | None
    due_at: datetime
    wakes: int


def _pick_locked(
    conn: sa.Connection,
    *,
    now: datetime,
    limit: int,
    held_until: datetime,
    tenant: object,
    resource: str | None,
    fair: bool,
) -> list[_Picked]:
    """PostgreSQL: lock up to ``limit`` due rows and move them to ``held_until``, in one
    statement; returns the rows as they were, in claim order.

    The rows are locked in claim order by ``FOR UPDATE SKIP LOCKED`` under the ``LIMIT``:
    rows another claimer holds are passed by and the next ones taken instead, so
    concurrent workers fill their claims from one queue without waiting for each other
    or coming back empty. The fair order needs a window function, which cannot be
    locked: it ranks the due rows in a subquery (the first ``2 × limit + 16`` of each
    tenant, enough for that many claimers at once) and the lock is taken on the join.
    """
    table = engine_tables.due

    def build() -> sa.Update:
        p_now = prepared.param("p_now", table.c.due_at)
        p_tenant = None if tenant is None else prepared.param("p_tenant", table.c.tenant)
        p_resource = None if resource is None else sa.bindparam("p_resource", type_=sa.Text)
        if fair:
            ranked = _ranked(now=p_now, tenant=p_tenant, resource=p_resource).subquery("ranked")
            picking = (
                sa.select(table.c.run_id, table.c.due_at, ranked.c.rank.label("place"))
                .join_from(table, ranked, ranked.c.run_id == table.c.run_id)
                .where(table.c.due_at <= p_now, ranked.c.rank <= sa.bindparam("p_wanted"))
                .order_by(ranked.c.rank, table.c.due_at, table.c.run_id)
                .with_for_update(of=table, skip_locked=True)
            )
        else:
            # Oldest first straight off the (resource, due_at) index: the cost follows
            # the claim, not how much is due.
            picking = (
                _scoped(
                    sa.select(table.c.run_id, table.c.due_at, sa.literal(0).label("place")),
                    tenant=p_tenant,
                    resource=p_resource,
                )
                .where(table.c.due_at <= p_now)
                .order_by(table.c.due_at)
                .with_for_update(skip_locked=True)
            )
        # MATERIALIZED: the locking subquery runs once, whatever plan the update takes.
        picked = picking.limit(sa.bindparam("p_limit")).cte("picked").prefix_with("MATERIALIZED")
        return (
            sa.update(table)
            .where(table.c.run_id == picked.c.run_id)
            .values(due_at=prepared.param("p_held", table.c.due_at))
            .returning(
                table.c.run_id,
                table.c.tenant,
                picked.c.due_at.label("was_due"),
                table.c.wakes,
                picked.c.place,
            )
        )

    key = ("claim_pick", fair, tenant is None, resource is None)
    values: dict[str, Any] = {"p_now": now, "p_limit": limit, "p_held": held_until}
    if fair:
        values["p_wanted"] = 2 * limit + 16
    if tenant is not None:
        values["p_tenant"] = tenant
    if resource is not None:
        values["p_resource"] = resource
    rows = list(conn.execute(prepared.statement(key, build), values))
    rows.sort(key=lambda r: (r.place, r.was_due, r.run_id))
    return [_Picked(int(r.run_id), r.tenant, r.was_due, int(r.wakes)) for r in rows]


def _pick_in_turn(
    conn: sa.Connection,
    *,
    now: datetime,
    limit: int,
    held_until: datetime,
    tenant: object,
    resource: str | None,
    fair: bool,
) -> list[_Picked]:
    """SQLite (one writer at a time: the transaction holds the write lock): read the first
    ``limit`` due rows in claim order and move them to ``held_until``."""
    table = engine_tables.due
    if fair:
        query = fair_candidates_query(now=now, limit=limit, tenant=tenant, resource=resource)
    else:
        query = _scoped(
            sa.select(table.c.run_id, table.c.tenant, table.c.due_at, table.c.wakes),
            tenant=tenant,
            resource=resource,
        )
        query = query.where(table.c.due_at <= now).order_by(table.c.due_at).limit(limit)
    picked = [_Picked(int(r[0]), r[1], r[2], int(r[3])) for r in conn.execute(query)]
    if picked:
        conn.execute(
            sa.update(table)
            .where(table.c.run_id.in_([p.run_id for p in picked]))
            .values(due_at=held_until)
        )
    return picked


def claim_due(
    engine: sa.Engine,
    *,
    now: datetime,
    owner: str,
    limit: int,
    ttl: leases.Ttl,
    tenant: object = None,
    resource: str | None = None,
    fair: bool = True,
) -> list[Claim]:
    """Claim up to ``limit`` due runs for ``owner``, each under the lease ``run:<id>``.

    A runner's worker passes its ``resource``: it claims only that resource's runs,
    so several runners share one database without touching each other's runs.
    ``fair`` shares the claim among tenants (``fair_candidates_query``); a binding
    without tenants passes False and its claim reads just the oldest due rows.

    Runs in its own short transaction of two statements on PostgreSQL: the due rows
    are locked with ``FOR UPDATE SKIP LOCKED`` under the limit and moved to the lease's
    expiry (if the worker dies, the run falls due again when its lease has run out),
    then their leases are taken. Concurrent claimers pass each other by and each fills
    its claim. On SQLite the transaction begins IMMEDIATE, so claimers take turns.

    A run whose lease another owner holds is skipped and left due when that lease runs
    out; one whose lease row an open transaction is writing under (its worker is saving
    its step) is skipped and left due as it was.
    """
    if limit <= 0:
        return []
    held_until = now + leases.as_timedelta(ttl)
    pick = _pick_locked if engine.dialect.name == "postgresql" else _pick_in_turn
    with dialects.begin(engine) as conn:
        picked = pick(
            conn,
            now=now,
            limit=limit,
            held_until=held_until,
            tenant=tenant,
            resource=resource,
            fair=fair,
        )
        if not picked:
            return []
        names = [leases.run_lease(p.run_id) for p in picked]
        taken, busy = leases.acquire_leases(conn, names=names, owner=owner, now=now, ttl=ttl)
        claims = [
            Claim(p.run_id, taken[name], p.due_at, p.wakes, p.tenant, held_until)
            for p, name in zip(picked, names, strict=True)
            if name in taken
        ]
        if len(claims) < len(picked):
            _put_back(conn, picked, names, taken, busy, now)
    return claims


def _put_back(
    conn: sa.Connection,
    picked: Sequence[_Picked],
    names: Sequence[str],
    taken: dict[str, int],
    busy: set[str],
    now: datetime,
) -> None:
    """Give the due rows whose leases were not taken their due time back.

    One whose lease another owner holds is due when that lease runs out: the time left is
    counted by the lease's clock and added to ours, so the due time stays on the clock due
    times are read by. One whose lease row was busy is due as it was: its worker is saving
    its step right now and sets the row itself.
    """
    table = engine_tables.due
    held = [name for name in names if name not in taken and name not in busy]
    left = leases.time_left(conn, names=held, now=now)
    for p, name in zip(picked, names, strict=True):
        if name in taken:
            continue
        due_again = now + left[name] if name in left else p.due_at
        conn.execute(sa.update(table).where(table.c.run_id == p.run_id).values(due_at=due_again))


def hand_back(engine: sa.Engine, *, owner: str, claims: Sequence[Claim]) -> int:
    """Give claimed runs back at once, due again as they were: for a worker whose step
    transaction was lost with its database connection. Returns how many went back.

    A run goes back only while its due row still holds the time its claim gave it and
    its lease is still ``owner``'s at the claim's epoch: if the lost transaction did
    commit after all (a connection cut during COMMIT), its step moved the due row on
    and nothing is undone. A lease row another transaction holds is not waited for
    long: that run simply falls due when its lease runs out.
    """
    table = engine_tables.due
    back = 0
    with dialects.begin(engine) as conn:
        dialects.limit_lock_wait(conn, timedelta(seconds=1))
        for claim in claims:
            if claim.held_until is None:
                continue
            try:
                with conn.begin_nested():
                    if not leases.release_lease(
                        conn, name=leases.run_lease(claim.run_id), owner=owner, epoch=claim.epoch
                    ):
                        continue
                    back_again = (
                        sa.update(table)
                        .where(table.c.run_id == claim.run_id, table.c.due_at == claim.held_until)
                        .values(due_at=claim.due_at)
                    )
                    woken_by = wakeups.wake(conn.dialect, table.c.resource)
                    if woken_by is not None:  # another worker may take it at once
                        back_again = back_again.returning(woken_by)
                    moved = conn.execute(back_again)
            except sa.exc.OperationalError:
                if conn.invalidated:
                    raise
                continue  # its lease row is locked: it waits for its lease instead
            back += moved.rowcount
    return back
