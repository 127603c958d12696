"""Crash injection for a workflow and its child: a worker stopped at every commit
boundary while orders wait for their credit checks, resumed by a fresh worker.

As tests/test_workflows_crash.py does for one workflow: the script runs once without
crashes (the reference), then once per point the worker passed, on a fresh database,
the worker stopped there — by an exception in-process, or by killing a worker process.
The end must equal the reference: each order's check started once, its score taken
once, the order decided once with the check's result; every run ended as it did;
nothing due.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import forked
import ordering
import pytest
import sqlalchemy as sa
from running import T0, mount
from sizes import sized
from test_crash import LEASE, crash_plan

from flowrunner import testing
from flowrunner.engine import worker
from flowrunner.store import operations as ops

HERE = Path(__file__).parent
BUREAU = {"ann": 720, "cat": 580}  # bob has no file: his check fails, his order is referred
CUSTOMERS = {1: "ann", 2: "bob", 3: "cat"}


@pytest.fixture(autouse=True)
def files() -> Iterator[None]:
    ordering.BUREAU.clear()
    ordering.BUREAU.update(BUREAU)
    yield
    ordering.BUREAU.clear()


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


SCRIPT: list[tuple[str, Any]] = [
    *[("create", n) for n in CUSTOMERS],
    *[("start", n) for n in CUSTOMERS],
    ("run", None),
    ("until", at(1)),  # the checks' hour of review ends: each order is decided
    ("until", at(2)),
]


def shop(engine: sa.Engine, hook: Any = None, copy_of: sa.Engine | None = None) -> Any:
    driver = mount(
        engine,
        "purchase_orders",
        flows="[]",
        commands=ordering.COMMANDS,
        workflows=ordering.workflows(),
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
        driver.create(ordering.purchase_order(arg, CUSTOMERS[arg]), run=False)
    elif action == "start":
        customer = {"customer": CUSTOMERS[arg]}
        driver.runner.start_workflow("order", customer, operator="olga", record=arg, key=str(arg))
    elif action == "run":
        driver.run_until_idle()
    elif driver.now < arg:
        driver.advance_to(arg)
    else:
        driver.run_until_idle()


def observe(driver: testing.FlowDriver) -> dict[str, Any]:
    """What a crash could duplicate or lose."""
    with driver.runner.engine.connect() as conn:
        runs = ops.list_runs(conn, limit=1000)
        due = ops.due_count(conn, now=driver.now + timedelta(days=3650))
    parents = {run.id: run.record_id for run in runs if run.flow_name == "order"}
    children: dict[str, int] = {}
    for run in runs:
        parent = run.snapshot.get("parent")
        if isinstance(parent, dict):
            children[parents[parent["run"]]] = children.get(parents[parent["run"]], 0) + 1
    return {
        "marks": {n: (driver.record(n) or {}).get("approver") for n in CUSTOMERS},
        "runs": sorted(
            (
                r.record_id,
                r.flow_name,
                r.status,
                r.reason,
                json.dumps(r.state.get("result"), sort_keys=True),
            )
            for r in runs
        ),
        "children": children,
        "due": due,
    }


EXPECTED = {
    "marks": {1: " +score(ann) +approved", 2: " +referred", 3: " +score(cat) +declined"},
    "runs": [
        ("1", "credit_check", "done", None, '{"customer": "ann", "score": 720}'),
        ("1", "order", "done", None, '{"decision": "approved"}'),
        ("2", "credit_check", "failed", "step 'score' was refused: no credit file for bob", "null"),
        ("2", "order", "done", None, '{"decision": "referred"}'),
        ("3", "credit_check", "done", None, '{"customer": "cat", "score": 580}'),
        ("3", "order", "done", None, '{"decision": "declined"}'),
    ],
    "children": {"1": 1, "2": 1, "3": 1},
    "due": 0,
}


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_crash_at_every_commit_boundary_starts_each_child_once_and_decides_once(
    engines: Callable[[], sa.Engine],
) -> None:
    passed: list[str] = []

    def note(point: str) -> None:
        if point != "heartbeat":  # a thread's, on a wall-clock interval: tested apart
            passed.append(point)

    reference = shop(engines(), hook=note)
    play(reference, SCRIPT)
    assert observe(reference) == EXPECTED
    dialect = engines().dialect.name
    every = sized(1 if dialect == "sqlite" else 3, 1)
    if os.environ.get("FLOWRUNNER_CRASH_ALL"):
        every = 1
    # Every hit on SQLite (61 of them), every 3rd on PostgreSQL with the first of each point.
    # On SQLite each crash point starts from a copy of one unused shop.
    mounted = None
    if dialect == "sqlite":
        mounted = engines()
        shop(mounted)
    exercised: set[str] = set()
    for index in crash_plan(passed, every):
        hits = {"n": 0}

        def hook(point: str, index: int = index, hits: dict[str, int] = hits) -> None:
            if point == "heartbeat":
                return
            hits["n"] += 1
            if hits["n"] - 1 == index:
                raise worker.Crash(point)

        driver = shop(engines(), hook=hook, copy_of=mounted)
        play(driver, SCRIPT)
        got = observe(driver)
        assert got == EXPECTED, f"a crash at hit {index} ({passed[index]}) changed the outcome"
        exercised.add(passed[index])
        driver.runner.engine.dispose()
    assert {
        "claimed",
        "after-command:score_customer",
        "after-command:decide_order",
        "before-checkpoint",
        "checkpointed",
        "before-save",
        "before-commit",
        "committed",
    } <= exercised


# -- a worker process killed -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("point", ["after-command:score_customer", "before-commit", "committed"])
def test_a_worker_killed_while_the_child_runs_starts_it_once_and_the_parent_gets_its_result_once(
    engines: Callable[[], sa.Engine], point: str
) -> None:
    engine = engines()
    driver = shop(engine)
    play(driver, SCRIPT[:6])  # the orders and their starts; no worker yet
    engine.dispose()
    assert kill_at(engine, driver.now, point) == 3, f"never reached {point}"
    driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.now = driver.now + LEASE + timedelta(seconds=1)
    play(driver, SCRIPT[6:])
    assert observe(driver) == EXPECTED


def kill_at(engine: sa.Engine, now: datetime, point: str) -> int:
    """A worker process that kills itself (os._exit) at ``point``; its exit code."""
    url = engine.url.render_as_string(hide_password=False)
    schema = getattr(engine, "info_schema", None)
    env = {
        **os.environ,
        "CRASH_DB": url,
        "CRASH_OPTIONS": f"-csearch_path={schema}" if schema else "",
        "CRASH_BUREAU": json.dumps(BUREAU),
    }
    done = forked.run(
        [sys.executable, str(HERE / "crashing_worker.py"), "ordering", now.isoformat(), point],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 3), done.stderr
    return done.returncode
