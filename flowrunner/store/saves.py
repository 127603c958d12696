"""A claimed run's step saved: the lease fence, the run's new state and its due row.

``checkpoint_run`` saves an open run part way through its step (a checkpoint after a
command): the run's state over the version the step read, fenced by the claim's lease in
the same statement (an ``EXISTS`` on the lease row), the lease neither given up nor
renewed — one statement on both dialects.

Three writes that go together at the end of every step: the fence (refused unless the
claim's lease is still the worker's, and giving the lease up), the run's state over the
version the step read, and the due row moved on unless the run was woken since its
claim. On PostgreSQL they are one statement (each part a data-modifying CTE that runs
only if the one before it changed its row), so a step's save is one round trip; on
SQLite, one process on one file, they are the three statements of ``leases``, ``runs``
and ``due``. Either way each part is the statement its module builds, and a refusal
raises the same ``LeaseLost``.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowrunner.foundations import shapes, sqltypes, statuses
from flowrunner.store import due, engine_tables, leases, prepared, runs


def save_step(
    conn: sa.Connection,
    *,
    run_id: int,
    expected_version: int,
    state: shapes.Payload,
    status: str,
    now: datetime,
    error: shapes.Payload | None = None,
    reason: str | None = None,
    owner: str,
    claim: due.Claim,
    due_at: datetime | None,
    tenant: object = None,
) -> None:
    """Fence and give up the claim's lease (``forget`` it when the run ended), save the
    run over ``expected_version``, and make it due at ``due_at`` (None: nothing to wait
    for) — as ``finish_lease``, ``save_run`` and ``set_due(claim=...)`` do in turn.

    Raises ``errors.LeaseLost`` when the lease is no longer ``owner``'s at the claim's
    epoch, or the run changed since it was read; nothing is then saved.
    """
    name = leases.run_lease(run_id)
    ended = statuses.RunStatus(status) in statuses.ENDED
    if conn.dialect.name != "postgresql":
        leases.finish_lease(conn, name=name, owner=owner, epoch=claim.epoch, forget=ended)
        runs.save_run(
            conn,
            run_id,
            expected_version=expected_version,
            state=state,
            status=status,
            now=now,
            error=error,
            reason=reason,
        )
        due.set_due(conn, run_id=run_id, due_at=due_at, tenant=tenant, claim=claim)
        return
    dropped = due_at is None
    fenced, saved, moved = (
        prepared.compiled(conn, ("save_step", ended, dropped), lambda: _together(ended, dropped))
        .execute(
            conn,
            leases.finishing_values(name=name, owner=owner, epoch=claim.epoch, forget=ended)
            | runs.saving_values(
                run_id,
                expected_version=expected_version,
                state=state,
                status=status,
                now=now,
                error=error,
                reason=reason,
            )
            | due.after_claim_values(run_id=run_id, due_at=due_at, tenant=tenant, claim=claim),
        )
        .one()
    )
    if not fenced:
        raise leases.lost(name=name, owner=owner, epoch=claim.epoch)
    if not saved:
        raise runs.changed(run_id, expected_version)
    if not moved:
        due.not_as_claimed(conn, run_id=run_id, due_at=due_at, tenant=tenant, claim=claim)


def checkpoint_run(
    conn: sa.Connection,
    *,
    run_id: int,
    expected_version: int,
    state: shapes.Payload,
    status: str,
    now: datetime,
    owner: str,
    epoch: int,
    stored_status: str | None = None,
) -> int:
    """Save the run's state over ``expected_version`` while ``owner`` still holds its
    lease at ``epoch``, in one statement; returns the new version.

    ``stored_status`` is the status the row held at ``expected_version``: when it is
    ``status`` already, the statement leaves the column alone. On SQLite a column set,
    even to the value it holds, rewrites every index that holds it (three of the runs'
    do): three pages more in the checkpoint's commit.

    Raises ``errors.LeaseLost`` when the lease is another's now, or the run changed since
    it was read (a second statement, on refusal only, tells which); nothing is saved.
    """
    name = leases.run_lease(run_id)
    keeps = stored_status is not None and statuses.RunStatus(stored_status) == status
    result = prepared.compiled(
        conn, ("checkpoint_run", keeps), lambda: _fenced_save(keeps_status=keeps)
    ).execute(
        conn,
        runs.saving_values(
            run_id, expected_version=expected_version, state=state, status=status, now=now
        )
        | {"p_name": name, "p_owner": owner, "p_epoch": epoch},
    )
    if result.rowcount == 1:
        return expected_version + 1
    holder = leases.lease_holder(conn, name=name)
    if holder is None or holder[:2] != (owner, epoch):
        raise leases.lost(name=name, owner=owner, epoch=epoch)
    raise runs.changed(run_id, expected_version)


def _fenced_save(*, keeps_status: bool) -> sa.Update:
    """``save_run``'s statement for an open run, refused unless the lease is still ours;
    ``keeps_status``: without the status (the row holds it already)."""
    table = engine_tables.leases
    ours = (
        sa.select(table.c.name)
        .where(
            table.c.name == sa.bindparam("p_name"),
            table.c.owner == sa.bindparam("p_owner"),
            table.c.epoch == sa.bindparam("p_epoch"),
        )
        .exists()
    )
    return runs.saving(ended=False, keeps_status=keeps_status).where(ours)


def _together(ended: bool, dropped: bool) -> sqltypes.Query:
    """The three statements as one: each runs only when the one before it changed its
    row, and the counts of rows each changed come back."""
    fence = leases.finishing(forget=ended).returning(engine_tables.leases.c.name).cte("fenced")
    saved = (
        runs.saving(ended)
        .where(sa.select(fence.c.name).exists())
        .returning(engine_tables.runs.c.id)
        .cte("saved")
    )
    moved = (
        due.after_claim(dropped)
        .where(sa.select(saved.c.id).exists())
        .returning(engine_tables.due.c.run_id)
        .cte("moved")
    )
    return sa.select(
        *(
            sa.select(sa.func.count()).select_from(part).scalar_subquery()
            for part in (fence, saved, moved)
        )
    )
