"""An operator forks a code workflow's run from a named step, as a designer states it:
after fixing the data, the order is fulfilled from 'charge' — the steps before it are
not run again (nor its credit check started again), 'charge' and after run anew. What
cannot be forked is refused with a sentence. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import ordering
import pytest
import sqlalchemy as sa
from running import mount

from flowrunner import errors, flow_runner, testing
from flowrunner.workflows import Manual, Workflows, replay


@pytest.fixture(autouse=True)
def files() -> Iterator[None]:
    """The bureau knows ann (720); nobody has a card on file yet."""
    ordering.BUREAU.clear()
    ordering.BUREAU["ann"] = 720
    ordering.CARDS.clear()
    yield
    ordering.BUREAU.clear()
    ordering.CARDS.clear()


# A flow from rows beside the workflows: it holds each new order a week.
HOLD = """
- name: Hold
  start: created
  steps:
    - {position: 1, kind: wait, title: A week, duration: 7 days}
"""


def shop(engine: sa.Engine, **options: Any) -> testing.FlowDriver:
    driver = mount(
        engine,
        "purchase_orders",
        flows=HOLD,
        commands=ordering.COMMANDS,
        workflows=ordering.workflows(),
        **options,
    )
    driver.create(ordering.purchase_order(1, "ann"))
    return driver


def marks(driver: testing.FlowDriver) -> str:
    record = driver.record(1)
    assert record is not None
    return str(record["approver"] or "").strip()


def sentences(driver: testing.FlowDriver, run_id: int) -> list[str]:
    return [line.sentence for line in driver.history(run_id)]


def workflow_runs(driver: testing.FlowDriver, name: str) -> list[Any]:
    return sorted((r for r in driver.runs(1) if r.flow_name == name), key=lambda r: r.id)


def failed_at_charge(driver: testing.FlowDriver) -> int:
    """Order 1 fulfilled until its charge is refused: ann has no card on file."""
    run_id = driver.runner.start_workflow("fulfil", {"customer": "ann"}, operator="olga", record=1)
    driver.advance("1 hour")
    run = driver.runner.get_run(run_id)
    assert (run.status, run.reason) == (
        "failed",
        "step 'charge' was refused: no card on file for ann",
    )
    return run_id


def test_an_operator_forks_a_run_from_charge_after_fixing_the_data(any_engine: sa.Engine) -> None:
    driver = shop(any_engine)
    run_id = failed_at_charge(driver)
    assert marks(driver) == "+reserve +score(ann)"

    ordering.CARDS["ann"] = "visa-4242"  # the customer adds a card
    fork_id = driver.runner.fork(run_id, from_step="charge", operator="olga", reason="card added")
    driver.run_until_idle()

    fork = driver.runner.get_run(fork_id)
    assert (fork.status, fork.state["result"]) == ("done", {"card": "visa-4242", "score": 720})
    assert (fork.flow_name, fork.record_id, fork.started_by) == ("fulfil", "1", "olga")
    assert fork.snapshot["version"] == 1
    assert fork.snapshot["forked"] == {"run": run_id, "step": "charge"}
    # Reserving and the credit check were not done again; the charge and the shipping
    # were, under the fork's own keys.
    assert marks(driver) == f"+reserve +score(ann) +charge(run-{fork_id}/charge) +ship"
    assert len(workflow_runs(driver, "credit_check")) == 1
    kept = replay.Recording.from_dict(fork.state)
    assert [step.name for step in kept.steps] == ["reserve", "credit_check", "charge", "ship"]
    old = replay.Recording.from_dict(driver.runner.get_run(run_id).state)
    assert kept.steps[:2] == old.steps[:2]  # as recorded, to the moment

    # The old run stays failed; both histories say what happened.
    assert driver.runner.get_run(run_id).status == "failed"
    assert sentences(driver, run_id)[-1] == (
        f"olga forked the run from 'charge' as run {fork_id}: card added"
    )
    assert sentences(driver, fork_id) == [
        f"Forked by olga from run {run_id} at 'charge' (2 steps before it kept as recorded): "
        "card added",
        "Ran charge card (charge)",
        "Ran ship order (ship)",
        "Run done",
    ]
    (entry,) = [e for e in driver.runner.journal() if e.action == "fork"]
    assert (entry.operator, entry.run_id, entry.detail) == (
        "olga",
        run_id,
        {"from": "charge", "forked_as": fork_id, "reason": "card added"},
    )


def test_a_fork_from_an_earlier_step_starts_its_child_anew_and_counts_timers_from_the_fork(
    any_engine: sa.Engine,
) -> None:
    driver = shop(any_engine)
    ordering.CARDS["ann"] = "visa-4242"
    run_id = driver.runner.start_workflow("fulfil", {"customer": "ann"}, operator="olga", record=1)
    driver.advance("1 hour")
    assert driver.runner.get_run(run_id).status == "done"

    ordering.BUREAU["ann"] = 810  # the bureau corrected ann's file
    driver.advance("1 day")
    fork_id = driver.runner.fork(run_id, from_step="credit_check", operator="olga")
    driver.run_until_idle()
    first, second = workflow_runs(driver, "credit_check")
    assert (first.snapshot["parent"]["run"], second.snapshot["parent"]["run"]) == (run_id, fork_id)
    assert driver.runner.get_run(fork_id).status == "waiting"  # its check's hour counts from now
    driver.advance("1 hour")
    fork = driver.runner.get_run(fork_id)
    assert (fork.status, fork.state["result"]) == ("done", {"card": "visa-4242", "score": 810})
    assert marks(driver) == (
        f"+reserve +score(ann) +charge(run-{run_id}/charge) +ship "
        f"+score(ann) +charge(run-{fork_id}/charge) +ship"
    )


def test_what_cannot_be_forked_is_refused_with_a_sentence(any_engine: sa.Engine) -> None:
    driver = shop(any_engine)
    run_id = failed_at_charge(driver)

    def refused(run: object, step: str, **options: Any) -> str:
        with pytest.raises(errors.OperatorError) as caught:
            driver.runner.fork(run, from_step=step, operator="olga", **options)
        return str(caught.value)

    assert refused(run_id, "ship") == (
        f"run {run_id} never reached a step 'ship': it cannot be forked there "
        "(its steps: 'reserve', 'credit_check', 'charge')"
    )
    assert refused(999, "charge") == "there is no run 999"
    with pytest.raises(errors.OperatorError, match="name the operator"):
        driver.runner.fork(run_id, from_step="charge", operator=" ")

    # A flow from rows, started on the order when it was created.
    (flow_run,) = [r for r in driver.runs(1) if r.snapshot.get("program") is None]
    assert refused(flow_run.id, "charge") == (
        f"run {flow_run.id} runs a flow from rows ({flow_run.flow_name}), not a workflow in "
        "code: only a code workflow's run is forked from a step"
    )

    # A runner that no longer has the version the run executes.
    later = Workflows()

    @later.define(start=Manual(), version=2, name="fulfil")
    async def fulfil_v2(w: Any, start: Mapping[str, Any]) -> None:
        await w.run("charge", "charge_card")

    runner = flow_runner(
        driver.runner.binding,
        driver.runner.engine,
        commands=driver.runner.commands,
        workflows=later,
        clock=driver.runner.clock,
    )
    with pytest.raises(errors.OperatorError) as caught:
        runner.fork(run_id, from_step="charge", operator="olga")
    assert str(caught.value) == (
        f"run {run_id} executes workflow 'fulfil' version 1, which this runner does not have "
        "any more: register it again to fork the run"
    )
    # Nothing was started, nothing journaled.
    assert [r.flow_name for r in driver.runs(1)].count("fulfil") == 1
    assert [e.action for e in driver.runner.journal()].count("fork") == 0
