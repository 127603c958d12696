"""Code workflows on the flows' engine: defined in Python, started by an event or by hand,
each step recorded once and replayed after every wake-up. Run on SQLite and PostgreSQL,
on the support desk's tickets, through the test driver's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, mount

from flowrunner import errors, testing
from flowrunner.engine import commands
from flowrunner.workflows import Manual, OnEvent, Workflows

TICKET = {"id": 1, "title": "Printer on fire", "requester_id": "ann"}


def title_of(driver: testing.FlowDriver, column: str) -> Any:
    """A column of ticket 1 as it is now."""
    record = driver.record(1)
    assert record is not None
    return record[column]


def steps(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A workflow run's recorded steps, from its stored state."""
    return list(state["steps"])


def desk(
    engine: sa.Engine, workflows: Workflows, **extra: commands.Command
) -> tuple[testing.FlowDriver, list[tuple[str, Mapping[str, Any]]]]:
    """The tickets app with ``workflows`` mounted and no flows; the commands' calls."""
    ran: list[tuple[str, Mapping[str, Any]]] = []

    def escalate(ctx: commands.CommandContext) -> dict[str, Any]:
        ran.append(("escalate", dict(ctx.inputs)))
        ctx.conn.execute(sa.text("UPDATE ticket SET priority = 'high' WHERE id = :id"), {"id": 1})
        return {"level": ctx.inputs.get("level", 1)}

    def close(ctx: commands.CommandContext) -> None:
        ran.append(("close", dict(ctx.inputs)))
        if ctx.inputs.get("refuse"):
            raise errors.CommandRefused("the ticket is locked")

    driver = mount(
        engine,
        "tickets",
        flows="[]",
        commands={"escalate": escalate, "close": close, **extra},
        workflows=workflows,
    )
    driver.create(TICKET)
    return driver, ran


def only_run(driver: testing.FlowDriver) -> Any:
    runs = driver.runs(1)
    assert len(runs) == 1
    return runs[0]


def sentences(driver: testing.FlowDriver, run_id: int) -> list[str]:
    return [line.sentence for line in driver.history(run_id)]


def test_an_event_starts_a_workflow_once_per_key_and_its_steps_run_in_order(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied", key=lambda e: e["reply"]), run_as="desk")
    async def follow_up(w: Any, start: Mapping[str, Any]) -> dict[str, Any]:
        raised = await w.run("escalate", "escalate", input={"level": 2})
        await w.sleep("cool off", "2 days")
        checked = await w.now("checked")
        await w.run("close", "close", input={"after": raised["level"]})
        return {"checked": checked.isoformat(), "reply": start["reply"]}

    driver, ran = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1, "reply": "r-1"})
    driver.emit("ticket.replied", {"ticket": 1, "reply": "r-1"})  # re-sent: nothing new
    run = only_run(driver)
    assert (run.flow_name, run.status, run.started_by) == ("follow_up", "waiting", "desk")
    assert [(w.title, w.awaits.value, w.until) for w in run.waiting] == [
        ("cool off", "time", T0 + timedelta(days=2))
    ]
    assert ran == [("escalate", {"level": 2})]
    assert title_of(driver, "priority") == "high"  # the command's write committed

    driver.advance("2 days")
    run = only_run(driver)
    assert run.status == "done"
    assert run.state["result"] == {"checked": (T0 + timedelta(days=2)).isoformat(), "reply": "r-1"}
    assert ran == [("escalate", {"level": 2}), ("close", {"after": 2})]  # each once
    assert sentences(driver, run.id) == [
        "Started the run",
        "Ran escalate (escalate)",
        "Sleeping until Wed 4 Mar 09:00 (cool off)",
        "Slept until Wed 4 Mar 09:00 (cool off)",
        "Took the time: Wed 4 Mar 09:00 (checked)",
        "Ran close (close)",
        "Run done",
    ]


def test_a_sleep_counts_from_when_the_step_before_it_ended_not_from_a_late_worker(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied"))
    async def two_naps(w: Any, start: Any) -> None:
        await w.sleep("first", "1 day")
        await w.sleep("second", "1 day")
        await w.run("close", "close")

    driver, _ = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    driver.advance("3 days", run=False)  # nobody worked for three days
    driver.run_until_idle()
    run = only_run(driver)
    assert run.status == "done"
    done = [line for line in driver.history(run.id) if line.what == "workflow_step"]
    assert [line.due_at for line in done[:2]] == [T0 + timedelta(days=1), T0 + timedelta(days=2)]


def test_wait_for_counts_an_event_since_the_run_began_and_none_from_before_it(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=Manual())
    async def hear(w: Any, start: Any) -> Any:
        await w.sleep("a while", "1 hour")
        return await w.wait_for(
            "reply", "ticket.replied", match=lambda e: e.get("from") == "ann", timeout="1 day"
        )

    driver, _ = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1, "from": "ann", "said": "before the run"})
    run_id = driver.runner.start_workflow("hear", operator="olga", record=1)
    driver.run_until_idle()
    driver.emit("ticket.replied", {"ticket": 1, "from": "bob", "said": "not a match"})
    driver.emit("ticket.replied", {"ticket": 1, "from": "ann", "said": "during the sleep"})
    driver.advance("1 hour")  # the wait is reached after the event arrived: it counts
    run = driver.runner.get_run(run_id)
    assert run.status == "done"
    assert run.state["result"] == {"ticket": 1, "from": "ann", "said": "during the sleep"}


def test_wait_for_gives_none_at_its_timeout_and_an_event_wakes_it_at_once(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define()
    async def ask(w: Any, start: Any) -> str:
        first = await w.wait_for("first", "ticket.replied", timeout="1 day")
        second = await w.wait_for(
            "second", "ticket.replied", match=lambda e: e["n"] == 2, timeout="1 day"
        )
        return f"{first and first['n']}, {second}"

    driver, _ = desk(any_engine, workflows)
    run_id = driver.runner.start_workflow("ask", operator="olga", record=1)
    driver.run_until_idle()
    (waiting,) = driver.runs(1)[0].waiting
    assert (waiting.awaits.value, waiting.event) == ("event", "ticket.replied")
    driver.advance("2 hours")
    driver.emit("ticket.replied", {"ticket": 1, "n": 1})  # woken now, not at the timeout
    assert steps(driver.runs(1)[0].state)[0]["result"] == {"ticket": 1, "n": 1}
    driver.advance("1 day")
    run = driver.runner.get_run(run_id)
    assert (run.status, run.state["result"]) == ("done", "1, None")
    said = sentences(driver, run_id)
    assert "The ticket replied event arrived (first)" in said
    assert "No ticket replied event came by Tue 3 Mar 11:00 (second)" in said


def test_a_refused_command_raises_step_refused_which_the_workflow_may_catch(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define()
    async def careful(w: Any, start: Any) -> str:
        try:
            await w.run("close", "close", input={"refuse": True})
        except errors.StepRefused as refused:
            await w.run("escalate instead", "escalate")
            return f"{refused.step}: {refused}"
        return "closed"

    @workflows.define()
    async def careless(w: Any, start: Any) -> None:
        await w.run("close", "close", input={"refuse": True})

    driver, ran = desk(any_engine, workflows)
    first = driver.runner.start_workflow("careful", operator="olga", record=1)
    second = driver.runner.start_workflow("careless", operator="olga", record=1)
    driver.run_until_idle()
    run = driver.runner.get_run(first)
    assert (run.status, run.state["result"]) == ("done", "close: the ticket is locked")
    failed = driver.runner.get_run(second)
    assert failed.status == "failed"
    assert failed.reason == "step 'close' was refused: the ticket is locked"
    assert "Close refused (close): the ticket is locked" in sentences(driver, first)
    assert [name for name, _ in ran] == ["close", "escalate", "close"]


def test_a_failing_command_is_tried_again_with_backoff_then_the_run_goes_on(
    any_engine: sa.Engine,
) -> None:
    tries: list[int] = []

    def flaky(ctx: commands.CommandContext) -> dict[str, int]:
        tries.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("the ledger is down")
        return {"attempt": ctx.attempt}

    workflows = Workflows()

    @workflows.define()
    async def book(w: Any, start: Any) -> Any:
        return await w.run("book", "flaky")

    driver, _ = desk(any_engine, workflows, flaky=flaky)
    run_id = driver.runner.start_workflow("book", operator="olga", record=1)
    driver.run_until_idle()
    (waiting,) = driver.runs(1)[0].waiting
    assert (waiting.awaits.value, waiting.until) == ("retry", T0 + timedelta(seconds=10))
    driver.advance("1 minute")
    run = driver.runner.get_run(run_id)
    assert (run.status, run.state["result"], tries) == ("done", {"attempt": 3}, [1, 2, 3])
    assert sentences(driver, run_id)[1].startswith("Attempt 1 failed (ConnectionError")


def test_a_manual_start_is_journaled_and_a_key_starts_once(any_engine: sa.Engine) -> None:
    workflows = Workflows()

    @workflows.define(start=Manual(), run_as="desk")
    async def audit(w: Any, start: Any) -> Any:
        return {"asked": start["what"]}

    @workflows.define(start=OnEvent("ticket.replied"))
    async def on_reply(w: Any, start: Any) -> None:
        return None

    driver, _ = desk(any_engine, workflows)
    run_id = driver.runner.start_workflow("audit", {"what": "q1"}, operator="olga", key="q1")
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).state["result"] == {"asked": "q1"}
    assert driver.runner.get_run(run_id).record_id == "q1"  # with no record: on its key
    with pytest.raises(errors.OperatorError, match="was started with key 'q1' already"):
        driver.runner.start_workflow("audit", {"what": "q1"}, operator="olga", key="q1")
    with pytest.raises(errors.OperatorError, match=r"there is no workflow 'audi' \(workflows"):
        driver.runner.start_workflow("audi", operator="olga")
    with pytest.raises(errors.OperatorError, match="only a manual workflow is started by hand"):
        driver.runner.start_workflow("on_reply", operator="olga")
    with pytest.raises(errors.OperatorError, match="there is no ticket 99"):
        driver.runner.start_workflow("audit", {"what": "x"}, operator="olga", record=99)
    entries = driver.runner.journal(run_id=run_id).rows
    assert [(e.operator, e.action) for e in entries] == [("olga", "start")]


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("r-1\x00", "contains the character \\x00, which cannot be stored"),
        ("\ud800", "contains a lone surrogate, which is not text (not UTF-8)"),
        (" ", "must be a text of 1 to 200 characters"),
        (10**400, "must be a text of 1 to 200 characters"),
    ],
)
def test_a_key_text_columns_cannot_hold_is_refused_on_either_database(
    any_engine: sa.Engine, key: object, says: str
) -> None:
    """An event's key refuses the event; a manual start's refuses the start; nothing kept."""
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied", key=lambda e: key))
    async def on_reply(w: Any, start: Any) -> None:
        return None

    @workflows.define(start=Manual())
    async def audit(w: Any, start: Any) -> None:
        return None

    driver, _ = desk(any_engine, workflows)
    with pytest.raises(errors.EventRejected) as refused:
        driver.emit("ticket.replied", {"ticket": 1})
    assert str(refused.value) == f"event 'ticket.replied': workflow 'on_reply''s key {says}"
    with pytest.raises(errors.OperatorError) as refused_by_hand:
        driver.runner.start_workflow("audit", operator="olga", key=key)  # type: ignore[arg-type]
    assert str(refused_by_hand.value) == f"a start's key {says}"
    assert driver.runs(1) == []


@pytest.mark.parametrize("operator", ["olga\x00", "\udc00lga"])
def test_an_operator_name_text_columns_cannot_hold_is_refused(
    any_engine: sa.Engine, operator: str
) -> None:
    """Who started a run is kept as given: a flow's manual start and a workflow's alike."""
    workflows = Workflows()

    @workflows.define(start=Manual())
    async def audit(w: Any, start: Any) -> None:
        return None

    manual = "- {name: By hand, start: manual, steps: [{position: 1, kind: wait, duration: 1 day}]}"
    driver = mount(any_engine, "tickets", flows=manual, workflows=workflows)
    driver.create(TICKET)
    with pytest.raises(errors.OperatorError, match=r"^the operator's name contains "):
        driver.runner.start_workflow("audit", operator=operator, record=1)
    with pytest.raises(errors.OperatorError, match=r"^the operator's name contains "):
        driver.runner.start("By hand", 1, operator=operator)
    assert driver.runs(1) == []


def test_a_workflow_on_an_event_the_binding_lacks_is_refused_at_mount(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.closed"))
    async def gone(w: Any, start: Any) -> None:
        return None

    with pytest.raises(errors.BindingError, match=r"event .ticket\.closed., which the binding"):
        desk(any_engine, workflows)


def test_definitions_are_checked_when_defined() -> None:
    workflows = Workflows()
    with pytest.raises(errors.BindingError, match="must be an async def"):

        @workflows.define()  # type: ignore[arg-type]
        def plain(w: Any, start: Any) -> None:
            return None

    @workflows.define(version=2)
    async def twice(w: Any, start: Any) -> None:
        return None

    with pytest.raises(errors.BindingError, match="version 2 is defined twice"):
        workflows.define(version=2, name="twice")(twice)
    with pytest.raises(errors.BindingError, match="a version is a whole number"):
        workflows.define(version=0)(twice)


def test_a_moment_already_past_goes_on_at_once_and_the_next_timer_counts_from_then(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define()
    async def late(w: Any, start: Any) -> None:
        await w.until("long ago", "2020-01-01T00:00:00")
        await w.sleep("nap", "1 hour")

    driver, _ = desk(any_engine, workflows)
    run_id = driver.start_workflow("late")
    (waiting,) = driver.runner.get_run(run_id).waiting
    assert (waiting.title, waiting.until) == ("nap", T0 + timedelta(hours=1))
