"""Two worker processes on one PostgreSQL database, 400 purchase-order runs (1,000 in a
long run, see ``sizes.py``), events arriving concurrently: no step is processed twice
and every run finishes."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from running import APPROVE_AND_SEND, app, done_twice, mount, serving_worker
from sizes import sized

from flowrunner.runner import utc_now
from flowrunner.store import engine_tables

ORDERS = sized(400, 1000)
PO = app("purchase_orders")


@pytest.mark.slow
def test_two_worker_processes_share_the_work_and_do_each_step_once(
    pg_engine: sa.Engine,
) -> None:
    driver = mount(pg_engine, "purchase_orders", flows=APPROVE_AND_SEND)
    runner = driver.runner
    runner.clock = utc_now  # the worker processes use the real clock too
    with pg_engine.begin() as conn:
        for n in range(1, ORDERS + 1):
            order = {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 20000}
            conn.execute(sa.insert(PO.purchase_order).values(**order))
            runner.record_created(conn, order)

    workers = [serving_worker(pg_engine, "purchase_orders", 240) for _ in range(2)]
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
        assert done_twice(conn) == []
        notices = conn.execute(
            sa.select(sa.func.count()).select_from(engine_tables.notices)
        ).scalar()
        assert notices == ORDERS
        sent = conn.execute(
            sa.select(sa.func.count()).where(PO.purchase_order.c.status == "sent")
        ).scalar()
        assert sent == ORDERS
    print(f"\nadvanced per worker: {advanced}")
