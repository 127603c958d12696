"""A worker process for tests/test_worker_faults.py and tests/test_worker_takeover.py.

    python faulty_worker.py        (settings in the environment, below)

It serves the purchasing app's runner with ``Worker.serve`` — the loop ``flowrunner
worker`` runs — until SIGTERM, then prints its counts as ``name=value`` lines. Its send
command writes a row of its own (``approval_reminder``, one per call that commits),
may take a while, and may block for good, so that a test can kill the process while it
holds its leases.

- ``FAULT_DB``: the database URL; ``FAULT_OPTIONS``: libpq options (the test's schema);
- ``FAULT_NAME``: the ``application_name`` of its PostgreSQL connections, so that a test
  can find (and cut) them;
- ``FAULT_LEASE``, ``FAULT_POLL`` (seconds), ``FAULT_BATCH``: the worker's settings;
- ``FAULT_PAUSE``: seconds the send command takes;
- ``FAULT_BLOCK``: a folder; the send command writes ``started-<order>`` there and then
  waits for ever (the test kills the process).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

from running import app

from flowrunner.engine import commands, worker
from flowrunner.runner import flow_runner

PO = app("purchase_orders")


def send(pause: float, block: Path | None) -> commands.Command:
    def send_purchase_order(ctx: commands.CommandContext) -> Mapping[str, Any] | None:
        order = ctx.record["id"]
        ctx.conn.execute(
            sa.insert(PO.approval_reminder).values(order_id=order, run_id=ctx.run_id, reminder=1)
        )
        if block is not None:
            (block / f"started-{order}").touch()
            threading.Event().wait()  # until the test kills the process
        time.sleep(pause)
        ctx.conn.execute(
            sa.update(PO.purchase_order)
            .where(PO.purchase_order.c.id == order)
            .values(status="sent")
        )
        return None

    return send_purchase_order


def main() -> None:
    env = os.environ
    url = env["FAULT_DB"]
    connect: dict[str, Any] = {}
    if url.startswith("postgresql"):
        connect["application_name"] = env.get("FAULT_NAME", "flowrunner-test-worker")
        if env.get("FAULT_OPTIONS"):
            connect["options"] = env["FAULT_OPTIONS"]
    engine = sa.create_engine(url, connect_args=connect)
    block = Path(env["FAULT_BLOCK"]) if env.get("FAULT_BLOCK") else None
    command = send(float(env.get("FAULT_PAUSE", "0")), block)
    runner = flow_runner(
        PO.binding, engine, commands={**PO.COMMANDS, "send_purchase_order": command}
    )
    serving = worker.Worker(
        runner,
        lease_ttl=timedelta(seconds=float(env.get("FAULT_LEASE", "30"))),
        batch=int(env.get("FAULT_BATCH", "1")),
    )
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    print("serving", flush=True)
    serving.serve(stop, poll=float(env.get("FAULT_POLL", "0.1")))
    for name, value in asdict(serving.stats).items():
        print(f"{name}={value}", flush=True)


if __name__ == "__main__":
    main()
