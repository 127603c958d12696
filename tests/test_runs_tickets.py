"""Runs of the support-desk app through the real engine, on SQLite and PostgreSQL.

Built-in kinds (until, notify, branch, set, wait, waitFor), how runs start, snapshots,
broken rows, and what operators do.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, count, mount, stored, whats

from flowrunner import errors, testing
from flowrunner.store import operations as ops


def ticket(
    ticket_id: int, *, due_in: timedelta | None = timedelta(hours=8), **extra: object
) -> dict[str, Any]:
    return {
        "id": ticket_id,
        "title": f"Ticket {ticket_id}",
        "requester_id": "ann",
        "assignee": "bob",
        "due_at": None if due_in is None else T0 + due_in,
        **extra,
    }


def notices(driver: testing.FlowDriver, audience: str | None = None) -> list[str | None]:
    return [n.title for n in driver.notices() if audience is None or n.audience == audience]


def test_sla_warns_then_escalates_an_open_ticket(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1))
    [run] = driver.runs(1)
    assert run.status == "waiting"
    driver.advance("3 hours")
    assert notices(driver) == []
    driver.advance("1 hour")  # 13:00, four hours before due
    assert notices(driver) == ["Ticket 1: This ticket is due in four hours."]
    driver.advance("4 hours")  # due, still open
    assert stored(driver, 1)["priority"] == "high"
    assert notices(driver, "requester") == [
        "Ticket 1: Your ticket is late; we raised its priority."
    ]
    [run] = driver.runs(1)
    assert run.status == "done"
    assert "Raise priority: set" in whats(driver, run.id)


def test_a_resolved_ticket_ends_at_the_branch(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1))
    driver.advance("5 hours")
    driver.update(1, status="resolved")
    driver.advance("4 hours")
    [run] = driver.runs(1)
    assert run.status == "done"
    assert run.reason == "status is resolved, so the run ended at Still open?"
    assert stored(driver, 1)["priority"] == "normal"
    assert len(notices(driver)) == 1


def test_until_follows_a_due_date_that_moves(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1))
    driver.advance("2 hours")
    driver.update(1, due_at=T0 + timedelta(days=2))  # pushed back while waiting
    driver.advance("3 hours")  # past the old warning time
    assert notices(driver) == []
    driver.advance_to(T0 + timedelta(days=2, hours=-4))
    assert notices(driver) == ["Ticket 1: This ticket is due in four hours."]


UNTIL_NULL = """
- name: Chase the date
  start: created
  steps:
    - {position: 1, kind: until, title: Due, field: due_at}
    - {position: 2, kind: set, title: Mark late, field: status, value: late}
"""


def test_until_waits_while_the_date_is_null(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=UNTIL_NULL)
    driver.create(ticket(1, due_in=None))
    driver.advance("30 days")
    [run] = driver.runs(1)
    assert run.status == "waiting"
    assert driver.next_due() is None  # nothing polls the record
    driver.update(1, due_at=driver.now + timedelta(hours=1))
    driver.advance("1 hour")
    assert stored(driver, 1)["status"] == "late"
    assert driver.runs(1)[0].status == "done"


def test_follow_up_waits_for_a_reply_or_nudges(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1, due_in=None))
    driver.create(ticket(2, due_in=None))
    driver.update(1, status="waiting")
    driver.update(2, status="waiting")
    follow = [r for r in driver.runs(1) if r.flow_name == "Follow up"]
    assert len(follow) == 1
    driver.advance("1 day")
    driver.update(1, status="open", run=False)
    driver.emit("ticket.replied", {"ticket": 1})
    driver.advance("3 days")
    [run1] = [r for r in driver.runs(1) if r.flow_name == "Follow up"]
    assert run1.status == "done"
    assert "Requester replies: arrived" in whats(driver, run1.id)
    [run2] = [r for r in driver.runs(2) if r.flow_name == "Follow up"]
    assert "Requester replies: timed_out" in whats(driver, run2.id)
    assert [n.run_id for n in driver.notices()] == [run2.id]


def test_updated_flows_start_once_per_change_and_only_on_their_column(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1, due_in=None))
    driver.update(1, priority="high")  # not the 'changes' column of Follow up
    assert [r.flow_name for r in driver.runs(1)] == []
    driver.update(1, status="waiting")
    driver.update(1, status="open")
    driver.update(1, status="waiting")
    assert [r.flow_name for r in driver.runs(1)] == ["Follow up", "Follow up"]


OWN_WRITES = """
- name: Raise
  start: created
  steps:
    - {position: 1, kind: set, title: Raise priority, field: priority, value: high}
- name: On priority
  start: updated
  changes: priority
  steps:
    - {position: 1, kind: set, title: Stamp, field: status, value: stamped}
"""


def test_a_flows_own_writes_start_nothing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=OWN_WRITES)
    driver.create(ticket(1, due_in=None))
    assert stored(driver, 1)["priority"] == "high"
    assert [r.flow_name for r in driver.runs(1)] == ["Raise"]
    driver.update(1, priority="low")  # a person's change does start it
    assert sorted(r.flow_name for r in driver.runs(1)) == ["On priority", "Raise"]


def test_starting_existing_records_twice_starts_nothing_new(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    runner = driver.runner
    with any_engine.begin() as conn:  # records written before any flow watched them
        for n in range(1, 8):
            conn.execute(
                sa.insert(runner.tables.resource).values(
                    **ticket(n), status="open" if n % 2 else "resolved"
                )
            )
    progress: list[tuple[int, int]] = []
    started = runner.start_existing(
        "status = open", progress=lambda done, total: progress.append((done, total))
    )
    assert started == 4
    assert progress[-1] == (4, 4)
    assert runner.start_existing("status = open") == 0
    assert runner.start_existing(None, flow="SLA warning") == 0
    with pytest.raises(errors.QueryError):
        runner.start_existing("stauts = open")


def test_a_run_keeps_the_flow_it_started_with(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1))
    steps = driver.runner.tables.steps
    with any_engine.begin() as conn:  # a business user edits the message meanwhile
        conn.execute(
            sa.update(steps).where(steps.c.kind == "notify").values(message="Edited message.")
        )
    driver.advance("4 hours")
    assert notices(driver) == ["Ticket 1: This ticket is due in four hours."]
    driver.create(ticket(2))
    driver.advance("4 hours")
    assert "Ticket 2: Edited message." in notices(driver)


def test_a_row_broken_after_it_was_written_fails_the_run_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets")
    steps = driver.runner.tables.steps
    with any_engine.begin() as conn:  # written around validation
        conn.execute(
            sa.update(steps).where(steps.c.title == "Raise priority").values(field="assignee2")
        )
    driver.create(ticket(1))
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason is not None
    assert "SLA warning" in run.reason and "Raise priority" in run.reason
    assert "position 5" in run.reason
    assert driver.next_due() is None


def test_operators_start_cancel_retry_and_redrive_with_a_journal(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    runner = driver.runner
    driver.create(ticket(1))
    with pytest.raises(errors.OperatorError, match="only manual flows"):
        runner.start("SLA warning", 1, operator="olga")
    with pytest.raises(errors.OperatorError, match="no ticket"):
        runner.start("Reassign to triage", 99, operator="olga")
    manual = runner.start("Reassign to triage", 1, operator="olga")
    driver.run_until_idle()
    sla = next(r for r in driver.runs(1) if r.flow_name == "SLA warning")
    runner.cancel(sla.id, operator="olga", reason="customer left")
    with pytest.raises(errors.OperatorError, match="already ended"):
        runner.cancel(sla.id, operator="olga")
    driver.advance("9 hours")
    sla = next(r for r in driver.runs(1) if r.id == sla.id)
    assert sla.status == "cancelled" and sla.reason == "cancelled by olga: customer left"
    assert notices(driver, "requester") == []
    with pytest.raises(errors.OperatorError, match="has not failed"):
        runner.retry(manual, operator="olga")
    with pytest.raises(errors.OperatorError, match="no run"):
        runner.redrive(12345, operator="olga")
    with any_engine.connect() as conn:
        actions = [(e.operator, e.action) for e in ops.journal_entries(conn)]
    assert actions == [("olga", "start"), ("olga", "cancel")]
    assert count(any_engine, runner.tables.resource) == 1
