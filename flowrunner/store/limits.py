"""A limit's tokens and its waiting line: how many of its commands run at once and how
many started lately, across every worker on one database.

A limit (``foundations.limits.Named``) is kept as token rows under its key:

- ``slot`` tokens, one per command allowed at once: a command holds one (its run's id,
  ``until`` a lease's end, renewed while it runs) and frees it when it ends; a worker
  that dies holds it only until ``until``.
- ``start`` tokens, one per start allowed in the rate's window: each start holds one
  for the window (``until`` = the start plus the window), so no window holds more
  starts than there are tokens.

Taking a token is one ``UPDATE`` of one free row. A run that finds none free (or older
runs waiting their turn) is written in the waiting line with the moment a token is
expected, which the caller makes its due time; a freed slot wakes the oldest waiting
run at once (``free_slot``). Taking and freeing one limit's tokens take turns (an
advisory lock on PostgreSQL; SQLite's writers always do), so the line's order holds.
The token rows are made on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from flowrunner.foundations.limits import Named
from flowrunner.store import dialects, due, engine_tables

SLOT = "slot"
START = "start"

_tokens = engine_tables.limit_tokens
_waiting = engine_tables.limit_waiting


@dataclass(frozen=True)
class Turn:
    """What ``take_turn`` found: the tokens taken (``taken``), or when to come back
    (``again_at``) and how many runs wait ahead (``ahead``)."""

    taken: bool
    again_at: datetime | None = None
    ahead: int = 0


def _lock(conn: sa.Connection, key: str) -> None:
    dialects.lock_for_transaction(conn, f"flowrunner-limit:{key}")


def _free(kind: str, count: int, key: str, now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(
        _tokens.c.name == key,
        _tokens.c.kind == kind,
        _tokens.c.number < count,
        sa.or_(_tokens.c.until.is_(None), _tokens.c.until <= now),
    )


def _made(conn: sa.Connection, key: str, kind: str, count: int) -> None:
    """Make ``key``'s first ``count`` tokens of ``kind`` where they are missing."""
    have = conn.execute(
        sa.select(sa.func.count())
        .select_from(_tokens)
        .where(_tokens.c.name == key, _tokens.c.kind == kind, _tokens.c.number < count)
    ).scalar_one()
    if have >= count:
        return
    stmt = dialects.insert_statement(conn, _tokens).on_conflict_do_nothing(
        index_elements=["name", "kind", "number"]
    )
    conn.execute(
        stmt, [{"name": key, "kind": kind, "number": n, "run_id": None} for n in range(count)]
    )


def _take(
    conn: sa.Connection,
    *,
    key: str,
    kind: str,
    count: int,
    run_id: int,
    now: datetime,
    until: datetime,
) -> bool:
    """Take one free token of ``kind`` (one already ``run_id``'s first), in one statement."""
    mine = sa.case((_tokens.c.run_id == run_id, 0), else_=1)
    first_free = (
        sa.select(_tokens.c.number)
        .where(
            sa.or_(
                _free(kind, count, key, now),
                sa.and_(
                    _tokens.c.name == key,
                    _tokens.c.kind == kind,
                    _tokens.c.number < count,
                    _tokens.c.run_id == run_id,
                ),
            )
        )
        .order_by(mine, _tokens.c.number)
        .limit(1)
        .scalar_subquery()
    )
    taken = conn.execute(
        sa.update(_tokens)
        .where(_tokens.c.name == key, _tokens.c.kind == kind, _tokens.c.number == first_free)
        .values(run_id=run_id, until=until)
    )
    return taken.rowcount == 1


def _live_waiting(key: str) -> sa.Select[tuple[int, datetime]]:
    """The runs waiting for ``key`` whose due rows still stand (a run that ended or was
    cancelled since waits no more), oldest first."""
    dues = engine_tables.due
    return (
        sa.select(_waiting.c.run_id, _waiting.c.since)
        .join(dues, dues.c.run_id == _waiting.c.run_id)
        .where(_waiting.c.name == key)
        .order_by(_waiting.c.since, _waiting.c.run_id)
    )


def _free_count(conn: sa.Connection, limit: Named, now: datetime) -> int:
    counts = []
    if limit.concurrency is not None:
        counts.append((SLOT, limit.concurrency))
    if limit.rate is not None:
        counts.append((START, limit.rate.count))
    free = []
    for kind, count in counts:
        free.append(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(_tokens)
                .where(_free(kind, count, limit.key, now))
            ).scalar_one()
        )
    return min(free)


def _ends(conn: sa.Connection, key: str, kind: str, count: int, now: datetime) -> list[datetime]:
    """When each token of ``kind`` held now frees, soonest first."""
    rows = conn.execute(
        sa.select(_tokens.c.until)
        .where(
            _tokens.c.name == key,
            _tokens.c.kind == kind,
            _tokens.c.number < count,
            _tokens.c.until > now,
        )
        .order_by(_tokens.c.until)
    ).scalars()
    return [row for row in rows if row is not None]


def take_turn(
    conn: sa.Connection,
    *,
    limit: Named,
    run_id: int,
    now: datetime | Callable[[], datetime],
    hold: timedelta,
) -> Turn:
    """Take a slot (held until ``now + hold``) and a start of ``limit`` for ``run_id``,
    in the caller's transaction, which should commit at once (on PostgreSQL, a short one
    of its own); one that finds no turn goes in the waiting line with ``wait_turn``.

    A run takes its turn when tokens are free and fewer runs wait ahead of it than
    there are free tokens: the oldest waiting run goes first. Otherwise it waits, and
    ``again_at`` says when a token is expected: the rate's next opening for its place in
    the line, or the last slot's end (a slot freed sooner wakes it: ``free_slot``).
    ``now`` may be the caller's clock, read once the limit's lock is held.
    """
    key = limit.key
    _lock(conn, key)
    if callable(now):
        now = now()  # read once the lock is ours: a start is counted when it is taken
    if limit.concurrency is not None:
        _made(conn, key, SLOT, limit.concurrency)
    if limit.rate is not None:
        _made(conn, key, START, limit.rate.count)
    line = conn.execute(_live_waiting(key)).all()
    since = next((row.since for row in line if row.run_id == run_id), None)
    ahead = [row for row in line if row.run_id != run_id and (since is None or row.since < since)]
    free = _free_count(conn, limit, now)
    if free > len(ahead):
        took = True
        if limit.concurrency is not None:
            took = _take(
                conn,
                key=key,
                kind=SLOT,
                count=limit.concurrency,
                run_id=run_id,
                now=now,
                until=now + hold,
            )
        if took and limit.rate is not None:
            took = _take(
                conn,
                key=key,
                kind=START,
                count=limit.rate.count,
                run_id=run_id,
                now=now,
                until=now + limit.rate.per,
            )
            if not took and limit.concurrency is not None:
                _release(conn, key, run_id)
        if took:
            conn.execute(
                sa.delete(_waiting).where(_waiting.c.name == key, _waiting.c.run_id == run_id)
            )
            return Turn(True)
    return Turn(False, _again_at(conn, limit, now, len(ahead), hold), len(ahead))


def wait_turn(conn: sa.Connection, *, limit: Named, run_id: int, now: datetime) -> None:
    """Put ``run_id`` in ``limit``'s waiting line (``take_turn`` found no turn for it):
    behind everyone, or where it stood if it waited before. Should tokens be free while
    older runs wait, those not woken yet are made due now."""
    key = limit.key
    _lock(conn, key)
    found = conn.execute(
        sa.update(_waiting)
        .where(_waiting.c.name == key, _waiting.c.run_id == run_id)
        .values(woken_at=None)
    )
    if found.rowcount == 0:
        conn.execute(sa.insert(_waiting).values(name=key, run_id=run_id, since=now, woken_at=None))
    free = _free_count(conn, limit, now)
    if free > 0:
        _wake(conn, key, now, free, passing=run_id)


def _again_at(
    conn: sa.Connection, limit: Named, now: datetime, place: int, hold: timedelta
) -> datetime:
    """When the run with ``place`` runs waiting ahead of it may expect its turn.

    A rate's starts open in a known order: the free ones now, then each held one when
    its window has passed, round again a window later; the run's place picks its own.
    A slot frees when its command ends, which nobody knows beforehand: a freed slot
    wakes the waiting runs in order (``free_slot``), and the run is due meanwhile only
    when the last slot held now would lapse, should its worker die.
    """
    times = [now]
    if limit.rate is not None:
        count = limit.rate.count
        ends = _ends(conn, limit.key, START, count, now)
        openings = [now] * (count - len(ends)) + ends
        times.append(openings[place % count] + limit.rate.per * (place // count))
    if limit.concurrency is not None:
        ends = _ends(conn, limit.key, SLOT, limit.concurrency, now)
        times.append(ends[-1] if ends else now + hold)
    return max(times)


def _release(conn: sa.Connection, key: str, run_id: int) -> int:
    freed = conn.execute(
        sa.update(_tokens)
        .where(_tokens.c.name == key, _tokens.c.kind == SLOT, _tokens.c.run_id == run_id)
        .values(run_id=None, until=None)
    )
    return freed.rowcount


def _wake(
    conn: sa.Connection, key: str, now: datetime, count: int, passing: int | None = None
) -> list[int]:
    """Make due now those of the ``count`` oldest waiting runs — the ones whose turn it
    is, with ``count`` tokens free — not woken yet (but ``passing``)."""
    first = conn.execute(_live_waiting(key).add_columns(_waiting.c.woken_at).limit(count)).all()
    woken = []
    for row in first:
        if row.woken_at is not None or row.run_id == passing:
            continue
        conn.execute(
            sa.update(_waiting)
            .where(_waiting.c.name == key, _waiting.c.run_id == row.run_id)
            .values(woken_at=now)
        )
        if due.wake_run(conn, run_id=row.run_id, now=now):
            woken.append(int(row.run_id))
    return woken


def free_slot(conn: sa.Connection, *, limit: Named, run_id: int, now: datetime) -> list[int]:
    """Free ``run_id``'s slot of ``limit`` (its command ended) and wake the oldest waiting
    runs whose turn it now is, those not woken yet; the runs woken. In the caller's
    transaction, which should commit at once."""
    _lock(conn, limit.key)
    if not _release(conn, limit.key, run_id):
        return []
    return _wake(conn, limit.key, now, _free_count(conn, limit, now))


def keep_slot(conn: sa.Connection, *, limit: Named, run_id: int, until: datetime) -> bool:
    """Hold ``run_id``'s slot of ``limit`` until ``until`` (its command still runs);
    whether it still held one."""
    kept = conn.execute(
        sa.update(_tokens)
        .where(_tokens.c.name == limit.key, _tokens.c.kind == SLOT, _tokens.c.run_id == run_id)
        .values(until=until)
    )
    return kept.rowcount > 0


def forget_waiting(conn: sa.Connection, *, run_id: int) -> None:
    """Take ``run_id`` out of every waiting line (its step went on without a token)."""
    conn.execute(sa.delete(_waiting).where(_waiting.c.run_id == run_id))


def waiting_runs(conn: sa.Connection, *, key: str) -> list[int]:
    """The runs waiting for the limit ``key``, oldest first."""
    return [int(row.run_id) for row in conn.execute(_live_waiting(key))]
