"""The fault path and the escalation docs/flows.md shows run as it says, on the sample apps:
each example is imported from the guide as written, and each sentence the guide quotes
for it is what the run's history (or its notice) says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from running import decide, mount, sentences, stored

from fixtures.purchase_orders import app as po
from flowrunner import errors, query, testing
from flowrunner.engine import commands
from flowrunner.flows import validation
from flowrunner.history import flows as flows_history

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "flows.md"
TEXT = GUIDE.read_text(encoding="utf-8")
PROSE = " ".join(re.sub(r"```.*?```", "", TEXT, flags=re.S).split())


def example(column: str) -> str:
    """The guide's one YAML example whose steps say ``column``."""
    [found] = [b for b in re.findall(r"```yaml\n(.*?)```", TEXT, re.S) if f" {column}:" in b]
    return str(found)


def guide_says(*quoted: str) -> None:
    """The guide quotes each of these, word for word (across its line breaks)."""
    for sentence in quoted:
        assert f"`{sentence}`" in PROSE, f"docs/flows.md does not say {sentence!r}"


def send(ctx: commands.CommandContext) -> None:
    """The sample's send, whose gateway is down for the North."""
    if ctx.record.get("region") == "north":
        raise ConnectionError("the supplier's gateway is down")
    po.send_purchase_order(ctx)


@pytest.fixture
def orders(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(
        any_engine,
        "purchase_orders",
        flows=example("on_failure"),
        commands={"send_purchase_order": send},
    )


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 800, **extra}


def told(driver: testing.FlowDriver, record: int) -> tuple[str, list[str], list[str]]:
    [run] = driver.runs(record)
    lines = [line.split(": ", 1)[1] for line in sentences(driver, run.id)]
    return run.status, lines, [n.message for n in driver.notices(run.id)]


def test_the_fault_path_example_runs_as_the_guide_says(orders: testing.FlowDriver) -> None:
    orders.create(order(7, priority="hold"))
    status, lines, notices = told(orders, 7)
    refused = (
        "Send to supplier failed (the order is on hold: release it, then restart the run) — "
        "went on at Put it on hold"
    )
    why = "Order PO-7 was not sent: the order is on hold: release it, then restart the run"
    assert status == "done" and refused in lines and notices == [why]
    assert stored(orders, 7)["status"] == "held"
    orders.create(order(8))
    status, lines, notices = told(orders, 8)
    assert notices == ["Order PO-8 went to the supplier."]
    assert "Failure is empty: ended here" in lines
    orders.create(order(9, region="north"))
    orders.advance("5 minutes")
    status, lines, _ = told(orders, 9)
    five = (
        "Send to supplier failed 5 times (ConnectionError: the supplier's gateway is down) — "
        "went on at Put it on hold"
    )
    assert status == "done" and five in lines
    guide_says(refused, why, notices[0], "Failure is empty: ended here", five)


def test_the_loop_a_fault_path_would_make_is_refused_as_the_guide_says() -> None:
    steps = [
        {"position": 1, "kind": "notify", "audience": "requester", "message": "Again"},
        {"position": 2, "kind": "send", "on_failure": 1},
    ]
    found = validation.errors_for_flow(
        po.binding,
        {"name": "Loop", "start": "created"},
        steps,
        query.column_types(po.purchase_order),
    )
    [(_, [problem])] = found
    assert isinstance(problem, errors.FieldError)
    said = f"{problem.field}: {problem.message}"
    assert said in TEXT and problem.code == "loop_without_wait"


@pytest.fixture
def tickets(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "tickets", flows=example("escalate"))


def test_the_escalation_example_runs_as_the_guide_says(tickets: testing.FlowDriver) -> None:
    flow = "Wait for the reply, and tell the assignee"
    for n, assignee in ((1, "bob"), (2, None)):
        tickets.create({"id": n, "title": f"T{n}", "requester_id": "ann", "assignee": assignee})
        tickets.runner.start(flow, n, operator="olga")
    tickets.run_until_idle()
    tickets.advance("1 day 23 hours")
    assert told(tickets, 1)[2] == []
    tickets.advance("1 hour")
    status, lines, notices = told(tickets, 1)
    message = "Requester replies has waited 2 days and still waits for the ticket replied event."
    line = f"Escalated to bob (assignee) after 2 days: {message}"
    assert status == "waiting" and notices == [message] and line in lines
    nobody = "Could not escalate to the assignee after 2 days: the record's assignee is empty"
    assert nobody in told(tickets, 2)[1]
    tickets.advance("1 day")
    status, lines, notices = told(tickets, 1)
    assert status == "done" and lines[-2].startswith("Gave up after 3 days")
    assert notices == [message]  # told once
    guide_says(message, line, nobody)


# -- subflow -----------------------------------------------------------------------------


def subflow_example() -> str:
    [found] = [b for b in re.findall(r"```yaml\n(.*?)```", TEXT, re.S) if "kind: subflow" in b]
    return str(found)


@pytest.fixture
def checked(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "purchase_orders", flows=subflow_example())


def test_the_subflow_example_runs_as_the_guide_says(checked: testing.FlowDriver) -> None:
    checked.create(order(1))
    [sending] = [r for r in checked.runs(1) if r.flow_name == "Check the supplier, then send"]
    [check] = [r for r in checked.runs(1) if r.flow_name == "Supplier check"]
    [waits] = sending.waiting
    where = flows_history.waiting_sentence(waits)
    assert where == (
        "Waits at Check the supplier (position 10) for subflow Supplier check (run 2) to end; "
        "gives up at Mon 9 Mar 09:00"
    )
    decide(checked, 1, "buyer@example.com")
    status, lines, _ = told_of(checked, sending.id)
    assert status == "done" and stored(checked, 1)["status"] == "sent"
    assert stored(checked, 1)["priority"] == "high"
    started_it = "Started subflow Supplier check (run 2); gives up at Mon 9 Mar 09:00"
    assert started_it in lines
    assert "Subflow Supplier check ended — went on" in lines
    started = sentences(checked, check.id)[0].split(": ", 1)[1]
    assert started == f"Started by run {sending.id} at its step 'Check the supplier'"

    checked.create(order(2))
    checked.advance("1 week")
    [sending] = [r for r in checked.runs(2) if r.flow_name == "Check the supplier, then send"]
    status, lines, _ = told_of(checked, sending.id)
    gave_up = "Gave up after 1 week: subflow Supplier check (run 4) had not ended"
    cancelled = "Cancelled subflow Supplier check (run 4): the wait gave up"
    assert status == "done" and gave_up in lines and cancelled in lines
    assert stored(checked, 2)["status"] == "sent"
    assert [r.status for r in checked.runs(2) if r.flow_name == "Supplier check"] == ["cancelled"]
    guide_says(
        where,
        started,
        started_it,
        "Subflow Supplier check ended — went on",
        gave_up.replace("run 4", "run 2"),
        cancelled.replace("run 4", "run 2"),
    )


def told_of(driver: testing.FlowDriver, run_id: int) -> tuple[str, list[str], list[str]]:
    """A run of the orders 1 and 2: its status, its history's sentences, its notices."""
    [run] = [r for record in (1, 2) for r in driver.runs(record) if r.id == run_id]
    lines = [line.split(": ", 1)[1] for line in sentences(driver, run.id)]
    return run.status, lines, [n.message for n in driver.notices(run.id)]
