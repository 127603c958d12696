"""An operator's retry of a flow's run that failed on a refused command: once the data is
fixed, the step's command is called again — under a new idempotency key, so an outside
service that keeps its answers by key answers anew — and the flow goes on. A step that
failed after all its attempts keeps its key. On SQLite and PostgreSQL, through the
purchasing app and the real worker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from running import app, decide, mount, sentences

from flowrunner import RetryPolicy, errors, testing
from flowrunner.engine import commands

PO = app("purchase_orders")

APPROVE_AND_SEND = """
- name: Approve and send
  start: created
  steps:
    - {position: 1, kind: approval, title: Manager approval, approver: manager@example.com}
    - {position: 2, kind: branch, title: Only if approved, condition: status = approved}
    - {position: 3, kind: send, title: Send to supplier}
"""


def order(n: int, **more: Any) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 25000, **more}


def purchasing(
    engine: sa.Engine, **options: Any
) -> tuple[testing.FlowDriver, list[tuple[str, int]]]:
    """The purchasing app, whose approvals are asked only of an order with a region (the
    approver is found by it); each approval asked: its idempotency key and attempt."""
    asked: list[tuple[str, int]] = []

    def request_approval(ctx: commands.CommandContext) -> Mapping[str, Any]:
        asked.append((ctx.idempotency_key, ctx.attempt))
        if ctx.record["region"] is None:
            raise errors.CommandRefused(f"{ctx.record['number']} names no region: nobody to ask")
        answer: Mapping[str, Any] = PO.request_approval(ctx)
        return answer

    driver = mount(
        engine,
        "purchase_orders",
        flows=APPROVE_AND_SEND,
        commands={"request_approval": request_approval},
        **options,
    )
    return driver, asked


def requests(engine: sa.Engine) -> list[tuple[str, str | None, bool]]:
    """The approval requests: the key each was asked under, its decision, withdrawn."""
    table = PO.approval_request
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(table.c.idempotency_key, table.c.decision, table.c.withdrawn_at).order_by(
                table.c.id
            )
        )
        return [(key, decision, withdrawn is not None) for key, decision, withdrawn in rows]


def test_an_approval_refused_and_retried_after_the_order_is_fixed_asks_again_and_goes_on(
    any_engine: sa.Engine,
) -> None:
    driver, asked = purchasing(any_engine)
    driver.create(order(1))
    [failed] = driver.runs(1)
    assert (failed.status, failed.reason) == (
        "failed",
        "step 'Manager approval' (approval, position 1) failed: the command refused: "
        "PO-1 names no region: nobody to ask",
    )

    driver.update(1, region="EU")  # the buyer fills in the region
    driver.runner.retry(failed.id, operator="olga", reason="region set")
    driver.run_until_idle()
    key = asked[0][0]
    assert re.fullmatch(rf"run-{failed.id}/step-[0-9]+/pass-1", key)
    assert asked == [(key, 1), (f"{key}/retry-1", 1)]
    assert requests(any_engine) == [(f"{key}/retry-1", None, False)]
    assert driver.runs(1)[0].status == "waiting"

    decide(driver, 1, "manager@example.com")
    [run] = driver.runs(1)
    record = driver.record(1)
    assert run.status == "done" and record is not None and record["status"] == "sent"
    said = sentences(driver, run.id)
    refused = said.index(
        "Manager approval: Manager approval failed: the command refused: PO-1 names no region: "
        "nobody to ask"
    )
    assert said[refused + 2 : refused + 5] == [
        "run: olga retried the run: region set",
        "Manager approval: Started Manager approval",
        "Manager approval: Asked for Manager approval",
    ]


def test_an_approval_retried_then_cancelled_withdraws_what_it_asked_under_its_new_key(
    any_engine: sa.Engine,
) -> None:
    driver, asked = purchasing(any_engine)
    driver.create(order(1))
    [failed] = driver.runs(1)
    driver.update(1, region="EU")
    driver.runner.retry(failed.id, operator="olga")
    driver.run_until_idle()
    driver.runner.cancel(failed.id, operator="olga", reason="order withdrawn")
    driver.run_until_idle()
    retried_key = asked[-1][0]
    assert retried_key == f"{asked[0][0]}/retry-1"
    assert requests(any_engine) == [(retried_key, None, True)]
    assert (
        sentences(driver, failed.id)[-1]
        == "Manager approval: Withdrew the Manager approval requests"
    )


def test_a_command_that_failed_on_every_attempt_is_retried_under_its_own_key(
    any_engine: sa.Engine,
) -> None:
    keys: list[str] = []

    def send(ctx: commands.CommandContext) -> None:
        keys.append(ctx.idempotency_key)
        if len(keys) <= 2:  # the answer may have been lost: the key must stay
            raise TimeoutError("the supplier did not answer")

    driver = mount(
        any_engine,
        "purchase_orders",
        flows="""
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
""",
        commands={"send_purchase_order": send},
        retry=RetryPolicy(max_attempts=2, base=timedelta(seconds=10)),
    )
    driver.create(order(1))
    driver.advance("10 seconds")
    [failed] = driver.runs(1)
    assert failed.status == "failed"
    driver.runner.retry(failed.id, operator="olga")
    driver.run_until_idle()
    assert driver.runs(1)[0].status == "done"
    assert len(keys) == 3 and len(set(keys)) == 1
