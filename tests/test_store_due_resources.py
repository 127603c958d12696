"""The due-work index by resource: every due row carries its run's resource, and claims,
counts and the next due time keep to one resource, with tenant fairness inside it."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import sqlalchemy as sa
import storing
from storing import T0, explain

from flowrunner.store import claims, dialects, engine_tables
from flowrunner.store import operations as ops

TTL = timedelta(minutes=5)


def new_run(
    conn: sa.Connection,
    resource: str,
    record_id: str,
    *,
    tenant: str | None = None,
    due_at: datetime | None = T0,
) -> int:
    return storing.new_run(conn, record_id, resource=resource, tenant=tenant, due_at=due_at)


def resources(engine: sa.Engine) -> dict[int, str | None]:
    table = engine_tables.due
    with engine.connect() as conn:
        return {int(r): s for r, s in conn.execute(sa.select(table.c.run_id, table.c.resource))}


def test_every_due_row_is_filed_under_its_runs_resource(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        order = new_run(conn, "purchase_order", "1")
        ticket = new_run(conn, "ticket", "1", due_at=None)
        ops.wake_record(conn, resource="ticket", record_id="1", now=T0)
    assert resources(engine) == {order: "purchase_order", ticket: "ticket"}
    with dialects.begin(engine) as conn:  # moved, and moved back: still its resource
        ops.set_due(conn, run_id=order, due_at=None)
        ops.set_due(conn, run_id=order, due_at=T0 + timedelta(hours=1))
    (claim,) = ops.claim_due(engine, now=T0, owner="A", limit=5, ttl=TTL, resource="ticket")
    with dialects.begin(engine) as conn:  # a worker's reschedule
        ops.set_due(conn, run_id=ticket, due_at=T0 + timedelta(days=1), claim=claim)
    assert resources(engine) == {order: "purchase_order", ticket: "ticket"}


def test_claims_counts_and_the_next_due_time_keep_to_one_resource(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        orders = [new_run(conn, "purchase_order", str(n)) for n in range(3)]
        tickets = [
            new_run(conn, "ticket", str(n), due_at=T0 - timedelta(hours=1)) for n in range(2)
        ]
        later = new_run(conn, "ticket", "9", due_at=T0 + timedelta(days=2))
    with engine.connect() as conn:
        assert ops.due_count(conn, now=T0, resource="purchase_order") == 3
        assert ops.due_count(conn, now=T0, resource="ticket") == 2
        assert ops.due_count(conn, now=T0) == 5
        assert ops.next_due(conn, resource="purchase_order") == T0
        assert ops.next_due(conn, resource="ticket") == T0 - timedelta(hours=1)
        assert ops.next_due(conn, resource="invoice") is None
    # The older ticket work is not the order runner's to take.
    claimed = ops.claim_due(engine, now=T0, owner="A", limit=10, ttl=TTL, resource="purchase_order")
    assert sorted(c.run_id for c in claimed) == orders
    claimed = ops.claim_due(
        engine, now=T0 + timedelta(days=3), owner="B", limit=10, ttl=TTL, resource="ticket"
    )
    assert sorted(c.run_id for c in claimed) == [*tickets, later]


def test_each_tenant_gets_its_share_within_a_resource(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        # Another resource's much older backlog takes no slot from this one.
        for n in range(20):
            new_run(conn, "ticket", f"t{n}", tenant="acme", due_at=T0 - timedelta(days=9))
        for n in range(10):  # acme's orders are older than globex's
            new_run(conn, "purchase_order", f"a{n}", tenant="acme", due_at=T0 - timedelta(days=2))
        for n in range(3):
            new_run(conn, "purchase_order", f"g{n}", tenant="globex", due_at=T0 - timedelta(days=1))
    claims = ops.claim_due(engine, now=T0, owner="A", limit=6, ttl=TTL, resource="purchase_order")
    assert Counter(c.tenant for c in claims) == {"acme": 3, "globex": 3}


def test_a_resources_due_work_is_found_by_a_range_search(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        table = engine_tables.due
        rows = [
            {
                "run_id": i,
                "tenant": f"t{i % 5}",
                "due_at": T0 + timedelta(days=30, seconds=i),
                "resource": ("ticket", "purchase_order")[i % 2],
            }
            for i in range(3000)  # waiting far ahead, on both resources
        ]
        rows += [
            {"run_id": i, "tenant": "t0", "due_at": T0, "resource": "ticket"}
            for i in range(3000, 3003)
        ]
        conn.execute(sa.insert(table), rows)
        # The due table alone: a database-wide ANALYZE would wait on, and deadlock with,
        # the other tests' schemas being moved and dropped at the same moment.
        conn.execute(sa.text("ANALYZE flowrunner_due"))
    oldest = (
        sa.select(table.c.run_id)
        .where(table.c.resource == "ticket", table.c.due_at <= T0)
        .order_by(table.c.due_at)
        .limit(10)
    )
    fair = claims.fair_candidates_query(now=T0, limit=10, tenant=None, resource="ticket")
    # A claim shared among tenants and one that takes the oldest alone both search the
    # due table's one index: their cost follows what is due, not what waits.
    for query in (fair, oldest):
        with engine.connect() as conn:
            plan = explain(conn, query)
        assert "ix_flowrunner_due_resource_due_at" in plan, plan
        assert "SCAN flowrunner_due" not in plan and "Seq Scan on flowrunner_due" not in plan, plan


def test_the_due_table_has_one_index_the_claims_own(engine: sa.Engine) -> None:
    """Each index on the due row is a page more in every start's and save's commit."""
    indexes = sa.inspect(engine).get_indexes("flowrunner_due")
    assert [index["column_names"] for index in indexes] == [["resource", "due_at"]]
