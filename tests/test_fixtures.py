"""The sample applications: their bindings fit their tables, their flows are valid, their
commands write what they say, and a purchase order runs its flow end to end."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import migrated
import pytest
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from fixtures.tickets import app as tk
from flowrunner import query, tables
from flowrunner.engine import commands
from flowrunner.flows import files
from flowrunner.runner import FlowRunner
from flowrunner.testing import FlowDriver

APPS = [pytest.param(po, id="purchase_orders"), pytest.param(tk, id="tickets")]
RESOURCES = {po: po.purchase_order, tk: tk.ticket}


@pytest.mark.parametrize("app", APPS)
def test_the_binding_fits_the_app_tables(app: ModuleType, any_engine: sa.Engine) -> None:
    assert app.binding.check(app.metadata).resource_columns
    app.metadata.create_all(any_engine)
    schema = app.binding.check(any_engine)
    assert schema.resource_columns == query.column_types(RESOURCES[app])


@pytest.mark.parametrize("app", APPS)
def test_the_flows_file_is_valid(app: ModuleType) -> None:
    docs = files.read_file(app.FLOWS_FILE)
    assert len(docs) >= 3
    columns = query.column_types(RESOURCES[app])
    assert files.problems(app.binding, docs, columns) == []


@pytest.mark.parametrize("app", APPS)
def test_the_factory_mounts_a_runner(app: ModuleType, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = sa.create_engine(url)
    app.metadata.create_all(engine)
    migrated.upgrade(engine)
    engine.dispose()
    runner = app.runner(url)
    assert isinstance(runner, FlowRunner) and runner.binding is app.binding
    assert set(runner.commands) == set(app.COMMANDS)
    runner.engine.dispose()


def context(
    conn: sa.Connection, record: dict[str, object], **inputs: object
) -> commands.CommandContext:
    return commands.CommandContext(
        record=record,
        inputs=inputs,
        conn=conn,
        principal="automation",
        idempotency_key="run-1-step-10",
        run_id=1,
        flow_name="Big orders",
        step_title="Finance approval",
        position=10,
        reminder=2,
    )


def test_the_purchase_order_commands(sqlite_engine: sa.Engine) -> None:
    po.metadata.create_all(sqlite_engine)
    with sqlite_engine.begin() as conn:
        conn.execute(
            sa.insert(po.purchase_order).values(
                id=7, number="PO-7", requester_id="ann", amount=12000
            )
        )
        record: dict[str, object] = {"id": 7}
        answer = po.request_approval(context(conn, record, approver="cfo, controller, cfo,"))
        assert answer == {"asked": ["cfo", "controller"]}
        po.remind_approver(context(conn, record))
        po.send_purchase_order(context(conn, record))
    with sqlite_engine.connect() as conn:
        asked = conn.execute(sa.select(po.approval_request.c.approver)).scalars().all()
        assert asked == ["cfo", "controller"]
        assert conn.execute(sa.select(po.approval_reminder.c.reminder)).scalars().all() == [2]
        order = conn.execute(sa.select(po.purchase_order)).mappings().one()
        assert order["status"] == "sent" and order["sent_at"] is not None


def test_the_ticket_command(sqlite_engine: sa.Engine) -> None:
    tk.metadata.create_all(sqlite_engine)
    with sqlite_engine.begin() as conn:
        conn.execute(sa.insert(tk.ticket).values(id=3, title="Printer", requester_id="bo"))
        tk.assign_ticket(context(conn, {"id": 3}, assign_to=" triage "))
        assert conn.scalar(sa.select(tk.ticket.c.assignee)) == "triage"


def test_a_big_order_runs_its_flow(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(url)
    po.metadata.create_all(engine)
    migrated.upgrade(engine)
    po_tables = tables.reflect(engine, po.binding)
    with engine.begin() as conn:
        files.import_flows(conn, po.binding, po_tables, files.read_file(po.FLOWS_FILE))
    engine.dispose()
    driver = FlowDriver(po.runner(url), start=datetime(2026, 3, 2, 9, tzinfo=UTC))
    driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": Decimal("25000.00")})
    with driver.runner.engine.connect() as conn:
        asked = conn.execute(sa.select(po.approval_request.c.approver)).scalars().all()
    assert sorted(asked) == ["cfo@example.com", "controller@example.com", "manager@example.com"]
    driver.advance("1 day")
    with driver.runner.engine.connect() as conn:
        assert len(conn.execute(sa.select(po.approval_reminder)).all()) == 2
    for approver in asked:
        with driver.runner.engine.begin() as conn:
            po.decide(driver.runner, conn, 1, approver, "approved")
        driver.run_until_idle()
    record = driver.record(1)
    assert record is not None and record["status"] == "sent"
    (run,) = driver.runs(1)
    assert run.status == "done"
    driver.runner.engine.dispose()
