"""Crash injection: stop the worker at every commit boundary, resume with a fresh one.

A scenario script runs once without crashes (the reference). Then, for each point the
worker passed in the reference (claimed, after a set, a notice or a command, before the
save, before and after the commit), the script runs again on a fresh database and the
worker is stopped at that point — by an exception in-process, or by killing a worker
process. A fresh worker (a new owner) takes over once the lease expires, and the
script goes on. The end state must equal the reference: no duplicated set, notice,
command write or reminder, no lost run, no stuck run.

The scenarios: the sample apps' own flows (``tickets``, ``purchase_orders``), and
``fault_paths`` — sends that take their fault path (refused, then failing five times)
and an approval that escalates to the manager — on the purchasing app.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, app, decide, mount
from sizes import sized
from test_runs_faults import BINDING as FAULTS_BINDING
from test_runs_faults import FLOWS as FAULTS_FLOWS
from test_runs_faults import supplier

from flowrunner import testing
from flowrunner.engine import worker
from flowrunner.store import operations as ops

LEASE = timedelta(seconds=1)
HERE = Path(__file__).parent


@dataclass
class Action:
    name: str
    args: tuple[Any, ...] = ()


def ticket(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": n,
        "title": f"T{n}",
        "requester_id": "ann",
        "assignee": "bob",
        "due_at": T0 + timedelta(hours=8),
        **extra,
    }


def order(n: int, amount: int = 25000, **extra: Any) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": amount, **extra}


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


TICKETS = [
    Action("create", (ticket(1),)),
    Action("create", (ticket(2),)),
    Action("create", (ticket(3, due_at=None),)),
    Action("run"),
    Action("until", (at(4),)),
    Action("update", (1, {"status": "resolved"})),
    Action("run"),
    Action("until", (at(9),)),
    Action("update", (2, {"status": "waiting"})),
    Action("update", (3, {"status": "waiting"})),
    Action("run"),
    Action("emit", ("ticket.replied", {"ticket": 3})),
    Action("update", (3, {"status": "open"})),
    Action("run"),
    Action("until", (at(9 + 24 * 6),)),
]


def decided(n: int, approver: str, decision: str = "approved") -> Action:
    """An approver answers through the app's own ``decide`` (recorded, then emitted)."""
    return Action("decide", (n, approver, decision))


ORDERS = [
    Action("create", (order(1),)),
    Action("create", (order(2),)),
    Action("create", (order(3, 500),)),
    Action("create", (order(4),)),  # nobody answers: reminders, then the give-up
    Action("create", (order(5),)),  # withdrawn while it waits: the approvals are cancelled
    Action("create", (order(6, 500, priority="hold"),)),  # sending is refused: the run fails
    Action("run"),
    Action("update", (6, {"priority": "normal"})),
    Action("restart", (6,)),  # released, and an operator starts the run again
    Action("until", (at(25),)),
    decided(1, "manager@example.com"),
    decided(1, "cfo@example.com"),
    decided(1, "cfo@example.com"),  # twice: counted once
    decided(1, "controller@example.com"),
    Action("run"),
    Action("until", (at(49),)),
    decided(2, "cfo@example.com", "rejected"),
    Action("update", (5, {"status": "withdrawn"})),
    Action("run"),
    Action("until", (at(24 * 9),)),
]

FAULTS = [
    Action("create", (order(1, 500),)),  # sent: the buyer is told it went
    Action("create", (order(2, 500, priority="hold"),)),  # refused: on at its fault path
    Action("create", (order(3, 500, region="north"),)),  # fails five times: the same
    Action("create", (order(4, approver="mia@example.com"),)),  # escalates after 2 days
    Action("run"),
    Action("until", (at(0.1),)),  # six minutes: order 3's retries are used up
    Action("until", (at(49),)),  # the manager was told about order 4 at 48 hours
    decided(4, "cfo@example.com"),  # still answered on day three
    decided(4, "controller@example.com"),
    Action("run"),
    Action("until", (at(24 * 9),)),
]


@dataclass(frozen=True)
class Scenario:
    """A script, the sample app it runs on, and the flows, binding and commands it
    mounts (the app's own when not given)."""

    app: str
    script: list[Action]
    flows: str | None = None
    binding: Any = None
    commands: dict[str, Any] | None = None


SCENARIOS = {
    "tickets": Scenario("tickets", TICKETS),
    "purchase_orders": Scenario("purchase_orders", ORDERS),
    "fault_paths": Scenario(
        "purchase_orders",
        FAULTS,
        flows=FAULTS_FLOWS,
        binding=FAULTS_BINDING,
        commands={"send_purchase_order": supplier},
    ),
}


def play(driver: testing.FlowDriver, script: list[Action], recover: Callable[[], None]) -> None:
    """Run the script; on a crash, recover (fresh worker, lease expired) and redo the step."""
    for action in script:
        while True:
            try:
                apply(driver, action)
                break
            except worker.Crash:
                recover()


def apply(driver: testing.FlowDriver, action: Action) -> None:
    if action.name == "create":
        driver.create(action.args[0], run=False)
    elif action.name == "update":
        driver.update(action.args[0], run=False, **action.args[1])
    elif action.name == "emit":
        driver.emit(*action.args, run=False)
    elif action.name == "decide":
        decide(driver, *action.args, run=False)
    elif action.name == "run":
        driver.run_until_idle()
    elif action.name == "restart":
        for run in driver.runs(action.args[0]):
            if run.status == "failed" and run.restarted_as is None:
                driver.runner.restart(run.id, operator="olga")
    elif action.name == "until":
        if driver.now < action.args[0]:
            driver.advance_to(action.args[0])
        else:
            driver.run_until_idle()


def observe(driver: testing.FlowDriver, name: str) -> dict[str, Any]:
    """Everything a crash could duplicate or lose, without timestamps."""
    engine = driver.runner.engine
    module = app(SCENARIOS[name].app)
    with engine.connect() as conn:
        resource = driver.runner.tables.resource
        records = [
            {k: v for k, v in row.items() if not k.endswith("_at")}
            for row in conn.execute(sa.select(resource).order_by(resource.c.id)).mappings()
        ]
        runs = [
            (r.record_id, r.flow_name, r.status, r.reason)
            for r in ops.list_runs(conn, limit=10_000)
        ]
        notices = sorted(
            (n.run_id, n.step_id, n.pass_, n.audience, n.title) for n in ops.notices(conn)
        )
        extra: dict[str, Any] = {}
        if module.__name__.endswith("purchase_orders.app"):
            for table in (module.approval_request, module.approval_reminder):
                # A moment depends on when the recovering worker got there: only
                # whether it was written is compared.
                extra[table.name] = sorted(
                    tuple(
                        str(v is not None if k.endswith("_at") else v)
                        for k, v in row.items()
                        if k != "id"
                    )
                    for row in conn.execute(sa.select(table)).mappings()
                )
        due = ops.due_count(conn, now=driver.now + timedelta(days=3650))
        stuck = [r for r in ops.list_runs(conn, limit=10_000) if r.status in ("running",)]
    return {
        "records": records,
        "runs": sorted(runs, key=str),
        "notices": notices,
        "due": due,
        "stuck": stuck,
        **extra,
    }


def fresh_driver(
    engine: sa.Engine, name: str, hook: Any = None, copy_of: sa.Engine | None = None
) -> testing.FlowDriver:
    """The scenario's app mounted on ``engine``, or copied from ``copy_of`` (SQLite)."""
    driver = mounted(engine, name, copy_of=copy_of)
    driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=hook)
    return driver


def mounted(engine: sa.Engine, name: str, copy_of: sa.Engine | None = None) -> testing.FlowDriver:
    """The scenario ``name``'s app mounted on ``engine`` (``running.mount``)."""
    scenario = SCENARIOS[name]
    return mount(
        engine,
        scenario.app,
        flows=scenario.flows,
        binding=scenario.binding,
        commands=scenario.commands,
        copy_of=copy_of,
    )


def recovery(driver: testing.FlowDriver) -> Callable[[], None]:
    def recover() -> None:
        driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)  # a new owner
        driver.now = driver.now + LEASE + timedelta(seconds=1)

    return recover


def reference(make: Callable[[], sa.Engine], name: str) -> tuple[dict[str, Any], list[str]]:
    passed: list[str] = []

    def note(point: str) -> None:
        # A heartbeat comes from a thread of its own after a wall-clock interval, so
        # whether one happens varies between runs: crashes there are tested apart
        # (test_worker_heartbeat.py).
        if point != "heartbeat":
            passed.append(point)

    driver = fresh_driver(make(), name, hook=note)
    play(driver, SCENARIOS[name].script, recovery(driver))
    return observe(driver, name), passed


def crash_plan(passed: list[str], every: int) -> list[int]:
    """Which hits to crash at: the first hit of each distinct point, then every n-th."""
    first: dict[str, int] = {}
    for index, point in enumerate(passed):
        first.setdefault(point, index)
    chosen = set(first.values()) | set(range(0, len(passed), every))
    return sorted(chosen)


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("name", ["tickets", "purchase_orders", "fault_paths"])
def test_crash_at_every_commit_boundary_changes_nothing(
    engines: Callable[[], sa.Engine], name: str
) -> None:
    expected, passed = reference(engines, name)
    assert expected["stuck"] == [] and expected["notices"]
    # Each distinct point, and every 6th hit on SQLite, every 16th on PostgreSQL (whose
    # dialect's own statements every distinct point already reaches); every hit
    # in a long run (or with FLOWRUNNER_CRASH_ALL=1).
    dialect = engines().dialect.name
    every = sized(6 if dialect == "sqlite" else 16, 1)
    if os.environ.get("FLOWRUNNER_CRASH_ALL"):
        every = 1
    plan = crash_plan(passed, every)
    # On SQLite each crash point starts from a copy of one database the app was mounted on,
    # rather than from the app's tables, migrations and flows made again.
    mounted_once = None
    if dialect == "sqlite":
        mounted_once = engines()
        mounted(mounted_once, name)
    exercised: set[str] = set()
    for index in plan:
        hits = {"n": 0}

        def hook(point: str, index: int = index, hits: dict[str, int] = hits) -> None:
            if point == "heartbeat":
                return
            if hits["n"] == index:
                hits["n"] += 1
                raise worker.Crash(point)
            hits["n"] += 1

        driver = fresh_driver(engines(), name, hook=hook, copy_of=mounted_once)
        play(driver, SCENARIOS[name].script, recovery(driver))
        exercised.add(passed[index])
        got = observe(driver, name)
        assert got == expected, f"crash at hit {index} ({passed[index]}) changed the outcome"
        driver.runner.engine.dispose()
    kinds = {p.split(":")[0] for p in exercised}
    assert {"claimed", "before-save", "before-commit", "committed", "after-set"} <= kinds
    assert "after-notify" in kinds
    if name == "fault_paths":
        # Each effect once: orders 2 and 3 held and their buyer told why once, the
        # manager told about order 4 once, order 4 still sent.
        assert [r["status"] for r in expected["records"]] == ["sent", "held", "held", "sent"]
        told = [(run, audience) for run, _, _, audience, _ in expected["notices"]]
        assert sorted(audience for _, audience in told) == [
            "manager",
            "requester",
            "requester",
            "requester",
        ]
        assert {status for _, _, status, _ in expected["runs"]} == {"done"}
        assert "after-command:send_purchase_order" in exercised
    if name == "purchase_orders":
        # Order 6's run was refused and failed, then restarted as a run that sent it.
        assert sorted(status for record, _, status, _ in expected["runs"] if record == "6") == [
            "done",
            "failed",
        ]
        assert {
            "after-command:request_approval",
            "after-command:remind_approver",
            "after-command:close_approval_requests",
        } <= exercised
    print(f"\n{name}: {len(plan)} crash points exercised of {len(passed)} passed")
