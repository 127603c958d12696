"""Jobs on an event, as a purchasing team describes them: a day after an order is decided
its requester is reminded, once however often the decision is sent; the reminder waits
for its day even when other news of the order arrives; a failing reminder is tried again
with the engine's backoff; a refused one fails its run with a sentence. Run on SQLite
and PostgreSQL, through the test driver's clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
import sqlalchemy as sa
from running import count, mount, order

from fixtures.purchase_orders import scheduled
from flowrunner import Job, Jobs, Plan, errors, testing
from flowrunner.engine import commands
from flowrunner.store import dialects
from flowrunner.store import operations as ops

NO_FLOWS = "[]"


def driver_with_jobs(
    engine: sa.Engine,
    jobs: Mapping[str, Job] | None = None,
    *,
    extra: Mapping[str, commands.Command] | None = None,
    authorize: Callable[[str, str], bool] = scheduled.grants,
) -> testing.FlowDriver:
    scheduled.metadata.create_all(engine)
    driver = mount(
        engine,
        "purchase_orders",
        flows=NO_FLOWS,
        commands={**scheduled.JOB_COMMANDS, **(extra or {})},
        authorize=authorize,
    )
    Jobs(driver.runner, {"remind_buyer": scheduled.JOBS["remind_buyer"]} if jobs is None else jobs)
    return driver


def decided(driver: testing.FlowDriver, order_id: int, decision: str = "approved") -> None:
    driver.emit("po.decided", {"order": order_id, "approver": "boss", "decision": decision})


def reminders(engine: sa.Engine) -> list[tuple[int, str]]:
    table = scheduled.buyer_reminder
    with engine.connect() as conn:
        return [(r.order_id, r.decision) for r in conn.execute(sa.select(table))]


def job_runs(driver: testing.FlowDriver, order_id: int) -> list[ops.RunRow]:
    return [run for run in driver.runs(order_id) if run.flow_id.startswith("job:")]


def test_the_same_decision_sent_three_times_plans_and_runs_one_reminder(
    po_engine: sa.Engine,
) -> None:
    driver = driver_with_jobs(po_engine)
    driver.create(order(7))
    for _ in range(3):
        decided(driver, 7)
        driver.advance("1 hour")
    [run] = job_runs(driver, 7)
    assert (run.status, run.flow_name, run.started_by) == ("waiting", "remind_buyer", "clock")
    assert reminders(po_engine) == []  # a day after the first decision, not before

    driver.advance("1 day")
    assert reminders(po_engine) == [(7, "approved")]
    [run] = job_runs(driver, 7)
    assert run.status == "done"
    assert [line.sentence for line in driver.history(run.id)] == [
        "Planned by the po decided event for Tue 3 Mar 09:00 (key 7)",
        "Ran remind buyer",
    ]
    with po_engine.connect() as conn:
        kept = ops.find_idempotent(conn, key="job:remind_buyer:7")
    assert kept is not None and kept.result == {"reminded": "ann"}

    decided(driver, 7, "rejected")  # sent again after it ran: still the one job
    driver.advance("3 days")
    assert reminders(po_engine) == [(7, "approved")]
    assert count(po_engine, scheduled.buyer_reminder) == 1


def test_each_order_gets_its_own_reminder(po_engine: sa.Engine) -> None:
    driver = driver_with_jobs(po_engine)
    for n in (1, 2):
        driver.create(order(n))
    decided(driver, 1)
    decided(driver, 2, "rejected")
    driver.advance("2 days")
    assert sorted(reminders(po_engine)) == [(1, "approved"), (2, "rejected")]


def test_news_of_the_order_does_not_bring_its_reminder_forward(po_engine: sa.Engine) -> None:
    """Other events about the order wake its runs; the planned job waits for its day."""
    driver = driver_with_jobs(po_engine)
    driver.create(order(7))
    decided(driver, 7)
    driver.advance("2 hours")
    driver.update(7, priority="high")  # a change of the record wakes its runs
    driver.advance("1 hour")
    assert reminders(po_engine) == []
    [run] = job_runs(driver, 7)
    assert run.status == "waiting"
    driver.advance("1 day")
    assert reminders(po_engine) == [(7, "approved")]


def test_a_failing_job_is_tried_again_with_the_engines_backoff(po_engine: sa.Engine) -> None:
    attempts: list[int] = []

    def flaky(ctx: commands.CommandContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("mail server down")

    job = Job(
        on="po.decided",
        command="flaky",
        run_as="automation",
        schedule=lambda event: Plan(key=event.payload["order"]),
    )
    driver = driver_with_jobs(
        po_engine, {"mail": job}, extra={"flaky": flaky}, authorize=lambda who, what: True
    )
    driver.create(order(7))
    decided(driver, 7)
    assert attempts == [1]
    driver.advance("9 seconds")
    assert attempts == [1]  # the first retry waits 10 seconds
    driver.advance("1 minute")
    assert attempts == [1, 2, 3]
    [run] = job_runs(driver, 7)
    assert run.status == "done"
    assert [line.sentence for line in driver.history(run.id)] == [
        "Planned by the po decided event for Mon 2 Mar 09:00 (key 7)",
        "Attempt 1 failed (ConnectionError: mail server down); trying again at Mon 2 Mar 09:00",
        "Attempt 2 failed (ConnectionError: mail server down); trying again at Mon 2 Mar 09:00",
        "Ran flaky (attempt 3)",
    ]


def test_a_job_out_of_attempts_fails_its_run_with_a_sentence(po_engine: sa.Engine) -> None:
    def broken(ctx: commands.CommandContext) -> None:
        raise RuntimeError("card 4111 1111 1111 1111 declined")

    job = Job(
        on="po.decided",
        command="broken",
        run_as="automation",
        schedule=lambda event: Plan(key=event.payload["order"]),
        retry=__import__("flowrunner").RetryPolicy(max_attempts=2),
    )
    driver = driver_with_jobs(
        po_engine, {"charge": job}, extra={"broken": broken}, authorize=lambda who, what: True
    )
    driver.create(order(7))
    decided(driver, 7)
    driver.advance("1 minute")
    [run] = job_runs(driver, 7)
    assert run.status == "failed"
    assert run.error is not None and run.error["code"] == "command_failed"
    assert "4111 1111 1111 1111" not in str(run.error) + str(run.reason)
    assert run.reason is not None and run.reason.startswith("job 'charge': broken failed 2 times: ")


def test_a_revoked_grant_refuses_the_job_when_it_runs(po_engine: sa.Engine) -> None:
    """Authorized at mount and again on every attempt: the grant withdrawn meanwhile
    fails the run, and the command never runs."""
    granted = {"clock": True}

    def grants(principal: str, command: str) -> bool:
        return granted.get(principal, principal == "automation")

    driver = driver_with_jobs(po_engine, authorize=grants)
    driver.create(order(7))
    decided(driver, 7)
    granted["clock"] = False
    driver.advance("2 days")
    assert reminders(po_engine) == []
    [run] = job_runs(driver, 7)
    assert run.status == "failed"
    assert run.error is not None and run.error["code"] == "command_refused"
    assert run.reason == (
        "job 'remind_buyer': remind_buyer was refused: principal 'clock' is not allowed "
        "to run command 'remind_buyer'"
    )


@pytest.mark.parametrize(
    ("jobs", "says"),
    [
        (
            {"x": Job(on="po.decided", command="nope", run_as="clock", schedule=lambda e: Plan(1))},
            "job 'x' runs command 'nope', but the runner was given no command of that name",
        ),
        (
            {
                "x": Job(
                    on="po.lost", command="remind_buyer", run_as="clock", schedule=lambda e: Plan(1)
                )
            },
            "job 'x' runs on event 'po.lost', which the binding does not have (events: po.decided)",
        ),
        (
            {
                "x": Job(
                    on="po.decided",
                    command="remind_buyer",
                    run_as="intern",
                    schedule=lambda e: Plan(1),
                )
            },
            "principal 'intern' is not allowed to run command 'remind_buyer', which job 'x' needs",
        ),
    ],
)
def test_a_job_that_cannot_run_is_refused_when_mounted(
    sqlite_engine: sa.Engine, jobs: dict[str, Job], says: str
) -> None:
    with pytest.raises(errors.BindingError, match=says.replace("(", r"\(").replace(")", r"\)")):
        driver_with_jobs(sqlite_engine, jobs)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"command": "c", "run_as": "clock"}, "runs either on an event (on=...) or at times"),
        ({"command": "c", "run_as": "clock", "on": "e"}, "needs a schedule"),
        ({"command": "c", "run_as": "", "every": "@daily"}, "needs a principal"),
        ({"command": "c", "run_as": "clock", "every": "@daily", "timeout": "soon"}, "timeout"),
    ],
)
def test_a_job_declared_wrong_is_refused_with_a_sentence(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(errors.BindingError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Job(**kwargs)


def test_a_schedule_that_answers_no_plan_refuses_the_event_and_writes_nothing(
    po_engine: sa.Engine,
) -> None:
    job = Job(on="po.decided", command="remind_buyer", run_as="clock", schedule=lambda e: None)  # type: ignore[arg-type,return-value]
    driver = driver_with_jobs(po_engine, {"bad": job})
    driver.create(order(7))
    with dialects.begin(po_engine) as conn:
        with pytest.raises(errors.BindingError, match="its schedule answered a NoneType"):
            driver.runner.emit(conn, "po.decided", {"order": 7, "decision": "approved"})
        # The emit's writes went with its savepoint: the application's transaction goes on.
        conn.execute(sa.select(1))
    assert job_runs(driver, 7) == []


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("\x00", "a plan's key contains the character \\x00, which cannot be stored"),
        ("PO-7\x00", "a plan's key contains the character \\x00, which cannot be stored"),
        ("\ud800", "a plan's key contains a lone surrogate, which is not text (not UTF-8)"),
        ({"order": "7\x00"}, "field 'key.order' contains the character \\x00"),
        (["\udfff"], "field 'key[0]' contains a lone surrogate"),
        (2**63, "a plan's key is a whole number from -9223372036854775808 to"),
    ],
)
def test_a_plan_key_text_columns_cannot_hold_refuses_the_event(
    po_engine: sa.Engine, key: object, says: str
) -> None:
    """The same refusal on SQLite and PostgreSQL (which refuses a NUL in text itself)."""
    job = Job(on="po.decided", command="remind_buyer", run_as="clock", schedule=lambda e: Plan(key))
    driver = driver_with_jobs(po_engine, {"odd": job})
    driver.create(order(7))
    with dialects.begin(po_engine) as conn:
        with pytest.raises(errors.BindingError) as refused:
            driver.runner.emit(conn, "po.decided", {"order": 7, "decision": "approved"})
        assert str(refused.value).startswith(f"job 'odd': its plan cannot be kept: {says}")
        conn.execute(sa.select(1))  # the application's transaction goes on
    assert job_runs(driver, 7) == []


def test_an_operator_retries_a_refused_job_once_the_grant_is_back(po_engine: sa.Engine) -> None:
    granted = {"clock": False}

    def grants(principal: str, command: str) -> bool:
        return granted.get(principal, principal == "automation")

    driver = driver_with_jobs(po_engine, authorize=lambda who, what: True)
    driver.runner.authorize = grants
    driver.create(order(7))
    decided(driver, 7)
    driver.advance("2 days")
    [run] = job_runs(driver, 7)
    assert run.status == "failed"
    [restart] = driver.runner.act("restart", [run.id], operator="olga")
    assert (restart.done, restart.code) == (False, "not_a_flow")
    assert restart.refusal == (
        f"run {run.id} cannot be restarted: it runs 'job', not a flow; retry it instead"
    )
    granted["clock"] = True
    driver.runner.retry(run.id, operator="olga", reason="clock may remind again")
    driver.run_until_idle()
    assert reminders(po_engine) == [(7, "approved")]
    [run] = job_runs(driver, 7)
    assert run.status == "done"
    assert [line.sentence for line in driver.history(run.id)][-2:] == [
        "olga retried the run: clock may remind again",
        "Ran remind buyer (attempt 2)",
    ]


def test_a_cancelled_job_never_runs(po_engine: sa.Engine) -> None:
    driver = driver_with_jobs(po_engine)
    driver.create(order(7))
    decided(driver, 7)
    [run] = job_runs(driver, 7)
    driver.runner.cancel(run.id, operator="olga", reason="order withdrawn")
    driver.advance("2 days")
    assert reminders(po_engine) == []
    [run] = job_runs(driver, 7)
    assert (run.status, run.reason) == ("cancelled", "cancelled by olga: order withdrawn")


def test_the_console_shows_an_orders_reminder_with_its_history_and_no_diagram(
    po_engine: sa.Engine,
) -> None:
    from console import OPERATOR, console, text

    driver = driver_with_jobs(po_engine)
    driver.create(order(7))
    decided(driver, 7)
    driver.advance("2 days")
    [run] = job_runs(driver, 7)
    ui = console(driver, OPERATOR)
    for page in (ui.get("/record/7"), ui.get(f"/run/{run.id}")):
        assert page.status_code == 200
        shown = text(page.text)
        assert f"Run {run.id} · remind_buyer done" in shown
        assert "Planned by the po decided event for Tue 3 Mar 09:00 (key 7)" in shown
        assert "Ran remind buyer" in shown
    assert f'<figure class="frd" data-run="{run.id}"' not in ui.get(f"/run/{run.id}").text
