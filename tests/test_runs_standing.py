"""``runner.runs(record)``: newest first, each open run saying where it waits and for what.

Through the real engine on SQLite and PostgreSQL, with the sample apps.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from running import T0, decide, mount

from flowrunner import Awaits, LaneStatus, RunStatus, Waiting
from flowrunner.engine import commands
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.history import flows

WEEK_LATER = T0 + timedelta(days=7)


def order(order_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": order_id,
        "number": f"PO-{order_id}",
        "requester_id": "ann",
        "amount": 25000,
        **extra,
    }


def ticket(ticket_id: int, **extra: Any) -> dict[str, Any]:
    return {"id": ticket_id, "title": "Printer", "requester_id": "ann", "due_at": T0, **extra}


def test_runs_are_newest_first(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1))  # the SLA warning starts
    driver.update(1, status="waiting")  # the follow-up starts
    driver.runner.start("Reassign to triage", 1, operator="olga")
    runs = driver.runs(1)
    assert [r.flow_name for r in runs] == ["Reassign to triage", "Follow up", "SLA warning"]
    assert [r.id for r in runs] == sorted((r.id for r in runs), reverse=True)


def test_a_waiting_approval_says_who_was_asked_and_who_answered(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    decide(driver, 1, "cfo@example.com")
    [run] = driver.runs(1)
    assert run.status == RunStatus.WAITING
    manager, finance = run.waiting
    assert manager == Waiting(
        position=10,
        step_id=manager.step_id,
        title="Manager approval",
        kind="approval",
        awaits=Awaits.EVENT,
        status=LaneStatus.WAITING,
        event="po.decided",
        until=WEEK_LATER,
        asked=1,
        needed=1,
        received=0,
        asked_names=("manager@example.com",),
        answered=(),
        next_reminder_at=T0 + timedelta(days=1),
    )
    assert manager.step_id is not None and manager.step_id != finance.step_id
    assert (finance.title, finance.asked, finance.needed, finance.received) == (
        "Finance approval",
        2,
        2,
        1,
    )
    assert finance.asked_names == ("cfo@example.com", "controller@example.com")
    assert finance.answered == ("cfo@example.com",)
    assert flows.waiting_sentence(finance) == (
        "Waits at Finance approval (position 10) for the po decided event: 1 of 2 answered, "
        "waiting for controller@example.com; gives up at Mon 9 Mar 09:00"
    )
    driver.advance("1 week")
    [run] = driver.runs(1)
    assert run.status == RunStatus.DONE and run.waiting == ()


def test_timers_events_and_empty_dates_each_say_what_they_wait_for(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1, due_at=T0 + timedelta(hours=8)))
    [sla] = driver.runs(1)
    [warning] = sla.waiting
    assert (warning.title, warning.awaits, warning.until, warning.field, warning.event) == (
        "Four hours before due",
        Awaits.TIME,
        T0 + timedelta(hours=4),
        "due_at",
        None,
    )
    driver.update(1, due_at=None)  # the until step follows the record: no date, no timer
    [sla] = driver.runs(1)
    assert (sla.waiting[0].until, sla.waiting[0].field) == (None, "due_at")
    assert flows.waiting_sentence(sla.waiting[0]) == (
        "Waits at Four hours before due (position 1) while due_at is empty"
    )
    driver.update(1, status="waiting")
    follow_up, _ = driver.runs(1)
    [reply] = follow_up.waiting
    assert (reply.title, reply.awaits, reply.event, reply.until) == (
        "Requester replies",
        Awaits.EVENT,
        "ticket.replied",
        T0 + timedelta(days=3),
    )
    assert reply.asked is None and reply.needed is None  # a waitFor counts no people


FAILS_ONCE = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""


def test_a_command_that_failed_waits_for_its_next_attempt(any_engine: sa.Engine) -> None:
    calls: list[int] = []

    def send(ctx: commands.CommandContext) -> None:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise ConnectionError("supplier gateway timed out")

    driver = mount(
        any_engine,
        "purchase_orders",
        flows=FAILS_ONCE,
        commands={"send_purchase_order": send},
        retry=RetryPolicy(max_attempts=3, base=timedelta(minutes=1)),
    )
    driver.create(order(1))
    [run] = driver.runs(1)
    [retry] = run.waiting
    assert (retry.title, retry.awaits, retry.status, retry.until) == (
        "Send to supplier",
        Awaits.RETRY,
        LaneStatus.RETRYING,
        T0 + timedelta(minutes=1),
    )
    driver.advance("1 minute")
    [run] = driver.runs(1)
    assert run.status == RunStatus.DONE and run.waiting == () and calls == [1, 2]


def test_a_failed_or_cancelled_run_waits_for_nothing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1, amount=500, priority="hold"))  # a small order: sending is refused
    driver.create(order(2))
    [failed] = driver.runs(1)
    [waiting] = driver.runs(2)
    assert failed.status == RunStatus.FAILED and failed.waiting == ()
    assert len(waiting.waiting) == 2
    driver.runner.cancel(waiting.id, operator="olga")
    [cancelled] = driver.runs(2)  # it reads cancelled before any worker ends its steps
    assert cancelled.status == RunStatus.CANCELLED and cancelled.waiting == ()
