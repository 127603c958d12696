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
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from running import mount
from sizes import sized
from timed_worker import set_clock, slot_ran

from flowrunner.store import engine_tables

START = datetime(2026, 3, 2, tzinfo=UTC)
# Six simulated hours of minutely slots by default, a day in a long run (each slot is a
# claim and a step on the database, one after the other);
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
        forked.popen(
            [sys.executable, script, name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]


# A wait ends when its condition holds; it fails, saying what it saw, only when nothing
# moved for this long (a slot, a worker's start) — a stall, never a speed: a loaded
# machine may take as long as it needs between two slots.
STALL = 300.0


def _ran(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(slot_ran)).scalar_one())


def _seen(engine: sa.Engine, clock: Path) -> str:
    """What the slots look like now: how many ran, any run twice, the latest, the clock."""
    with engine.connect() as conn:
        slots = list(conn.execute(sa.select(slot_ran.c.slot).order_by(slot_ran.c.id)).scalars())
    twice = sorted(slot for slot, times in Counter(slots).items() if times > 1)
    latest = max(slots, default="none")
    return (
        f"{len(slots)} slots ran, {len(twice)} of them twice {twice[:5]}; the latest "
        f"{latest}; the shared clock at {clock.read_text(encoding='utf-8')}"
    )


def _until(
    engine: sa.Engine, count: int, workers: list[subprocess.Popen[str]], clock: Path
) -> None:
    """Until ``count`` slots have run (the workers are separate processes: the test looks),
    however long that takes while slots keep running."""
    seen, moved = _ran(engine), time.monotonic()
    while seen < count:
        for process in workers:
            assert process.poll() is None, f"a worker stopped: {process.communicate()[1]}"
        time.sleep(0.1)
        now = _ran(engine)
        if now > seen:
            seen, moved = now, time.monotonic()
        elif time.monotonic() - moved > STALL:
            pytest.fail(
                f"waiting for {count} slots, none ran for {STALL:.0f} s: {_seen(engine, clock)}"
            )


def _scheduled(engine: sa.Engine, workers: list[subprocess.Popen[str]]) -> None:
    """Until a worker made the job's run (each does before its first claim)."""
    runs = engine_tables.runs
    query = sa.select(sa.func.count()).where(runs.c.flow_id == "job:every_minute")
    began = time.monotonic()
    while True:
        with engine.connect() as conn:
            if conn.execute(query).scalar_one():
                return
        for process in workers:
            assert process.poll() is None, f"a worker stopped: {process.communicate()[1]}"
        if time.monotonic() - began > STALL:
            pytest.fail(f"no worker made the job's run in {STALL:.0f} s, both still running")
        time.sleep(0.01)


def _stop(workers: list[subprocess.Popen[str]], stop: Path) -> list[int]:
    stop.touch()
    advanced = []
    for process in workers:
        out, err = process.communicate(timeout=STALL)
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
    workers = _workers(pg_engine, clock, stop, end)
    _scheduled(pg_engine, workers)  # at START: its first slot is a minute later
    began = time.monotonic()
    set_clock(clock, START + timedelta(minutes=1, seconds=5))
    try:
        _until(pg_engine, SLOTS, workers, clock)
    finally:
        took = time.monotonic() - began
        advanced = _stop(workers, stop)

    with pg_engine.connect() as conn:
        rows = conn.execute(sa.select(slot_ran.c.slot, slot_ran.c.worker)).all()
    slots = [datetime.fromisoformat(slot) for slot, _ in rows]
    twice = sorted(slot for slot, times in Counter(slots).items() if times > 1)
    assert twice == [], f"{len(twice)} slots ran twice, the first {twice[:5]}"
    assert sorted(slots) == [START + timedelta(minutes=m) for m in range(1, SLOTS + 1)]
    assert all(n > 0 for n in advanced), f"one worker ran no slot: {advanced}"

    # Stopped for three and a half hours; started again, they run the latest slot only.
    set_clock(clock, end + timedelta(hours=3, minutes=30, seconds=20))
    workers = _workers(pg_engine, clock, stop, end)
    try:
        _until(pg_engine, SLOTS + 1, workers, clock)
    finally:
        _stop(workers, stop)
    with pg_engine.connect() as conn:
        later = (
            conn.execute(sa.select(slot_ran.c.slot).where(slot_ran.c.id > SLOTS)).scalars().all()
        )
    assert [datetime.fromisoformat(s) for s in later] == [end + timedelta(hours=3, minutes=30)]
    print(f"\n{SLOTS} minutely slots in {took:.1f} s; runs per worker: {advanced}")
