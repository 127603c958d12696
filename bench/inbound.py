"""Signed callbacks: how long one takes to be judged and answered, on SQLite and PostgreSQL.

    python bench/inbound.py [--callbacks 300] [--postgres URL]

A shop's orders wait for their payment (``waitFor order.paid``); each callback is a
processor's signed ``payment_settled`` whose command writes a payment row and whose
event answers the waiting run. Timed through ``runner.receive`` (the handling without
HTTP): a new delivery applied (the receipt, the command, the event: one transaction), the
same bytes again (replayed from the receipt), and a forged signature (refused before
the body is read). The script prints each case's median and 95th percentile in ms.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowrunner import CommandContext, FlowBinding, FlowRunner, Hmac, Inbound, flow_runner, tables
from flowrunner.runner import utc_now
from flowrunner.store import migrate

SECRET_ENV = "BENCH_CALLBACK_SECRET"
SECRET = "bench-secret"

metadata = sa.MetaData()
order = sa.Table(
    "bench_order",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="open"),
)
payment = sa.Table(
    "bench_payment",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Integer, nullable=False),
    sa.Column("amount", sa.Numeric(12, 2), nullable=False),
)
BINDING = FlowBinding(
    resource="bench_order",
    flows_table="bench_flow",
    steps_table="bench_flow_step",
    events={"order.paid": "order"},
    set_columns=["status"],
)
tables.for_binding(metadata, BINDING)
VERIFY = Hmac(secret_env=SECRET_ENV, header="x-signature", timestamp_header="x-timestamp")


def settle(ctx: CommandContext) -> None:
    ctx.conn.execute(
        sa.insert(payment).values(
            order_id=ctx.inputs["order"], amount=Decimal(str(ctx.inputs["amount"]))
        )
    )


PAID = Inbound(
    name="paid",
    verify=VERIFY,
    run_as="processor",
    command="settle",
    key=lambda body: body["id"],
    input=lambda body: {"order": body["order"], "amount": body["amount"]},
    emit="order.paid",
    payload=lambda body: {"order": body["order"]},
)


def shop(engine: sa.Engine, orders: int) -> FlowRunner:
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(BINDING, engine, commands={"settle": settle}, inbound=[PAID])
    with engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Await payment", "start": "created"})
        runner.save_step(
            conn, {"flow_id": flow, "position": 1, "kind": "waitFor", "event": "order.paid"}
        )
        for number in range(1, orders + 1):
            conn.execute(sa.insert(order).values(id=number))
            runner.record_created(conn, {"id": number, "status": "open"})
    return runner


def timed(calls: list[Callable[[], int]], expected: int) -> list[float]:
    took = []
    for call in calls:
        began = time.perf_counter()
        status = call()
        took.append((time.perf_counter() - began) * 1000)
        assert status == expected, status
    return took


def measure(engine: sa.Engine, count: int) -> dict[str, list[float]]:
    runner = shop(engine, count)
    bodies = [
        json.dumps({"id": f"evt_{n}", "order": n, "amount": "12.50"}).encode()
        for n in range(1, count + 1)
    ]
    signed = [(VERIFY.sign(SECRET, b, utc_now()), b) for b in bodies]
    forged = [({**h, "x-signature": "00" * 32}, b) for h, b in signed]

    def call(headers: dict[str, str], content: bytes) -> Callable[[], int]:
        return lambda: runner.receive("paid", headers, content).status

    return {
        "applied": timed([call(h, b) for h, b in signed], 204),
        "replayed": timed([call(h, b) for h, b in signed], 204),
        "forged": timed([call(h, b) for h, b in forged], 401),
    }


def report(database: str, results: dict[str, list[float]]) -> None:
    for case, took in results.items():
        p95 = statistics.quantiles(took, n=20)[-1]
        print(f"{database:10} {case:8} median {statistics.median(took):6.2f} ms  p95 {p95:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--callbacks", type=int, default=300)
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    os.environ[SECRET_ENV] = SECRET
    logging.getLogger("flowrunner.inbound").setLevel(logging.ERROR)  # a line per callback
    with tempfile.TemporaryDirectory() as folder:
        engine = sa.create_engine(f"sqlite:///{folder}/bench.db")
        report("sqlite", measure(engine, args.callbacks))
        engine.dispose()
    if args.postgres:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(args.postgres)
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        engine = sa.create_engine(
            args.postgres, connect_args={"options": f"-csearch_path={schema}"}
        )
        try:
            report("postgresql", measure(engine, args.callbacks))
        finally:
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


if __name__ == "__main__":
    main()
