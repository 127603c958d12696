"""A workflow may await only its steps: a body that awaits anything else — an asyncio
sleep, a gather, a task, the event loop, a future from elsewhere — fails its run with the
one sentence that says so, naming what it awaited, even when it caught what it was
raised. On SQLite and PostgreSQL, on the support desk's tickets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
import sqlalchemy as sa
from running import mount

from flowrunner import testing
from flowrunner.engine import commands
from flowrunner.workflows import Manual, Workflows, awaited, replay

TICKET = {"id": 1, "title": "Printer on fire", "requester_id": "ann"}
RULE = (
    "a workflow may await only its steps "
    "(w.run, w.call, w.child, w.wait_for, w.sleep, w.until, w.now)"
)


async def _nap() -> None:
    await asyncio.sleep(1)


def _other_loops_future() -> Awaitable[None]:
    loop = asyncio.new_event_loop()
    try:
        return loop.create_future()
    finally:
        loop.close()


async def _queue_get() -> None:
    await asyncio.Queue().get()


async def _swallowed() -> None:
    with contextlib.suppress(Exception):  # caught, yet the sleep never happened: it fails
        await asyncio.sleep(5)


# What the body awaits after its first step, and what the sentence says it awaited.
AWAITS: dict[str, tuple[Callable[[Any], Awaitable[Any]], str]] = {
    "sleep": (lambda w: asyncio.sleep(0.01), "asyncio.sleep"),
    "sleep(0)": (lambda w: asyncio.sleep(0), "asyncio.sleep"),
    "gather": (
        lambda w: asyncio.gather(w.run("two", "tell"), w.run("three", "tell")),
        "asyncio.gather",
    ),
    "task": (lambda w: asyncio.create_task(_nap()), "asyncio.create_task"),
    "wait_for": (lambda w: asyncio.wait_for(w.run("two", "tell"), 5), "asyncio.wait_for"),
    "loop": (
        lambda w: asyncio.get_running_loop().run_in_executor(None, print, "hi"),
        "loop.run_in_executor",
    ),
    "queue": (lambda w: _queue_get(), "asyncio.Queue.get"),
    "a future of another loop": (lambda w: _other_loops_future(), "Future"),
    "caught": (lambda w: _swallowed(), "asyncio.sleep"),
}


def desk(
    engine: sa.Engine, workflows: Workflows
) -> tuple[testing.FlowDriver, list[Mapping[str, Any]]]:
    """The tickets app with ``workflows`` and no flows; what its ``tell`` command told."""
    told: list[Mapping[str, Any]] = []

    def tell(ctx: commands.CommandContext) -> None:
        told.append({"step": ctx.step_title})

    driver = mount(engine, "tickets", flows="[]", commands={"tell": tell}, workflows=workflows)
    driver.create(TICKET)
    return driver, told


@pytest.mark.parametrize("what", list(AWAITS))
def test_a_workflow_that_awaits_what_is_not_its_step_fails_with_the_sentence(
    any_engine: sa.Engine, what: str
) -> None:
    awaits, named = AWAITS[what]
    workflows = Workflows()

    @workflows.define(start=Manual())
    async def impatient(w: Any, start: Any) -> str:
        await w.run("one", "tell")
        await awaits(w)
        await w.run("four", "tell")
        return "done"

    driver, told = desk(any_engine, workflows)
    run_id = driver.runner.start_workflow("impatient", operator="olga", record=1)
    driver.run_until_idle()
    run = driver.runner.get_run(run_id)
    assert (run.status, run.reason) == ("failed", f"{RULE}; it awaited {named}")
    assert run.error is not None and run.error["code"] == "workflow_awaited"
    assert told == [{"step": "one"}]  # nothing after it ran, nothing of a gather either


def test_a_workflow_that_sleeps_with_asyncio_fails_and_runs_once_its_code_is_fixed(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=Manual(), name="remind")
    async def remind_v1(w: Any, start: Any) -> None:
        await w.run("first", "tell")
        await asyncio.sleep(60)
        await w.run("again", "tell")

    driver, told = desk(any_engine, workflows)
    run_id = driver.runner.start_workflow("remind", operator="olga", record=1)
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).reason == f"{RULE}; it awaited asyncio.sleep"

    fixed = Workflows()

    @fixed.define(start=Manual(), name="remind")
    async def remind_fixed(w: Any, start: Any) -> None:
        await w.run("first", "tell")
        await w.sleep("a minute", "1 minute")  # the durable timer it meant
        await w.run("again", "tell")

    driver.runner.mount_workflows(fixed)
    driver.runner.retry(run_id, operator="olga", reason="sleeps with w.sleep")
    driver.advance("1 minute")
    assert driver.runner.get_run(run_id).status == "done"
    assert told == [{"step": "first"}, {"step": "again"}]


def test_the_event_loop_of_the_worker_is_its_own_again_after_a_body_ran() -> None:
    async def body(w: Any) -> None:
        await asyncio.sleep(1)

    async def outside() -> None:
        coroutine = body(None)
        with pytest.raises(awaited.NotAStep, match=r"asyncio\.sleep"):
            awaited.next_step(coroutine, None, None)
        coroutine.close()
        assert asyncio.get_running_loop() is running
        await asyncio.sleep(0)  # the loop works as before

    loop = asyncio.new_event_loop()
    running = loop
    try:
        loop.run_until_complete(outside())
    finally:
        loop.close()
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()


def test_a_step_is_handed_over_and_its_result_sent_back() -> None:
    asked = replay.Ask("one", replay.NOW)

    class Step:
        def __await__(self) -> Any:
            return (yield asked)

    async def body() -> Any:
        return await Step()

    coroutine = body()
    assert awaited.next_step(coroutine, None, None) is asked
    with pytest.raises(StopIteration) as done:
        awaited.next_step(coroutine, "the time", None)
    assert done.value.value == "the time"
