"""Signed callbacks on a tenant binding: the body names its tenant, the command runs in
it, and the event goes to that tenant's record only; on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import migrated
import pytest
import sqlalchemy as sa

from flowrunner import (
    BindingError,
    CommandContext,
    FlowBinding,
    FlowRunner,
    Hmac,
    Inbound,
    OperatorError,
    RunStatus,
    flow_runner,
    tables,
)
from flowrunner.store import engine_tables
from flowrunner.testing import FlowDriver

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SECRET_ENV = "MALL_CALLBACK_SECRET"
SECRET = "mall-secret-41"

metadata = sa.MetaData()
mall_order = sa.Table(
    "mall_order",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("shop", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32), nullable=False, server_default="open"),
)
mall_payment = sa.Table(
    "mall_payment",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("shop", sa.String(32), nullable=False),
    sa.Column("order_id", sa.Integer, nullable=False),
)
BINDING = FlowBinding(
    resource="mall_order",
    flows_table="mall_flow",
    steps_table="mall_flow_step",
    events={"order.paid": "order"},
    set_columns=["status"],
    tenant="shop",
)
tables.for_binding(metadata, BINDING)
VERIFY = Hmac(secret_env=SECRET_ENV, header="x-signature", timestamp_header="x-timestamp")


def record_payment(ctx: CommandContext) -> None:
    ctx.conn.execute(
        sa.insert(mall_payment).values(shop=ctx.tenant, order_id=int(str(ctx.inputs["order"])))
    )


PAID = Inbound(
    name="paid",
    verify=VERIFY,
    run_as="processor",
    command="record_payment",
    key=lambda body: body["id"],
    tenant=lambda body: body["shop"],
    input=lambda body: {"order": body["order"]},
    emit="order.paid",
    payload=lambda body: {"order": body["order"], **body.get("extra", {})},
)


@pytest.fixture
def mall(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> FlowDriver:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    metadata.create_all(engine)
    migrated.upgrade(engine)
    runner = flow_runner(
        BINDING, engine, commands={"record_payment": record_payment}, inbound=[PAID]
    )
    driver = FlowDriver(runner, start=START)
    with engine.begin() as conn:
        for shop in ("acme", "globex"):
            flow = runner.save_flow(
                conn, {"name": "Await payment", "start": "created"}, tenant=shop
            )
            for step in (
                {"position": 1, "kind": "waitFor", "event": "order.paid", "duration": "3 days"},
                {"position": 2, "kind": "set", "field": "status", "value": "paid"},
            ):
                runner.save_step(conn, {"flow_id": flow, **step}, tenant=shop)
    driver.create({"id": 1, "shop": "acme"})
    driver.create({"id": 2, "shop": "globex"})
    return driver


def post(driver: FlowDriver, **fields: Any) -> int:
    content = json.dumps(fields).encode()
    headers = VERIFY.sign(SECRET, content, driver.now)
    return driver.runner.receive("paid", headers, content).status


def written(runner: FlowRunner) -> dict[str, Any]:
    with runner.engine.connect() as conn:
        receipts = conn.execute(sa.select(engine_tables.idempotency.c.tenant)).scalars().all()
        events = conn.execute(
            sa.select(engine_tables.events.c.tenant, engine_tables.events.c.record_id)
        ).all()
        payments = conn.execute(sa.select(mall_payment.c.shop, mall_payment.c.order_id)).all()
    return {
        "receipts": list(receipts),
        "events": [tuple(e) for e in events],
        "payments": [tuple(p) for p in payments],
    }


def statuses(driver: FlowDriver) -> dict[str, RunStatus]:
    return {
        "acme": driver.runs(1, tenant="acme")[0].status,
        "globex": driver.runs(2, tenant="globex")[0].status,
    }


def test_a_shop_s_callback_answers_its_own_order(mall: FlowDriver) -> None:
    assert post(mall, id="evt_1", shop="acme", order=1) == 204
    mall.run_until_idle()
    assert statuses(mall) == {"acme": RunStatus.DONE, "globex": RunStatus.WAITING}
    assert written(mall.runner) == {
        "receipts": ["acme"],
        "events": [("acme", "1")],
        "payments": [("acme", 1)],
    }


def test_a_shop_s_callback_naming_another_shop_s_order_is_refused(mall: FlowDriver) -> None:
    assert post(mall, id="evt_2", shop="acme", order=2) == 400
    mall.run_until_idle()
    assert statuses(mall) == {"acme": RunStatus.WAITING, "globex": RunStatus.WAITING}
    assert written(mall.runner) == {"receipts": [], "events": [], "payments": []}


@pytest.mark.parametrize(
    "fields",
    [
        {"id": "evt_3", "order": 1},  # no shop
        {"id": "evt_3", "shop": None, "order": 1},
        {"id": "evt_3", "shop": "acme", "order": 1, "extra": {"shop": "globex"}},
    ],
    ids=["no-tenant", "null-tenant", "payload-of-another-tenant"],
)
def test_a_callback_that_does_not_name_one_tenant_is_refused(
    mall: FlowDriver, fields: dict[str, Any]
) -> None:
    assert post(mall, **fields) == 400
    assert written(mall.runner) == {"receipts": [], "events": [], "payments": []}


def test_the_same_delivery_id_for_another_shop_is_another_body(mall: FlowDriver) -> None:
    assert post(mall, id="evt_4", shop="acme", order=1) == 204
    assert post(mall, id="evt_4", shop="globex", order=2) == 409
    assert written(mall.runner)["events"] == [("acme", "1")]


def test_a_tenant_binding_s_inbound_names_its_tenant(sqlite_engine: sa.Engine) -> None:
    metadata.create_all(sqlite_engine)
    untenanted = dataclasses.replace(PAID, tenant=None)
    with pytest.raises(BindingError) as refused:
        flow_runner(
            BINDING,
            sqlite_engine,
            commands={"record_payment": record_payment},
            inbound=[untenanted],
        )
    assert str(refused.value) == (
        "inbound 'paid' needs tenant=, a function of the body naming its tenant: mall_order "
        "records belong to tenants"
    )


def test_each_shop_s_operator_reads_its_own_callbacks(mall: FlowDriver) -> None:
    from console import Session, as_, rows

    from flowrunner.web.console import Principal

    assert post(mall, id="evt_a", shop="acme", order=1) == 204
    assert post(mall, id="evt_g", shop="globex", order=2) == 204
    assert mall.runner.receive("paid", {}, b"{}").status == 401  # no shop's: not read

    operations = mall.runner.operations
    [acme_row] = operations.deliveries(tenant="acme")
    assert (acme_row.key, acme_row.tenant) == ("evt_a", "acme")
    [unread] = operations.deliveries(no_tenant=True)
    assert (unread.key, unread.tenant, unread.status) == (None, None, 401)
    with pytest.raises(OperatorError, match="mall_order records belong to tenants"):
        operations.deliveries()

    acme = Session(mall.runner.console(principal=as_(Principal("ann", tenant="acme"))))
    page = acme.get("/ops/deliveries")
    assert page.status_code == 200
    assert rows(page.text, "callback") == [str(acme_row.id)]
    assert "evt_g" not in page.text and "401" not in page.text
