"""A code workflow that starts another as its child (``w.child``), as a designer states
it: the order waits for its credit check and goes on with its result; a failed check
raises in the order, which handles it; cancelling the order cancels the check. On
SQLite and PostgreSQL, through the test driver's clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import ordering
import pytest
import sqlalchemy as sa
from running import T0, mount

from flowrunner import StepRefused, errors, testing
from flowrunner.store import operations as ops
from flowrunner.workflows import Manual, Workflows, replay


@pytest.fixture(autouse=True)
def files() -> Iterator[None]:
    """The bureau knows ann (720) and cat (580), not bob; nobody has a card on file."""
    ordering.BUREAU.clear()
    ordering.BUREAU.update({"ann": 720, "cat": 580})
    ordering.CARDS.clear()
    yield
    ordering.BUREAU.clear()
    ordering.CARDS.clear()


def shop(engine: sa.Engine, workflows: Workflows | None = None) -> testing.FlowDriver:
    """The purchase-order app with the ordering workflows, and orders 1 (ann), 2 (bob)
    and 3 (cat)."""
    driver = mount(
        engine,
        "purchase_orders",
        flows="[]",
        commands=ordering.COMMANDS,
        workflows=workflows or ordering.workflows(),
    )
    for n, customer in ((1, "ann"), (2, "bob"), (3, "cat")):
        driver.create(ordering.purchase_order(n, customer))
    return driver


def start(driver: testing.FlowDriver, workflow: str, order: int, customer: str) -> int:
    return driver.runner.start_workflow(
        workflow, {"customer": customer}, operator="olga", record=order
    )


def marks(driver: testing.FlowDriver, order: int) -> str:
    record = driver.record(order)
    assert record is not None
    return str(record["approver"] or "").strip()


def sentences(driver: testing.FlowDriver, run_id: int) -> list[str]:
    return [line.sentence for line in driver.history(run_id)]


def children_of(driver: testing.FlowDriver, order: int, parent: int) -> list[Any]:
    """The runs on ``order`` that ``parent`` started as its children, oldest first."""
    found = []
    for run in driver.runs(order):
        parent_of = run.snapshot.get("parent")
        if isinstance(parent_of, Mapping) and parent_of.get("run") == parent:
            found.append(run)
    return sorted(found, key=lambda run: run.id)


def test_an_order_starts_a_credit_check_child_waits_and_goes_on_with_its_result(
    any_engine: sa.Engine,
) -> None:
    driver = shop(any_engine)
    order = start(driver, "order", 1, "ann")
    driver.run_until_idle()

    # The check scored ann and is in its analyst's hour: the order waits for it.
    (check,) = children_of(driver, 1, order)
    parent = driver.runner.get_run(order)
    assert (parent.status, check.status, check.flow_name) == ("waiting", "waiting", "credit_check")
    assert check.snapshot["parent"] == {"run": order, "step": "credit_check"}
    assert (check.record_id, check.started_by) == ("1", f"run {order}")
    (waits,) = parent.waiting
    assert (waits.title, waits.kind, waits.awaits) == ("credit_check", "child", "event")
    assert waits.event == f"run {check.id} (credit_check) to end"
    assert marks(driver, 1) == "+score(ann)"
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "order", order).mermaid()
    assert (
        f"child · credit_check<br/>workflow: credit_check<br/>◔ Waiting for run {check.id} to end"
        in drawn
    )

    driver.advance("1 hour")
    parent = driver.runner.get_run(order)
    assert (parent.status, parent.state["result"]) == ("done", {"decision": "approved"})
    assert driver.runner.get_run(check.id).state["result"] == {"customer": "ann", "score": 720}
    assert marks(driver, 1) == "+score(ann) +approved"
    assert sentences(driver, order) == [
        "Started the run",
        f"Started credit check as run {check.id}; waiting for it to end (credit_check)",
        f"Credit check (run {check.id}) done (credit_check)",
        "Ran decide order (decide)",
        "Run done",
    ]
    assert sentences(driver, check.id) == [
        f"Started by run {order} at its step 'credit_check'",
        "Ran score customer (score)",
        "Sleeping until Mon 2 Mar 10:00 (review)",
        "Slept until Mon 2 Mar 10:00 (review)",
        "Run done",
    ]
    # The parent was woken when its child ended, not later: it ended at the same moment.
    ended = driver.runner.get_run(order).ended_at
    assert ended is not None and ended == driver.runner.get_run(check.id).ended_at
    assert ended == T0 + timedelta(hours=1)


def test_a_low_score_declines_and_each_order_has_its_own_check(any_engine: sa.Engine) -> None:
    driver = shop(any_engine)
    orders = [start(driver, "order", 1, "ann"), start(driver, "order", 3, "cat")]
    driver.advance("2 hours")
    assert [driver.runner.get_run(run).state["result"] for run in orders] == [
        {"decision": "approved"},
        {"decision": "declined"},
    ]
    assert [len(children_of(driver, n, run)) for n, run in zip((1, 3), orders, strict=True)] == [
        1,
        1,
    ]


def test_the_child_fails_the_parents_await_raises_and_the_parent_refers_the_order(
    any_engine: sa.Engine,
) -> None:
    driver = shop(any_engine)
    order = start(driver, "order", 2, "bob")  # the bureau has no file on bob
    driver.run_until_idle()

    (check,) = children_of(driver, 2, order)
    check = driver.runner.get_run(check.id)
    assert (check.status, check.reason) == (
        "failed",
        "step 'score' was refused: no credit file for bob",
    )
    parent = driver.runner.get_run(order)
    assert (parent.status, parent.state["result"]) == ("done", {"decision": "referred"})
    assert marks(driver, 2) == "+referred"
    step = replay.Recording.from_dict(parent.state).steps[0]
    assert step.refused == {
        "message": f"child run {check.id} failed: step 'score' was refused: no credit file for bob",
        "code": "child_failed",
        "run": check.id,
    }
    assert sentences(driver, order)[2] == (
        f"Credit check failed (credit_check): child run {check.id} failed: step 'score' was "
        "refused: no credit file for bob"
    )


def test_a_failed_child_let_out_fails_the_parent_and_a_retry_after_the_fix_checks_anew(
    any_engine: sa.Engine,
) -> None:
    driver = shop(any_engine)
    ordering.CARDS["bob"] = "visa-4242"
    run_id = start(driver, "fulfil", 2, "bob")
    driver.run_until_idle()
    parent = driver.runner.get_run(run_id)
    (first,) = children_of(driver, 2, run_id)
    assert (parent.status, parent.reason) == (
        "failed",
        f"step 'credit_check' was refused: child run {first.id} failed: step 'score' was "
        "refused: no credit file for bob",
    )

    ordering.BUREAU["bob"] = 700  # the bureau opens bob's file
    driver.runner.retry(run_id, operator="olga", reason="bob has a file now")
    driver.advance("1 hour")

    # The retry started a new check (its key the retry's): the failed one stays as it was.
    first_again, second = children_of(driver, 2, run_id)
    assert (first_again.id, first_again.status, second.status) == (first.id, "failed", "done")
    assert second.start_key == f"child:run-{run_id}/credit_check/retry-1"
    parent = driver.runner.get_run(run_id)
    assert (parent.status, parent.state["result"]) == ("done", {"card": "visa-4242", "score": 700})
    assert marks(driver, 2) == (f"+reserve +score(bob) +charge(run-{run_id}/charge) +ship")


def test_an_operator_cancels_the_child_and_the_parent_handles_it(any_engine: sa.Engine) -> None:
    driver = shop(any_engine)
    order = start(driver, "order", 1, "ann")
    driver.run_until_idle()
    (check,) = children_of(driver, 1, order)
    driver.runner.cancel(check.id, operator="olga", reason="asked twice")
    driver.run_until_idle()
    parent = driver.runner.get_run(order)
    assert (parent.status, parent.state["result"]) == ("done", {"decision": "referred"})
    refused = replay.Recording.from_dict(parent.state).steps[0].refused
    assert refused is not None and refused["message"] == (
        f"child run {check.id} was cancelled (cancelled by olga: asked twice)"
    )


def test_cancelling_the_parent_cancels_its_child_and_the_childs_own(any_engine: sa.Engine) -> None:
    workflows = ordering.workflows()

    @workflows.define(start=Manual())
    async def audit(w: Any, start: Mapping[str, Any]) -> Any:
        return await w.child("order", input=dict(start))  # order → credit_check

    driver = shop(any_engine, workflows)
    audit_id = start(driver, "audit", 1, "ann")
    driver.run_until_idle()
    (order,) = children_of(driver, 1, audit_id)
    (check,) = children_of(driver, 1, order.id)
    assert [driver.runner.get_run(r).status for r in (audit_id, order.id, check.id)] == [
        "waiting"
    ] * 3

    driver.runner.cancel(audit_id, operator="olga", reason="order withdrawn")
    driver.run_until_idle()
    runs = [driver.runner.get_run(r) for r in (audit_id, order.id, check.id)]
    assert [run.status for run in runs] == ["cancelled"] * 3
    assert runs[1].reason == (
        f"cancelled with its parent, run {audit_id} (cancelled by olga: order withdrawn)"
    )
    assert runs[2].reason == (
        f"cancelled with its parent, run {order.id} (cancelled with its parent, run {audit_id} "
        "(cancelled by olga: order withdrawn))"
    )
    assert sentences(driver, order.id)[-1] == (
        f"Cancelled with its parent, run {audit_id} (cancelled by olga: order withdrawn)"
    )
    # Nothing of theirs runs any more, and nothing is left due.
    driver.advance("2 hours")
    assert marks(driver, 1) == "+score(ann)"
    with driver.runner.engine.connect() as conn:
        assert ops.due_count(conn, now=driver.now + timedelta(days=365)) == 0


def test_a_child_on_another_record_and_what_a_child_step_refuses(any_engine: sa.Engine) -> None:
    workflows = ordering.workflows()

    @workflows.define(start=Manual())
    async def second_opinion(w: Any, start: Mapping[str, Any]) -> Any:
        refused = []
        for key, workflow, record in (
            ("nowhere", "credit_check", 99),
            ("unknown", "credit_chek", None),
        ):
            try:
                await w.child(workflow, input={"customer": "ann"}, key=key, record=record)
            except StepRefused as exc:
                refused.append((exc.step, str(exc)))
        other = await w.child("credit_check", input={"customer": "cat"}, record=3)
        return {"refused": refused, "other": other}

    driver = shop(any_engine, workflows)
    run_id = start(driver, "second_opinion", 1, "ann")
    driver.advance("1 hour")
    run = driver.runner.get_run(run_id)
    assert run.status == "done", run.reason
    assert run.state["result"] == {
        "refused": [
            ["nowhere", "there is no purchase_order 99"],
            [
                "unknown",
                "there is no workflow 'credit_chek' (workflows: credit_check, fulfil, order, "
                "second_opinion)",
            ],
        ],
        "other": {"customer": "cat", "score": 580},
    }
    (check,) = children_of(driver, 3, run_id)
    assert check.record_id == "3" and marks(driver, 3) == "+score(cat)"


def test_a_child_step_checks_what_it_is_given() -> None:
    from flowrunner.workflows import context

    w = context.Context(workflow="order", version=1, run_id=1, key="k", record_id="1")
    with pytest.raises(errors.BindingError, match="name the workflow"):
        w.child("")
    with pytest.raises(errors.BindingError, match="needs a name"):
        w.child("credit_check", key="")
    with pytest.raises(errors.BindingError, match="input is a mapping"):
        w.child("credit_check", input=[1])  # type: ignore[arg-type]
    asked = w.child("credit_check", input={"customer": "ann"}, key="check-1", record=3).ask
    assert (asked.name, asked.kind, asked.target) == ("check-1", "child", "credit_check")
    assert asked.options == {"input": {"customer": "ann"}, "record": "3"}


def test_a_failed_child_an_operator_retried_is_cancelled_with_its_parent(
    any_engine: sa.Engine,
) -> None:
    workflows = ordering.workflows()

    @workflows.define(start=Manual())
    async def patient(w: Any, start: Mapping[str, Any]) -> Any:
        try:
            await w.child("credit_check", input=dict(start))
        except StepRefused:
            await w.sleep("wait a week", "7 days")  # the parent goes on without it

    driver = shop(any_engine, workflows)
    run_id = start(driver, "patient", 2, "bob")
    driver.run_until_idle()
    (check,) = children_of(driver, 2, run_id)
    assert driver.runner.get_run(check.id).status == "failed"
    ordering.BUREAU["bob"] = 700
    driver.runner.retry(check.id, operator="olga")  # the check runs again, on its own
    driver.run_until_idle()
    assert driver.runner.get_run(check.id).status == "waiting"

    driver.runner.cancel(run_id, operator="olga", reason="bob left")
    driver.run_until_idle()
    check = driver.runner.get_run(check.id)
    assert (check.status, check.reason) == (
        "cancelled",
        f"cancelled with its parent, run {run_id} (cancelled by olga: bob left)",
    )
