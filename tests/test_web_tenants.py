"""Tenants over HTTP: the application says whose request it is (a FastAPI dependency),
and a tenant's screens see, change and delete only that tenant's flows — another
tenant's are unknown (404), never overwritten. The runner itself holds the same line
for an id: a save naming another tenant's flow or step is refused. On SQLite and
PostgreSQL."""

from __future__ import annotations

from typing import Any

import desk
import pytest
import sqlalchemy as sa
from fastapi import FastAPI, Header, HTTPException
from fastapi.testclient import TestClient

from flowrunner import BindingError, FlowRunner, OperatorError, RowInvalid, web

TRIAGE = {"name": "Triage", "start": "created"}
SEEN = {"position": 1, "kind": "set", "field": "status", "value": "seen"}


def tenant_of(x_tenant: str = Header(default="")) -> str:
    """The app's own rule: here a header; in a real app, the logged-in user's tenant."""
    if not x_tenant:
        raise HTTPException(401, "log in first")
    return x_tenant


@pytest.fixture
def runner(any_engine: sa.Engine) -> FlowRunner:
    return desk.runner(any_engine)


@pytest.fixture
def client(runner: FlowRunner) -> TestClient:
    app = FastAPI()
    web.install(app)
    app.include_router(web.router(runner, tenant=tenant_of))
    return TestClient(app)


def as_(tenant: str) -> dict[str, str]:
    return {"x-tenant": tenant}


def test_each_tenant_sees_and_edits_only_its_own_flows(client: TestClient) -> None:
    acme = client.post("/flows", json=TRIAGE, headers=as_("acme")).json()
    globex = client.post("/flows", json=TRIAGE, headers=as_("globex")).json()
    assert acme["tenant_id"] == "acme" and globex["tenant_id"] == "globex"  # same name: fine
    step = client.post(f"/flows/{acme['id']}/steps", json=SEEN, headers=as_("acme")).json()

    assert client.get("/flows", headers=as_("acme")).json() == [acme]
    assert client.get("/flows", headers=as_("globex")).json() == [globex]
    foreign = f"/flows/{acme['id']}"
    assert client.get(foreign, headers=as_("globex")).json() == {
        "detail": f"there is no flow {acme['id']}",
        "code": "flow_unknown",
    }
    assert client.patch(foreign, json={"active": False}, headers=as_("globex")).status_code == 404
    assert client.post(f"{foreign}/steps", json=SEEN, headers=as_("globex")).status_code == 404
    step_url = f"{foreign}/steps/{step['id']}"
    assert client.patch(step_url, json={"value": "x"}, headers=as_("globex")).status_code == 404
    assert client.delete(step_url, headers=as_("globex")).status_code == 404
    assert client.delete(foreign, headers=as_("globex")).status_code == 404
    assert (
        client.post(f"{foreign}/steps/validate", json=SEEN, headers=as_("globex")).status_code
        == 404
    )
    assert client.get(foreign, headers=as_("acme")).json()["steps"] == [step]
    assert client.get(foreign, headers=as_("acme")).json()["active"] is True

    # A row naming another tenant is refused as any bad row is.
    hijack = client.post("/flows", json={**TRIAGE, "tenant_id": "acme"}, headers=as_("globex"))
    assert hijack.status_code == 422
    assert [e["type"] for e in hijack.json()["detail"]] == ["tenant_mismatch"]
    moved = client.patch(
        f"/flows/{globex['id']}", json={"tenant_id": "acme"}, headers=as_("globex")
    )
    assert moved.status_code == 422
    # A step cannot be moved into another tenant's flow either.
    into = client.patch(step_url, json={"flow_id": globex["id"]}, headers=as_("acme"))
    assert into.status_code == 422
    assert client.get("/flows", headers=as_("globex")).json() == [globex]


def test_a_request_the_app_cannot_place_is_the_apps_answer(runner: FlowRunner) -> None:
    app = FastAPI()
    web.install(app)
    app.include_router(web.router(runner, tenant=tenant_of))
    assert TestClient(app).get("/flows").status_code == 401

    nobody = FastAPI()
    web.install(nobody)
    nobody.include_router(web.router(runner, tenant=lambda: None))
    answered = TestClient(nobody).get("/flows")
    assert (answered.status_code, answered.json()["code"]) == (403, "tenant_required")


def test_a_tenant_binding_needs_the_tenant_dependency_and_others_refuse_it(
    runner: FlowRunner, any_engine: sa.Engine
) -> None:
    with pytest.raises(BindingError, match="belong to tenants: give router"):
        web.router(runner)
    from running import mount

    orders = mount(any_engine, "purchase_orders", flows="[]").runner
    with pytest.raises(BindingError, match="belong to no tenant"):
        web.router(orders, tenant=tenant_of)


def flows_of(runner: FlowRunner, conn: sa.Connection) -> list[tuple[Any, ...]]:
    flows = runner.tables.flows
    return [
        tuple(r)
        for r in conn.execute(
            sa.select(flows.c.id, flows.c.name, flows.c.tenant_id).order_by(flows.c.id)
        )
    ]


def test_the_runner_never_overwrites_another_tenants_row_by_its_id(
    runner: FlowRunner, any_engine: sa.Engine
) -> None:
    with any_engine.begin() as conn:
        theirs = runner.save_flow(conn, TRIAGE, tenant="globex")
        their_step = runner.save_step(conn, {**SEEN, "flow_id": theirs}, tenant="globex")
        ours = runner.save_flow(conn, {**TRIAGE, "name": "Ours"}, tenant="acme")
    with any_engine.begin() as conn:
        with pytest.raises(RowInvalid) as flow_refused:
            runner.save_flow(
                conn, {"id": theirs, "name": "Mine now", "start": "manual"}, tenant="acme"
            )
        assert [(e.field, e.code) for e in flow_refused.value.errors] == [("id", "flow_unknown")]
        with pytest.raises(RowInvalid) as step_refused:
            runner.save_step(conn, {**SEEN, "id": their_step, "flow_id": ours}, tenant="acme")
        assert [(e.field, e.code) for e in step_refused.value.errors] == [("id", "step_unknown")]
        with pytest.raises(OperatorError) as delete_refused:
            runner.delete_flow(conn, theirs, tenant="acme")
        assert delete_refused.value.status_code == 404
    with any_engine.connect() as conn:
        assert flows_of(runner, conn) == [(theirs, "Triage", "globex"), (ours, "Ours", "acme")]
        steps = runner.tables.steps
        assert conn.execute(sa.select(steps.c.flow_id, steps.c.tenant_id)).all() == [
            (theirs, "globex")
        ]
    with any_engine.begin() as conn:
        runner.delete_flow(conn, theirs, tenant="globex")
    with any_engine.connect() as conn:
        assert flows_of(runner, conn) == [(ours, "Ours", "acme")]
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(runner.tables.steps)).scalar() == 0
        )
