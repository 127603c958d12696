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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from flowrunner import sqltypes, statuses
from flowrunner.store import dialects, engine_tables, leases, prepared


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
        return stmt.on_conflict_do_update(
            index_elements=["run_id"],
            set_={"due_at": offered.due_at, "tenant": offered.tenant, "resource": offered.resource},
        )

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
        query = sa.select(runs.c.id, runs.c.tenant).where(
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
        prepared.statement(("wake_record", tenant is None, except_run is None), build),
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
    for run_id, run_tenant in woken:
        conn.execute(
            upsert,
            {"p_run": run_id, "p_tenant": run_tenant, "p_now": now, "p_resource": resource},
        )
    return [int(run_id) for run_id, _ in woken]


def _scoped(query: sa.Select[Any], *, tenant: object, resource: str | None) -> sa.Select[Any]:
    """``query`` over the due rows of one tenant and one resource, where given."""
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
    ranked = sa.select(due_now, rank).subquery("ranked")
    return (
        sa.select(ranked.c.run_id, ranked.c.tenant, ranked.c.due_at, ranked.c.wakes)
        .where(ranked.c.rank <= limit)
        .order_by(ranked.c.rank, ranked.c.due_at, ranked.c.run_id)
        .limit(limit)
    )


def _fair_candidates(
    conn: sa.Connection, *, now: datetime, limit: int, tenant: object, resource: str | None
) -> list[tuple[int, str | None, datetime, int]]:
    query = fair_candidates_query(now=now, limit=limit, tenant=tenant, resource=resource)
    return [(int(r[0]), r[1], r[2], int(r[3])) for r in conn.execute(query)]


def _leases_in_use(conn: sa.Connection, run_ids: set[int]) -> set[int]:
    """Runs whose lease row an open transaction is writing under (PostgreSQL).

    Such a run is being worked on right now. Skipping it, instead of waiting for its
    lease row, means a claimer never waits for a lease while holding due rows, so it
    cannot deadlock with a worker that checked its lease and then writes its due row.
    """
    if not run_ids or conn.dialect.name != "postgresql":
        return set()
    table = engine_tables.leases
    names = {leases.run_lease(run_id): run_id for run_id in run_ids}
    existing = set(conn.execute(sa.select(table.c.name).where(table.c.name.in_(names))).scalars())
    free = set(
        conn.execute(
            dialects.skip_locked(conn, sa.select(table.c.name).where(table.c.name.in_(existing)))
        ).scalars()
    )
    return {names[name] for name in existing - free}


def claim_due(
    engine: sa.Engine,
    *,
    now: datetime,
    owner: str,
    limit: int,
    ttl: leases.Ttl,
    tenant: object = None,
    resource: str | None = None,
) -> list[Claim]:
    """Claim up to ``limit`` due runs for ``owner``, each under the lease ``run:<id>``.

    A runner's worker passes its ``resource``: it claims only that resource's runs,
    so several runners share one database without touching each other's runs.

    Runs in its own short transaction. On PostgreSQL the due rows are locked with
    ``FOR UPDATE SKIP LOCKED``, so concurrent claimers pass each other by; on SQLite
    the transaction begins IMMEDIATE, so claimers take turns. A run whose lease
    another owner holds is skipped and left due when that lease runs out.
    """
    if limit <= 0:
        return []
    # Ask for a few more than needed: some may be locked or leased by others.
    wanted = limit + math.ceil(limit / 2)
    claims: list[Claim] = []
    with dialects.begin(engine) as conn:
        candidates = _fair_candidates(conn, now=now, limit=wanted, tenant=tenant, resource=resource)
        if not candidates:
            return []
        table = engine_tables.due
        # Window functions cannot be locked, so lock the chosen rows in a second
        # statement, re-checking that they are still due.
        # The wake count is read again under the lock: it is what a finishing worker
        # compares with to tell whether the run was woken after this claim.
        locked: dict[int, int] = {
            int(run_id): int(wakes)
            for run_id, wakes in conn.execute(
                dialects.skip_locked(
                    conn,
                    sa.select(table.c.run_id, table.c.wakes).where(
                        table.c.run_id.in_([c[0] for c in candidates]), table.c.due_at <= now
                    ),
                )
            )
        }
        busy = _leases_in_use(conn, set(locked))
        eligible = [c for c in candidates if c[0] in locked and c[0] not in busy]
        taken: dict[str, int] = {}
        for start in range(0, len(eligible), limit):
            # Usually one round; another only when some leases were held by others.
            needed = limit - len(taken)
            if needed <= 0:
                break
            names = {leases.run_lease(c[0]): c[0] for c in eligible[start : start + needed]}
            taken.update(
                leases.acquire_leases(conn, names=list(names), owner=owner, now=now, ttl=ttl)
            )
            held = sorted(names.keys() - taken.keys())
            # Held by another worker: due again when that lease runs out. The time left
            # is counted by the lease's clock and added to ours, so the due time stays on
            # the clock due times are read by.
            for name, left in leases.time_left(conn, names=held, now=now).items():
                conn.execute(
                    sa.update(table).where(table.c.run_id == names[name]).values(due_at=now + left)
                )
        held_until = now + leases.as_timedelta(ttl)
        for run_id, run_tenant, due_at, _ in eligible:
            epoch = taken.get(leases.run_lease(run_id))
            if epoch is not None:
                claims.append(Claim(run_id, epoch, due_at, locked[run_id], run_tenant, held_until))
        if claims:
            # A claim that dies with its worker is due again once the lease runs out.
            conn.execute(
                sa.update(table)
                .where(table.c.run_id.in_([c.run_id for c in claims]))
                .values(due_at=held_until)
            )
    return claims


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
                    moved = conn.execute(
                        sa.update(table)
                        .where(table.c.run_id == claim.run_id, table.c.due_at == claim.held_until)
                        .values(due_at=claim.due_at)
                    )
            except sa.exc.OperationalError:
                if conn.invalidated:
                    raise
                continue  # its lease row is locked: it waits for its lease instead
            back += moved.rowcount
    return back
