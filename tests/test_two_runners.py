"""Two runners on one PostgreSQL database — a support desk's tickets and purchase orders —
with two worker processes each, 200 runs per resource (500 in a long run, see
``sizes.py``) and both resources' events
arriving interleaved while the workers run: every run finishes, and no worker claims a
run of the other resource."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from running import ACKNOWLEDGE, APPROVE_AND_SEND, app, done_twice, mount, serving_worker
from sizes import sized

from flowrunner.runner import utc_now
from flowrunner.store import engine_tables

RUNS = sized(200, 500)  # per resource
TICKETS = app("tickets")
PO = app("purchase_orders")


@pytest.mark.slow
def test_two_runners_with_two_workers_each_touch_only_their_own_runs(
    pg_engine: sa.Engine,
) -> None:
    tickets = mount(pg_engine, "tickets", flows=ACKNOWLEDGE).runner
    orders = mount(pg_engine, "purchase_orders", flows=APPROVE_AND_SEND).runner
    tickets.clock = orders.clock = utc_now  # the worker processes use the real clock too
    with pg_engine.begin() as conn:
        for n in range(1, RUNS + 1):
            ticket = {"id": n, "title": f"T-{n}", "requester_id": "ann", "status": "open"}
            conn.execute(sa.insert(TICKETS.ticket).values(**ticket))
            tickets.record_created(conn, ticket)
            order = {"id": n, "number": f"PO-{n}", "requester_id": "bob", "amount": 900}
            conn.execute(sa.insert(PO.purchase_order).values(**order))
            orders.record_created(conn, order)

    began = time.monotonic()
    workers = {
        (name, index): serving_worker(pg_engine, name, 100)
        for name in ("tickets", "purchase_orders")
        for index in range(2)
    }
    # Answer each ticket once it was handed to triage and each order once its approval
    # was asked, the two resources' events interleaved, while the workers run.
    replied: set[int] = set()
    decided: set[int] = set()
    deadline = time.monotonic() + 100
    while (len(replied) < RUNS or len(decided) < RUNS) and time.monotonic() < deadline:
        with pg_engine.connect() as conn:
            handed = set(
                conn.execute(
                    sa.select(TICKETS.ticket.c.id).where(TICKETS.ticket.c.assignee.is_not(None))
                ).scalars()
            )
            asked = set(conn.execute(sa.select(PO.approval_request.c.order_id)).scalars())
        fresh_tickets = sorted(handed - replied)
        fresh_orders = sorted(asked - decided)
        with pg_engine.begin() as conn:
            for index in range(max(len(fresh_tickets), len(fresh_orders))):
                if index < len(fresh_tickets):
                    tickets.emit(conn, "ticket.replied", {"ticket": fresh_tickets[index]})
                if index < len(fresh_orders):
                    orders.emit(
                        conn,
                        "po.decided",
                        {"order": fresh_orders[index], "decision": "approved", "approver": "boss"},
                    )
        replied.update(fresh_tickets)
        decided.update(fresh_orders)
        if not fresh_tickets and not fresh_orders:
            time.sleep(0.05)  # the workers have not asked anyone new yet
    outputs = {key: process.communicate(timeout=120) for key, process in workers.items()}
    seconds = time.monotonic() - began
    for key, process in workers.items():
        assert process.returncode == 0, (key, outputs[key][1])

    runs = engine_tables.runs
    with pg_engine.connect() as conn:
        by_resource = {
            resource: set(
                conn.execute(sa.select(runs.c.id).where(runs.c.resource == resource)).scalars()
            )
            for resource in ("ticket", "purchase_order")
        }
        statuses = conn.execute(
            sa.select(runs.c.resource, runs.c.status, sa.func.count()).group_by(
                runs.c.resource, runs.c.status
            )
        ).all()
        assert sorted(tuple(row) for row in statuses) == [
            ("purchase_order", "done", RUNS),
            ("ticket", "done", RUNS),
        ]
        assert done_twice(conn) == []
        answered = conn.execute(
            sa.select(sa.func.count()).where(TICKETS.ticket.c.status == "answered")
        ).scalar()
        sent = conn.execute(
            sa.select(sa.func.count()).where(PO.purchase_order.c.status == "sent")
        ).scalar()
        assert (answered, sent) == (RUNS, RUNS)
        asked_twice = conn.execute(
            sa.select(PO.approval_request.c.order_id)
            .group_by(PO.approval_request.c.order_id)
            .having(sa.func.count() > 1)
        ).all()
        assert asked_twice == []
    assert len(tickets.notices()) == RUNS and len(orders.notices()) == RUNS

    resource_of = {"tickets": "ticket", "purchase_orders": "purchase_order"}
    for (name, index), (out, _err) in outputs.items():
        claimed = {int(i) for i in out.split("claimed=")[1].split()[0].split(",") if i}
        assert claimed, f"{name} worker {index} claimed nothing"
        mine = by_resource[resource_of[name]]
        assert claimed <= mine, f"{name} worker {index} claimed {sorted(claimed - mine)[:5]}"
    advanced = {key: int(out.split("advanced=")[1].split()[0]) for key, (out, _) in outputs.items()}
    print(f"\n{RUNS} runs per resource, 4 workers, {seconds:.1f} s; advanced: {advanced}")
