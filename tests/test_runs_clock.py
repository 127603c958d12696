"""A run listens from its start and keeps the flow's own clock, through the real worker.

The cases as a workflow designer tells them, on SQLite and PostgreSQL: replies that came
before any worker ran, replies from before the flow began, a worker down for a day, and
the history showing when each thing was due and when it was done.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from running import T0, app, mount, order, stored

from flowrunner import testing
from flowrunner.engine import commands
from flowrunner.store import dialects
from flowrunner.store import operations as ops

TICKETS = app("tickets")

WAIT_FOR_REPLY = """
- name: Chase
  start: created
  steps:
    - {position: 1, kind: waitFor, title: Requester replies, event: ticket.replied}
    - {position: 2, kind: set, title: Answered, field: status, value: answered}
"""

TWO_DAYS = """
- name: Two days
  start: created
  steps:
    - {position: 1, kind: wait, title: First day, duration: 1 day}
    - {position: 2, kind: set, title: Day one done, field: priority, value: high}
    - {position: 3, kind: wait, title: Second day, duration: 1 day}
    - {position: 4, kind: set, title: Day two done, field: status, value: overdue}
"""

WAIT_THEN_REPLY = """
- name: Cool off, then chase
  start: created
  steps:
    - {position: 1, kind: wait, title: Cool off, duration: 1 day}
    - {position: 2, kind: waitFor, title: Requester replies, event: ticket.replied}
    - {position: 3, kind: set, title: Answered, field: status, value: answered}
"""

CHASE_BY_HAND = """
- name: Chase by hand
  start: manual
  steps:
    - {position: 1, kind: waitFor, title: Requester replies, event: ticket.replied}
    - {position: 2, kind: set, title: Answered, field: status, value: answered}
"""


REMINDED_DAILY = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: ann, remind: 1 day}
"""


def ticket(ticket_id: int = 1) -> dict[str, Any]:
    return {"id": ticket_id, "title": "Printer", "requester_id": "ann", "status": "open"}


def reply(driver: testing.FlowDriver, ticket_id: int = 1, *, run: bool = True) -> None:
    driver.emit("ticket.replied", {"ticket": ticket_id}, run=run)


def status(driver: testing.FlowDriver, ticket_id: int = 1) -> object:
    return stored(driver, ticket_id)["status"]


def test_the_reply_arrived_before_any_worker_ran_the_wait_ends_at_once(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=WAIT_FOR_REPLY)
    driver.create(ticket(), run=False)
    driver.advance("2 hours", run=False)
    reply(driver, run=False)  # ann answered at 11:00; no worker has run yet
    driver.advance("3 hours", run=False)
    driver.run_until_idle()  # the worker comes at 14:00
    assert status(driver) == "answered"
    [run] = driver.runs(1)
    [arrived] = [line for line in driver.history(run.id) if line.what == "arrived"]
    assert arrived.due_at == T0 + timedelta(hours=2) and arrived.at == T0 + timedelta(hours=5)
    assert arrived.late


def test_a_reply_in_the_same_transaction_as_the_tickets_creation_counts(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=WAIT_FOR_REPLY)
    runner = driver.runner
    with dialects.begin(runner.engine) as conn:
        conn.execute(sa.insert(TICKETS.ticket).values(**ticket()))
        runner.record_created(conn, ticket())
        runner.emit(conn, "ticket.replied", {"ticket": 1})
    driver.run_until_idle()
    assert status(driver) == "answered"


def test_a_reply_from_before_the_flow_began_does_not_count(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=CHASE_BY_HAND)
    driver.create(ticket())
    reply(driver)  # ann wrote before anyone started chasing her
    driver.advance("1 hour")
    driver.runner.start("Chase by hand", 1, operator="olga")
    driver.run_until_idle()
    assert status(driver) == "open"
    reply(driver)
    assert status(driver) == "answered"


def test_the_worker_was_down_for_a_day_the_second_wait_still_ends_at_nine_wednesday(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=TWO_DAYS)
    driver.create(ticket())  # Monday 09:00
    driver.advance("3 hours")  # Monday noon: the worker stops
    driver.advance_to(T0 + timedelta(days=1, hours=6), run=False)  # Tuesday 15:00 it is back
    driver.run_until_idle()
    assert stored(driver, 1)["priority"] == "high" and status(driver) == "open"
    assert driver.next_due() == T0 + timedelta(days=2)  # Wednesday 09:00, not 15:00
    driver.advance_to(T0 + timedelta(days=2) - timedelta(minutes=1))
    assert status(driver) == "open"
    driver.advance("1 minute")
    assert status(driver) == "overdue"
    [run] = driver.runs(1)
    history = driver.history(run.id)
    [first_done] = [h for h in history if h.what == "done" and h.title == "First day"]
    assert first_done.due_at == T0 + timedelta(days=1)  # due Tuesday 09:00 ...
    assert first_done.at == T0 + timedelta(days=1, hours=6)  # ... done at 15:00
    assert first_done.late
    [second_done] = [h for h in history if h.what == "done" and h.title == "Second day"]
    assert second_done.due_at == second_done.at == T0 + timedelta(days=2)
    assert not second_done.late


def test_the_reply_came_while_the_worker_was_down_after_the_first_wait_it_counts(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=WAIT_THEN_REPLY)
    driver.create(ticket())
    driver.advance_to(T0 + timedelta(days=1, hours=1), run=False)  # Tuesday 10:00
    reply(driver, run=False)
    driver.advance_to(T0 + timedelta(days=1, hours=6), run=False)
    driver.run_until_idle()  # the worker is back at 15:00
    assert status(driver) == "answered"


def test_the_reply_came_during_the_cooling_off_the_chase_after_it_still_waits(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=WAIT_THEN_REPLY)
    driver.create(ticket())
    driver.advance("2 hours", run=False)
    reply(driver, run=False)  # Monday 11:00, during the day of cooling off
    driver.advance_to(T0 + timedelta(days=1, hours=6), run=False)
    driver.run_until_idle()  # the worker comes Tuesday 15:00
    assert status(driver) == "open"
    [run] = driver.runs(1)
    assert run.status == "waiting"
    reply(driver)
    assert status(driver) == "answered"


def test_a_reminder_sent_after_an_outage_says_when_it_was_due_and_that_it_is_late(
    any_engine: sa.Engine,
) -> None:
    said: list[datetime | None] = []

    def remind(ctx: commands.CommandContext) -> None:
        said.append(ctx.now)

    driver = mount(
        any_engine, "purchase_orders", flows=REMINDED_DAILY, commands={"remind_approver": remind}
    )
    driver.create(order(1))  # Monday 09:00: ann is asked, reminded daily
    driver.advance_to(T0 + timedelta(days=1, hours=3), run=False)  # the workers are back
    driver.run_until_idle()  # at Tuesday noon; the reminder was due at 09:00
    tuesday_nine = T0 + timedelta(days=1)
    assert said == [tuesday_nine]
    [run] = driver.runs(1)
    # Both lines are stored, each stamped when the reminder was due and marked late;
    # the history shows the reminder once, as sent.
    with any_engine.connect() as conn:
        kept = ops.run_history(conn, run.id)
    for what in ("reminder", "reminded"):
        [line] = [h for h in kept if h.what == what]
        assert line.due_at == tuesday_nine and line.at == T0 + timedelta(days=1, hours=3)
        assert line.late
    shown = [h for h in driver.history(run.id) if h.what in ("reminder", "reminded")]
    assert [(h.what, h.sentence, h.late) for h in shown] == [
        ("reminded", "Reminded ann (1st reminder)", True)
    ]
    assert driver.next_due() == T0 + timedelta(days=2)  # the next one counts on as before
