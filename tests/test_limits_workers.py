"""A limited kind under several worker processes on one database, measured by the
command itself (``limited.py``: it counts itself in flight and writes down each start):
"score at most 3 tasks at once, whichever of the 4 workers scores them", "at most 5
scores a second", every task scored once, and the runs over the limit waiting on the
due index rather than being claimed again and again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import forked
import limited
import migrated
import pytest
import sqlalchemy as sa

from flowrunner.engine import commands, worker
from flowrunner.flows import files
from flowrunner.runner import flow_runner, utc_now
from flowrunner.store import engine_tables

HERE = Path(__file__).parent


def workers(
    engine: sa.Engine, count: int, limits: dict[str, Any], seconds: int = 120
) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "LIMITED_LIMITS": json.dumps(limits), "LIMITED_WORK": "0.1"}
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            schema = conn.execute(sa.text("select current_schema()")).scalar()
        env["LIMITED_OPTIONS"] = f"-csearch_path={schema}"
    env["LIMITED_DB"] = engine.url.render_as_string(hide_password=False)
    script = str(HERE / "limited_worker.py")
    return [
        forked.popen(
            [sys.executable, script, str(seconds)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]


def tasks(engine: sa.Engine, count: int, **limits: Any) -> None:
    """``count`` tasks created, each with its score run due now."""
    limited.prepare(engine)
    migrated.upgrade(engine)
    runner = flow_runner(limited.binding(**limits), engine, commands=limited.COMMANDS)
    runner.clock = utc_now
    with runner.engine.begin() as conn:
        docs = files.loads_yaml(limited.SCORE)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    with engine.begin() as conn:
        for n in range(1, count + 1):
            task = {"id": n, "title": f"Task {n}"}
            conn.execute(sa.insert(limited.task).values(**task))
            runner.record_created(conn, task)


def finished(processes: list[subprocess.Popen[str]]) -> list[dict[str, int]]:
    said = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        said.append({k: int(v) for k, v in (part.split("=") for part in out.split())})
    return said


def statuses(engine: sa.Engine) -> dict[str, int]:
    runs = engine_tables.runs
    with engine.connect() as conn:
        return dict(
            conn.execute(sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status)).all()
        )


@pytest.mark.slow
def test_three_at_once_under_four_postgresql_workers(pg_engine: sa.Engine) -> None:
    count = 40
    tasks(pg_engine, count, concurrency=3)
    said = finished(workers(pg_engine, 4, {"concurrency": 3}))
    assert statuses(pg_engine) == {"done": count}
    starts = limited.starts(pg_engine)
    assert sorted(Counter(s.task_id for s in starts).values()) == [1] * count  # each once
    assert limited.most_in_flight(pg_engine) == 3  # reached, never passed
    assert len({s.worker for s in starts}) > 1, "one worker scored everything"
    # Waiting runs are made due when a slot frees, not claimed over and over.
    deferred = sum(s["deferred"] for s in said)
    assert deferred <= 2 * count, f"{deferred} put back for {count} runs: {said}"
    print(f"\nper worker: {said}")


@pytest.mark.slow
def test_without_a_limit_four_postgresql_workers_score_four_at_once(pg_engine: sa.Engine) -> None:
    # The measure can see a fourth: the limit above is what holds it at three.
    tasks(pg_engine, 40)
    finished(workers(pg_engine, 4, {}))
    assert statuses(pg_engine) == {"done": 40}
    assert limited.most_in_flight(pg_engine) == 4


@pytest.mark.slow
def test_five_a_second_under_three_postgresql_workers(pg_engine: sa.Engine) -> None:
    count = 20
    tasks(pg_engine, count, rate="5/second")
    finished(workers(pg_engine, 3, {"rate": "5/second"}))
    assert statuses(pg_engine) == {"done": count}
    began = [s.began for s in limited.starts(pg_engine)]
    assert len(began) == count
    # A start is counted when its turn is taken, a moment before the command begins (a
    # commit, the heartbeat started): by the commands' own times, the sixth start after
    # any one comes a second after it, give or take that moment (here, 100 ms).
    sixth = [round(b - a, 3) for a, b in zip(began, began[5:], strict=False)]
    print(f"\nthe sixth start after each, seconds later: {sixth}")
    # By the turns themselves (when each start was taken, as its token says): exactly.
    turns = sorted(s.turn_until - 1.0 for s in limited.starts(pg_engine))
    late = [round(b - t, 3) for b, t in zip(began, turns, strict=True)]
    print(f"each command began, after its turn: {late}")
    assert limited.most_in_window(turns, 1.0) <= 5
    assert limited.most_in_window(began, 0.9) <= 5, sixth
    assert began[-1] - began[0] >= (count // 5 - 1) * 0.95


def test_two_sqlite_worker_processes_score_each_task_once(sqlite_engine: sa.Engine) -> None:
    # SQLite has one writer at a time: a step holds it while its command runs, so
    # the workers take turns and the limit is never what holds them back.
    count = 12
    tasks(sqlite_engine, count, concurrency=2, rate="100/second")
    finished(workers(sqlite_engine, 2, {"concurrency": 2, "rate": "100/second"}))
    assert statuses(sqlite_engine) == {"done": count}
    starts = limited.starts(sqlite_engine)
    assert sorted(Counter(s.task_id for s in starts).values()) == [1] * count
    assert limited.most_in_flight(sqlite_engine) == 1


def test_a_command_longer_than_the_lease_keeps_its_slot(pg_engine: sa.Engine) -> None:
    # The heartbeat renews the slot with the run's lease: a second score cannot slip in
    # while the first one still works past its lease's first end.
    tasks(pg_engine, 1, concurrency=1)
    held: list[bool] = []

    def long_score(ctx: commands.CommandContext) -> None:
        lease = timedelta(seconds=0.6)
        began = utc_now()
        time.sleep(3 * lease.total_seconds())  # the work: three leases long
        tokens = engine_tables.limit_tokens
        with pg_engine.connect() as conn:
            until = conn.execute(
                sa.select(tokens.c.until).where(tokens.c.run_id == ctx.run_id)
            ).scalar_one()
        held.append(until > began + 2 * lease)

    runner = flow_runner(limited.binding(concurrency=1), pg_engine, commands={"score": long_score})
    serving = worker.Worker(runner, lease_ttl=timedelta(seconds=0.6))
    assert serving.run_due() == 1
    assert held == [True]
    with pg_engine.connect() as conn:
        tokens = engine_tables.limit_tokens
        assert conn.execute(sa.select(tokens.c.run_id)).scalars().all() == [None]
