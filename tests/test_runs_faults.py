"""Fault paths and escalations, as a purchasing department states them.

- A send to the supplier that is refused does not fail the run: it goes on at the step's
  ``on_failure``, where the order is put on hold and the buyer is told why — the notice
  carries what the supplier said (``{failure}``).
- A send that fails five times does the same, once its retries are used up; so does one
  whose attempts all time out.
- An approval that has waited two days tells the manager, once, and keeps waiting: the
  approvers still answer on day three, reminders and the give-up are as they were.

Everything through the real engine, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import app, count, decide, mount, sentences, stored

from flowrunner import errors, testing
from flowrunner.binding import Kind, NotifyRule
from flowrunner.engine import commands
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.history import flows as history

PO = app("purchase_orders")

# The purchasing app, whose managers are told through the order's approver column.
BINDING = PO.binding.model_copy(
    update={
        "notify": [
            *PO.binding.notify,
            NotifyRule(audience="manager", to="approver", title="{number}: {message}"),
        ]
    }
)

FLOWS = """
- name: Send or say why
  start: created
  condition: amount <= 10000
  steps:
    - {position: 10, kind: send, title: Send to supplier, on_failure: 40}
    - {position: 20, kind: notify, title: Tell the buyer it went, audience: requester,
       message: "Order {number} went to the supplier."}
    # Reached only when the send went through: the run ends here.
    - {position: 30, kind: branch, title: "Did the send fail?", condition: failure is not null}
    - {position: 40, kind: set, title: Put it on hold, field: status, value: held}
    - {position: 50, kind: notify, title: Tell the buyer why, audience: requester,
       message: "Order {number} was not sent: {failure}"}

- name: Big orders
  start: created
  condition: amount > 10000
  steps:
    - {position: 10, kind: approval, title: Finance approval,
       approver: "cfo@example.com, controller@example.com", mode: all, remind: 1 day,
       duration: 1 week, escalate: 2 days, escalate_to: manager}
    - {position: 20, kind: branch, title: "Approved?", condition: status = approved}
    - {position: 30, kind: send, title: Send to supplier}
"""


def order(n: int, amount: int = 500, **extra: Any) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": amount, **extra}


def supplier(ctx: commands.CommandContext) -> Mapping[str, Any] | None:
    """The supplier refuses an order on hold, and its gateway is down for the North."""
    if ctx.record.get("priority") == "hold":
        raise errors.CommandRefused("the supplier refused: order on hold")
    if ctx.record.get("region") == "north":
        raise ConnectionError("the supplier's gateway is down")
    PO.send_purchase_order(ctx)
    return None


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(
        any_engine,
        "purchase_orders",
        flows=FLOWS,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )


def told(driver: testing.FlowDriver, run_id: int) -> list[tuple[str | None, str, str]]:
    return [(n.recipient, n.audience, n.message) for n in driver.notices(run_id)]


# -- fault paths ---------------------------------------------------------------------------


def test_a_sent_order_tells_the_buyer_it_went_and_ends(driver: testing.FlowDriver) -> None:
    driver.create(order(1))
    [run] = driver.runs(1)
    assert run.status == "done"
    assert stored(driver, 1)["status"] == "sent"
    assert told(driver, run.id) == [("ann", "requester", "Order PO-1 went to the supplier.")]
    assert sentences(driver, run.id)[-3:] == [
        "Did the send fail?: Failure is empty: ended here",
        "Did the send fail?: Finished Did the send fail?",
        "run: Run done: failure is empty, so the run ended at Did the send fail?",
    ]


def test_a_refused_send_goes_on_at_its_fault_path_and_the_buyer_is_told_why(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(2, priority="hold"))
    [run] = driver.runs(2)
    assert run.status == "done" and run.error is None
    assert stored(driver, 2)["status"] == "held"
    assert told(driver, run.id) == [
        ("ann", "requester", "Order PO-2 was not sent: the supplier refused: order on hold")
    ]
    assert sentences(driver, run.id) == [
        "Send to supplier: Started Send to supplier",
        "Send to supplier: Sent to supplier",
        "Send to supplier: Send to supplier failed (the supplier refused: order on hold) — "
        "went on at Put it on hold",
        "Put it on hold: Started Put it on hold",
        "Put it on hold: Set status to held",
        "Put it on hold: Finished Put it on hold",
        "Tell the buyer why: Started Tell the buyer why",
        "Tell the buyer why: Told ann (requester): "
        "Order PO-2 was not sent: the supplier refused: order on hold",
        "Tell the buyer why: Finished Tell the buyer why",
        "run: Run done: the flow ended after its last step",
    ]
    [failed] = [line for line in driver.history(run.id) if line.what == "failed"]
    assert failed.detail == {
        "code": "command.refused",
        "message": "the command refused: the supplier refused: order on hold",
        "failure": "the supplier refused: order on hold",
        "attempts": 1,
        "on_failure": 40,
    }


def test_a_send_failing_five_times_takes_the_same_path_after_its_retries(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(3, region="north"))
    [run] = driver.runs(3)
    assert run.status == "waiting"  # trying again in 10 s, then 20, 40 and 80
    driver.advance("2 minutes")
    [run] = driver.runs(3)
    assert run.status == "waiting" and stored(driver, 3)["status"] == "open"
    driver.advance("1 minute")
    [run] = driver.runs(3)
    assert run.status == "done"
    assert stored(driver, 3)["status"] == "held"
    said = "ConnectionError: the supplier's gateway is down"
    assert told(driver, run.id) == [("ann", "requester", f"Order PO-3 was not sent: {said}")]
    lines = sentences(driver, run.id)
    assert [line for line in lines if "Attempt" in line] == [
        f"Send to supplier: Attempt {n} failed ({said}); trying again at Mon 2 Mar 09:0{m}"
        for n, m in ((1, 0), (2, 0), (3, 1), (4, 2))
    ]
    assert (
        f"Send to supplier: Send to supplier failed 5 times ({said}) — went on at Put it on hold"
    ) in lines


def test_a_send_whose_attempts_all_time_out_takes_its_fault_path(any_engine: sa.Engine) -> None:
    slow = Kind(
        command="send_purchase_order", timeout="30 seconds", retry=RetryPolicy(max_attempts=2)
    )
    binding = BINDING.model_copy(update={"kinds": {**BINDING.kinds, "send": slow}})
    driver: testing.FlowDriver

    def slow_send(ctx: commands.CommandContext) -> None:
        driver.now += timedelta(seconds=31)  # it took 31 seconds, and then answered

    driver = mount(
        any_engine,
        "purchase_orders",
        flows=FLOWS,
        binding=binding,
        commands={"send_purchase_order": slow_send},
    )
    driver.create(order(4))
    driver.advance("1 minute")
    [run] = driver.runs(4)
    assert run.status == "done" and stored(driver, 4)["status"] == "held"
    assert told(driver, run.id) == [
        ("ann", "requester", "Order PO-4 was not sent: timed out after 30 seconds")
    ]


def test_without_a_fault_path_a_refusal_still_fails_the_run(any_engine: sa.Engine) -> None:
    flows = FLOWS.replace(", on_failure: 40", "")
    driver = mount(
        any_engine,
        "purchase_orders",
        flows=flows,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )
    driver.create(order(5, priority="hold"))
    [run] = driver.runs(5)
    assert run.status == "failed"
    assert run.reason == (
        "step 'Send to supplier' (send, position 10) failed: "
        "the command refused: the supplier refused: order on hold"
    )
    assert driver.notices(run.id) == []


# -- escalation ----------------------------------------------------------------------------


def test_an_approval_escalates_to_the_manager_once_and_is_still_answered_on_day_three(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(6, amount=25000, approver="mia@example.com"))
    [run] = driver.runs(6)
    [waiting] = run.waiting
    assert (waiting.escalate_to, waiting.escalated) == ("manager", False)
    assert history.waiting_sentence(waiting).endswith("; tells the manager at Wed 4 Mar 09:00")
    driver.advance("1 day 23 hours")
    assert [n.audience for n in driver.notices(run.id)] == []
    driver.advance("1 hour")  # two days: the manager is told, and the approval waits on
    [run] = driver.runs(6)
    assert run.status == "waiting"
    assert told(driver, run.id) == [
        (
            "mia@example.com",
            "manager",
            "Finance approval has waited 2 days and still waits for cfo@example.com and "
            "controller@example.com.",
        )
    ]
    [notice] = driver.notices(run.id)
    assert str(notice.title).startswith("PO-6: Finance approval has waited 2 days")
    [waiting] = run.waiting
    assert waiting.escalated and history.waiting_sentence(waiting).endswith("; told the manager")
    driver.advance("1 day 1 hour")  # day three, 10:00: both approvers answer
    decide(driver, 6, "cfo@example.com")
    decide(driver, 6, "controller@example.com")
    [run] = driver.runs(6)
    assert run.status == "done" and stored(driver, 6)["status"] == "sent"
    driver.advance("1 week")
    assert [n.audience for n in driver.notices(run.id)] == ["manager"]  # once
    # Reminders went on as before: one a day until the answers came.
    assert count(driver.runner.engine, PO.approval_reminder, order_id=6) == 3
    assert [line for line in sentences(driver, run.id) if "Escalated" in line] == [
        "Finance approval: Escalated to mia@example.com (manager) after 2 days: "
        "Finance approval has waited 2 days and still waits for cfo@example.com and "
        "controller@example.com."
    ]


def test_an_approval_answered_before_it_escalates_tells_nobody(
    driver: testing.FlowDriver,
) -> None:
    driver.create(order(7, amount=25000, approver="mia@example.com"))
    driver.advance("1 day")
    decide(driver, 7, "cfo@example.com")
    decide(driver, 7, "controller@example.com")
    driver.advance("1 week")
    [run] = driver.runs(7)
    assert run.status == "done"
    assert [n.audience for n in driver.notices(run.id)] == []


def test_an_escalation_nobody_can_receive_is_kept_and_said(driver: testing.FlowDriver) -> None:
    driver.create(order(8, amount=25000))  # no approver: no manager to tell
    driver.advance("2 days")
    [run] = driver.runs(8)
    [notice] = driver.notices(run.id)
    assert (notice.audience, notice.deliverable, notice.problem) == (
        "manager",
        False,
        "the record's approver is empty",
    )
    assert [line for line in sentences(driver, run.id) if "escalate" in line] == [
        "Finance approval: Could not escalate to the manager after 2 days: "
        "the record's approver is empty"
    ]
