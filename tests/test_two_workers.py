"""Two worker processes on one PostgreSQL database, 1,000 purchase-order runs, events
arriving concurrently: no step is processed twice and every run finishes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from running import app, mount

from flowrunner.runner import utc_now
from flowrunner.store import engine_tables

ORDERS = 1000
HERE = Path(__file__).parent
PO = app("purchase_orders")

FLOWS = """
- name: Approve and send
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: "boss"}
    - {position: 2, kind: set, title: Approved, field: status, value: approved}
    - {position: 3, kind: notify, title: Tell, audience: requester, message: approved}
    - {position: 4, kind: send, title: Send}
"""


@pytest.mark.slow
def test_two_worker_processes_share_the_work_and_do_each_step_once(
    pg_engine: sa.Engine,
) -> None:
    driver = mount(pg_engine, "purchase_orders", flows=FLOWS)
    runner = driver.runner
    runner.clock = utc_now  # the worker processes use the real clock too
    with pg_engine.begin() as conn:
        for n in range(1, ORDERS + 1):
            order = {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 20000}
            conn.execute(sa.insert(PO.purchase_order).values(**order))
            runner.record_created(conn, order)

    env = {
        **os.environ,
        "SERVE_DB": pg_engine.url.render_as_string(hide_password=False),
        "SERVE_OPTIONS": _options(pg_engine),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "serving_worker.py"), "purchase_orders", "240"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    # Answer each approval as soon as it was asked, while the workers run.
    answered: set[int] = set()
    deadline = time.monotonic() + 240
    requests = PO.approval_request
    while len(answered) < ORDERS and time.monotonic() < deadline:
        with pg_engine.connect() as conn:
            asked = {r for (r,) in conn.execute(sa.select(requests.c.order_id))}
        fresh = sorted(asked - answered)
        for order_id in fresh:
            with pg_engine.begin() as conn:
                runner.emit(
                    conn,
                    "po.decided",
                    {"order": order_id, "decision": "approved", "approver": "boss"},
                )
            answered.add(order_id)
        if not fresh:
            time.sleep(0.05)  # the workers have not asked anyone new yet
    outputs = [w.communicate(timeout=300) for w in workers]
    for worker_process, (_out, err) in zip(workers, outputs, strict=True):
        assert worker_process.returncode == 0, err
    advanced = [int(out.split("advanced=")[1].split()[0]) for out, _ in outputs]
    assert all(n > 0 for n in advanced), f"one worker did nothing: {advanced}"

    with pg_engine.connect() as conn:
        statuses = conn.execute(
            sa.select(engine_tables.runs.c.status, sa.func.count()).group_by(
                engine_tables.runs.c.status
            )
        ).all()
        assert dict(statuses) == {"done": ORDERS}
        asked_twice = conn.execute(
            sa.select(requests.c.order_id).group_by(requests.c.order_id).having(sa.func.count() > 1)
        ).all()
        assert asked_twice == []
        log = engine_tables.step_log
        done_twice = conn.execute(
            sa.select(log.c.run_id, log.c.step_id, log.c["pass"])
            .where(log.c.what == "done")
            .group_by(log.c.run_id, log.c.step_id, log.c["pass"])
            .having(sa.func.count() > 1)
        ).all()
        assert done_twice == []
        notices = conn.execute(
            sa.select(sa.func.count()).select_from(engine_tables.notices)
        ).scalar()
        assert notices == ORDERS
        sent = conn.execute(
            sa.select(sa.func.count()).where(PO.purchase_order.c.status == "sent")
        ).scalar()
        assert sent == ORDERS
    print(f"\nadvanced per worker: {advanced}")


def _options(engine: sa.Engine) -> str:
    with engine.connect() as conn:
        schema_name = conn.execute(sa.text("select current_schema()")).scalar()
    return f"-csearch_path={schema_name}"
