"""An operator's retry of a code workflow's run that failed on a refused step: once the
data is fixed, the step runs again — with a new idempotency key, so a payment processor
that keeps its answers by key does not answer with its refusal — and the run goes on.
On SQLite and PostgreSQL, through the test driver's clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from provider import Provider, serving
from running import app, mount

from flowrunner import RetryPolicy, errors, testing
from flowrunner.engine import commands
from flowrunner.workflows import Connection, Manual, Workflows, replay

PO = app("purchase_orders")
ORDER = {"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 250}


@dataclass
class Processor:
    """A payment processor that keeps each answer by idempotency key, as real ones do:
    a key sent again gets its first answer back — a decline too."""

    cards: dict[str, str] = field(default_factory=dict)
    """The card on file, by customer."""
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    """Every key a charge was asked with, in order."""
    charged: list[tuple[str, str, int]] = field(default_factory=list)
    """Each charge made: its key, the card, the amount."""

    def charge(self, key: str, customer: str, amount: int) -> dict[str, Any]:
        self.keys.append(key)
        if key not in self.answers:
            card = self.cards.get(customer)
            if card is None:
                self.answers[key] = {"declined": f"no card on file for {customer}"}
            else:
                self.charged.append((key, card, amount))
                self.answers[key] = {"charged": amount, "card": card}
        return self.answers[key]


def paying(
    engine: sa.Engine,
    workflows: Workflows,
    extra: Mapping[str, commands.Command] | None = None,
    **options: Any,
) -> tuple[testing.FlowDriver, Processor, list[int]]:
    """The purchasing app with ``workflows`` (and ``extra`` commands, the runner's
    ``options``), no flows, and order 1; its processor; the attempt of each charge."""
    processor = Processor()
    attempts: list[int] = []

    def charge_card(ctx: commands.CommandContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        answer = processor.charge(
            ctx.idempotency_key,
            str(ctx.record["requester_id"]),
            int(Decimal(str(ctx.record["amount"]))),
        )
        if "declined" in answer:
            raise errors.CommandRefused(answer["declined"])
        ctx.conn.execute(
            sa.update(PO.purchase_order)
            .where(PO.purchase_order.c.id == ctx.record["id"])
            .values(status="paid")
        )
        return answer

    driver = mount(
        engine,
        "purchase_orders",
        flows="[]",
        commands={"charge_card": charge_card, **(extra or {})},
        workflows=workflows,
        **options,
    )
    driver.create(ORDER)
    return driver, processor, attempts


def sentences(driver: testing.FlowDriver, run_id: int) -> list[str]:
    return [line.sentence for line in driver.history(run_id)]


def test_a_charge_refused_for_a_missing_card_retried_after_the_card_is_added_charges_once(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=Manual())
    async def pay(w: Any, start: Any) -> Any:
        charged = await w.run("charge", "charge_card")
        await w.run("send", "send_purchase_order")
        return charged

    driver, processor, attempts = paying(any_engine, workflows)
    run_id = driver.runner.start_workflow("pay", operator="olga", record=1)
    driver.run_until_idle()
    failed = driver.runner.get_run(run_id)
    assert (failed.status, failed.reason) == (
        "failed",
        "step 'charge' was refused: no card on file for ann",
    )
    assert processor.charged == []

    processor.cards["ann"] = "visa-4242"  # the customer adds a card
    driver.runner.retry(run_id, operator="olga", reason="card added")
    driver.run_until_idle()

    run = driver.runner.get_run(run_id)
    assert (run.status, run.state["result"]) == ("done", {"charged": 250, "card": "visa-4242"})
    assert processor.keys == [f"run-{run_id}/charge", f"run-{run_id}/charge/retry-1"]
    assert processor.charged == [(f"run-{run_id}/charge/retry-1", "visa-4242", 250)]
    assert attempts == [1, 1]  # the retried step starts again with all its attempts
    record = driver.record(1)
    assert record is not None and record["status"] == "sent"
    kept = replay.Recording.from_dict(run.state)  # the refusal set aside, kept
    assert [step.name for step in kept.steps] == ["charge", "send"]
    assert [(step.name, step.refused) for step in kept.superseded] == [
        ("charge", {"message": "no card on file for ann", "code": "command_refused"})
    ]
    assert sentences(driver, run_id) == [
        "Started the run",
        "Charge card refused (charge): no card on file for ann",
        "Failed: step 'charge' was refused: no card on file for ann",
        "olga retried the run: card added",
        "Ran charge card (charge)",
        "Ran send purchase order (send)",
        "Run done",
    ]
    with pytest.raises(errors.OperatorError, match="has not failed"):
        driver.runner.retry(run_id, operator="olga")


def test_each_retry_of_a_step_refused_again_asks_with_a_key_of_its_own(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    @workflows.define(start=Manual())
    async def pay(w: Any, start: Any) -> Any:
        return await w.run("charge", "charge_card")

    driver, processor, _ = paying(any_engine, workflows)
    run_id = driver.runner.start_workflow("pay", operator="olga", record=1)
    driver.run_until_idle()
    driver.runner.retry(run_id, operator="olga", reason="asked the customer")
    driver.run_until_idle()  # no card yet: refused again
    assert driver.runner.get_run(run_id).status == "failed"
    processor.cards["ann"] = "visa-4242"
    driver.runner.retry(run_id, operator="olga", reason="card added")
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).status == "done"
    assert processor.keys == [
        f"run-{run_id}/charge",
        f"run-{run_id}/charge/retry-1",
        f"run-{run_id}/charge/retry-2",
    ]
    assert len(processor.charged) == 1


def test_a_refusal_the_workflow_turns_into_its_own_error_is_retried_the_same_way(
    any_engine: sa.Engine,
) -> None:
    workflows = Workflows()

    class PaymentDeclined(Exception):
        pass

    @workflows.define(start=Manual())
    async def pay(w: Any, start: Any) -> Any:
        try:
            return await w.run("charge", "charge_card")
        except errors.StepRefused as refused:
            raise PaymentDeclined(str(refused)) from None

    driver, processor, _ = paying(any_engine, workflows)
    run_id = driver.runner.start_workflow("pay", operator="olga", record=1)
    driver.run_until_idle()
    failed = driver.runner.get_run(run_id)
    assert failed.reason == "the workflow raised PaymentDeclined: no card on file for ann"
    processor.cards["ann"] = "visa-4242"
    driver.runner.retry(run_id, operator="olga")
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).status == "done"
    assert [key for key, _, _ in processor.charged] == [f"run-{run_id}/charge/retry-1"]


def test_a_refusal_the_workflow_handled_stays_when_a_later_step_is_retried(
    any_engine: sa.Engine,
) -> None:
    tries: list[int] = []

    def tell_finance(ctx: commands.CommandContext) -> None:
        tries.append(ctx.attempt)
        if len(tries) <= 2:  # both attempts of the runner's policy
            raise ConnectionError("the finance desk is down")

    workflows = Workflows()

    @workflows.define(start=Manual())
    async def pay(w: Any, start: Any) -> Any:
        try:
            await w.run("charge", "charge_card")
        except errors.StepRefused:
            await w.run("tell finance", "tell_finance")
            return "told"
        return "charged"

    twice = RetryPolicy(max_attempts=2, base=timedelta(seconds=10))
    driver, processor, _ = paying(
        any_engine, workflows, {"tell_finance": tell_finance}, retry=twice
    )
    run_id = driver.runner.start_workflow("pay", operator="olga", record=1)
    driver.run_until_idle()
    driver.advance("10 seconds")
    assert driver.runner.get_run(run_id).reason == (
        "step 'tell finance' failed after 2 attempts: ConnectionError: the finance desk is down"
    )
    processor.cards["ann"] = "visa-4242"  # too late: the workflow went another way
    driver.runner.retry(run_id, operator="olga")
    driver.run_until_idle()
    run = driver.runner.get_run(run_id)
    assert (run.status, run.state["result"]) == ("done", "told")
    assert processor.keys == [f"run-{run_id}/charge"]  # the handled refusal is not asked again


@pytest.fixture
def provider() -> Iterator[Provider]:
    with serving() as service:
        yield service


def test_a_refused_call_retried_is_sent_with_a_new_idempotency_key(
    any_engine: sa.Engine, provider: Provider
) -> None:
    workflows = Workflows(connections={"checks": Connection(provider.url, timeout=0.5)})

    @workflows.define(start=Manual())
    async def check(w: Any, start: Any) -> Any:
        return await w.call("request-check", "checks", {"method": "POST", "path": "/checks"})

    provider.failures["/checks"] = [422]  # the provider refuses it until the data is fixed
    driver = mount(any_engine, "purchase_orders", flows="[]", workflows=workflows)
    driver.create(ORDER)
    run_id = driver.runner.start_workflow("check", operator="olga", record=1)
    driver.run_until_idle()
    assert driver.runner.get_run(run_id).reason == (
        'step \'request-check\' was refused: POST /checks answered 422: {"error": "not now"}'
    )
    driver.runner.retry(run_id, operator="olga")
    driver.run_until_idle()
    run = driver.runner.get_run(run_id)
    assert (run.status, run.state["result"]) == ("done", {"id": "chk-1"})
    assert provider.sent_keys() == [
        f"run-{run_id}/request-check",
        f"run-{run_id}/request-check/retry-1",
    ]
