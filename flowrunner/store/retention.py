"""Keeping history small: deleting, in short batches, what no run and no operator needs.

Each kind of row goes by one rule, checked again in the statement that deletes it:

- **a run** that ended (``done`` or ``cancelled``; ``failed`` too when asked) before the
  cutoff, with nothing left to do (no due-work row: a cancelled run whose waiting steps
  are still to be told has one) and every notice it wrote delivered (or undeliverable:
  nobody was there to tell) — together with its history lines and its notices;
- **an event** recorded before the cutoff that no run may still read: none of its
  record's runs that are open, due, or failed and not restarted (an operator's retry
  reads on) has an event floor below the event's id;
- **an idempotency record** completed and last written before the cutoff;
- **a callback's answer** (``store.callbacks``) last given before the cutoff.

Kept: runs that have not ended, failed runs unless asked (an operator may still retry
or restart them), undelivered notices and their runs, the operator journal, leases. The
newest run, the runs holding the newest history line and the newest notice, and the
newest event stay too: SQLite gives a new row the highest id plus one, so deleting the
newest row would hand its id out again — to a run whose commands' idempotency keys
repeat an old run's, or to an event a waiting run would take as already read.

A prune walks each table once along its primary key, up to its newest row when the
walk began, judging a stretch of ``batch`` rows per transaction: its cost follows the
table's size, and workers go on between batches. On PostgreSQL the runs of a batch are
locked ``FOR UPDATE SKIP LOCKED``, so a run an operator is changing right now is left
for the next prune. A dry run walks the same way, judges by the same rules and deletes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.foundations import durations, sqltypes, statuses
from flowrunner.store import dialects, engine_tables, ledger

# Rows deleted per transaction by default; at most MAX_BATCH (one IN list per statement).
BATCH = 1_000
MAX_BATCH = 10_000
# The cutoff is at least this far back: rows written by a transaction still open (an
# event emitted beside a run being started) are never old enough to be touched.
SHORTEST = timedelta(hours=1)

# Told after each batch: (stage, rows walked so far, rows to walk). The stages, in
# order: "runs", "events", "idempotency", "callbacks".
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Pruned:
    """How many rows a prune deleted (or, in a dry run, would delete), per table."""

    runs: int = 0
    """Ended runs."""
    history: int = 0
    """Their history lines."""
    notices: int = 0
    """Their notices, every one delivered (or undeliverable: nobody was there to tell)."""
    events: int = 0
    """Events no run may still read."""
    idempotency: int = 0
    """Completed idempotency records."""
    callbacks: int = 0
    """Answers given to signed callbacks (receipts and refusals)."""
    dry_run: bool = False
    """True when nothing was deleted: the counts are what a prune would delete."""
    before: datetime | None = None
    """The cutoff: what ended or happened before it was old enough to go."""

    def counts(self) -> dict[str, int]:
        """The counts by table, in the order above."""
        found = asdict(self)
        del found["dry_run"], found["before"]
        return found

    @property
    def total(self) -> int:
        return sum(self.counts().values())


def cutoff(
    now: datetime, older_than: str | durations.Duration | timedelta, tz: tzinfo | None = None
) -> datetime:
    """The moment before which rows are old: ``now`` less ``older_than``.

    ``older_than`` is a duration as flowrunner reads them (``90d``, ``90 days``, ``P3M``)
    or a timedelta; it must be at least ``SHORTEST``, else ``OperatorError``.

    >>> from datetime import UTC
    >>> cutoff(datetime(2026, 5, 31, tzinfo=UTC), "90d").date()
    datetime.date(2026, 3, 2)
    """
    if isinstance(older_than, timedelta):
        before = now - older_than
    else:
        if isinstance(older_than, str):
            older_than = durations.parse_duration(older_than)
        before = older_than.subtract_from(now, tz)
    if before > now - SHORTEST:
        shortest = durations.Duration(seconds=int(SHORTEST.total_seconds()))
        raise errors.OperatorError(
            f"a prune keeps at least the last {shortest}: rows younger than that may "
            f"belong to work still in progress (asked for {older_than})"
        )
    return before


def prune(
    engine: sa.Engine,
    *,
    before: datetime,
    resource: str | None = None,
    include_failed: bool = False,
    batch: int = BATCH,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> Pruned:
    """Delete what ended or happened before ``before`` and nothing needs; the counts.

    ``resource`` keeps to one runner's runs and events (idempotency records name no
    resource: they go by age alone). Runs its own transactions, one per batch of at most
    ``batch`` rows. With ``dry_run`` nothing is deleted and the counts are what would be.
    ``progress`` is told each stage's advance (see ``Progress``).
    """
    if not 1 <= batch <= MAX_BATCH:
        raise ValueError(f"a prune's batch is 1 to {MAX_BATCH} rows: {batch}")
    dialects.prepare_engine(engine)
    scope = _Scope(before, resource, include_failed, batch, dry_run)
    runs, history, notices = _prune_runs(engine, scope, progress)
    events = _prune_events(engine, scope, progress)
    idempotency = _prune_idempotency(engine, scope, progress)
    callbacks = _prune_callbacks(engine, scope, progress)
    return Pruned(runs, history, notices, events, idempotency, callbacks, dry_run, before)


@dataclass(frozen=True)
class _Scope:
    before: datetime
    resource: str | None
    include_failed: bool
    batch: int
    dry_run: bool

    @property
    def ended(self) -> list[str]:
        kinds = set(statuses.FINAL) | (
            {statuses.RunStatus.FAILED} if self.include_failed else set()
        )
        return sorted(s.value for s in kinds)


def _transaction(engine: sa.Engine, scope: _Scope) -> AbstractContextManager[sa.Connection]:
    # A dry run only reads: it takes no write lock, on SQLite either.
    return dialects.begin(engine, immediate=not scope.dry_run)


def _count(conn: sa.Connection, query: sqltypes.Query) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one())


@dataclass(frozen=True)
class _Window:
    """One stretch of a table's primary key: where it ends, its length, the keys to judge."""

    last: object
    length: int
    keys: list[Any]  # the table's own: ids, or idempotency keys


def _window(
    conn: sa.Connection, table: sa.Table, after: object, until: object, scope: _Scope
) -> _Window:
    """The next ``scope.batch`` rows of ``table`` with keys above ``after`` up to ``until``,
    by its primary key alone; the keys to judge are those of the scope's resource.

    A prune walks each table once, start to end, a stretch per batch. (Asking for "the
    next 1,000 old rows" let a planner take another index and sort every match again for
    each batch; an equality on the resource in the judging statement led SQLite down that
    column's whole index: either made a prune of 1,000,000 runs quadratic. A row's
    resource never changes, so it is judged here.)
    """
    [key] = table.primary_key.columns
    owner = table.c.get("resource")
    query = sa.select(key) if owner is None else sa.select(key, owner)
    query = query.where(key <= until).order_by(key).limit(scope.batch)
    if after is not None:
        query = query.where(key > after)
    rows = conn.execute(query).all()
    if not rows:
        return _Window(after, 0, [])
    keys = [row[0] for row in rows if owner is None or scope.resource in (None, row[1])]
    return _Window(rows[-1][0], len(rows), keys)


def _walk(
    engine: sa.Engine,
    table: sa.Table,
    scope: _Scope,
    stage: str,
    progress: Progress | None,
    judge: Callable[[sa.Connection, list[Any]], None],
) -> None:
    """Walk ``table`` a stretch per transaction, letting ``judge`` act on each stretch's keys.

    The walk ends at the greatest key when it began: rows written since are younger than
    the cutoff, and a walk that chased them might never end.
    """
    [key] = table.primary_key.columns
    with engine.connect() as conn:
        until = conn.execute(sa.select(sa.func.max(key))).scalar()
        # Counted only to report progress.
        total = 0 if progress is None else _count(conn, sa.select(key))
    after: object = None
    walked = 0
    while until is not None:
        with _transaction(engine, scope) as conn:
            window = _window(conn, table, after, until, scope)
            if window.keys:
                judge(conn, window.keys)
        if not window.length:
            break
        after, walked = window.last, walked + window.length
        if progress is not None:
            progress(stage, walked, max(total, walked))
    if progress is not None:
        progress(stage, walked, walked)


# -- runs, with their history and notices ------------------------------------------------


def _newest_holders(conn: sa.Connection) -> list[int]:
    """The runs that hold the newest run, history line and notice (their ids stay taken)."""
    runs, log, notices = engine_tables.runs, engine_tables.step_log, engine_tables.notices
    found = [
        conn.execute(sa.select(sa.func.max(runs.c.id))).scalar_one_or_none(),
        conn.execute(sa.select(log.c.run_id).order_by(log.c.id.desc()).limit(1)).scalar(),
        conn.execute(sa.select(notices.c.run_id).order_by(notices.c.id.desc()).limit(1)).scalar(),
    ]
    return [int(run_id) for run_id in found if run_id is not None]


def _to_deliver(notices: sa.Table) -> sa.ColumnElement[bool]:
    """A notice still to deliver: not delivered, and not undeliverable (nobody to tell)."""
    return sa.and_(notices.c.delivered_at.is_(None), notices.c.problem.is_(None))


def _prunable_runs(conn: sa.Connection, scope: _Scope, ids: Sequence[int]) -> list[int]:
    """Of ``ids``, the runs the rule lets go, judged (and on PostgreSQL locked) now."""
    runs, due, notices = engine_tables.runs, engine_tables.due, engine_tables.notices
    idle = (
        ~sa.exists().where(due.c.run_id == runs.c.id),
        ~sa.exists().where(notices.c.run_id == runs.c.id, _to_deliver(notices)),
    )
    query = sa.select(runs.c.id).where(
        runs.c.id.in_(ids),
        runs.c.status.in_(scope.ended),
        runs.c.ended_at < scope.before,
        runs.c.id.not_in(_newest_holders(conn)),
        *idle,
    )
    if scope.dry_run:
        return [int(run_id) for run_id in conn.execute(query).scalars()]
    # A run locked elsewhere is being changed (an operator's retry or cancel): skip it.
    locked = list(conn.execute(dialects.skip_locked(conn, query)).scalars())
    if not locked:
        return []
    # Judged again now that the rows are ours, in a statement of its own: on PostgreSQL a
    # cancel that committed while its run was being locked made the run due, which the
    # locking statement's snapshot could not see. Nothing changes a locked run now.
    again = sa.select(runs.c.id).where(runs.c.id.in_(locked), *idle)
    return sorted(int(run_id) for run_id in conn.execute(again).scalars())


def _prune_runs(
    engine: sa.Engine, scope: _Scope, progress: Progress | None
) -> tuple[int, int, int]:
    runs, log, notices = engine_tables.runs, engine_tables.step_log, engine_tables.notices
    gone = {"runs": 0, "history": 0, "notices": 0}

    def judge(conn: sa.Connection, ids: list[int]) -> None:
        doomed = _prunable_runs(conn, scope, ids)
        if not doomed:
            return
        lines = log.c.run_id.in_(doomed)
        told = sa.and_(notices.c.run_id.in_(doomed), ~_to_deliver(notices))
        if scope.dry_run:
            gone["runs"] += len(doomed)
            gone["history"] += _count(conn, sa.select(log.c.id).where(lines))
            gone["notices"] += _count(conn, sa.select(notices.c.id).where(told))
            return
        # The children first: a run's lines never outlive it, even for a moment.
        gone["history"] += conn.execute(sa.delete(log).where(lines)).rowcount
        gone["notices"] += conn.execute(sa.delete(notices).where(told)).rowcount
        gone["runs"] += conn.execute(sa.delete(runs).where(runs.c.id.in_(doomed))).rowcount

    _walk(engine, runs, scope, "runs", progress, judge)
    return gone["runs"], gone["history"], gone["notices"]


# -- events --------------------------------------------------------------------------------


def _unread(scope: _Scope) -> sa.ColumnElement[bool]:
    """An event some run of its record may still read (correlated to the events table).

    A run reads its record's events above its last read one, which is never below its
    event floor; so a run whose floor is at or above an event's id never reads it. The
    runs that may read on: open ones, due ones (a cancel still telling its steps), and
    failed ones not restarted (an operator may retry them) — unless failed runs that
    ended before the cutoff are being pruned.
    """
    events, runs, due = engine_tables.events, engine_tables.runs, engine_tables.due
    open_ = sorted(s.value for s in statuses.OPEN)
    retryable = sa.and_(
        runs.c.status == statuses.RunStatus.FAILED.value, runs.c.restarted_as.is_(None)
    )
    if scope.include_failed:
        retryable = sa.and_(retryable, runs.c.ended_at >= scope.before)
    return sa.exists().where(
        runs.c.resource == events.c.resource,
        runs.c.record_id == events.c.record_id,
        sa.func.coalesce(runs.c.event_floor, 0) < events.c.id,
        sa.or_(
            runs.c.status.in_(open_),
            retryable,
            sa.exists().where(due.c.run_id == runs.c.id),
        ),
    )


def _prune_events(engine: sa.Engine, scope: _Scope, progress: Progress | None) -> int:
    events = engine_tables.events
    newest = sa.select(sa.func.max(events.c.id)).scalar_subquery()
    gone = [0]

    def judge(conn: sa.Connection, ids: list[int]) -> None:
        rule = sa.and_(
            events.c.id.in_(ids),
            events.c.at < scope.before,
            events.c.id < newest,
            ~_unread(scope),
        )
        if scope.dry_run:
            gone[0] += _count(conn, sa.select(events.c.id).where(rule))
        else:
            gone[0] += conn.execute(sa.delete(events).where(rule)).rowcount

    _walk(engine, events, scope, "events", progress, judge)
    return gone[0]


# -- idempotency records ---------------------------------------------------------------------


def _prune_idempotency(engine: sa.Engine, scope: _Scope, progress: Progress | None) -> int:
    table = engine_tables.idempotency
    gone = [0]

    def judge(conn: sa.Connection, keys: list[str]) -> None:
        rule = sa.and_(
            table.c.key.in_(keys),
            table.c.status == ledger.COMPLETED,
            table.c.updated_at < scope.before,
        )
        if scope.dry_run:
            gone[0] += _count(conn, sa.select(table.c.key).where(rule))
        else:
            gone[0] += conn.execute(sa.delete(table).where(rule)).rowcount

    _walk(engine, table, scope, "idempotency", progress, judge)
    return gone[0]


# -- callbacks' answers ----------------------------------------------------------------------


def _prune_callbacks(engine: sa.Engine, scope: _Scope, progress: Progress | None) -> int:
    table = engine_tables.callbacks
    newest = sa.select(sa.func.max(table.c.id)).scalar_subquery()
    gone = [0]

    def judge(conn: sa.Connection, ids: list[int]) -> None:
        # The newest stays: SQLite would give its id to the next answer kept.
        rule = sa.and_(table.c.id.in_(ids), table.c.last_at < scope.before, table.c.id < newest)
        if scope.dry_run:
            gone[0] += _count(conn, sa.select(table.c.id).where(rule))
        else:
            gone[0] += conn.execute(sa.delete(table).where(rule)).rowcount

    _walk(engine, table, scope, "callbacks", progress, judge)
    return gone[0]
