"""Crash injection for subflows: a worker stopped at every commit boundary while the
lending desk's accounts wait for their credit checks, resumed by a fresh worker.

As tests/test_workflows_children_crash.py does for a code workflow's children: the
script runs once without crashes (the reference), then once per point the worker
passed, on a fresh database, the worker stopped there by an exception. The end must
equal the reference: each check started once (the parent's step starts its child), each
account woken once its check ended and opened (or put on hold) once, each applicant
told once, a check cancelled with its account once; nothing due.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import lending
import pytest
import sqlalchemy as sa
from sizes import sized
from test_crash import LEASE, crash_plan

from flowrunner import testing
from flowrunner.engine import worker
from flowrunner.store import operations as ops

SCRIPT: list[tuple[str, Any]] = [
    ("create", lending.applicant(1, "Ann")),
    ("create", lending.applicant(2, "Mallory")),  # the bureau refuses: put on hold
    ("create", lending.applicant(3, "Gus")),
    ("create", lending.applicant(4, "Ann", guarantor=3)),
    ("create", lending.applicant(5, "Bea")),
    ("run", None),
    ("decide", 1),
    ("decide", 3),  # ends Gus's own check and the one his guarantee started
    ("cancel", 5),  # Bea withdraws: her account's run, and with it her check
    ("advance", "1 hour"),
]


def desk(engine: sa.Engine, hook: Any = None) -> testing.FlowDriver:
    driver = lending.mount(engine)
    driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=hook)
    return driver


def play(driver: testing.FlowDriver) -> None:
    """Run the script; on a crash, a fresh worker takes over once the lease ran out."""
    for action, arg in SCRIPT:
        while True:
            try:
                apply(driver, action, arg)
                break
            except worker.Crash:
                driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)
                driver.now = driver.now + LEASE + timedelta(seconds=1)


def apply(driver: testing.FlowDriver, action: str, arg: Any) -> None:
    if action == "create":
        if driver.record(arg["id"]) is None:
            driver.create(arg, run=False)
        driver.run_until_idle()
    elif action == "run":
        driver.run_until_idle()
    elif action == "decide":
        lending.decide(driver, arg)
    elif action == "cancel":
        [account] = [r for r in driver.runs(arg) if r.flow_name == "Open account"]
        if account.status != "cancelled":
            driver.runner.cancel(account.id, operator="olga", reason="withdrawn")
        driver.run_until_idle()
    else:
        driver.advance(arg)


def observe(driver: testing.FlowDriver) -> dict[str, Any]:
    """What a crash could duplicate or lose."""
    with driver.runner.engine.connect() as conn:
        runs = ops.list_runs(conn, limit=1000)
        due = ops.due_count(conn, now=driver.now + timedelta(days=3650))
    by_id = {run.id: run for run in runs}
    parents = {run.id: run.snapshot.get("parent") for run in runs}
    children = sorted(
        (by_id[parent["run"]].record_id, by_id[run_id].record_id, by_id[run_id].status)
        for run_id, parent in parents.items()
        if isinstance(parent, dict)
    )
    return {
        "records": {n: (driver.record(n) or {}).get("status") for n in range(1, 6)},
        "runs": sorted((r.record_id, r.flow_name, r.status) for r in runs),
        "children": children,
        "notices": sorted((n.recipient, n.message[:30]) for n in driver.notices()),
        "woken": sorted(
            (
                r.record_id,
                sum(
                    line.what == "done" and line.kind == "subflow" for line in driver.history(r.id)
                ),
            )
            for r in runs
            if r.flow_name.startswith("Open")
        ),
        "due": due,
    }


EXPECTED = {
    "records": {1: "open", 2: "held", 3: "open", 4: "open", 5: "new"},
    "runs": [
        ("1", "Credit check", "done"),
        ("1", "Open account", "done"),
        ("2", "Credit check", "failed"),
        ("2", "Open account", "done"),
        ("3", "Credit check", "done"),
        ("3", "Credit check", "done"),
        ("3", "Open account", "done"),
        ("4", "Open guaranteed account", "done"),
        ("5", "Credit check", "cancelled"),
        ("5", "Open account", "cancelled"),
    ],
    "children": [
        ("1", "1", "done"),
        ("2", "2", "failed"),
        ("3", "3", "done"),
        ("4", "3", "done"),
        ("5", "5", "cancelled"),
    ],
    "notices": [("Mallory", "Your account is on hold: subfl")],
    "woken": [("1", 1), ("2", 0), ("3", 1), ("4", 1), ("5", 0)],
    "due": 0,
}


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_crash_at_every_commit_boundary_starts_each_check_once_and_wakes_once(
    engines: Callable[[], sa.Engine],
) -> None:
    passed: list[str] = []

    def note(point: str) -> None:
        if point != "heartbeat":  # a thread's, on a wall-clock interval: tested apart
            passed.append(point)

    reference = desk(engines(), hook=note)
    play(reference)
    assert observe(reference) == EXPECTED
    dialect = engines().dialect.name
    every = sized(4 if dialect == "sqlite" else 12, 1)
    if os.environ.get("FLOWRUNNER_CRASH_ALL"):
        every = 1
    exercised: set[str] = set()
    for index in crash_plan(passed, every):
        hits = {"n": 0}

        def hook(point: str, index: int = index, hits: dict[str, int] = hits) -> None:
            if point == "heartbeat":
                return
            hits["n"] += 1
            if hits["n"] - 1 == index:
                raise worker.Crash(point)

        driver = desk(engines(), hook=hook)
        play(driver)
        got = observe(driver)
        assert got == EXPECTED, f"a crash at hit {index} ({passed[index]}) changed the outcome"
        exercised.add(passed[index])
        driver.runner.engine.dispose()
    assert {
        "claimed",
        "after-subflow-start",
        "after-subflow-cancel",
        "before-save",
        "before-commit",
        "committed",
    } <= exercised
