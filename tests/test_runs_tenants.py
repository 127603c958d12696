"""Tenancy: a flow only runs on its own tenant's records; a tenant never sees, starts,
wakes or steers another tenant's work. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import desk
import pytest
import sqlalchemy as sa
from running import T0, stored

from flowrunner import EventRejected, OperatorError, RowInvalid, testing


def mount(engine: sa.Engine) -> testing.FlowDriver:
    runner = desk.runner(engine)
    with engine.begin() as conn:
        for tenant in ("acme", "globex"):
            flow = runner.save_flow(
                conn, {"name": "Triage", "start": "created", "tenant_id": tenant}
            )
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 1,
                    "kind": "set",
                    "field": "status",
                    "value": f"'seen by {tenant}'",
                    "tenant_id": tenant,
                },
            )
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 2,
                    "kind": "waitFor",
                    "event": "desk.replied",
                    "tenant_id": tenant,
                },
            )
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 3,
                    "kind": "set",
                    "field": "priority",
                    "value": "replied",
                    "tenant_id": tenant,
                },
            )
    return testing.FlowDriver(runner, start=T0)


def record(n: int, tenant: str) -> dict[str, Any]:
    return {"id": n, "tenant_id": tenant, "status": "new", "priority": "low"}


def test_each_record_runs_only_its_own_tenants_flows(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    driver.create(record(1, "acme"))
    driver.create(record(2, "globex"))
    assert stored(driver, 1, tenant="acme")["status"] == "seen by acme"
    assert stored(driver, 2, tenant="globex")["status"] == "seen by globex"
    [run] = driver.runs(1, tenant="acme")
    assert run.tenant == "acme"
    assert driver.runs(1, tenant="globex") == []


def test_events_and_operators_stay_within_their_tenant(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    runner = driver.runner
    driver.create(record(1, "acme"))
    driver.create(record(2, "globex"))
    with pytest.raises(EventRejected, match="does not exist"):
        driver.emit("desk.replied", {"ticket": 1, "tenant_id": "globex"})
    assert stored(driver, 1, tenant="acme")["priority"] == "low"
    driver.emit("desk.replied", {"ticket": 1, "tenant_id": "acme"})
    assert stored(driver, 1, tenant="acme")["priority"] == "replied"
    assert stored(driver, 2, tenant="globex")["priority"] == "low"
    [globex_run] = driver.runs(2, tenant="globex")
    with pytest.raises(OperatorError, match="no run"):
        runner.cancel(globex_run.id, operator="acme-admin", tenant="acme")
    with pytest.raises(OperatorError):
        runner.start("Triage", 2, operator="acme-admin", tenant="acme")
    with pytest.raises(OperatorError, match="no run"):
        runner.history(globex_run.id, tenant="acme")
    with pytest.raises(OperatorError, match="name the tenant"):
        runner.runs(2)
    assert runner.history(globex_run.id, tenant="globex")
    runner.cancel(globex_run.id, operator="globex-admin", tenant="globex")
    assert driver.runs(2, tenant="globex")[0].status == "cancelled"


def test_starting_existing_records_takes_one_tenant_at_a_time(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    with any_engine.begin() as conn:
        conn.execute(
            sa.insert(desk.ticket),
            [record(n, "acme" if n % 3 else "globex") for n in range(1, 10)],
        )
    assert driver.runner.start_existing("status = new", tenant="globex") == 3
    driver.run_until_idle()
    with any_engine.connect() as conn:
        seen = dict(conn.execute(sa.select(desk.ticket.c.id, desk.ticket.c.status)).all())
    assert {n for n, status in seen.items() if status == "seen by globex"} == {3, 6, 9}
    assert {n for n, status in seen.items() if status == "new"} == {1, 2, 4, 5, 7, 8}


def test_a_tenant_edits_only_its_own_flows(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    runner = driver.runner
    with any_engine.connect() as conn:
        flows = runner.tables.flows
        acme_flow = conn.execute(
            sa.select(flows.c.id).where(flows.c.tenant_id == "acme")
        ).scalar_one()
    step = {"flow_id": acme_flow, "position": 9, "kind": "set", "field": "priority", "value": "x"}
    with any_engine.begin() as conn:
        with pytest.raises(RowInvalid) as refused:
            runner.save_step(conn, step, tenant="globex")
        assert refused.value.errors[0].code == "tenant_mismatch"
        with pytest.raises(RowInvalid) as unnamed:
            runner.save_step(conn, step)
        assert unnamed.value.errors[0].code == "column_required"
        with pytest.raises(OperatorError):
            runner.snapshot(conn, acme_flow, tenant="globex")
        assert runner.snapshot(conn, acme_flow, tenant="acme").flow.tenant == "acme"
        step_id = runner.save_step(conn, step, tenant="acme")
        with pytest.raises(OperatorError):
            runner.delete_step(conn, step_id, tenant="globex")
        runner.delete_step(conn, step_id, tenant="acme")
