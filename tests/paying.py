"""A shop paid by an outside processor, for the tests of signed callbacks (inbound).

An order waits for its payment (a ``waitFor`` step on ``order.paid``, three days at
most). The processor calls back ``POST …/inbound/payment_settled``, signed with the
secret in ``PAYMENT_CALLBACK_SECRET``; the callback runs ``settle_payment`` as the
``payment-processor`` principal (a payment row, the order marked paid) and emits
``order.paid``, which answers the waiting flow: the order then goes to shipping.

    runner = tests.paying.runner("sqlite:///shop.db")   # flowrunner console --app …
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from flowrunner import (
    CommandContext,
    CommandRefused,
    FlowBinding,
    FlowRunner,
    Hmac,
    Inbound,
    flow_runner,
    tables,
)
from flowrunner.store import migrate

# (Imported as tests.paying by the command line's --app too: only the package's own
# modules here, no helper of the tests' folder.)

SECRET_ENV = "PAYMENT_CALLBACK_SECRET"
SECRET = "whsec-test-7f3a9c0e5b"
SIGNATURE = "x-processor-signature"
TIMESTAMP = "x-processor-timestamp"

metadata = sa.MetaData()
shop_order = sa.Table(
    "shop_order",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("number", sa.String(32), nullable=False),
    sa.Column("amount", sa.Numeric(12, 2), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, server_default="open"),
)
# The command's own writes: one row per payment settled.
payment = sa.Table(
    "shop_payment",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Integer, nullable=False),
    sa.Column("amount", sa.Numeric(12, 2), nullable=False),
    sa.Column("receipt", sa.String(300), nullable=False),
    sa.Column("principal", sa.String(64), nullable=False),
)
BINDING = FlowBinding(
    resource="shop_order",
    flows_table="shop_flow",
    steps_table="shop_flow_step",
    events={"order.paid": "order"},
    set_columns=["status"],
)
tables.for_binding(metadata, BINDING)

VERIFY = Hmac(
    secret_env=SECRET_ENV,
    header=SIGNATURE,
    encoding="hex",
    timestamp_header=TIMESTAMP,
    window="5 minutes",
    signed="{timestamp}.{body}",
)
PAYMENT_SETTLED = Inbound(
    name="payment_settled",
    verify=VERIFY,
    run_as="payment-processor",
    command="settle_payment",
    key=lambda body: body["id"],
    input=lambda body: {"order": body["order"], "amount": body["amount"]},
    emit="order.paid",
    payload=lambda body: {"order": body["order"], "amount": body["amount"]},
)

# Who may run what: the processor settles payments, and nothing else.
GRANTS = {
    "payment-processor": {"settle_payment", "note_refund"},
    "bookkeeper": {"count_orders"},
    "automation": set[str](),
}

FLOW = {"name": "Await payment", "start": "created"}
STEPS = [
    {
        "position": 1,
        "kind": "waitFor",
        "title": "Paid?",
        "event": "order.paid",
        "duration": "3 days",
    },
    {"position": 2, "kind": "branch", "title": "Was it paid?", "condition": "status = paid"},
    {"position": 3, "kind": "set", "title": "Ship it", "field": "status", "value": "shipping"},
]


def settle_payment(ctx: CommandContext) -> Mapping[str, Any]:
    """Record the payment and mark the order paid, in the callback's own transaction.

    What it cannot settle it refuses: the processor is told so (409) and not asked again.
    """
    try:
        amount = Decimal(str(ctx.inputs["amount"]))
        order_id = int(str(ctx.inputs["order"]))
    except (ArithmeticError, ValueError):
        raise CommandRefused("the payment names no order or amount") from None
    if not amount.is_finite() or not 0 < amount < 10**10:
        raise CommandRefused("a payment of nothing settles nothing")
    if not 0 < order_id < 2**31:  # what the order's id column holds
        raise CommandRefused("there is no such order")
    ctx.conn.execute(
        sa.insert(payment).values(
            order_id=order_id, amount=amount, receipt=ctx.idempotency_key, principal=ctx.principal
        )
    )
    ctx.conn.execute(sa.update(shop_order).where(shop_order.c.id == order_id).values(status="paid"))
    return {"settled": amount}


COMMANDS = {"settle_payment": settle_payment}


def authorize(principal: str, command: str) -> bool:
    return command in GRANTS.get(principal, set())


def mount(engine: sa.Engine, **options: Any) -> FlowRunner:
    """The shop's tables and the engine's created, a runner with the callback, and the flow."""
    metadata.create_all(engine)
    migrate.upgrade(engine)
    options.setdefault("commands", COMMANDS)
    options.setdefault("inbound", [PAYMENT_SETTLED])
    options.setdefault("authorize", authorize)
    shop = flow_runner(BINDING, engine, **options)
    with engine.begin() as conn:
        if _has_flow(shop, conn):
            return shop
        flow_id = shop.save_flow(conn, FLOW)
        for step in STEPS:
            shop.save_step(conn, {"flow_id": flow_id, **step})
    return shop


def _has_flow(shop: FlowRunner, conn: sa.Connection) -> bool:
    found = conn.execute(sa.select(sa.func.count()).select_from(shop.tables.flows))
    return bool(found.scalar_one())


def runner(url: str | None = None) -> FlowRunner:
    """The shop on ``url`` (for ``--app tests.paying:runner``)."""
    return mount(sa.create_engine(url or "sqlite:///shop.db"))


def body(delivery: str, order: int, amount: str = "120.00", **more: Any) -> bytes:
    """A processor's callback body, as it sends it: compact JSON."""
    fields = {"id": delivery, "order": order, "amount": amount, **more}
    return json.dumps(fields, separators=(",", ":")).encode()


def signed(content: bytes, at: datetime, secret: str = SECRET) -> dict[str, str]:
    """The headers the processor sends with ``content`` signed at ``at``."""
    return {**VERIFY.sign(secret, content, at), "content-type": "application/json"}


def counts(engine: sa.Engine) -> dict[str, int]:
    """What callbacks may write: payments, orders paid, events, receipts."""
    from flowrunner.store import engine_tables

    with engine.connect() as conn:

        def count(table: sa.Table, *where: Any) -> int:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(table).where(*where)
                ).scalar_one()
            )

        return {
            "payments": count(payment),
            "paid": count(shop_order, shop_order.c.status != "open"),
            "events": count(engine_tables.events),
            "receipts": count(
                engine_tables.idempotency, engine_tables.idempotency.c.key.like("inbound:%")
            ),
        }


class Shop:
    """The shop on a database, its clock held by a test driver, its callbacks served under
    ``/api/inbound`` of a Starlette app and posted to through Starlette's test client."""

    def __init__(self, engine: sa.Engine, start: datetime, **options: Any) -> None:
        from starlette.applications import Starlette
        from starlette.routing import Mount
        from starlette.testclient import TestClient

        from flowrunner.testing import FlowDriver

        self.engine = engine
        self.runner = mount(engine, **options)
        self.driver = FlowDriver(self.runner, start=start)
        app = Starlette(routes=[Mount("/api/inbound", app=self.runner.inbound_app())])
        self.client = TestClient(app, base_url="https://shop.example")

    def order(self, order_id: int, amount: str = "120.00") -> None:
        """An order is placed: its flow starts and waits for the payment."""
        self.driver.create({"id": order_id, "number": f"PO-{order_id}", "amount": Decimal(amount)})

    def post(
        self,
        content: bytes,
        *,
        at: datetime | None = None,
        secret: str = SECRET,
        headers: Mapping[str, str] | None = None,
        name: str = "payment_settled",
    ) -> int:
        """The processor posts ``content``, signed at ``at`` (default: now); the status.

        The answer is a status alone: its body is checked empty here.
        """
        sent = signed(content, at or self.driver.now, secret) if headers is None else headers
        answer = self.client.post(f"/api/inbound/{name}", content=content, headers=dict(sent))
        assert answer.content == b""
        return answer.status_code

    def counts(self) -> dict[str, int]:
        return counts(self.engine)

    def status(self, order_id: int) -> str:
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(shop_order.c.status).where(shop_order.c.id == order_id))
            return str(found.scalar_one())


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` served by a real uvicorn on 127.0.0.1 until the block ends: its base URL,
    once it listens (uvicorn binds in its own thread). It stops as soon as the block ends
    (``_stopping_server``), not at uvicorn's next look, a tenth of a second later."""
    from serving import free_port

    port = free_port()
    server = _stopping_server(app, port)
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    try:
        listening = threading.Event()
        while not server.started:
            if not serving.is_alive():
                raise RuntimeError("uvicorn stopped before it listened")
            listening.wait(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        serving.join(timeout=30)


def _stopping_server(app: Any, port: int) -> Any:
    """A uvicorn server for ``app`` on ``port`` whose ``stop()`` ends it at once."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    return _stopping_class()(config)


@functools.cache
def _stopping_class() -> Any:
    """uvicorn's server, stopped at once (the class made once a process). uvicorn's own
    looks for ``should_exit`` every tenth of a second, and then waits another tenth for
    the connections it asked to close; a test's server stops after the test has read
    every answer, so it closes its listening sockets and connections, ends the
    application's lifespan, and is done."""
    import uvicorn

    class Stopping(uvicorn.Server):
        def __init__(self, config: uvicorn.Config) -> None:
            super().__init__(config)
            self._stop = asyncio.Event()
            self._loop: asyncio.AbstractEventLoop | None = None

        def stop(self) -> None:
            self.should_exit = True
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)

        async def main_loop(self) -> None:
            self._loop = asyncio.get_running_loop()
            while not self.should_exit:  # (a stop asked before the loop was known)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), 0.1)

        async def shutdown(self, sockets: Any = None) -> None:
            for listening in self.servers:
                listening.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            for listening in self.servers:
                await listening.wait_closed()
            await self.lifespan.shutdown()

    return Stopping


def post(url: str, content: bytes, headers: Mapping[str, str]) -> int:
    """POST ``content`` over HTTP; the status (the answer's body is checked empty)."""
    request = urllib.request.Request(url, data=content, headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert answer.read() == b""
            status: int = answer.status
            return status
    except urllib.error.HTTPError as refused:
        assert refused.read() == b""
        return refused.code
