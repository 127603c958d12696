"""Notices that say something, on SQLite and PostgreSQL: a message filled from the record,
and a notice nobody can receive kept as undeliverable, with who and why in the history.

The support desk's flows, as a desk lead would write them: tell the assignee about the
ticket by its title, and see what happens for a ticket nobody is assigned to yet.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, app, count, mount, stored, whats

from flowrunner import RowInvalid, testing
from flowrunner.runner import flow_runner
from flowrunner.store import engine_tables, migrate
from flowrunner.store import operations as ops

TELL_ASSIGNEE = """
- name: Raise and tell
  start: created
  steps:
    - {position: 1, kind: set, title: Raise, field: priority, value: high}
    - position: 2
      kind: notify
      title: Tell the assignee
      audience: assignee
      message: "Ticket {id} ({title}) is now {priority} priority."
    - {position: 3, kind: set, title: Work, field: status, value: working}
"""


def ticket(n: int, **columns: Any) -> dict[str, Any]:
    return {"id": n, "title": f"Printer {n}", "requester_id": "ann", **columns}


def run_of(driver: testing.FlowDriver, record_id: int) -> Any:
    [run] = driver.runs(record_id)
    return run


def lines(driver: testing.FlowDriver, record_id: int, what: str) -> list[Any]:
    return [
        line.detail for line in driver.history(run_of(driver, record_id).id) if line.what == what
    ]


# -- a message filled from the record ------------------------------------------------------


def test_the_assignee_is_told_the_ticket_as_the_run_sees_it(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=TELL_ASSIGNEE)
    driver.create(ticket(1, assignee="bob"))
    run = run_of(driver, 1)
    assert run.status == "done"
    [notice] = driver.notices(run.id)
    # The set step just before the notice counts: the record as the run sees it then.
    told = "Ticket 1 (Printer 1) is now high priority."
    assert (notice.recipient, notice.message) == ("bob", told)
    assert notice.title == f"Ticket 1: {told}"  # the rule's title takes the filled message
    assert (notice.deliverable, notice.problem, notice.delivered_at) == (True, None, None)
    assert driver.runner.notices(undelivered=True) == [notice]
    assert lines(driver, 1, "notice") == [
        {"audience": "assignee", "recipient": "bob", "message": told}
    ]
    assert lines(driver, 1, "undeliverable") == []


def test_a_value_that_looks_like_a_template_is_told_as_written(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=TELL_ASSIGNEE)
    driver.create(ticket(2, title="{requester_id} {id.__class__} {{x}}", assignee="bob"))
    [notice] = driver.notices(run_of(driver, 2).id)
    assert notice.message == "Ticket 2 ({requester_id} {id.__class__} {{x}}) is now high priority."


# -- nobody to tell --------------------------------------------------------------------------


@pytest.mark.parametrize("assignee", [None, "", "   "])
def test_a_ticket_nobody_is_assigned_to_keeps_its_notice_as_undeliverable(
    any_engine: sa.Engine, assignee: str | None
) -> None:
    driver = mount(any_engine, "tickets", flows=TELL_ASSIGNEE)
    driver.create(ticket(3, assignee=assignee))
    run = run_of(driver, 3)
    # Nobody could be told, and the run went on with its next step.
    assert run.status == "done"
    assert stored(driver, 3)["status"] == "working"
    history = whats(driver, run.id)
    assert "Tell the assignee: notice" not in history
    assert history.index("Tell the assignee: undeliverable") < history.index("Work: set")
    [notice] = driver.notices(run.id)
    told = "Ticket 3 (Printer 3) is now high priority."
    assert (notice.audience, notice.recipient, notice.message) == ("assignee", None, told)
    assert (notice.deliverable, notice.problem) == (False, "the record's assignee is empty")
    assert lines(driver, 3, "undeliverable") == [
        {"audience": "assignee", "to": "assignee", "why": "empty", "message": told}
    ]
    assert lines(driver, 3, "notice") == []
    # The mailer is never handed it, and it cannot be marked delivered.
    assert driver.runner.notices(undelivered=True) == []
    assert driver.runner.notices() == [notice]
    assert driver.runner.mark_delivered(notice.id) is False
    assert driver.notices(run.id)[0].delivered_at is None


def test_the_mailer_gets_only_the_notices_it_can_deliver(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=TELL_ASSIGNEE)
    driver.create(ticket(4, assignee="bob"))
    driver.create(ticket(5))
    driver.create(ticket(6, assignee="cy"))
    mailer = driver.runner.notices(undelivered=True)
    assert [(n.recipient, n.message[:8]) for n in mailer] == [
        ("bob", "Ticket 4"),
        ("cy", "Ticket 6"),
    ]
    for notice in mailer:
        assert driver.runner.mark_delivered(notice.id) is True
    assert driver.runner.notices(undelivered=True) == []
    [kept] = [n for n in driver.runner.notices() if not n.deliverable]
    assert (kept.run_id, kept.problem) == (run_of(driver, 5).id, "the record's assignee is empty")


def test_a_run_that_could_not_tell_anyone_is_pruned_once_old(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=TELL_ASSIGNEE)
    driver.create(ticket(7))  # nobody to tell: its notice is undeliverable
    driver.create(ticket(8, assignee="bob"))  # bob's notice is still to deliver
    driver.create(ticket(9, assignee="cy"))  # the newest run stays whatever its age
    for notice in driver.notices(run_of(driver, 9).id):
        driver.runner.mark_delivered(notice.id)
    driver.advance("100 days")
    pruned = driver.runner.prune(older_than="90 days")
    assert (pruned.runs, pruned.notices) == (1, 1)
    assert driver.runs(7) == []
    assert [run.status for run in driver.runs(8)] == ["done"]
    assert count(any_engine, engine_tables.notices, problem=None) == 2


# -- refused when saved, and a message that broke later ----------------------------------------


def test_a_message_naming_a_column_tickets_do_not_have_is_refused(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows="[]")
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Tell", "start": "created"})
    row = {"flow_id": flow, "position": 1, "kind": "notify", "audience": "assignee"}
    with pytest.raises(RowInvalid) as refused, runner.engine.begin() as conn:
        runner.save_step(conn, {**row, "message": "Ticket {number} is due {due}"})
    assert [(e.field, e.code, e.message) for e in refused.value.errors] == [
        (
            "message",
            "message_unknown_column",
            f"{{{name}}} is not a column of ticket — use one of: id, title, requester_id, "
            "priority, status, assignee, due_at, created_at, warn_at",
        )
        for name in ("number", "due")
    ]
    with pytest.raises(RowInvalid) as refused, runner.engine.begin() as conn:
        runner.save_step(conn, {**row, "message": "Ticket {id:>5}"})
    assert [(e.code, e.message) for e in refused.value.errors] == [
        ("message_invalid", "{id:>5} is not a plain column name — write just {id}")
    ]
    with runner.engine.begin() as conn:
        runner.save_step(conn, {**row, "message": "Ticket {id}: {title} {{sic}}"})
    assert count(any_engine, app("tickets").ticket_flow_step, flow_id=flow) == 1


def test_a_run_whose_message_names_a_dropped_column_stops_naming_its_step(
    any_engine: sa.Engine,
) -> None:
    flows = """
- name: Later
  start: created
  steps:
    - {position: 1, kind: wait, title: A day, duration: 1 day}
    - {position: 2, kind: notify, title: Tell, audience: assignee, message: "Opened {created_at}"}
"""
    driver = mount(any_engine, "tickets", flows=flows)
    driver.create(ticket(10, assignee="bob", created_at=T0))
    assert run_of(driver, 10).status == "waiting"
    with any_engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE ticket DROP COLUMN created_at"))
    # The application is deployed again without the column: a new runner reads the tables.
    tickets = app("tickets")
    runner = flow_runner(tickets.binding, any_engine, commands=tickets.COMMANDS)
    later = testing.FlowDriver(runner, start=T0 + timedelta(days=2))
    later.run_until_idle()
    [run] = later.runs(10)
    assert run.status == "failed"
    assert run.reason == (
        "flow 'Later', step 'Tell' (notify, position 2): {created_at} is not a column of "
        "ticket — use one of: id, title, requester_id, priority, status, assignee, due_at, "
        "warn_at"
    )
    assert later.notices(run.id) == []


# -- the migration -------------------------------------------------------------------------------


def test_notices_written_before_0003_stay_to_deliver(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine, "0002")
    with any_engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO flowrunner_notices (run_id, step_id, pass, audience, recipient,"
                " title, message, email, at) VALUES (1, '2', 1, 'requester', 'ann', 'Hi',"
                " 'Hello', :no, :at)"
            ),
            {"no": False, "at": "2026-03-02 09:00:00+00:00"},
        )
    assert migrate.upgrade(any_engine).is_current
    with any_engine.connect() as conn:
        [notice] = ops.notices(conn, undelivered=True)
    assert (notice.recipient, notice.message) == ("ann", "Hello")
    assert (notice.deliverable, notice.problem) == (True, None)
    with any_engine.begin() as conn:
        assert ops.mark_delivered(conn, notice_id=notice.id, at=T0) is True
