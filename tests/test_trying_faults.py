"""Trying a flow with a fault path or an escalation: the try follows the fault path when the
script says the command refuses (no command runs), and says whom a waiting step would
tell once it has waited its escalate — the path a real run takes, nothing leaving the try.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, mount, stored
from test_runs_faults import BINDING, FLOWS, order, supplier

from flowrunner import Refusal, TryResult, testing


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    """The purchasing app with a fault path and an escalation, and two orders stored
    without their flows started: the records a designer picks."""
    found = mount(
        any_engine,
        "purchase_orders",
        flows=FLOWS,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )
    with found.runner.engine.begin() as conn:
        tables = found.runner.tables
        conn.execute(sa.insert(tables.resource).values(order(1)))
        conn.execute(sa.insert(tables.resource).values(order(2, 25000, approver="mia@x.org")))
    return found


def tried(driver: testing.FlowDriver, flow: Any, record: int, *answers: Any) -> TryResult:
    steps = flow.pop("steps") if isinstance(flow, dict) else None
    return driver.runner.try_flow(flow, steps, record, answers=answers, start=T0)


def said(result: TryResult, *whats: str) -> list[str]:
    return [f"{line.step}: {line.sentence}" for line in result.lines if line.what in whats]


def test_a_refusal_in_the_script_takes_the_fault_path(driver: testing.FlowDriver) -> None:
    line = "send_purchase_order refuses because the supplier refused: order on hold"
    result = tried(driver, "Send or say why", 1, line)
    assert result.path == (
        "Send to supplier (10)",
        "Put it on hold (40)",
        "Tell the buyer why (50)",
    )
    assert said(result, "failed") == [
        "Send to supplier: Send to supplier failed (the supplier refused: order on hold) — "
        "went on at Put it on hold"
    ]
    assert [n.message for n in result.notices] == [
        "Order PO-1 was not sent: the supplier refused: order on hold"
    ]
    assert [(v.field, v.after) for v in result.values] == [("status", "held")]
    [send] = result.commands
    assert send.sentence == (
        "Would run send_purchase_order, refused: the supplier refused: order on hold"
    )
    assert result.end.sentence == "Done on Mon 2 Mar 09:00: the flow ended after its last step"
    # Nothing left the try: the order is as it was, and no run started.
    assert stored(driver, 1)["status"] == "open"
    assert driver.runs(1) == []


def test_without_a_refusal_the_try_sends_and_ends_at_the_branch(
    driver: testing.FlowDriver,
) -> None:
    result = tried(driver, "Send or say why", 1, Refusal("remind_approver"))
    assert result.path == (
        "Send to supplier (10)",
        "Tell the buyer it went (20)",
        "Did the send fail? (30)",
    )
    assert said(result, "condition") == ["Did the send fail?: Failure is empty: ended here"]


def test_an_edited_flow_is_tried_with_its_fault_path_before_it_is_saved(
    driver: testing.FlowDriver,
) -> None:
    flow = {
        "name": "Send, or tell the requester",
        "start": "manual",
        "steps": [
            {"position": 1, "kind": "send", "title": "Send", "on_failure": 3},
            {"position": 2, "kind": "set", "title": "Sent", "field": "priority", "value": "low"},
            {
                "position": 3,
                "kind": "notify",
                "title": "Tell",
                "audience": "requester",
                "message": "{failure}",
            },
        ],
    }
    result = tried(driver, flow, 1, "send_purchase_order refuses because closed")
    assert result.path == ("Send (1)", "Tell (3)")
    assert [n.message for n in result.notices] == ["closed"]


def test_a_try_says_whom_a_waiting_step_would_escalate_to(driver: testing.FlowDriver) -> None:
    result = tried(
        driver,
        "Big orders",
        2,
        "finance approves after 3 days",
        "status becomes approved after 3 days",
    )
    assert said(result, "escalated") == [
        "Finance approval: Would escalate to mia@x.org (manager) after 2 days: "
        "Finance approval has waited 2 days and still waits for cfo@example.com and "
        "controller@example.com."
    ]
    escalations = [n for n in result.notices if n.audience == "manager"]
    assert [(n.recipient, n.at) for n in escalations] == [("mia@x.org", T0.replace(day=T0.day + 2))]
    assert result.path[-1] == "Send to supplier (30)"


def test_the_try_takes_the_path_a_real_run_takes(driver: testing.FlowDriver) -> None:
    result = tried(driver, "Send or say why", 1, "send_purchase_order refuses")
    with driver.runner.engine.begin() as conn:
        conn.execute(
            sa.update(driver.runner.tables.resource)
            .where(driver.runner.tables.resource.c.id == 1)
            .values(priority="hold")
        )
    driver.runner.start_existing(where="id = 1")
    driver.run_until_idle()
    [run] = driver.runs(1)
    real = [(line.position, line.what) for line in driver.history(run.id)]
    assert [(line.position, line.what) for line in result.lines] == real
