"""Claiming due work: a worker takes due runs under leases, and gives them back.

``claim_due`` hands due runs to a worker under a lease and moves their ``due_at`` to the
lease's expiry: if the worker dies, the run falls due again when its lease has run out.
On PostgreSQL concurrent claimers pass each other by (``FOR UPDATE SKIP LOCKED`` under
the claim's limit), each filling its claim from the same queue; on SQLite they take
turns. Runs are taken oldest first, and from every tenant in turn where the binding has
tenants (``fair_candidates_query``). A worker that lost its transaction with its
connection gives its claims back at once (``hand_back``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from flowrunner.foundations import shapes, sqltypes
from flowrunner.store import dialects, engine_tables, leases, prepared, wakeups
from flowrunner.store.due import Claim, scoped


def fair_candidates_query(
    *, now: datetime, limit: int, tenant: object, resource: str | None = None
) -> sqltypes.Query:
    """Due runs (of one resource, where given), oldest first but taken from each tenant in turn.

    Each tenant's due runs are numbered by age (``row_number() over (partition by
    tenant order by due_at)``) and the list is ordered by that number first: every
    tenant's oldest, then every tenant's second oldest, and so on. So with ``limit``
    slots and ``k`` tenants that have due work, each tenant gets at least
    ``min(its due, floor(limit / k))`` slots and one tenant's backlog never holds up
    another's; a tenant alone gets all of them.

    The due rows are first found by a range search on ``due_at`` in a subquery of
    their own: with the window directly over the table, SQLite prefers walking a whole
    index, which costs every waiting run, not just the due. With a ``resource`` (a
    worker's claim) the search is on the ``(resource, due_at)`` index: the fairness is
    among one resource's tenants.
    """
    ranked = _ranked(now=now, tenant=tenant, resource=resource).subquery("ranked")
    return (
        sa.select(ranked.c.run_id, ranked.c.tenant, ranked.c.due_at, ranked.c.wakes)
        .where(ranked.c.rank <= limit)
        .order_by(ranked.c.rank, ranked.c.due_at, ranked.c.run_id)
        .limit(limit)
    )


def _ranked(*, now: object, tenant: object, resource: object) -> sqltypes.Query:
    """The due rows with each one's ``rank``: its place in its tenant's line, oldest first.

    ``now``, ``tenant`` and ``resource`` are values or bound parameters.
    """
    table = engine_tables.due
    found = scoped(
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
                scoped(
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
    values: shapes.RowDict = {"p_now": now, "p_limit": limit, "p_held": held_until}
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
        rows = conn.execute(
            fair_candidates_query(now=now, limit=limit, tenant=tenant, resource=resource)
        )
    else:

        def oldest() -> sqltypes.Query:
            query = scoped(
                sa.select(table.c.run_id, table.c.tenant, table.c.due_at, table.c.wakes),
                tenant=None if tenant is None else prepared.param("p_tenant", table.c.tenant),
                resource=None if resource is None else sa.bindparam("p_resource", type_=sa.Text),
            )
            return (
                query.where(table.c.due_at <= prepared.param("p_now", table.c.due_at))
                .order_by(table.c.due_at)
                .limit(sa.bindparam("p_limit", type_=sa.Integer))
            )

        values: shapes.RowDict = {"p_now": now, "p_limit": limit}
        if tenant is not None:
            values["p_tenant"] = tenant
        if resource is not None:
            values["p_resource"] = resource
        rows = conn.execute(
            prepared.statement(("claim_oldest", tenant is None, resource is None), oldest), values
        )
    picked = [_Picked(int(r[0]), r[1], r[2], int(r[3])) for r in rows]
    if picked:
        count = len(picked)

        def hold() -> sa.Update:
            ids = [sa.bindparam(f"p_run_{i}", type_=sa.Integer) for i in range(count)]
            return (
                sa.update(table)
                .where(table.c.run_id.in_(ids))
                .values(due_at=prepared.param("p_held", table.c.due_at))
            )

        prepared.compiled(conn, ("hold_due", count), hold).execute(
            conn, {f"p_run_{i}": p.run_id for i, p in enumerate(picked)} | {"p_held": held_until}
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


def claim_run(
    engine: sa.Engine, *, run_id: int, owner: str, now: datetime, ttl: leases.Ttl
) -> Claim | None:
    """Claim one named run for ``owner`` whether or not it is due (an operator's "now"),
    under its lease ``run:<id>``; None while another owner holds that lease.

    The claim carries the run's due row as it is (its time and wake count), so the step's
    save (``saves.save_step``) puts it back or moves it on as it would for a due claim.
    """
    table = engine_tables.due
    with dialects.begin(engine) as conn:
        epoch = leases.acquire_lease(
            conn, name=leases.run_lease(run_id), owner=owner, now=now, ttl=ttl
        )
        if epoch is None:
            return None
        row = conn.execute(
            sa.select(table.c.due_at, table.c.wakes, table.c.tenant).where(table.c.run_id == run_id)
        ).one_or_none()
    if row is None:
        return Claim(run_id, epoch, now)
    return Claim(run_id, epoch, row.due_at, int(row.wakes), row.tenant)
