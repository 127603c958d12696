"""Acceptance: a deploy stops one of two workers in the middle of a backlog. The stopped
worker finishes the run in hand, hands back the runs it claimed but had not started —
saying so on one line — and exits well within its lease; the other worker does those
runs at once, not when their leases would have run out; and every command's effect
happens once, counted in the command's own table.

Real worker processes (``flowrunner worker``) on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from running import mount, ticket
from sizes import sized

ROOT = Path(__file__).resolve().parent.parent
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]
LEASE = 120.0  # seconds: far longer than the test takes, so a run it waited for shows

BACKLOG = sized(200, 1_000)

EFFECTS = sa.Table(
    "handover_effect",
    sa.MetaData(),
    sa.Column("run_id", sa.BigInteger, nullable=False),
    sa.Column("ticket_id", sa.Integer, nullable=False),
)

# The desk's handover, whose command writes one row of its own per run: a worker with
# HANDOVER_PAUSE set takes that long over each (the first worker, so that it still
# holds most of the backlog when it is stopped).
APP = """\
import os
import pathlib
import time

import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner.runner import flow_runner

EFFECTS = sa.Table(
    "handover_effect",
    sa.MetaData(),
    sa.Column("run_id", sa.BigInteger, nullable=False),
    sa.Column("ticket_id", sa.Integer, nullable=False),
)
PAUSE = float(os.environ.get("HANDOVER_PAUSE", "0"))


def assign(ctx):
    pathlib.Path("started").touch()
    time.sleep(PAUSE)
    ctx.conn.execute(sa.insert(EFFECTS).values(run_id=ctx.run_id, ticket_id=ctx.record["id"]))
    tickets.assign_ticket(ctx)


def runner(url):
    commands = {**tickets.COMMANDS, "assign_ticket": assign}
    return flow_runner(tickets.binding, sa.create_engine(url), commands=commands)
"""

FLOWS = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
    - {position: 2, kind: set, title: Urgent, field: priority, value: urgent}
"""


class Worker:
    """A ``flowrunner worker`` process, its standard error in a file the test reads."""

    def __init__(self, folder: Path, name: str, url: str, *options: str, pause: float) -> None:
        self.err = folder / f"{name}.err"
        self.out = folder / f"{name}.out"
        command = [*FLOWRUNNER, "worker", "--app", "handover:runner", "--database", url]
        with self.err.open("w") as err, self.out.open("w") as out:
            self.process = forked.popen(
                [*command, "--poll", "0.1", "--lease", f"{int(LEASE)} seconds", *options],
                cwd=folder,
                stdout=out,
                stderr=err,
                env={
                    **os.environ,
                    "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}",
                    "PYTHONUNBUFFERED": "1",
                    "HANDOVER_PAUSE": str(pause),
                },
            )

    def said(self) -> str:
        return self.err.read_text(encoding="utf-8")

    def summary(self) -> str:
        return self.out.read_text(encoding="utf-8")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=LEASE)


def until(condition: Callable[[], bool], what: str, *workers: Worker, within: float = 90) -> float:
    """Poll ``condition`` until it holds; the seconds it took. Fails past ``within`` or
    when a worker died on the way."""
    began = time.monotonic()
    while not condition():
        for worker in workers:
            assert worker.process.poll() is None, f"a worker exited: {worker.said()}"
        assert time.monotonic() - began < within, f"not within {within} s: {what}"
        time.sleep(0.02)
    return time.monotonic() - began


@pytest.mark.slow
def test_a_stopped_worker_hands_its_backlog_to_the_other(database_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(database_url)
    driver = mount(engine, "tickets", flows=FLOWS)
    EFFECTS.metadata.create_all(engine)
    for n in range(1, BACKLOG + 1):
        driver.create(ticket(n), run=False)
    (tmp_path / "handover.py").write_text(APP, encoding="utf-8")

    def effects() -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(EFFECTS)).scalar_one())

    # The first worker claims the whole backlog at once and works through it slowly.
    first = Worker(tmp_path, "first", database_url, "--claim", str(BACKLOG), pause=0.05)
    second: Worker | None = None
    try:
        until(lambda: effects() > 0, "the first worker began", first)
        second = other = Worker(tmp_path, "second", database_url, "--claim", "10", pause=0)
        until(lambda: "serving" in other.said(), "the second worker serves", first, other)
        before = effects()
        assert before < BACKLOG, "the first worker finished before it could be stopped"

        stopped = time.monotonic()
        assert first.stop() == 0, first.said()
        exited = time.monotonic() - stopped
        said = first.said()
        [line] = [line for line in said.splitlines() if "handed back" in line]
        found = re.search(r"stopping: handed back (\d+) claimed run\(s\) not started", line)
        assert found is not None, line
        handed = int(found.group(1))
        assert handed > 0, said
        assert "worker stopped" in said
        took = until(lambda: effects() >= BACKLOG, "the backlog done", other)
        done_after_stop = time.monotonic() - stopped
        assert other.stop() == 0, other.said()
    finally:
        for worker in (first, second):
            if worker is not None and worker.process.poll() is None:
                worker.process.kill()
                worker.process.wait()

    # Within the lease: the stop took the run in hand only, and the handed-back runs
    # were done long before their leases would have let the second worker have them.
    assert exited < LEASE / 4, exited
    assert done_after_stop < LEASE / 4, (done_after_stop, took)
    with engine.connect() as conn:
        once = conn.execute(
            sa.select(sa.func.count(), sa.func.count(sa.distinct(EFFECTS.c.run_id)))
        ).one()
        statuses: dict[str, int] = dict(
            conn.execute(
                sa.text("select status, count(*) from flowrunner_runs group by status")
            ).all()
        )
        assignees = conn.execute(
            sa.text("select count(*) from ticket where assignee = 'triage' and priority = 'urgent'")
        ).scalar_one()
    engine.dispose()
    assert tuple(once) == (BACKLOG, BACKLOG)  # every effect, once
    assert statuses == {"done": BACKLOG} and assignees == BACKLOG
    # What each worker says it did adds up: the first's advanced and handed back are its
    # whole claim, the second did the rest.
    first_done = re.search(r"advanced (\d+) run\(s\) of (\d+) claimed", first.summary())
    second_done = re.search(r"advanced (\d+) run\(s\)", other.summary())
    assert first_done is not None and second_done is not None
    assert int(first_done.group(2)) == BACKLOG
    assert int(first_done.group(1)) + handed == BACKLOG
    assert int(first_done.group(1)) + int(second_done.group(1)) == BACKLOG
    assert f"{handed} handed back" in first.summary()


@pytest.mark.slow
def test_a_second_signal_stops_the_worker_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "tickets", flows=FLOWS)
    EFFECTS.metadata.create_all(engine)
    driver.create(ticket(1), run=False)
    (tmp_path / "handover.py").write_text(APP, encoding="utf-8")
    worker = Worker(tmp_path, "worker", url, pause=LEASE)  # its command would take long
    try:
        until(lambda: (tmp_path / "started").exists(), "the command began", worker)
        worker.process.send_signal(signal.SIGTERM)
        until(lambda: "finishing the runs in hand" in worker.said(), "the first heard", worker)
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=30) == -signal.SIGTERM
    finally:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()
    assert "received signal 15 again; stopping at once" in worker.said()
    with engine.connect() as conn:
        status = conn.execute(sa.text("select status from flowrunner_runs")).scalar_one()
        effects = conn.execute(sa.select(sa.func.count()).select_from(EFFECTS)).scalar_one()
    engine.dispose()
    assert (status, effects) == ("running", 0)  # nothing of the step committed
