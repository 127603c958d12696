"""Business time in flows, as a workflow designer describes it: a support desk open
Monday to Friday, 09:00-17:00 in New York, whose SLA steps count "4 business hours" and
"2 business days"; its holidays kept in a table the business users edit; tenants with
desk hours of their own. On SQLite and PostgreSQL, through the test driver's clock.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

import migrated
import pytest
import sqlalchemy as sa
from running import stored

from flowrunner import (
    BindingError,
    FlowBinding,
    NotifyRule,
    RowInvalid,
    flow_runner,
    tables,
    testing,
)
from flowrunner.binding import Kind
from flowrunner.calendars import Calendar
from flowrunner.engine import commands
from flowrunner.flows import validation
from flowrunner.foundations import statuses

NEW_YORK = Calendar("desk", "America/New_York", {"mon-fri": "09:00-17:00"})
KOBE = Calendar("kobe", "Asia/Tokyo", {"mon-fri": "09:00-18:00"})
# Friday 6 March 2026, 16:00 in New York (EST); that Sunday the clocks go forward.
FRIDAY_4PM = datetime(2026, 3, 6, 21, 0, tzinfo=UTC)
# Monday 9 March 2026, 10:00 in New York (EDT).
MONDAY_10AM = datetime(2026, 3, 9, 14, 0, tzinfo=UTC)

metadata = sa.MetaData()
case = sa.Table(
    "sla_case",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(32)),
    sa.Column("requester", sa.String(64)),
)
holiday = tables.holidays_table(metadata, "sla_holiday")
DESK = FlowBinding(
    resource="sla_case",
    flows_table="sla_flow",
    steps_table="sla_flow_step",
    events={"case.answered": "case"},
    kinds={
        "ask": Kind(command="ask_customer", wait_for="case.answered", remind="nudge_customer"),
    },
    set_columns=["status"],
    notify=[
        NotifyRule(audience="requester", to="requester"),
        NotifyRule(audience="lead", to="requester"),
    ],
    calendars={"desk": NEW_YORK},
    calendar="desk",
    holidays_table="sla_holiday",
)
tables.for_binding(metadata, DESK)

# A desk whose flows each choose their calendar (there is no default), on a flows table
# made without the ``calendar`` column (an application's table from an earlier release).
plain = sa.MetaData()
plain_case = sa.Table(
    "plain_case",
    plain,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(32)),
)
PLAIN = FlowBinding(
    resource="plain_case",
    flows_table="plain_flow",
    steps_table="plain_flow_step",
    set_columns=["status"],
    calendars={"desk": NEW_YORK},
)
_, plain_steps = tables.for_binding(plain, PLAIN)
plain.remove(plain.tables["plain_flow"])
sa.Table(
    "plain_flow",
    plain,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("start", sa.Text, nullable=False),
    sa.Column("condition", sa.Text),
    sa.Column("changes", sa.Text),
    sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
)

# Tenants, each with its own desk hours.
tenanted = sa.MetaData()
tenant_case = sa.Table(
    "t_case",
    tenanted,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32)),
)
TENANT_CALENDARS = {"acme": NEW_YORK, "kobe-works": KOBE}
TENANTS = FlowBinding(
    resource="t_case",
    flows_table="t_flow",
    steps_table="t_flow_step",
    set_columns=["status"],
    tenant="tenant_id",
    calendar_for=lambda tenant: TENANT_CALENDARS[str(tenant)],
    holidays_table="t_holiday",
)
tables.for_binding(tenanted, TENANTS)
tenant_holiday = tables.holidays_table(tenanted, "t_holiday", tenant="tenant_id")

asked: list[tuple[str, Any]] = []


def ask_customer(ctx: commands.CommandContext) -> None:
    asked.append(("ask", ctx.record["id"]))


def nudge_customer(ctx: commands.CommandContext) -> None:
    asked.append(("nudge", ctx.now))


def desk(engine: sa.Engine, start: datetime) -> testing.FlowDriver:
    metadata.create_all(engine)
    migrated.upgrade(engine)
    runner = flow_runner(
        DESK, engine, commands={"ask_customer": ask_customer, "nudge_customer": nudge_customer}
    )
    return testing.FlowDriver(runner, start=start)


def flow(driver: testing.FlowDriver, name: str, *steps: dict[str, Any], **row: Any) -> Any:
    """Save a flow that starts when a case is created, with its steps in order."""
    with driver.runner.engine.begin() as conn:
        flow_id = driver.runner.save_flow(conn, {"name": name, "start": "created", **row})
        for position, step in enumerate(steps, start=1):
            driver.runner.save_step(conn, {"flow_id": flow_id, "position": position, **step})
    return flow_id


def add_holiday(driver: testing.FlowDriver, day: date, **row: Any) -> None:
    with driver.runner.engine.begin() as conn:
        conn.execute(sa.insert(holiday).values(day=day, **row))


def at_new_york(moment: datetime | None) -> str:
    assert moment is not None
    return moment.astimezone(NEW_YORK.tz).strftime("%a %d %b %H:%M")


def test_a_4_business_hour_sla_reminder_created_friday_4pm_fires_monday_noon(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine, FRIDAY_4PM)
    flow(
        driver,
        "SLA reminder",
        {"kind": "wait", "title": "Four desk hours", "duration": "4 business hours"},
        {"kind": "notify", "title": "Remind", "audience": "requester", "message": "Still open"},
    )
    driver.create({"id": 1, "status": "open", "requester": "ann"})
    # One hour on Friday, three on Monday morning: the weekend and the change to summer
    # time between them do not count.
    assert at_new_york(driver.next_due()) == "Mon 09 Mar 12:00"
    driver.advance_to(datetime(2026, 3, 9, 15, 59, tzinfo=UTC))
    assert driver.runner.notices() == []
    driver.advance("1 minute")
    [notice] = driver.runner.notices()
    assert notice.message == "Still open" and at_new_york(notice.at) == "Mon 09 Mar 12:00"
    [run] = driver.runs(1)
    assert run.status == statuses.RunStatus.DONE


def test_reminders_escalation_and_give_up_count_business_days(any_engine: sa.Engine) -> None:
    asked.clear()
    driver = desk(any_engine, FRIDAY_4PM)
    flow(
        driver,
        "Ask the customer",
        {
            "kind": "ask",
            "title": "Ask",
            "remind": "1 business day",
            "escalate": "2 business days",
            "escalate_to": "lead",
            "duration": "3 business days",
        },
        {"kind": "set", "title": "Answered", "field": "status", "value": "answered"},
    )
    driver.create({"id": 1, "status": "open", "requester": "ann"})
    driver.advance("7 days")
    nudges = [at_new_york(when) for what, when in asked if what == "nudge"]
    # Friday 16:00 plus 1 and 2 business days (Monday, Tuesday); given up on Wednesday.
    assert nudges == ["Mon 09 Mar 16:00", "Tue 10 Mar 16:00"]
    [escalated] = [n for n in driver.runner.notices() if n.audience == "lead"]
    assert at_new_york(escalated.at) == "Tue 10 Mar 16:00"
    [run] = driver.runs(1)
    assert stored(driver, 1)["status"] == "answered"
    gave_up = [line for line in driver.history(run.id) if line.what == "timed_out"]
    assert [at_new_york(line.at) for line in gave_up] == ["Wed 11 Mar 16:00"]


def test_a_holiday_added_while_runs_wait_moves_their_due_times(any_engine: sa.Engine) -> None:
    driver = desk(any_engine, MONDAY_10AM)
    flow(
        driver,
        "Two days",
        {"kind": "wait", "title": "Two desk days", "duration": "2 business days"},
        {"kind": "set", "title": "Late", "field": "status", "value": "late"},
    )
    driver.create({"id": 1, "status": "open"})
    driver.create({"id": 2, "status": "open"})
    assert at_new_york(driver.next_due()) == "Wed 11 Mar 10:00"
    # The business users add Tuesday as a holiday while both cases wait.
    add_holiday(driver, date(2026, 3, 10), name="Desk offsite")
    driver.advance("1 hour")
    assert at_new_york(driver.next_due()) == "Thu 12 Mar 10:00"
    driver.advance_to(datetime(2026, 3, 11, 14, 0, tzinfo=UTC))
    assert stored(driver, 1)["status"] == "open" and stored(driver, 2)["status"] == "open"
    [run] = driver.runs(1)
    waits = [line.sentence for line in driver.history(run.id) if line.what == "waiting"]
    assert len(waits) == 2  # the second says the wait now ends on Thursday
    driver.advance_to(datetime(2026, 3, 12, 14, 0, tzinfo=UTC))
    assert stored(driver, 1)["status"] == "late" and stored(driver, 2)["status"] == "late"


def test_a_holiday_taken_away_brings_due_times_back(any_engine: sa.Engine) -> None:
    driver = desk(any_engine, MONDAY_10AM)
    add_holiday(driver, date(2026, 3, 10))
    add_holiday(driver, date(2026, 3, 11), calendar="another desk")  # not this desk's
    flow(
        driver,
        "Two days",
        {"kind": "wait", "title": "Two desk days", "duration": "2 business days"},
        {"kind": "set", "title": "Late", "field": "status", "value": "late"},
    )
    driver.create({"id": 1, "status": "open"})
    assert at_new_york(driver.next_due()) == "Thu 12 Mar 10:00"
    with driver.runner.engine.begin() as conn:
        conn.execute(sa.delete(holiday).where(holiday.c.day == date(2026, 3, 10)))
    driver.advance("1 hour")
    assert at_new_york(driver.next_due()) == "Wed 11 Mar 10:00"
    driver.advance_to(datetime(2026, 3, 11, 14, 0, tzinfo=UTC))
    assert stored(driver, 1)["status"] == "late"


def test_each_tenant_counts_business_time_on_its_own_desk_hours(any_engine: sa.Engine) -> None:
    tenanted.create_all(any_engine)
    migrated.upgrade(any_engine)
    runner = flow_runner(TENANTS, any_engine)
    # Monday 9 March 2026, 08:00 UTC: 17:00 in Kobe, 04:00 in New York.
    driver = testing.FlowDriver(runner, start=datetime(2026, 3, 9, 8, 0, tzinfo=UTC))
    with any_engine.begin() as conn:
        for tenant in TENANT_CALENDARS:
            flow_id = runner.save_flow(
                conn, {"name": "SLA", "start": "created", "tenant_id": tenant}
            )
            for position, step in enumerate(
                (
                    {"kind": "wait", "duration": "4 business hours"},
                    {"kind": "set", "field": "status", "value": "late"},
                ),
                start=1,
            ):
                runner.save_step(
                    conn, {"flow_id": flow_id, "position": position, "tenant_id": tenant, **step}
                )
    with any_engine.begin() as conn:
        # Kobe's own day off, on Tuesday; not acme's.
        conn.execute(
            sa.insert(tenant_holiday).values(day=date(2026, 3, 10), tenant_id="kobe-works")
        )
    driver.create({"id": 1, "tenant_id": "acme", "status": "open"})
    driver.create({"id": 2, "tenant_id": "kobe-works", "status": "open"})
    # New York: Monday 09:00-13:00 EDT, 17:00 UTC.
    driver.advance_to(datetime(2026, 3, 9, 16, 59, tzinfo=UTC))
    assert stored(driver, 1, tenant="acme")["status"] == "open"
    driver.advance("1 minute")
    assert stored(driver, 1, tenant="acme")["status"] == "late"
    # Kobe: one hour on Monday (17:00-18:00), three on Wednesday (Tuesday is its
    # holiday): 12:00 there, 03:00 UTC.
    assert stored(driver, 2, tenant="kobe-works")["status"] == "open"
    driver.advance_to(datetime(2026, 3, 11, 2, 59, tzinfo=UTC))
    assert stored(driver, 2, tenant="kobe-works")["status"] == "open"
    driver.advance("1 minute")
    assert stored(driver, 2, tenant="kobe-works")["status"] == "late"


def test_a_business_duration_is_refused_on_save_where_no_calendar_applies(
    any_engine: sa.Engine,
) -> None:
    plain.create_all(any_engine)
    migrated.upgrade(any_engine)
    runner = flow_runner(PLAIN, any_engine)
    with any_engine.begin() as conn:
        flow_id = runner.save_flow(conn, {"name": "SLA", "start": "created"})
    with pytest.raises(RowInvalid) as refused, any_engine.begin() as conn:
        step = {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "2 business days"}
        runner.save_step(conn, step)
    [problem] = refused.value.errors
    assert problem.field == "duration" and problem.code == "calendar_missing"
    assert problem.message == (
        "'2 business days' counts business time, but no calendar applies to this flow: "
        "name one in the flow's calendar column (desk)"
    )
    # Time as it passes needs no calendar.
    with any_engine.begin() as conn:
        runner.save_step(conn, {**step, "duration": "2 days"})
    # A flows table made before calendars still works, but cannot name one.
    with pytest.raises(RowInvalid, match="has no column 'calendar'"), any_engine.begin() as conn:
        runner.save_flow(conn, {"name": "Desk", "start": "created", "calendar": "desk"})


def test_a_binding_without_calendars_says_to_give_it_one() -> None:
    binding = FlowBinding(resource="case", flows_table="flow", steps_table="step")
    step = {"flow_id": 1, "position": 1, "kind": "wait", "duration": "4 business hours"}
    [problem] = validation.errors_for_step_row(binding, step, {}, flow={"name": "SLA"})
    assert problem.message == (
        "'4 business hours' counts business time, but the binding has no calendar: give it "
        "one (FlowBinding(calendars=..., calendar=...)) or write the time as it passes, "
        "e.g. '4 hours'"
    )


def test_a_flow_names_only_a_calendar_of_the_binding(any_engine: sa.Engine) -> None:
    driver = desk(any_engine, MONDAY_10AM)
    with pytest.raises(RowInvalid) as refused, any_engine.begin() as conn:
        driver.runner.save_flow(conn, {"name": "SLA", "start": "created", "calendar": "dsek"})
    [problem] = refused.value.errors
    assert problem.code == "calendar_unknown"
    assert (
        problem.message
        == "'dsek' is not one of the binding's calendars (desk) — did you mean 'desk'?"
    )
    flow_id = flow(driver, "Named", calendar="desk")
    with any_engine.begin() as conn:
        driver.runner.save_step(
            conn, {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "1 business day"}
        )


def test_business_time_must_be_a_whole_positive_number_of_days_hours_or_minutes(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine, MONDAY_10AM)
    flow_id = flow(driver, "SLA")
    for written, message in (
        ("2.5 business days", "'2.5 business days' is not business time"),
        ("0 business hours", "'0 business hours' must be longer than nothing"),
        ("2 business weeks", "'2 business weeks' is not business time"),
    ):
        with pytest.raises(RowInvalid, match=message), any_engine.begin() as conn:
            driver.runner.save_step(
                conn, {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": written}
            )


def test_a_binding_names_its_calendars_and_its_holidays_table_rightly(
    any_engine: sa.Engine,
) -> None:
    with pytest.raises(BindingError, match="the default calendar 'dsek' is not one of"):
        FlowBinding(**{**BASE, "calendars": {"desk": NEW_YORK}, "calendar": "dsek"})
    with pytest.raises(BindingError, match="calendar 'front' is named 'desk'"):
        FlowBinding(**{**BASE, "calendars": {"front": NEW_YORK}})
    with pytest.raises(BindingError, match="calendar_for gives each tenant a calendar"):
        FlowBinding(**{**BASE, "calendar_for": lambda tenant: NEW_YORK})
    plain.create_all(any_engine)
    migrated.upgrade(any_engine)
    missing = FlowBinding(**{**BASE, "holidays_table": "no_such_holidays"})
    with pytest.raises(BindingError, match="the holidays table 'no_such_holidays' does not exist"):
        flow_runner(missing, any_engine)


BASE: dict[str, Any] = {
    "resource": "plain_case",
    "flows_table": "plain_flow",
    "steps_table": "plain_flow_step",
    "set_columns": ["status"],
}


def test_a_designer_chooses_the_flows_calendar_in_the_console(engine: sa.Engine) -> None:
    from console import console, errors_beside

    driver = desk(engine, MONDAY_10AM)
    flow_id = flow(driver, "Answer the customer", {"kind": "wait", "duration": "2 business days"})
    ui = console(driver)
    page = ui.get(f"/flow/{flow_id}")
    assert '<select id="flow-calendar" name="calendar"' in page.text
    assert re.search(r'<option value=""( selected)?>the default \(desk\)</option>', page.text)
    row = {"name": "Answer the customer", "start": "created", "active": "true"}
    ui.follow(ui.post(f"/flow/{flow_id}", {**row, "calendar": "desk"}))
    with engine.connect() as conn:
        saved = conn.execute(sa.text("select calendar from sla_flow")).scalar_one()
    assert saved == "desk"
    refused = ui.post(f"/flow/{flow_id}", {**row, "calendar": "dsek"})
    assert refused.status_code == 422
    [sentence] = errors_beside(refused.text, "flow", "calendar")
    assert "'dsek' is not one of the binding's calendars" in sentence and "desk" in sentence
    with engine.connect() as conn:
        assert conn.execute(sa.text("select calendar from sla_flow")).scalar_one() == "desk"
