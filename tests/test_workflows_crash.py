"""Crash injection for code workflows: stop the worker at every commit boundary of a
workflow with run, call, wait_for and sleep steps, resume with a fresh worker.

As tests/test_crash.py does for flows: the script runs once without crashes (the
reference), then once per point the worker passed, on a fresh database and a fresh
checks service, the worker stopped there — by an exception in-process, or by killing a
worker process. The end must equal the reference: every command's write once, every
run ended as it did, nothing due or stuck; and the checks service asked at least once
per run, always with that run's one Idempotency-Key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import workflow_desk
from provider import Provider, serving
from running import T0, mount
from sizes import sized
from test_crash import LEASE, crash_plan

from flowrunner import testing
from flowrunner.engine import worker
from flowrunner.store import operations as ops

HERE = Path(__file__).parent


def ticket(n: int) -> dict[str, Any]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann"}


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


# Case A is answered after two hours; case B never is (its wait gives up after a day).
SCRIPT: list[tuple[str, Any]] = [
    ("create", ticket(1)),
    ("create", ticket(2)),
    ("emit", {"ticket": 1, "case": "A"}),
    ("emit", {"ticket": 2, "case": "B"}),
    ("emit", {"ticket": 1, "case": "A"}),  # re-sent: starts nothing new
    ("run", None),
    ("until", at(2)),
    ("emit", {"ticket": 1, "answers": "A"}),
    ("run", None),
    ("until", at(30)),
]


def desk(
    engine: sa.Engine, provider: Provider, hook: Any = None, copy_of: sa.Engine | None = None
) -> testing.FlowDriver:
    """The desk on ``engine``; copied from ``copy_of`` (an unused SQLite desk) when given."""
    driver = mount(
        engine,
        "tickets",
        flows="[]",
        commands=workflow_desk.COMMANDS,
        workflows=workflow_desk.workflows(provider.url),
        copy_of=copy_of,
    )
    driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=hook)
    return driver


def play(driver: testing.FlowDriver, script: list[tuple[str, Any]]) -> None:
    """Run the script; on a crash, a fresh worker takes over once the lease ran out."""
    for action, arg in script:
        while True:
            try:
                apply(driver, action, arg)
                break
            except worker.Crash:
                driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)
                driver.now = driver.now + LEASE + timedelta(seconds=1)


def apply(driver: testing.FlowDriver, action: str, arg: Any) -> None:
    if action == "create":
        driver.create(arg, run=False)
    elif action == "emit":
        driver.emit("ticket.replied", arg, run=False)
    elif action == "run":
        driver.run_until_idle()
    elif driver.now < arg:
        driver.advance_to(arg)
    else:
        driver.run_until_idle()


def observe(driver: testing.FlowDriver, provider: Provider) -> dict[str, Any]:
    """What a crash could duplicate or lose, and the keys the service was called with."""
    with driver.runner.engine.connect() as conn:
        runs = ops.list_runs(conn, limit=1000)
        due = ops.due_count(conn, now=driver.now + timedelta(days=3650))
    titles = {n: (driver.record(n) or {}).get("title") for n in (1, 2)}
    keys = {run.record_id: f"run-{run.id}/check" for run in runs}
    return {
        "titles": titles,
        "runs": sorted(
            (r.record_id, r.flow_name, r.status, r.reason, str(r.state.get("result"))) for r in runs
        ),
        "due": due,
        # Each run's call was made at least once, always with its one key.
        "called": sorted({str(key) for key in provider.sent_keys()}) == sorted(keys.values()),
    }


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_the_reference_run_does_each_step_once(engines: Callable[[], sa.Engine]) -> None:
    with serving() as provider:
        provider.failures["/checks"] = [503]  # the first call is tried again
        driver = desk(engines(), provider)
        play(driver, SCRIPT)
        got = observe(driver, provider)
    assert got["titles"] == {1: "T1 +mark(A) +finish(A,True)", 2: "T2 +mark(B) +finish(B,False)"}
    assert [status for _, _, status, _, _ in got["runs"]] == ["done", "done"]
    assert got["due"] == 0 and got["called"]


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_crash_at_every_commit_boundary_of_a_workflow_changes_nothing(
    engines: Callable[[], sa.Engine],
) -> None:
    passed: list[str] = []
    with serving() as provider:
        provider.failures["/checks"] = [503]

        def note(point: str) -> None:
            if point != "heartbeat":  # a thread's, on a wall-clock interval: tested apart
                passed.append(point)

        reference = desk(engines(), provider, hook=note)
        play(reference, SCRIPT)
        expected = observe(reference, provider)
    dialect = engines().dialect.name
    every = sized(6 if dialect == "sqlite" else 12, 1)
    if os.environ.get("FLOWRUNNER_CRASH_ALL"):
        every = 1
    # On SQLite each crash point starts from a copy of one unused desk.
    mounted = None
    if dialect == "sqlite":
        with serving() as provider:
            mounted = engines()
            desk(mounted, provider)
    exercised: set[str] = set()
    for index in crash_plan(passed, every):
        hits = {"n": 0}

        def hook(point: str, index: int = index, hits: dict[str, int] = hits) -> None:
            if point == "heartbeat":
                return
            hits["n"] += 1
            if hits["n"] - 1 == index:
                raise worker.Crash(point)

        with serving() as provider:
            provider.failures["/checks"] = [503]
            driver = desk(engines(), provider, hook=hook, copy_of=mounted)
            play(driver, SCRIPT)
            got = observe(driver, provider)
        assert got == expected, f"a crash at hit {index} ({passed[index]}) changed the outcome"
        exercised.add(passed[index])
        driver.runner.engine.dispose()
    assert {
        "claimed",
        "after-command:mark",
        "after-call:check",
        "after-command:finish",
        "before-save",
        "before-commit",
        "committed",
    } <= exercised
