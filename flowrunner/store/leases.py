"""Leases with fencing epochs: who may work on a run (or any named thing) right now.

A lease is a row ``(name, owner, expires_at, epoch)``. Acquiring succeeds when the
row is missing, expired, or already ours, and fails closed when another owner holds
an unexpired one. The epoch grows whenever a *different* owner takes the lease, so
a worker that paused past its lease and lost it to another is refused by
``check_lease`` at its next write, while one whose lease merely expired (nobody took
it) may still write. Every decision is one conditional statement whose row count is
checked, so it is race-safe under PostgreSQL's READ COMMITTED and SQLite alike.

Whose clock judges a lease differs by database. On PostgreSQL it is the database's own
(``clock_timestamp()``, in the statement that acquires, renews or expires): every worker
on every host reads the same clock, so one whose clock runs ahead cannot take a lease
that is still running. The ``now`` these functions take is then not used for leases. On
SQLite (one host) the caller's ``now`` — the process's clock — judges.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from flowrunner import errors
from flowrunner.foundations import shapes
from flowrunner.store import dialects, engine_tables, prepared

Ttl = timedelta | float


def as_timedelta(ttl: Ttl) -> timedelta:
    """A lease time-to-live given as a timedelta or as seconds."""
    return ttl if isinstance(ttl, timedelta) else timedelta(seconds=ttl)


def new_owner_id(prefix: str = "worker") -> str:
    """A fresh owner id: ``worker:host:pid:random``; a restarted process inherits nothing."""
    return f"{prefix}:{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


def acquire_lease(
    conn: sa.Connection, *, name: str, owner: str, now: datetime, ttl: Ttl
) -> int | None:
    """Take or renew the lease ``name`` for ``ttl`` from now; return its epoch, or None.

    None means another owner holds an unexpired lease (fail closed). "Now" is the
    database's clock on PostgreSQL, ``now`` on SQLite (see the module docstring).
    """
    table = engine_tables.leases
    expires = _until(conn, now, ttl)
    # Under READ COMMITTED a concurrent taker blocks on the row and re-checks this
    # WHERE against the committed row, so at most one of two racers matches.
    taken = conn.execute(
        sa.update(table)
        .where(
            table.c.name == name,
            sa.or_(table.c.owner == owner, table.c.expires_at <= _clock(conn, now)),
        )
        .values(
            owner=owner,
            expires_at=expires,
            epoch=sa.case((table.c.owner == owner, table.c.epoch), else_=table.c.epoch + 1),
        )
        .returning(table.c.epoch)
    ).scalar_one_or_none()
    if taken is not None:
        return int(taken)
    inserted = dialects.insert_ignore(
        conn,
        table,
        {"name": name, "owner": owner, "expires_at": expires, "epoch": 1},
        conflict=["name"],
    )
    # Not inserted: the row exists and another owner holds it unexpired (or has
    # just created it concurrently) — either way it is not ours.
    return 1 if inserted is not None else None


def acquire_leases(
    conn: sa.Connection, *, names: Sequence[str], owner: str, now: datetime, ttl: Ttl
) -> tuple[dict[str, int], set[str]]:
    """``acquire_lease`` for many names at once: the epochs of those taken, and the names
    whose lease row another transaction is writing under right now (PostgreSQL).

    The same rules per name: taken if missing, expired or already ``owner``'s; a name
    another owner holds unexpired is left out (fail closed). A lease row locked by an open
    transaction — a worker saving that run's step — is not waited for but left out and
    named in the second set: a claimer holding due rows never waits for a lease, so it
    cannot deadlock with a worker that holds its lease row and then writes its due row.
    On PostgreSQL this is one statement; on SQLite (one writer at a time) two.
    """
    if not names:
        return {}, set()
    if conn.dialect.name == "postgresql":
        taken: dict[str, int] = {}
        busy: set[str] = set()
        rows = conn.execute(
            prepared.statement("acquire_free_leases", _acquire_free_leases),
            {"p_names": list(names), "p_owner": owner, "p_ttl": as_timedelta(ttl)},
        )
        for name, epoch in rows:
            if epoch is None:
                busy.add(str(name))
            else:
                taken[str(name)] = int(epoch)
        return taken, busy
    # SQLite (one writer at a time): two statements, each built once per number of names.
    count = len(names)
    named = {f"p_name_{i}": name for i, name in enumerate(names)}
    expires = now + as_timedelta(ttl)
    taken = {
        str(name): int(epoch)
        for name, epoch in prepared.compiled(conn, ("take_leases", count), lambda: _taking(count))
        .execute(conn, {**named, "p_owner": owner, "p_expires": expires, "p_now": now})
        .rows
    }
    missing = [name for name in names if name not in taken]
    if missing:
        count = len(missing)
        added = prepared.compiled(
            conn, ("add_leases", count), lambda: _adding(conn, count)
        ).execute(
            conn,
            {f"p_name_{i}": name for i, name in enumerate(missing)}
            | {"p_owner": owner, "p_expires": expires},
        )
        taken.update({str(name): 1 for (name,) in added.rows})
    return taken, set()


def _named(count: int) -> list[sa.BindParameter[str]]:
    """``count`` lease names as parameters ``p_name_0``, ``p_name_1``, …"""
    return [sa.bindparam(f"p_name_{i}", type_=sa.Text) for i in range(count)]


def _taking(count: int) -> sa.Update:
    """SQLite's first statement of ``acquire_leases``: take the ``count`` named leases
    that are expired (at ``p_now``) or ``p_owner``'s already; their names and epochs."""
    table = engine_tables.leases
    owner = sa.bindparam("p_owner", type_=sa.Text)
    return (
        sa.update(table)
        .where(
            table.c.name.in_(_named(count)),
            sa.or_(
                table.c.owner == owner,
                table.c.expires_at <= prepared.param("p_now", table.c.expires_at),
            ),
        )
        .values(
            owner=owner,
            expires_at=prepared.param("p_expires", table.c.expires_at),
            epoch=sa.case((table.c.owner == owner, table.c.epoch), else_=table.c.epoch + 1),
        )
        .returning(table.c.name, table.c.epoch)
    )


def _adding(conn: sa.Connection, count: int) -> sa.ClauseElement:
    """SQLite's second statement of ``acquire_leases``: insert the ``count`` named leases
    that have no row yet, at epoch 1; the names inserted."""
    table = engine_tables.leases
    owner = sa.bindparam("p_owner", type_=sa.Text)
    expires = prepared.param("p_expires", table.c.expires_at)
    return (
        dialects.insert_statement(conn, table)
        .values(
            [{"name": n, "owner": owner, "expires_at": expires, "epoch": 1} for n in _named(count)]
        )
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(table.c.name)
    )


def _acquire_free_leases() -> sa.CompoundSelect[Any]:
    """PostgreSQL's ``acquire_leases`` in one statement: lock the named lease rows that
    are free (``SKIP LOCKED``), take those that are expired or ours, insert the missing;
    returns ``(name, epoch)`` for each taken and ``(name, NULL)`` for each locked one.

    All its parts read one snapshot: a row that exists but could not be locked is busy;
    a row that does not exist is inserted (``ON CONFLICT DO NOTHING``: one that another
    claimer inserted meanwhile is simply not ours).
    """
    table = engine_tables.leases
    names = sa.bindparam("p_names", type_=postgresql.ARRAY(sa.Text))
    owner = sa.bindparam("p_owner", type_=sa.Text)
    clock = dialects.postgres_clock()
    expires = clock + sa.bindparam("p_ttl", type_=sa.Interval)
    named = table.c.name == sa.any_(names)
    present = sa.select(table.c.name).where(named).cte("present")
    free = sa.select(table.c.name).where(named).with_for_update(skip_locked=True).cte("free")
    taken = (
        sa.update(table)
        .where(
            table.c.name == free.c.name,
            sa.or_(table.c.owner == owner, table.c.expires_at <= clock),
        )
        .values(
            owner=owner,
            expires_at=expires,
            epoch=sa.case((table.c.owner == owner, table.c.epoch), else_=table.c.epoch + 1),
        )
        .returning(table.c.name, table.c.epoch)
        .cte("taken")
    )
    offered = sa.func.unnest(names, type_=sa.Text).column_valued("offered")
    added = (
        postgresql.insert(table)
        .from_select(
            ["name", "owner", "expires_at", "epoch"],
            sa.select(offered, owner, expires, sa.literal(1)).where(
                offered.not_in(sa.select(present.c.name))
            ),
        )
        .on_conflict_do_nothing(index_elements=["name"])
        .returning(table.c.name, table.c.epoch)
        .cte("added")
    )
    return sa.union_all(
        sa.select(taken.c.name, taken.c.epoch),
        sa.select(added.c.name, added.c.epoch),
        sa.select(present.c.name, sa.null().label("epoch")).where(
            present.c.name.not_in(sa.select(free.c.name))
        ),
    )


def refresh_lease(
    conn: sa.Connection, *, name: str, owner: str, epoch: int, now: datetime, ttl: Ttl
) -> bool:
    """Extend our lease to ``ttl`` from now; False when it is no longer ours at this epoch.

    Compiled once per dialect (a worker renews at each checkpoint of a step): the expiry
    is the database's clock plus ``ttl`` where it has one, else ``now`` plus ``ttl``.
    """
    clocked = dialects.database_clock(conn) is not None
    result = prepared.compiled(conn, ("refresh_lease", clocked), lambda: _renewing(conn)).execute(
        conn,
        {
            "p_name": name,
            "p_owner": owner,
            "p_epoch": epoch,
            "p_ttl": as_timedelta(ttl),
            "p_until": now + as_timedelta(ttl),
        },
    )
    return result.rowcount == 1


def _renewing(conn: sa.Connection) -> sa.Update:
    """``refresh_lease``'s statement."""
    table = engine_tables.leases
    clock = dialects.database_clock(conn)
    until: sa.ColumnElement[datetime] = (
        sa.bindparam("p_until", type_=table.c.expires_at.type)
        if clock is None
        else clock + sa.bindparam("p_ttl", type_=sa.Interval())
    )
    return (
        sa.update(table)
        .where(
            table.c.name == sa.bindparam("p_name"),
            table.c.owner == sa.bindparam("p_owner"),
            table.c.epoch == sa.bindparam("p_epoch"),
        )
        .values(expires_at=until)
    )


def release_lease(conn: sa.Connection, *, name: str, owner: str, epoch: int) -> bool:
    """Give the lease up at once; False when it was not ours at this epoch.

    The row stays (expired) so that the epoch keeps growing for the next owner.
    """
    table = engine_tables.leases
    result = conn.execute(
        sa.update(table)
        .where(table.c.name == name, table.c.owner == owner, table.c.epoch == epoch)
        .values(expires_at=dialects.epoch_start())
    )
    return result.rowcount == 1


def finish_lease(
    conn: sa.Connection, *, name: str, owner: str, epoch: int, forget: bool = False
) -> None:
    """The fence and the release in one statement, inside the transaction that writes.

    Raises ``errors.LeaseLost`` unless the lease still has this owner and epoch; else
    gives it up (kept, expired, so the epoch keeps growing) or, with ``forget``, deletes
    it (the work is over). Either way the row stays locked until the transaction ends,
    and if that transaction rolls back the lease is still held and simply expires.
    """
    result = prepared.compiled(conn, ("finish_lease", forget), lambda: finishing(forget)).execute(
        conn, finishing_values(name=name, owner=owner, epoch=epoch, forget=forget)
    )
    if result.rowcount != 1:
        raise lost(name=name, owner=owner, epoch=epoch)


def finishing(forget: bool) -> sa.Delete | sa.Update:
    """``finish_lease``'s statement, its values named as ``finishing_values`` names them."""
    table = engine_tables.leases
    ours = sa.and_(
        table.c.name == sa.bindparam("p_name"),
        table.c.owner == sa.bindparam("p_owner"),
        table.c.epoch == sa.bindparam("p_epoch"),
    )
    if forget:
        return sa.delete(table).where(ours)
    return (
        sa.update(table)
        .where(ours)
        .values(expires_at=prepared.param("p_expires", table.c.expires_at))
    )


def finishing_values(*, name: str, owner: str, epoch: int, forget: bool) -> shapes.RowDict:
    values: shapes.RowDict = {"p_name": name, "p_owner": owner, "p_epoch": epoch}
    if not forget:
        values["p_expires"] = dialects.epoch_start()
    return values


def lost(*, name: str, owner: str, epoch: int) -> errors.LeaseLost:
    """The refusal of a write under a lease that is no longer ``owner``'s at ``epoch``."""
    return errors.LeaseLost(
        f"the lease {name!r} is no longer held by {owner} at epoch {epoch}; "
        "another worker has taken the work over"
    )


def check_lease(conn: sa.Connection, *, name: str, owner: str, epoch: int) -> None:
    """Raise ``errors.LeaseLost`` unless the lease still has this owner and epoch.

    Call it inside the transaction that writes under the lease: the check is a
    no-op UPDATE, so it locks the lease row (PostgreSQL) or the database (SQLite)
    until that transaction ends, and no one can take the lease in between.
    """
    table = engine_tables.leases
    result = conn.execute(
        sa.update(table)
        .where(table.c.name == name, table.c.owner == owner, table.c.epoch == epoch)
        .values(epoch=table.c.epoch)
    )
    if result.rowcount != 1:
        raise errors.LeaseLost(
            f"the lease {name!r} is no longer held by {owner} at epoch {epoch}; "
            "another worker has taken the work over"
        )


def expire_lease(conn: sa.Connection, *, name: str, now: datetime) -> bool:
    """Let anyone take the lease from now on, whoever holds it (an operator's redrive).

    The holder keeps its epoch, so it may still write until another owner takes the
    lease; from then on ``check_lease`` refuses it. False when there is no such lease.
    """
    table = engine_tables.leases
    clock = _clock(conn, now)
    result = conn.execute(
        sa.update(table)
        .where(table.c.name == name, table.c.expires_at > clock)
        .values(expires_at=clock)
    )
    return result.rowcount == 1


def forget_lease(conn: sa.Connection, *, name: str) -> None:
    """Delete a lease row for good (e.g. when its run has ended)."""
    conn.execute(sa.delete(engine_tables.leases).where(engine_tables.leases.c.name == name))


def lease_holder(conn: sa.Connection, *, name: str) -> tuple[str, int, datetime] | None:
    """``(owner, epoch, expires_at)`` of the lease row, or None when there is none."""
    table = engine_tables.leases
    row = conn.execute(
        sa.select(table.c.owner, table.c.epoch, table.c.expires_at).where(table.c.name == name)
    ).one_or_none()
    return None if row is None else (row.owner, int(row.epoch), row.expires_at)


def time_left(conn: sa.Connection, *, names: Sequence[str], now: datetime) -> dict[str, timedelta]:
    """How long each of the named leases still runs; a lease run out (or missing) is left out.

    A duration, the same whichever clock judged it, so a caller may add it to its own
    ``now`` (a claim that found a run leased makes it due when that lease runs out).
    """
    if not names:
        return {}
    table = engine_tables.leases
    clock = _clock(conn, now)
    query = sa.select(table.c.name, table.c.expires_at).where(
        table.c.name.in_(names), table.c.expires_at > clock
    )
    if dialects.database_clock(conn) is None:
        return {str(row.name): row.expires_at - now for row in conn.execute(query)}
    assert isinstance(clock, sa.ColumnElement)  # the database's clock, then
    rows = conn.execute(query.add_columns(clock.label("at"))).all()
    return {str(row.name): row.expires_at - row.at for row in rows}


def lease_now(conn: sa.Connection, now: datetime) -> datetime:
    """The moment leases are judged at: the database's clock on PostgreSQL, else ``now``."""
    clock = dialects.database_clock(conn)
    if clock is None:
        return now
    moment: datetime = conn.execute(sa.select(clock)).scalar_one()
    return moment


def age_leases(engine: sa.Engine, *, by: timedelta) -> int:
    """Bring every lease not given back ``by`` nearer its end, as though that much time
    had passed.

    For a test driver that moves time by hand: on PostgreSQL leases follow the database's
    clock, which no test can move, so the leases move instead (a dead worker's lease runs
    out when the test's clock passes it, and has run out for as long as the test's clock
    says — what tells a stuck run), in a transaction of their own. Where the caller's
    ``now`` judges leases (SQLite), moving ``now`` is enough and nothing is done. Returns
    how many leases moved.
    """
    if dialects.database_clock(engine) is None or by <= timedelta(0):
        return 0
    table = engine_tables.leases
    with dialects.begin(engine) as conn:
        # A lease row a step holds locked (at its save) is waited for, but not for ever:
        # a test whose worker waits on the test itself fails here instead of hanging.
        dialects.limit_lock_wait(conn, timedelta(seconds=10))
        # A lease given back expires at the epoch's start: it stays there.
        result = conn.execute(
            sa.update(table)
            .where(table.c.expires_at > dialects.epoch_start())
            .values(expires_at=table.c.expires_at - sa.literal(by, sa.Interval()))
        )
    return int(result.rowcount)


def _clock(conn: sa.Connection, now: datetime) -> datetime | sa.ColumnElement[datetime]:
    """What "now" is for leases in a statement on ``conn`` (see the module docstring)."""
    clock = dialects.database_clock(conn)
    return now if clock is None else clock


def _until(conn: sa.Connection, now: datetime, ttl: Ttl) -> datetime | sa.ColumnElement[datetime]:
    """The expiry of a lease taken or renewed now for ``ttl``."""
    clock = dialects.database_clock(conn)
    return now + as_timedelta(ttl) if clock is None else clock + as_timedelta(ttl)


RUN_LEASE = "run:"
"""What the name of a lease on a run begins with (the run's id follows)."""


def run_lease(run_id: int) -> str:
    """The lease name that guards work on one run."""
    return f"{RUN_LEASE}{run_id}"
