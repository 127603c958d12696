"""Replaying a code workflow: finished steps hand back what they stored, a run resumes at
its first unfinished step, a changed body stops as diverged, versions run side by side,
and operators steer its runs as they steer a flow's. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import mount

from flowrunner import errors, testing
from flowrunner.engine import commands, worker
from flowrunner.workflows import OnEvent, Workflows

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
    engine: sa.Engine, workflows: Workflows
) -> tuple[testing.FlowDriver, list[tuple[str, int]]]:
    """The tickets app with ``workflows`` and no flows; each command call (name, attempt)."""
    ran: list[tuple[str, int]] = []

    def note(name: str) -> commands.Command:
        def command(ctx: commands.CommandContext) -> dict[str, Any]:
            ran.append((name, ctx.attempt))
            ctx.conn.execute(
                sa.text("UPDATE ticket SET title = title || :mark WHERE id = 1"),
                {"mark": f" +{name}"},
            )
            return {"did": name}

        return command

    names = ("first", "second", "third", "other")
    driver = mount(
        engine, "tickets", flows="[]", commands={n: note(n) for n in names}, workflows=workflows
    )
    driver.create(TICKET)
    return driver, ran


def three_steps(workflows: Workflows, **options: Any) -> Callable[..., Any]:
    @workflows.define(start=OnEvent("ticket.replied"), **options)
    async def chores(w: Any, start: Mapping[str, Any]) -> list[Any]:
        one = await w.run("one", "first")
        two = await w.run("two", "second", input={"after": one["did"]})
        await w.sleep("rest", "1 day")
        three = await w.run("three", "third")
        return [one, two, three, w.version]

    return chores


def test_a_worker_killed_between_steps_resumes_at_the_first_unfinished_step(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()
    three_steps(workflows)
    driver, ran = desk(any_engine, workflows)
    crashed = {"done": False}

    def crash(point: str) -> None:
        # The second step's command ran; the worker dies before its transaction commits.
        if point == "after-command:second" and not crashed["done"]:
            crashed["done"] = True
            raise worker.Crash(point)

    driver.worker = worker.Worker(driver.runner, lease_ttl=timedelta(seconds=1), crash_at=crash)
    driver.emit("ticket.replied", {"ticket": 1}, run=False)
    with pytest.raises(worker.Crash):
        driver.run_until_idle()
    # The first step was kept at its checkpoint; nothing of the second, in flight, was.
    assert title_of(driver, "title") == "Printer on fire +first"
    driver.worker = worker.Worker(driver.runner)  # a new worker, once the lease ran out
    driver.now = driver.now + timedelta(seconds=2)
    driver.run_until_idle()
    driver.advance("1 day")
    run = driver.runs(1)[0]
    assert run.status == "done"
    assert title_of(driver, "title") == "Printer on fire +first +second +third"
    # Only the command in flight ran twice; the first ran once.
    assert ran == [("first", 1), ("second", 1), ("second", 1), ("third", 1)]


def test_after_a_wake_up_finished_steps_return_what_they_stored_without_running_again(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()
    three_steps(workflows)
    driver, ran = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    assert ran == [("first", 1), ("second", 1)]
    driver.advance("1 day")
    run = driver.runs(1)[0]
    assert ran == [("first", 1), ("second", 1), ("third", 1)]
    assert run.state["result"] == [{"did": "first"}, {"did": "second"}, {"did": "third"}, 1]


def test_a_changed_body_stops_the_run_as_diverged_naming_the_step(
    any_engine: sa.Engine,
) -> None:
    before = Workflows()
    three_steps(before)
    driver, ran = desk(any_engine, before)
    driver.emit("ticket.replied", {"ticket": 1})
    run_id = driver.runs(1)[0].id

    after = Workflows()  # deployed at the same version: the second step now runs "other"

    @after.define(start=OnEvent("ticket.replied"), name="chores")
    async def chores(w: Any, start: Any) -> None:
        await w.run("one", "first")
        await w.run("two", "other")

    driver.runner.mount_workflows(after)
    driver.advance("1 day")
    run = driver.runner.get_run(run_id)
    assert run.status == "failed"
    assert run.reason == (
        "diverged: step 2 asked for run 'two' (command other), but this run recorded "
        "run 'two' (command second) there at version 1"
    )
    assert run.error is not None and run.error["code"] == "workflow_diverged"
    assert driver.history(run_id)[-1].sentence.startswith("Diverged: step 2 asked for")
    assert ran == [("first", 1), ("second", 1)]  # nothing ran again, nothing new ran


def test_a_body_that_returns_before_its_recorded_steps_diverges_too(
    any_engine: sa.Engine,
) -> None:
    before = Workflows()
    three_steps(before)
    driver, _ = desk(any_engine, before)
    driver.emit("ticket.replied", {"ticket": 1})
    after = Workflows()

    @after.define(start=OnEvent("ticket.replied"), name="chores")
    async def chores(w: Any, start: Any) -> None:
        await w.run("one", "first")

    driver.runner.mount_workflows(after)
    driver.advance("1 day")
    assert driver.runs(1)[0].reason == (
        "diverged: the workflow returned before step 2, run 'two' (command second), which "
        "this run recorded at version 1"
    )


def test_versions_one_and_two_run_side_by_side(any_engine: sa.Engine) -> None:
    workflows = Workflows()
    three_steps(workflows)
    driver, ran = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    old = driver.runs(1)[0].id

    @workflows.define(start=OnEvent("ticket.replied", key=lambda e: e["n"]), version=2)
    async def chores(w: Any, start: Any) -> list[Any]:
        await w.run("other", "other")
        return [w.version]

    driver.emit("ticket.replied", {"ticket": 1, "n": 7})
    new = next(run for run in driver.runs(1) if run.id != old)
    assert (new.status, new.state["result"], new.snapshot["version"]) == ("done", [2], 2)
    driver.advance("1 day")
    finished = driver.runner.get_run(old)
    assert finished.status == "done"  # the version-1 run kept its version's code
    assert steps(finished.state)[-1]["result"] == {"did": "third"}
    assert finished.state["result"] == [{"did": "first"}, {"did": "second"}, {"did": "third"}, 1]
    assert [name for name, _ in ran] == ["first", "second", "other", "third"]


def test_a_run_whose_version_is_gone_fails_with_a_sentence(any_engine: sa.Engine) -> None:
    workflows = Workflows()
    three_steps(workflows)
    driver, _ = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    later = Workflows()
    three_steps(later, version=2)
    driver.runner.mount_workflows(later)
    driver.advance("1 day")
    assert driver.runs(1)[0].reason == (
        "this run executes workflow 'chores' version 1, which this runner does not have any more"
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            "repeat",
            "diverged: step 2 is named 'one' like step 1: give each step of a run its own "
            "name (a loop's steps take its index)",
        ),
        (
            "asyncio",
            "a workflow may await only its steps (w.run, w.call, w.child, w.wait_for, "
            "w.sleep, w.until, w.now); it awaited Future",
        ),
        ("raise", "the workflow raised KeyError: 'missing'"),
    ],
)
def test_a_body_that_breaks_the_rules_fails_with_a_sentence(
    any_engine: sa.Engine, body: str, reason: str
) -> None:
    import asyncio

    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied"))
    async def broken(w: Any, start: Mapping[str, Any]) -> None:
        await w.run("one", "first")
        if body == "repeat":
            await w.run("one", "second")
        elif body == "asyncio":
            loop = asyncio.new_event_loop()
            try:
                await loop.create_future()
            finally:
                loop.close()
        else:
            print(start["missing"])

    driver, _ = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    assert driver.runs(1)[0].reason == reason


# -- operators ----------------------------------------------------------------------------


def test_operators_cancel_redrive_retry_and_restart_a_workflows_runs(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()
    three_steps(workflows)
    driver, ran = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1})
    run_id = driver.runs(1)[0].id
    driver.runner.redrive(run_id, operator="olga")  # due now: it goes on sleeping
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).status == "waiting"
    driver.runner.cancel(run_id, operator="olga", reason="duplicate")
    driver.advance("2 days")
    run = driver.runner.get_run(run_id)
    assert (run.status, run.reason) == ("cancelled", "cancelled by olga: duplicate")
    assert driver.history(run_id)[-1].sentence == "olga cancelled the run: duplicate"
    assert [name for name, _ in ran] == ["first", "second"]
    with pytest.raises(errors.OperatorError, match="has already ended"):
        driver.runner.cancel(run_id, operator="olga")

    # A diverged run is retried once its code is fixed.
    driver.create({**TICKET, "id": 2})
    driver.emit("ticket.replied", {"ticket": 2})
    fixed = driver.runner.workflows
    assert fixed is not None
    other = Workflows()

    @other.define(start=OnEvent("ticket.replied"))
    async def chores(w: Any, start: Any) -> None:
        await w.run("one", "other")

    driver.runner.mount_workflows(other)
    driver.advance("1 day")
    failed = driver.runs(2)[0]
    assert failed.reason is not None and failed.reason.startswith("diverged:")
    driver.runner.mount_workflows(fixed)
    driver.runner.retry(failed.id, operator="olga", reason="code fixed")
    driver.advance("1 day")
    assert driver.runner.get_run(failed.id).status == "done"
    done = driver.runner.get_run(failed.id)
    with pytest.raises(errors.OperatorError, match="has not failed"):
        driver.runner.retry(done.id, operator="olga")
    entries = [(e.action, e.run_id) for e in driver.runner.journal().rows]
    assert ("retry", failed.id) in entries and ("cancel", run_id) in entries


def test_a_failed_run_is_restarted_as_a_new_run_with_the_same_start(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()
    calls = {"n": 0}

    @workflows.define(start=OnEvent("ticket.replied"))
    async def once(w: Any, start: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug")
        return await w.run("one", "first", input={"said": start["said"]})

    driver, _ = desk(any_engine, workflows)
    driver.emit("ticket.replied", {"ticket": 1, "said": "hello"})
    failed = driver.runs(1)[0]
    assert failed.reason == "the workflow raised RuntimeError: a bug"
    new_id = driver.runner.restart(failed.id, operator="olga")
    driver.run_until_idle()
    new = driver.runner.get_run(new_id)
    assert (new.status, new.state["result"], new.start_key) == (
        "done",
        {"did": "first"},
        f"restart:{failed.id}",
    )
    assert driver.runner.get_run(failed.id).restarted_as == new_id
