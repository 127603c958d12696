"""A small app whose one kind is limited, for the limits' tests and bench: a ``task``
table, a flow that scores each task once it is created, and a ``score`` command that
records, in tables of its own, how many scores are in flight and when each began.

The command keeps its own count, not the engine's: on entry it adds one to
``score_gauge.inflight`` (and raises ``most`` to it), on exit it takes one off — each in
its own committed statement on a connection of its own, so every worker process sees
it at once (PostgreSQL). ``score_started`` has one row per start: the run, the task,
when it began and ended by the host's clock, and which process ran it.

    python limited_worker.py  (LIMITED_DB, LIMITED_OPTIONS, LIMITED_KIND in the environment)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import tables
from flowrunner.binding import FlowBinding, Kind
from flowrunner.engine import commands

metadata = sa.MetaData()

task = sa.Table(
    "task",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, server_default="new"),
)

score_gauge = sa.Table(
    "score_gauge",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("inflight", sa.Integer, nullable=False),
    sa.Column("most", sa.Integer, nullable=False),
)

score_started = sa.Table(
    "score_started",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("task_id", sa.Integer, nullable=False),
    sa.Column("run_id", sa.Integer, nullable=False),
    sa.Column("began", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=True),
    # When the run's start of the rate is free again (its turn's time plus the window),
    # as the engine's token says: None without a rate.
    sa.Column("turn_until", sa.Float, nullable=True),
    sa.Column("worker", sa.Integer, nullable=False),
)

SCORE = """
- name: Score
  start: created
  steps:
    - {position: 1, kind: score, title: Score}
"""

# How long one score works, in seconds (the bench sets it through the environment).
WORK = float(os.environ.get("LIMITED_WORK", "0.1"))


def binding(**limits: Any) -> FlowBinding:
    """The tasks' binding, its ``score`` kind limited by ``limits`` (``concurrency=3``)."""
    return FlowBinding(
        resource="task",
        flows_table="task_flow",
        steps_table="task_flow_step",
        events={"task.done": "task"},
        kinds={"score": Kind(command="score", **limits)},
        set_columns=["status"],
    )


task_flow, task_flow_step = tables.for_binding(metadata, binding())


# The engine's limit tokens, as the command reads them (not the application's table).
_tokens = sa.table(
    "flowrunner_limit_tokens", sa.column("run_id"), sa.column("kind"), sa.column("until")
)


def _seconds(moment: object) -> float:
    """A timestamp as read back from either database, in seconds since the epoch (SQLite
    gives the engine's UTC text)."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    assert isinstance(moment, datetime)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _gauge(conn: sa.Connection, by: int) -> None:
    new = score_gauge.c.inflight + by
    values: dict[str, Any] = {"inflight": new}
    if by > 0:
        values["most"] = sa.case((new > score_gauge.c.most, new), else_=score_gauge.c.most)
    conn.execute(sa.update(score_gauge).where(score_gauge.c.name == "score").values(**values))


@contextlib.contextmanager
def _own(ctx: commands.CommandContext) -> Iterator[sa.Connection]:
    """A committed write of the command's own, seen by every process at once. SQLite has
    one writer at a time (the step's transaction, which holds its lock while the
    command runs): there it goes through the step's connection."""
    if ctx.conn.dialect.name == "sqlite":
        yield ctx.conn
        return
    with ctx.conn.engine.begin() as conn:
        yield conn


def score(ctx: commands.CommandContext) -> dict[str, object]:
    """Score the task: counted in flight while it works, its start written down."""
    began = time.time()
    with _own(ctx) as conn:
        _gauge(conn, +1)
        turn_until = conn.execute(
            sa.select(sa.func.max(_tokens.c.until)).where(
                _tokens.c.run_id == ctx.run_id, _tokens.c.kind == "start"
            )
        ).scalar_one()
        started = conn.execute(
            sa.insert(score_started)
            .values(
                task_id=ctx.record["id"],
                run_id=ctx.run_id,
                began=began,
                worker=os.getpid(),
                turn_until=None if turn_until is None else _seconds(turn_until),
            )
            .returning(score_started.c.id)
        ).scalar_one()
    try:
        time.sleep(WORK)  # the work itself: the time a score takes
    finally:
        with _own(ctx) as conn:
            conn.execute(
                sa.update(score_started)
                .where(score_started.c.id == started)
                .values(ended=time.time())
            )
            _gauge(conn, -1)
    return {"scored": ctx.record["id"]}


COMMANDS = {"score": score}


def prepare(engine: sa.Engine) -> None:
    """The app's tables, with the gauge at zero."""
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.delete(score_gauge))
        conn.execute(sa.insert(score_gauge).values(name="score", inflight=0, most=0))


def most_in_flight(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(score_gauge.c.most).where(score_gauge.c.name == "score")
            ).scalar_one()
        )


def starts(engine: sa.Engine) -> list[Any]:
    """Every start the command wrote down, in the order they began."""
    with engine.connect() as conn:
        return list(conn.execute(sa.select(score_started).order_by(score_started.c.began)).all())


def most_in_window(began: list[float], window: float) -> int:
    """The most starts that fall in any stretch of ``window`` seconds (each start's
    stretch beginning at it)."""
    most, first = 0, 0
    for last, moment in enumerate(began):
        while moment - began[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most
