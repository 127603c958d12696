"""Runs of the purchase-order app: events, approvals by mode, reminders, give-up, retries.

Everything through the real engine on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import sqlalchemy as sa
from running import app, count, mount, stored, whats
from running import decide as decide_in_app

from flowrunner import errors, testing
from flowrunner.engine import commands
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.store import operations as ops

PO = app("purchase_orders")


def order(order_id: int, amount: int = 25000, **extra: Any) -> dict[str, Any]:
    return {
        "id": order_id,
        "number": f"PO-{1000 + order_id}",
        "requester_id": "ann",
        "amount": amount,
        **extra,
    }


def one_approval(mode: str | None = None, *, approvers: str = "a, b, c", **more: str) -> str:
    options = "".join(f", {k}: {v!r}" for k, v in more.items())
    mode_text = f", mode: {mode!r}" if mode else ""
    return f"""
- name: Approve
  start: created
  steps:
    - {{position: 1, kind: approval, title: Approval, approver: "{approvers}"{mode_text}{options}}}
    - {{position: 2, kind: set, title: Done, field: status, value: approved}}
"""


def decide(
    driver: testing.FlowDriver,
    order_id: int,
    decision: str = "approved",
    *,
    by: str = "a",
    **payload: Any,
) -> None:
    """An approver's answer (the fixture's approval kind counts each approver once)."""
    driver.emit("po.decided", {"order": order_id, "decision": decision, "approver": by, **payload})


def status(driver: testing.FlowDriver, order_id: int) -> str:
    return str(stored(driver, order_id)["status"])


@pytest.mark.parametrize(
    ("mode", "needed"),
    [(None, 1), ("any", 1), ("all", 3), ("2", 2), ("60%", 2), ("100%", 3), ("34%", 2)],
)
def test_a_wait_ends_exactly_when_its_mode_says(
    any_engine: sa.Engine, mode: str | None, needed: int
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=one_approval(mode))
    driver.create(order(1))
    assert count(any_engine, PO.approval_request, order_id=1) == 3
    who = ["a", "b", "c"]
    for n in range(1, needed):
        decide(driver, 1, by=who[n - 1])
        assert status(driver, 1) == "open", f"ended after {n} of {needed}"
    decide(driver, 1, by=who[needed - 1])
    assert status(driver, 1) == "approved"


def test_the_condition_ends_the_wait_early(any_engine: sa.Engine) -> None:
    flows = one_approval("all", condition="event.decision = rejected")
    driver = mount(any_engine, "purchase_orders", flows=flows)
    driver.create(order(1))
    decide(driver, 1, "approved", by="a")
    assert status(driver, 1) == "open"
    decide(driver, 1, "rejected", by="b")
    assert status(driver, 1) == "approved"  # the flow goes on: its branch decides
    [run] = driver.runs(1)
    assert "Approval: condition" in whats(driver, run.id)


def test_give_up_after_the_duration_and_go_on(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=one_approval("all", duration="1 week"))
    driver.create(order(1))
    decide(driver, 1, by="a")
    driver.advance("6 days 23 hours")
    assert status(driver, 1) == "open"
    driver.advance("1 hour")
    assert status(driver, 1) == "approved"
    [run] = driver.runs(1)
    assert "Approval: timed_out" in whats(driver, run.id)


def test_reminders_are_counted_exactly_across_a_long_wait(any_engine: sa.Engine) -> None:
    driver = mount(
        any_engine,
        "purchase_orders",
        flows=one_approval("all", remind="1 day", duration="1 week"),
    )
    driver.create(order(1))
    driver.advance("3 days 12 hours")
    assert [r for (r,) in reminders(any_engine)] == [1, 2, 3]
    driver.advance("10 days")
    # Reminders at days 1..6; at day 7 the wait gives up instead.
    assert [r for (r,) in reminders(any_engine)] == [1, 2, 3, 4, 5, 6]
    assert status(driver, 1) == "approved"


def test_a_clock_jump_sends_one_reminder_not_a_burst(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=one_approval("all", remind="1 day"))
    driver.create(order(1))
    driver.advance("4 days 2 hours", run=False)  # the workers were down for four days
    driver.run_until_idle()
    assert len(reminders(any_engine)) == 1
    driver.advance("1 day")
    assert len(reminders(any_engine)) == 2


def reminders(engine: sa.Engine) -> list[tuple[int]]:
    table = PO.approval_reminder
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(table.c.reminder).order_by(table.c.id))]


WAIT_THEN_APPROVE = """
- name: Later
  start: created
  steps:
    - {position: 1, kind: set, title: Hold, field: priority, value: low}
    - {position: 2, kind: approval, title: Approval, approver: a}
    - {position: 3, kind: set, title: Done, field: status, value: approved}
"""


def test_the_decision_came_before_any_worker_ran_the_approval_ends_at_once(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=WAIT_THEN_APPROVE)
    driver.create(order(1), run=False)
    decide(driver, 1)  # recorded after the order was created, before any worker came
    assert status(driver, 1) == "approved"


def test_decisions_about_other_orders_change_nothing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=WAIT_THEN_APPROVE)
    driver.create(order(1))
    driver.create(order(2))
    decide(driver, 2)
    assert status(driver, 1) == "open"
    assert status(driver, 2) == "approved"
    decide(driver, 1)
    assert status(driver, 1) == "approved"


def test_events_are_refused_with_a_clear_error_and_change_nothing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=one_approval())
    driver.create(order(1))
    rejected: list[tuple[str, dict[str, Any], str]] = [
        ("po.unknown", {"order": 1}, "there is no event 'po.unknown'"),
        ("po.decided", {"decision": "approved"}, "must name its purchase_order in field 'order'"),
        ("po.decided", {"order": 99}, "which does not exist"),
        ("po.decided", {"order": "x1"}, "cannot be a purchase_order key: send a whole number"),
    ]
    for name, payload, message in rejected:
        with pytest.raises(errors.EventRejected, match=message):
            driver.emit(name, payload)
    with any_engine.connect() as conn:
        assert ops.events_after(conn, resource="purchase_order", record_id="1", after_id=0) == []
    assert status(driver, 1) == "open"


def flaky(fails: int, seen: list[str]) -> commands.Command:
    def send(ctx: commands.CommandContext) -> Mapping[str, Any] | None:
        seen.append(ctx.idempotency_key)
        ctx.conn.execute(
            sa.update(PO.purchase_order)
            .where(PO.purchase_order.c.id == ctx.record["id"])
            .values(status="sending")
        )
        if len(seen) <= fails:
            raise ConnectionError("supplier gateway timed out")
        return None

    return send


SEND = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
    - {position: 2, kind: set, title: Sent, field: priority, value: high}
"""

POLICY = RetryPolicy(max_attempts=3, base=__import__("datetime").timedelta(minutes=1))


def sending(engine: sa.Engine, fails: int) -> tuple[testing.FlowDriver, list[str]]:
    """Order 1 created under the send flow, whose command fails its first ``fails`` calls;
    and the idempotency keys of the calls so far (more as the driver goes on)."""
    seen: list[str] = []
    driver = mount(
        engine,
        "purchase_orders",
        flows=SEND,
        commands={"send_purchase_order": flaky(fails, seen)},
        retry=POLICY,
    )
    driver.create(order(1))
    return driver, seen


def test_a_failing_command_retries_with_backoff_and_the_same_key(any_engine: sa.Engine) -> None:
    driver, seen = sending(any_engine, 2)
    assert len(seen) == 1 and status(driver, 1) == "open"  # the failed attempt rolled back
    driver.advance("1 minute")
    assert len(seen) == 2
    driver.advance("2 minutes")
    assert len(seen) == 3
    assert len(set(seen)) == 1  # one idempotency key for every attempt
    assert status(driver, 1) == "sending" and stored(driver, 1)["priority"] == "high"


def test_a_command_that_keeps_failing_fails_the_run_and_an_operator_retries(
    any_engine: sa.Engine,
) -> None:
    driver, seen = sending(any_engine, 3)
    driver.advance("1 hour")
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert len(seen) == 3
    assert run.reason is not None and run.error is not None
    assert "Send to supplier" in run.reason
    assert "\n" not in str(run.error["message"])
    driver.runner.retry(run.id, operator="olga")
    driver.run_until_idle()
    [run] = driver.runs(1)
    assert run.status == "done" and status(driver, 1) == "sending"


def test_a_refusal_fails_the_step_at_once(any_engine: sa.Engine) -> None:
    calls: list[int] = []

    def refuse(ctx: commands.CommandContext) -> None:
        calls.append(1)
        raise errors.CommandRefused("supplier account closed; card 4111 1111 1111 1111")

    driver = mount(
        any_engine, "purchase_orders", flows=SEND, commands={"send_purchase_order": refuse}
    )
    driver.create(order(1))
    driver.advance("1 day")
    [run] = driver.runs(1)
    assert run.status == "failed" and calls == [1]
    assert "4111 1111 1111 1111" not in str(run.error)
    assert run.error is not None
    assert "supplier account closed" in str(run.error["message"])


def test_a_record_deleted_while_its_run_waits_ends_the_run(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=one_approval())
    driver.create(order(1))
    driver.delete(1)
    [run] = driver.runs(1)
    assert run.status == "cancelled"
    assert run.reason == "the record was deleted while the run waited"


def test_the_sample_big_order_flow_end_to_end(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    driver.create(order(2))
    driver.create(order(3, amount=500))
    assert status(driver, 3) == "sent"
    driver.advance("1 day")
    for approver in ("manager@example.com", "cfo@example.com", "controller@example.com"):
        assert status(driver, 1) == "open"
        decide_in_app(driver, 1, approver)
    assert status(driver, 1) == "sent"
    decide_in_app(driver, 2, "cfo@example.com", "rejected")
    assert status(driver, 2) == "rejected"
    titles = [n.title for n in driver.notices()]
    assert titles == [
        "PO-1001: Your order was approved and goes to the supplier now.",
        "PO-1002: Your order was rejected.",
    ]
    assert [r.status for r in driver.runs(1) + driver.runs(2) + driver.runs(3)] == ["done"] * 3


def test_a_big_order_nobody_answered_is_rejected_never_sent(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    decide_in_app(driver, 1, "manager@example.com")  # one of three: not enough
    driver.advance("6 days 23 hours")
    assert status(driver, 1) == "open"
    driver.advance("1 hour")  # a week: both waits give up
    assert status(driver, 1) == "rejected"
    assert stored(driver, 1)["sent_at"] is None
    assert [n.title for n in driver.notices()] == ["PO-1001: Your order was rejected."]
    [run] = driver.runs(1)
    assert run.status == "done"
    whats_ = whats(driver, run.id)
    assert "Finance approval: timed_out" in whats_ and "Send to supplier: started" not in whats_
    assert "Reject it: set" in whats_


def test_a_withdrawn_big_order_ends_without_a_notice_or_a_send(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    driver.update(1, status="withdrawn")
    [run] = driver.runs(1)
    assert run.status == "done" and status(driver, 1) == "withdrawn"
    assert driver.notices() == []
    assert run.reason == "status is not approved, so the run ended at Approved?"


def test_the_apps_decide_marks_an_order_only_while_it_is_open(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    driver.create(order(2))
    decide_in_app(driver, 1, "manager@example.com")
    decide_in_app(driver, 1, "cfo@example.com")
    assert status(driver, 1) == "open"  # the controller has not approved yet
    driver.update(2, status="withdrawn")
    decide_in_app(driver, 2, "cfo@example.com", "rejected")
    assert status(driver, 2) == "withdrawn"  # a decision never reopens a withdrawn order
    table = PO.approval_request
    with any_engine.connect() as conn:
        decided = conn.execute(
            sa.select(table.c.order_id, table.c.approver, table.c.decision).order_by(table.c.id)
        ).all()
    assert [tuple(row) for row in decided if row.decision is not None] == [
        (1, "manager@example.com", "approved"),
        (1, "cfo@example.com", "approved"),
    ]  # order 2's requests were withdrawn with its approvals: the decision came too late
