"""Timers on a record's date (``at``), as a workflow designer describes them, on the
ticket desk's SLA warning: ``At(column="warn_at", command="warn_sla", when="status =
open")``. Run on SQLite and PostgreSQL through the test driver's clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import migrated
import pytest
import sqlalchemy as sa
from running import T0, app, mount, stored
from sqlalchemy import orm

from flowrunner import RetryPolicy, errors, query, tables, testing
from flowrunner.binding import At, FlowBinding
from flowrunner.engine import commands
from flowrunner.foundations import statuses
from flowrunner.runner import flow_runner
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops
from flowrunner.timers import rules

NO_FLOWS = "[]"


def desk(engine: sa.Engine, **options: Any) -> testing.FlowDriver:
    """The ticket desk with its SLA timer and no flows: only the timer acts."""
    return mount(engine, "tickets", flows=NO_FLOWS, **options)


def ticket(n: int, **values: Any) -> dict[str, Any]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", **values}


def timer_runs(driver: testing.FlowDriver, n: int) -> list[ops.RunRow]:
    """The ticket's timer runs, oldest first."""
    return sorted(
        (run for run in driver.runs(n) if run.flow_id == "at:warn_at"), key=lambda r: r.id
    )


def told(driver: testing.FlowDriver, run: ops.RunRow) -> list[str]:
    return [line.sentence or "" for line in driver.history(run.id)]


def test_an_sla_warning_fires_once_when_warn_at_passes_while_the_ticket_is_open(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=2)))
    driver.advance("1 hour")
    assert stored(driver, 1)["priority"] == "normal"
    driver.advance("1 hour")
    assert stored(driver, 1)["priority"] == "urgent"
    [run] = timer_runs(driver, 1)
    assert run.status == statuses.RunStatus.DONE
    assert told(driver, run) == ["warn_at passed (Mon 2 Mar 11:00): ran warn_sla"]
    driver.update(1, priority="normal")
    driver.advance("3 days")
    assert stored(driver, 1)["priority"] == "normal"  # once for that instant
    assert len(timer_runs(driver, 1)) == 1


def test_moving_warn_at_later_rearms_and_the_old_instant_does_nothing(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=2)))
    driver.update(1, warn_at=T0 + timedelta(hours=5))
    driver.advance("3 hours")
    assert stored(driver, 1)["priority"] == "normal"
    old, new = timer_runs(driver, 1)
    assert old.status == statuses.RunStatus.DONE
    assert told(driver, old) == [
        "warn_at no longer holds Mon 2 Mar 11:00 (it holds Mon 2 Mar 14:00): nothing to run"
    ]
    assert new.status == statuses.RunStatus.WAITING
    driver.advance("2 hours")
    assert stored(driver, 1)["priority"] == "urgent"
    assert told(driver, timer_runs(driver, 1)[1]) == [
        "warn_at passed (Mon 2 Mar 14:00): ran warn_sla"
    ]


def test_moving_warn_at_away_and_back_before_it_passes_still_warns_once(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=2)))
    driver.update(1, warn_at=T0 + timedelta(hours=5))
    driver.update(1, warn_at=T0 + timedelta(hours=2))
    driver.advance("6 hours")
    first, second = timer_runs(driver, 1)
    assert told(driver, first) == ["warn_at passed (Mon 2 Mar 11:00): ran warn_sla"]
    assert told(driver, second) == [
        "warn_at no longer holds Mon 2 Mar 14:00 (it holds Mon 2 Mar 11:00): nothing to run"
    ]


def test_a_ticket_closed_before_warn_at_is_not_warned_and_reopening_does_not_rearm(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=2)))
    driver.update(1, status="closed")
    driver.advance("3 hours")
    [run] = timer_runs(driver, 1)
    assert told(driver, run) == [
        "warn_at passed (Mon 2 Mar 11:00) but status is not open: warn_sla did not run"
    ]
    driver.update(1, status="open")  # the instant has not changed: nothing arms
    driver.advance("1 day")
    assert stored(driver, 1)["priority"] == "normal"
    assert len(timer_runs(driver, 1)) == 1
    driver.update(1, warn_at=T0 + timedelta(days=2))  # a new instant arms it again
    driver.advance("2 days")
    assert stored(driver, 1)["priority"] == "urgent"


def test_when_is_read_at_fire_time_not_when_the_timer_is_armed(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, status="waiting", warn_at=T0 + timedelta(hours=2)))
    driver.advance("1 hour")
    driver.update(1, status="open")
    driver.advance("1 hour")
    assert stored(driver, 1)["priority"] == "urgent"


def test_an_instant_already_past_when_written_fires_at_once(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 - timedelta(days=3)))
    assert stored(driver, 1)["priority"] == "urgent"
    [run] = timer_runs(driver, 1)
    assert told(driver, run) == ["warn_at passed (Fri 27 Feb 09:00): ran warn_sla"]


def test_a_far_future_instant_waits_in_the_due_index(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    far = T0.replace(year=2090)
    driver.create(ticket(1, warn_at=far))
    [run] = timer_runs(driver, 1)
    assert run.status == statuses.RunStatus.WAITING
    assert driver.next_due() == far
    assert driver.run_until_idle() == 0


def test_an_empty_warn_at_arms_nothing_and_emptying_it_disarms(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1))
    assert timer_runs(driver, 1) == []
    driver.update(1, warn_at=T0 + timedelta(hours=1))
    driver.update(1, warn_at=None)
    driver.advance("2 hours")
    [run] = timer_runs(driver, 1)
    assert told(driver, run) == [
        "warn_at no longer holds Mon 2 Mar 10:00 (it is empty): nothing to run"
    ]
    assert stored(driver, 1)["priority"] == "normal"


def test_a_deleted_ticket_is_not_warned(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=1)))
    driver.delete(1)
    driver.advance("2 hours")
    [run] = sorted(driver.runs(1), key=lambda r: r.id)
    assert told(driver, run) == [
        "warn_at passed (Mon 2 Mar 10:00) but the ticket record is gone: warn_sla did not run"
    ]


SET_WARNING = """
- name: Start the clock
  start: created
  steps:
    - {position: 1, kind: set, title: Warn in an hour, field: warn_at, value: now() + 1 hour}
"""


def test_a_flow_that_sets_warn_at_arms_the_timer(any_engine: sa.Engine) -> None:
    bound = app("tickets").binding.model_copy(
        update={"set_columns": ("priority", "status", "assignee", "warn_at")}
    )
    driver = mount(any_engine, "tickets", flows=SET_WARNING, binding=bound)
    driver.create(ticket(1))
    written = rules.instant_of(stored(driver, 1)["warn_at"], query.ColumnType.TIMESTAMP, None)
    assert written == T0 + timedelta(hours=1)
    assert stored(driver, 1)["priority"] == "normal"
    driver.advance("1 hour")
    assert stored(driver, 1)["priority"] == "urgent"


def test_tickets_that_existed_before_the_timer_are_armed_once(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    runner = driver.runner
    with dialects.begin(runner.engine) as conn:
        for n in range(1, 6):
            warn = None if n == 5 else T0 + timedelta(hours=n)
            records.insert_record(conn, runner.tables, ticket(n, warn_at=warn))
    seen: list[tuple[int, int]] = []
    assert runner.arm_timers(progress=lambda done, total: seen.append((done, total))) == 4
    assert seen[-1] == (4, 5)  # the empty one is not read
    assert runner.arm_timers() == 0
    assert runner.arm_timers(where="id > 2") == 0
    driver.advance("3 hours")
    assert [stored(driver, n)["priority"] for n in range(1, 6)] == [
        "urgent",
        "urgent",
        "urgent",
        "normal",
        "normal",
    ]


def test_a_failing_warning_is_tried_again_and_a_refusal_fails_the_run(
    any_engine: sa.Engine,
) -> None:
    attempts: list[int] = []

    def flaky(ctx: commands.CommandContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.record["id"] == 2:
            raise errors.CommandRefused("the desk is closed for postgres://user:secret@db")
        if ctx.attempt < 3:
            raise RuntimeError("mail server down")

    driver = desk(any_engine, commands={"warn_sla": flaky})
    driver.create(ticket(1, warn_at=T0))
    driver.update(1, title="Printer on fire")  # woken meanwhile: the backoff still holds
    assert attempts == [1]
    driver.advance("1 minute")
    [run] = timer_runs(driver, 1)
    assert run.status == statuses.RunStatus.DONE
    assert attempts == [1, 2, 3]
    assert told(driver, run) == [
        "Attempt 1 failed (RuntimeError: mail server down); trying again at Mon 2 Mar 09:00",
        "Attempt 2 failed (RuntimeError: mail server down); trying again at Mon 2 Mar 09:00",
        "warn_at passed (Mon 2 Mar 09:00): ran warn_sla (attempt 3)",
    ]
    driver.create(ticket(2, warn_at=T0))
    [refused] = timer_runs(driver, 2)
    assert refused.status == statuses.RunStatus.FAILED
    assert refused.error is not None and refused.error["code"] == "command_refused"
    assert "secret" not in str(refused.error) and "secret" not in str(refused.reason)


# -- tenants -------------------------------------------------------------------------------

_tenant_metadata = sa.MetaData()
_shared = sa.Table(
    "shared_ticket",
    _tenant_metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32)),
    sa.Column("warn_at", sa.DateTime(timezone=True)),
)
SHARED = FlowBinding(
    resource="shared_ticket",
    flows_table="shared_flow",
    steps_table="shared_flow_step",
    tenant="tenant_id",
    at=[At(column="warn_at", command="warn", when="status = open")],
)
tables.for_binding(_tenant_metadata, SHARED)


def test_one_tenants_backlog_of_warnings_does_not_hold_up_anothers(
    any_engine: sa.Engine,
) -> None:
    _tenant_metadata.create_all(any_engine)
    migrated.upgrade(any_engine)
    warned: list[tuple[str, int]] = []

    def warn(ctx: commands.CommandContext) -> None:
        warned.append((str(ctx.record["tenant_id"]), int(str(ctx.record["id"]))))

    runner = flow_runner(SHARED, any_engine, commands={"warn": warn})
    driver = testing.FlowDriver(runner, start=T0)
    for n in range(1, 21):
        driver.create({"id": n, "tenant_id": "acme", "status": "open", "warn_at": T0}, run=False)
    driver.create({"id": 99, "tenant_id": "globex", "status": "open", "warn_at": T0}, run=False)
    assert driver.worker.run_due(limit=2) == 2
    assert ("globex", 99) in warned
    driver.run_until_idle()
    assert len(warned) == 21
    assert driver.runs(99, tenant="acme") == []  # a tenant sees only its own timers
    [globex] = driver.runs(99, tenant="globex")
    assert globex.tenant == "globex"


# -- the binding's checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timer", "message"),
    [
        (
            At(column="warn_on", command="warn_sla"),
            "the resource table 'ticket' has no column 'warn_on', which the timer at "
            "'warn_on' waits for",
        ),
        (
            At(column="title", command="warn_sla"),
            "the timer at 'title' needs a date or timestamp column, but ticket.title holds text",
        ),
        (
            At(column="warn_at", command="warn_sla", when="staus = open"),
            "the timer at 'warn_at': when 'staus = open' does not fit the resource's columns: "
            "line 1, column 1: unknown column 'staus' — did you mean 'status'?",
        ),
        (
            At(column="warn_at", command="warn_sales"),
            "the timer at 'warn_at' runs command 'warn_sales', but the runner was given no "
            "command of that name (commands: assign_ticket, warn_sla)",
        ),
    ],
)
def test_a_timer_the_desk_cannot_run_is_refused_at_mount(
    sqlite_engine: sa.Engine, timer: At, message: str
) -> None:
    module = app("tickets")
    module.metadata.create_all(sqlite_engine)
    bound = module.binding.model_copy(update={"at": (timer,)})
    with pytest.raises(errors.BindingError) as refused:
        flow_runner(bound, sqlite_engine, commands=module.COMMANDS)
    assert str(refused.value).startswith(message)


def test_a_timer_that_does_not_read_is_refused_when_declared() -> None:
    with pytest.raises(errors.BindingError, match="when 'status = = open' is not a condition"):
        At(column="warn_at", command="warn_sla", when="status = = open")
    with pytest.raises(errors.BindingError, match="more than one timer"):
        FlowBinding(
            resource="t",
            flows_table="f",
            steps_table="s",
            at=[At(column="a", command="x"), At(column="a", command="y")],
        )
    with pytest.raises(errors.BindingError, match="must be longer than zero"):
        At(column="warn_at", command="warn_sla", timeout="0 seconds")


def test_a_principal_not_allowed_the_timers_command_is_refused_at_mount(
    sqlite_engine: sa.Engine,
) -> None:
    module = app("tickets")
    module.metadata.create_all(sqlite_engine)
    with pytest.raises(errors.BindingError, match="which the timer at 'warn_at' needs"):
        flow_runner(
            module.binding,
            sqlite_engine,
            commands=module.COMMANDS,
            authorize=lambda who, command: command != "warn_sla",
        )


def test_an_operator_retries_a_warning_that_gave_up_and_it_runs_again(
    any_engine: sa.Engine,
) -> None:
    down = [True]

    def warn_sla(ctx: commands.CommandContext) -> None:
        if down[0]:
            raise RuntimeError("mail server down")

    driver = desk(any_engine, commands={"warn_sla": warn_sla}, retry=RetryPolicy(max_attempts=2))
    driver.create(ticket(1, warn_at=T0))
    driver.advance("1 minute")
    [run] = timer_runs(driver, 1)
    assert run.status == statuses.RunStatus.FAILED
    assert run.error is not None and run.error["code"] == "command_failed"
    with pytest.raises(errors.OperatorError, match="not a flow; retry it instead"):
        driver.runner.restart(run.id, operator="olga")
    down[0] = False
    driver.runner.retry(run.id, operator="olga", reason="mail is back")
    driver.run_until_idle()
    [run] = timer_runs(driver, 1)
    assert run.status == statuses.RunStatus.DONE
    assert told(driver, run)[-2:] == [
        "olga retried the run: mail is back",
        "warn_at passed (Mon 2 Mar 09:00): ran warn_sla",
    ]


def test_a_ticket_without_warn_at_costs_no_statement_more_and_one_with_it_one_insert(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    runner = driver.runner
    plain = flow_runner(
        app("tickets").binding.model_copy(update={"at": ()}),
        any_engine,
        commands=app("tickets").COMMANDS,
    )
    sent: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    def created(on: Any, n: int, **values: Any) -> int:
        with dialects.begin(any_engine) as conn:
            records.insert_record(conn, runner.tables, ticket(n, **values))
            sent.clear()
            sa.event.listen(any_engine, "before_cursor_execute", count)
            try:
                on.record_created(conn, ticket(n, **values))
            finally:
                sa.event.remove(any_engine, "before_cursor_execute", count)
        return len(sent)

    created(plain, 10), created(runner, 11)  # each runner has read the flows once
    without_timers = created(plain, 1)
    assert created(runner, 2) == without_timers  # no warn_at: nothing more
    # An instant: the run row and its due row (one statement on PostgreSQL).
    extra = 1 if any_engine.dialect.name == "postgresql" else 2
    assert created(runner, 3, warn_at=T0 + timedelta(hours=1)) == without_timers + extra


def test_the_console_shows_a_tickets_warning_with_its_history_and_no_diagram(
    any_engine: sa.Engine,
) -> None:
    from console import OPERATOR, console, text

    driver = desk(any_engine)
    driver.create(ticket(1, warn_at=T0 + timedelta(hours=1)))
    driver.advance("2 hours")
    page = console(driver, OPERATOR).get("/record/1")
    assert page.status_code == 200
    shown = text(page.text)
    assert "at warn_at done" in shown
    assert "warn_at passed (Mon 2 Mar 10:00): ran warn_sla" in shown
    assert 'class="frd"' not in page.text
    [run] = timer_runs(driver, 1)
    no_diagram = "runs 'at', not a flow: it has no diagram"
    with any_engine.connect() as conn, pytest.raises(errors.OperatorError, match=no_diagram):
        driver.runner.diagram(conn, run.flow_id, run=run.id)


def test_a_ticket_saved_through_the_orm_arms_its_warning_with_the_flush(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    unwatch = driver.runner.watch(Ticket)
    try:
        with orm.Session(any_engine) as session, session.begin():
            session.add(Ticket(id=1, title="Printer", requester_id="ann", warn_at=T0))
        with orm.Session(any_engine) as session:  # moved, then rolled back: nothing arms
            found = session.get(Ticket, 1)
            assert found is not None
            found.warn_at = T0 + timedelta(days=1)
            session.flush()
            session.rollback()
        assert len(timer_runs(driver, 1)) == 1
        with orm.Session(any_engine) as session, session.begin():
            found = session.get(Ticket, 1)
            assert found is not None
            found.warn_at = T0 + timedelta(hours=1)
        assert len(timer_runs(driver, 1)) == 2
    finally:
        unwatch()
    driver.advance("2 hours")
    first, second = timer_runs(driver, 1)
    assert told(driver, first)[0].startswith("warn_at no longer holds Mon 2 Mar 09:00")
    assert told(driver, second) == ["warn_at passed (Mon 2 Mar 10:00): ran warn_sla"]


class _Base(orm.DeclarativeBase):
    pass


class Ticket(_Base):
    __table__ = app("tickets").ticket
    warn_at: orm.Mapped[datetime | None]  # typing only: the columns come from the table
