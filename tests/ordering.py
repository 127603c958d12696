"""Orders checked by a credit-check child workflow, and fulfilled — reserve, check,
charge, ship — on the purchase-order app: for the tests of children and forks
(in-process, the crash tests, and ``flowrunner runs fork``).

``order`` starts ``credit_check`` as its child, waits for it, and decides with its
score; a customer without a credit file makes the child fail, and the order is referred
instead. ``fulfil`` lets a failed child or a refused charge out: the run fails there.
Each command appends a mark to the order's ``approver`` column, so a test reads what
ran, and how often, from the record.

    runner = tests.ordering.runner("sqlite:///orders.db")   # flowrunner runs … --app
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import migrated
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from flowrunner import CommandContext, CommandRefused, FlowRunner, StepRefused, flow_runner
from flowrunner.workflows import Manual, Workflows

BUREAU: dict[str, int] = {}
"""The credit bureau's files: a score by customer."""
CARDS: dict[str, str] = {}
"""The payment processor's cards on file, by customer."""


def _mark(ctx: CommandContext, mark: str) -> None:
    table = po.purchase_order
    ctx.conn.execute(
        sa.update(table)
        .where(table.c.id == int(str(ctx.record["id"])))
        .values(approver=sa.func.coalesce(table.c.approver, "") + mark)
    )


def score_customer(ctx: CommandContext) -> dict[str, Any]:
    customer = str(ctx.inputs["customer"])
    if customer not in BUREAU:
        raise CommandRefused(f"no credit file for {customer}")
    _mark(ctx, f" +score({customer})")
    return {"score": BUREAU[customer]}


def decide_order(ctx: CommandContext) -> dict[str, Any]:
    decision = str(ctx.inputs["decision"])
    _mark(ctx, f" +{decision}")
    table = po.purchase_order
    ctx.conn.execute(
        sa.update(table).where(table.c.id == int(str(ctx.record["id"]))).values(status=decision)
    )
    return {"decision": decision}


def reserve_stock(ctx: CommandContext) -> None:
    _mark(ctx, " +reserve")


def charge_card(ctx: CommandContext) -> dict[str, Any]:
    customer = str(ctx.record["requester_id"])
    card = CARDS.get(customer)
    if card is None:
        raise CommandRefused(f"no card on file for {customer}")
    _mark(ctx, f" +charge({ctx.idempotency_key})")
    return {"card": card}


def ship_order(ctx: CommandContext) -> None:
    _mark(ctx, " +ship")


COMMANDS = {
    "score_customer": score_customer,
    "decide_order": decide_order,
    "reserve_stock": reserve_stock,
    "charge_card": charge_card,
    "ship_order": ship_order,
}


def workflows() -> Workflows:
    """``credit_check``, ``order`` (its parent) and ``fulfil``."""
    defined = Workflows()

    @defined.define(start=Manual(), run_as="credit-desk")
    async def credit_check(w: Any, start: Mapping[str, Any]) -> dict[str, Any]:
        scored = await w.run("score", "score_customer", input={"customer": start["customer"]})
        await w.sleep("review", "1 hour")  # an analyst looks: the parent waits meanwhile
        return {"customer": start["customer"], "score": scored["score"]}

    @defined.define(start=Manual())
    async def order(w: Any, start: Mapping[str, Any]) -> Any:
        try:
            credit = await w.child("credit_check", input={"customer": start["customer"]})
        except StepRefused:
            return await w.run("refer", "decide_order", input={"decision": "referred"})
        decision = "approved" if credit["score"] >= 650 else "declined"
        return await w.run("decide", "decide_order", input={"decision": decision})

    @defined.define(start=Manual())
    async def fulfil(w: Any, start: Mapping[str, Any]) -> Any:
        await w.run("reserve", "reserve_stock")
        credit = await w.child("credit_check", input={"customer": start["customer"]})
        charged = await w.run("charge", "charge_card", input={"score": credit["score"]})
        await w.run("ship", "ship_order")
        return {"card": charged["card"], "score": credit["score"]}

    return defined


def purchase_order(n: int, customer: str) -> dict[str, Any]:
    """Order ``n`` of ``customer``."""
    return {"id": n, "number": f"PO-{n}", "requester_id": customer, "amount": 250}


def runner(url: str | None = None) -> FlowRunner:
    """The purchase-order app with these workflows on ``url``, its tables made."""
    engine = sa.create_engine(url or "sqlite:///orders.db")
    po.metadata.create_all(engine)
    migrated.upgrade(engine)
    return flow_runner(
        po.binding, engine, commands={**po.COMMANDS, **COMMANDS}, workflows=workflows()
    )
