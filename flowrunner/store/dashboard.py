"""What a flow's dashboard reads: its runs started and ended per day, how long they took
to finish and how long they stayed at each step, where its open runs wait now (and how
many of them are late), where its failed runs failed, and the steps that gave up.

Every query is of one resource and one flow, and of one tenant when a tenant is named
(the console always names the reader's). The runs are found on the runs table's indexes:
the flow's by ``(resource, flow_id, start_key)``, the open and failed ones by
``(resource, status, started_at)``; their history by ``(run_id, id)``.

Days are the runner's wall-clock days: the caller gives their bounds (``Days``) as UTC
moments and each run falls in the day whose bounds hold it, in SQL (one ``CASE`` over
bound parameters, the same on both databases). Percentiles (the median and the 95th) are
``percentile_cont`` on PostgreSQL; on SQLite, which has none, they are computed in Python
from the newest ``SAMPLE`` durations, interpolated as ``percentile_cont`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowrunner.foundations import sqltypes, statuses
from flowrunner.store import dialects, engine_tables

SAMPLE = 50_000
"""On SQLite, the most durations a percentile of the time to finish is computed from
(the newest)."""

RUNS = 10_000
"""The time at each step, and the steps that gave up, are of the newest this many runs
started in the days shown."""

STEP_ENDS = ("done", "arrived", "timed_out", "failed", "cancel")
"""The history lines that end a step's pass: done, arrived, gave up, failed, stopped
waiting."""

GAVE_UP = "timed_out"
"""The history line of a step whose deadline passed: it gave up (an SLA breached)."""

OPEN = tuple(sorted(str(s) for s in statuses.OPEN))


@dataclass(frozen=True)
class Scope:
    """Whose runs: one resource's, of one flow (its id as runs keep it, text), of one
    tenant when named."""

    resource: str
    flow_id: str
    tenant: object = None


@dataclass(frozen=True)
class Days:
    """The days shown, as ``bounds``: each day's start, then the last day's end (UTC)."""

    bounds: tuple[datetime, ...]

    def __post_init__(self) -> None:
        if len(self.bounds) < 2 or list(self.bounds) != sorted(self.bounds):
            raise ValueError("days need at least two bounds, in order")

    @property
    def since(self) -> datetime:
        return self.bounds[0]

    @property
    def until(self) -> datetime:
        return self.bounds[-1]

    def __len__(self) -> int:
        return len(self.bounds) - 1


@dataclass(frozen=True)
class Spread:
    """How long something took, in seconds: how many, the median and the 95th percentile
    (None when there is nothing to measure). ``sampled``: on SQLite, from the newest
    ``SAMPLE`` of ``count``."""

    count: int
    median: float | None
    p95: float | None
    sampled: int | None = None


@dataclass(frozen=True)
class StepFigures:
    """One step (by its id as the history keeps it, text): how long its passes took,
    how many gave up, and where the flow's runs stand at its position now."""

    step_id: str
    title: str
    time: Spread
    gave_up: int = 0


@dataclass(frozen=True)
class PositionNow:
    """The flow's runs at one position now: waiting (or due), how many of those are late
    (their due moment has passed and no worker has acted on it yet), and failed."""

    position: int
    waiting: int = 0
    late: int = 0
    failed: int = 0


def _runs_of(scope: Scope) -> list[sa.ColumnElement[bool]]:
    runs = engine_tables.runs
    where = [runs.c.resource == scope.resource, runs.c.flow_id == scope.flow_id]
    if scope.tenant is not None:
        where.append(runs.c.tenant == scope.tenant)
    return where


def _day_of(column: sqltypes.Expression, days: Days) -> sa.ColumnElement[int]:
    """The index of the day ``column`` falls in (the caller keeps it within the days): a
    search halving the days at each ``CASE``, five comparisons for thirty days."""

    def within(low: int, high: int) -> sa.ColumnElement[int]:
        if high - low == 1:
            return sa.literal(low, sa.Integer)
        middle = (low + high) // 2
        return sa.case(
            (column < days.bounds[middle], within(low, middle)), else_=within(middle, high)
        )

    return within(0, len(days))


def per_day(conn: sa.Connection, scope: Scope, days: Days) -> tuple[list[int], list[int]]:
    """How many of the flow's runs started, and how many ended, on each day."""
    runs = engine_tables.runs
    started = [0] * len(days)
    ended = [0] * len(days)
    for column, counts in ((runs.c.started_at, started), (runs.c.ended_at, ended)):
        day = _day_of(column, days).label("day")
        query = (
            sa.select(day, sa.func.count())
            .where(*_runs_of(scope), column >= days.since, column < days.until)
            .group_by(day)
        )
        for index, count in conn.execute(query):
            counts[int(index)] = int(count)
    return started, ended


def by_status(conn: sa.Connection, scope: Scope, since: datetime) -> dict[str, int]:
    """How many of the flow's runs started since ``since`` have each status now."""
    runs = engine_tables.runs
    query = (
        sa.select(runs.c.status, sa.func.count())
        .where(*_runs_of(scope), runs.c.started_at >= since)
        .group_by(runs.c.status)
    )
    found = {str(s): 0 for s in statuses.RunStatus}
    for status, count in conn.execute(query):
        found[str(status)] = int(count)
    return found


def _seconds(
    conn: sa.Connection, later: sqltypes.Expression, earlier: sqltypes.Expression
) -> sa.ColumnElement[float]:
    """``later - earlier`` in seconds, in SQL."""
    if dialects.is_sqlite(conn):
        return (sa.func.julianday(later) - sa.func.julianday(earlier)) * 86400.0
    return sa.cast(sa.extract("epoch", later - earlier), sa.Float)


def finish_times(conn: sa.Connection, scope: Scope, since: datetime) -> Spread:
    """How long the flow's runs that finished (done) since ``since`` took, start to end."""
    runs = engine_tables.runs
    where = [*_runs_of(scope), runs.c.status == "done", runs.c.ended_at >= since]
    took = _seconds(conn, runs.c.ended_at, runs.c.started_at)
    if not dialects.is_sqlite(conn):
        row = conn.execute(sa.select(sa.func.count(), *_percentiles(took)).where(*where)).one()
        return Spread(int(row[0]), _float(row[1]), _float(row[2]))
    count = int(conn.execute(sa.select(sa.func.count()).where(*where)).scalar_one())
    query = sa.select(took).where(*where).order_by(runs.c.id.desc()).limit(SAMPLE)
    return _spread([float(v) for (v,) in conn.execute(query)], count)


def _percentiles(value: sa.ColumnElement[float]) -> list[sa.ColumnElement[float]]:
    return [
        sa.func.percentile_cont(sa.literal(share, sa.Float)).within_group(value)
        for share in (0.5, 0.95)
    ]


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def percentile(ordered: Sequence[float], share: float) -> float | None:
    """The ``share`` percentile of ``ordered`` values, interpolated as ``percentile_cont``.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([5.0], 0.95), percentile([], 0.5)
    (2.5, 5.0, None)
    """
    if not ordered:
        return None
    rank = share * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _spread(values: list[float], count: int) -> Spread:
    values.sort()
    sampled = len(values) if len(values) < count else None
    return Spread(count, percentile(values, 0.5), percentile(values, 0.95), sampled)


def step_times(conn: sa.Connection, scope: Scope, since: datetime) -> list[StepFigures]:
    """Each step of the flow's newest ``RUNS`` runs started since ``since``: how long its
    ended passes took (from its first history line to the line that ended it, on the
    flow's clock), and how many passes gave up. Steps in the order they first appear."""
    runs, log = engine_tables.runs, engine_tables.step_log
    newest = (
        sa.select(runs.c.id)
        .where(*_runs_of(scope), runs.c.started_at >= since)
        .order_by(runs.c.id.desc())
        .limit(RUNS)
        .subquery()
    )
    # Their lowest id, bound: the history is read as a range of ``(run_id, id)`` (without
    # it PostgreSQL hashes the newest ids and reads every history line to join them).
    lowest = conn.execute(sa.select(sa.func.min(newest.c.id))).scalar()
    if lowest is None:
        return []
    moment = sa.func.coalesce(log.c.due_at, log.c.at)
    ends = sa.func.sum(sa.case((log.c.what.in_(STEP_ENDS), 1), else_=0))
    gave_up = sa.func.sum(sa.case((log.c.what == GAVE_UP, 1), else_=0))
    passes = (
        sa.select(
            log.c.step_id,
            sa.func.max(log.c.title).label("title"),
            sa.func.min(log.c.id).label("first"),
            _seconds(conn, sa.func.max(moment), sa.func.min(moment)).label("took"),
            ends.label("ends"),
            gave_up.label("gave_up"),
        )
        .select_from(log.join(newest, newest.c.id == log.c.run_id))
        .where(
            log.c.run_id >= int(lowest),
            log.c.step_id.is_not(None),
            # Telling the application a step stopped waiting comes later, off the clock.
            log.c.what.not_in(("cancel_done", "cancel_failed")),
        )
        .group_by(log.c.run_id, log.c.step_id, log.c["pass"])
    )
    if dialects.is_sqlite(conn):
        return _step_figures([tuple(row) for row in conn.execute(passes)])
    table = passes.subquery()
    ended = table.c.ends > 0
    query = sa.select(
        table.c.step_id,
        sa.func.max(table.c.title),
        sa.func.min(table.c.first),
        sa.func.sum(sa.case((ended, 1), else_=0)),
        sa.func.sum(table.c.gave_up),
        *_percentiles(sa.case((ended, table.c.took))),
    ).group_by(table.c.step_id)
    figures = []
    for step_id, title, _first, count, breaches, median, p95 in sorted(
        conn.execute(query), key=lambda row: int(row[2])
    ):
        spread = Spread(int(count), _float(median), _float(p95))
        figures.append(StepFigures(str(step_id), str(title or ""), spread, int(breaches)))
    return figures


def _step_figures(passes: Sequence[Sequence[Any]]) -> list[StepFigures]:
    """Each step's figures from its passes (SQLite, which has no percentile)."""
    first: dict[str, int] = {}
    titles: dict[str, str] = {}
    took: dict[str, list[float]] = {}
    breaches: dict[str, int] = {}
    for step_id, title, at, seconds, ends, gave_up in passes:
        key = str(step_id)
        first[key] = min(first.get(key, at), at)
        titles[key] = max(titles.get(key, ""), str(title or ""))
        breaches[key] = breaches.get(key, 0) + int(gave_up or 0)
        took.setdefault(key, [])
        if ends:
            took[key].append(float(seconds))
    return [
        StepFigures(key, titles[key], _spread(took[key], len(took[key])), breaches[key])
        for key in sorted(first, key=first.__getitem__)
    ]


def where_now(conn: sa.Connection, scope: Scope, now: datetime) -> list[PositionNow]:
    """The flow's runs that have not ended, and those that failed, by the position they
    stand at now (as their state keeps it), with how many of the open ones are late."""
    runs, due = engine_tables.runs, engine_tables.due
    position = runs.c.state["position"].as_integer().label("position")
    is_open = runs.c.status.in_(OPEN)
    late = sa.and_(is_open, due.c.due_at < now)
    query = (
        sa.select(
            position,
            sa.func.sum(sa.case((is_open, 1), else_=0)),
            sa.func.sum(sa.case((late, 1), else_=0)),
            sa.func.sum(sa.case((runs.c.status == "failed", 1), else_=0)),
        )
        .select_from(runs.outerjoin(due, due.c.run_id == runs.c.id))
        .where(*_runs_of(scope), runs.c.status.in_((*OPEN, "failed")))
        .group_by(position)
    )
    found = [
        PositionNow(-1 if at is None else int(at), int(w or 0), int(lt or 0), int(f or 0))
        for at, w, lt, f in conn.execute(query)
    ]
    return sorted(found, key=lambda p: p.position)
