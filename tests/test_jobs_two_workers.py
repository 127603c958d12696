"""Two worker processes on one PostgreSQL database serve a job that runs every minute,
on a shared clock that moves through simulated days: every slot runs once, none twice;
stopped for a few hours and started again, they run only the latest missed slot.

The clock is a file every worker reads. While a slot runs, its command moves the clock
on to just past the next minute (``timed_worker.py``): time passes, and the next slot
is due the moment this one is saved, to whichever worker claims it first. A slot run
twice, or one skipped (a step lost after the clock moved on), shows in the count."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from running import mount
from sizes import sized
from timed_worker import set_clock, slot_ran

from flowrunner.store import engine_tables

START = datetime(2026, 3, 2, tzinfo=UTC)
# Six simulated hours of minutely slots by default, a day in a long run (each slot is a
# claim and a step on the database, one after the other: ~10-40 ms here);
# FLOWRUNNER_TEST_JOB_SLOTS=10080 runs the whole week, in minutes rather than seconds.
SLOTS = int(os.environ.get("FLOWRUNNER_TEST_JOB_SLOTS", str(sized(6 * 60, 24 * 60))))


def _workers(
    engine: sa.Engine, clock: Path, stop: Path, until: datetime
) -> list[subprocess.Popen[str]]:
    with engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar()
    env = {
        **os.environ,
        "SERVE_DB": engine.url.render_as_string(hide_password=False),
        "SERVE_OPTIONS": f"-csearch_path={schema}",
        "CLOCK_FILE": str(clock),
        "STOP_FILE": str(stop),
        "MOVE_UNTIL": until.isoformat(),
    }
    script = str(Path(__file__).with_name("timed_worker.py"))
    return [
        subprocess.Popen(
            [sys.executable, script, name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]


def _ran(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(slot_ran)).scalar_one())


def _until(engine: sa.Engine, count: int, deadline: float) -> None:
    """Until ``count`` slots have run (the workers are separate processes: the test looks)."""
    while _ran(engine) < count:
        assert time.monotonic() < deadline, f"only {_ran(engine)} of {count} slots ran in time"
        time.sleep(0.1)


def _scheduled(engine: sa.Engine, workers: list[subprocess.Popen[str]], deadline: float) -> None:
    """Until a worker made the job's run (each does before its first claim)."""
    runs = engine_tables.runs
    query = sa.select(sa.func.count()).where(runs.c.flow_id == "job:every_minute")
    while True:
        with engine.connect() as conn:
            if conn.execute(query).scalar_one():
                return
        for process in workers:
            assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no worker made the job's run"
        time.sleep(0.01)


def _stop(workers: list[subprocess.Popen[str]], stop: Path) -> list[int]:
    stop.touch()
    advanced = []
    for process in workers:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        advanced.append(int(out.split("advanced=")[1].split()[0]))
    stop.unlink()
    return advanced


@pytest.mark.slow
def test_two_workers_run_each_minute_once_and_only_the_latest_after_a_stop(
    pg_engine: sa.Engine, tmp_path: Path
) -> None:
    mount(pg_engine, "tickets", flows="[]")
    slot_ran.create(pg_engine)
    clock, stop = tmp_path / "clock", tmp_path / "stop"
    set_clock(clock, START)
    end = START + timedelta(minutes=SLOTS)
    deadline = time.monotonic() + 60 + SLOTS * 0.1
    workers = _workers(pg_engine, clock, stop, end)
    _scheduled(pg_engine, workers, deadline)  # at START: its first slot is a minute later
    began = time.monotonic()
    set_clock(clock, START + timedelta(minutes=1, seconds=5))
    _until(pg_engine, SLOTS, deadline)
    took = time.monotonic() - began
    advanced = _stop(workers, stop)

    with pg_engine.connect() as conn:
        rows = conn.execute(sa.select(slot_ran.c.slot, slot_ran.c.worker)).all()
    slots = [datetime.fromisoformat(slot) for slot, _ in rows]
    assert len(slots) == len(set(slots)) == SLOTS  # every slot once, none twice
    assert sorted(slots) == [START + timedelta(minutes=m) for m in range(1, SLOTS + 1)]
    assert all(n > 0 for n in advanced), f"one worker ran no slot: {advanced}"

    # Stopped for three and a half hours; started again, they run the latest slot only.
    set_clock(clock, end + timedelta(hours=3, minutes=30, seconds=20))
    workers = _workers(pg_engine, clock, stop, end)
    _until(pg_engine, SLOTS + 1, time.monotonic() + 60)
    _stop(workers, stop)
    with pg_engine.connect() as conn:
        later = (
            conn.execute(sa.select(slot_ran.c.slot).where(slot_ran.c.id > SLOTS)).scalars().all()
        )
    assert [datetime.fromisoformat(s) for s in later] == [end + timedelta(hours=3, minutes=30)]
    print(f"\n{SLOTS} minutely slots in {took:.1f} s; runs per worker: {advanced}")
