"""The router of flow and step rows (``flowrunner.web.router``), as a business user's
screen uses it over HTTP: every write judged as any save is, every refusal a 422 with
each field error, unknowns 404, and the rows it leaves are ones the engine runs. On
SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient
from running import mount, stored, whats

from flowrunner import testing, web

BIG_ORDERS = {"name": "Big orders", "start": "created", "condition": "amount > 10000"}
APPROVAL = {
    "position": 1,
    "kind": "approval",
    "title": "Manager approval",
    "approver": "mia",
    "duration": "3 days",
}
APPROVED = {"position": 2, "kind": "set", "title": "Approved", "field": "status", "value": "ok"}


def order(n: int, amount: int) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": amount}


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    """The purchase-order app on a database, without flows yet."""
    return mount(any_engine, "purchase_orders", flows="[]")


@pytest.fixture
def client(driver: testing.FlowDriver) -> TestClient:
    app = FastAPI()
    web.install(app)
    app.include_router(web.router(driver.runner))
    return TestClient(app)


def fields(response: Any) -> list[tuple[str, str]]:
    """A 422's field errors as (column, code), in order."""
    return [(e["loc"][-1], e["type"]) for e in response.json()["detail"]]


def test_a_flow_built_through_the_api_runs_on_the_next_big_order(
    client: TestClient, driver: testing.FlowDriver
) -> None:
    created = client.post("/flows", json=BIG_ORDERS)
    assert created.status_code == 201
    flow = created.json()
    assert flow | BIG_ORDERS == flow and flow["active"] is True
    first = client.post(f"/flows/{flow['id']}/steps", json=APPROVAL)
    second = client.post(f"/flows/{flow['id']}/steps", json=APPROVED)
    assert (first.status_code, second.status_code) == (201, 201)
    assert second.json()["flow_id"] == flow["id"]

    read = client.get(f"/flows/{flow['id']}").json()
    assert [s["title"] for s in read["steps"]] == ["Manager approval", "Approved"]
    assert client.get("/flows").json() == [flow]

    # A step changed: only what is sent changes, and the whole row is judged.
    changed = client.patch(
        f"/flows/{flow['id']}/steps/{first.json()['id']}", json={"duration": "1 day"}
    )
    assert changed.status_code == 200
    assert changed.json() | {"duration": "1 day"} == {**first.json(), "duration": "1 day"}

    driver.create(order(1, 25000))
    driver.create(order(2, 50))  # too small: the condition keeps it out
    [run] = driver.runs(1)
    assert driver.runs(2) == []
    driver.emit("po.decided", {"order": 1, "approver": "mia", "decision": "approved"})
    assert stored(driver, 1)["status"] == "ok"
    assert "Approved: done" in whats(driver, run.id)


def test_a_bad_step_answers_422_with_every_field_error_and_nothing_is_saved(
    client: TestClient,
) -> None:
    flow = client.post("/flows", json=BIG_ORDERS).json()
    bad = {
        "position": 1,
        "kind": "wait",
        "duration": "2 dayz",
        "field": "status",
        "goto": 7,
        "message": "x",
    }
    refused = client.post(f"/flows/{flow['id']}/steps", json=bad)
    assert refused.status_code == 422
    assert sorted(fields(refused)) == [
        ("duration", "duration_invalid"),
        ("field", "column_not_read"),
        ("goto", "column_not_read"),
        ("message", "column_not_read"),
    ]
    by_field = {e["loc"][-1]: e for e in refused.json()["detail"]}
    assert by_field["duration"] == {
        "loc": ["body", "duration"],
        "msg": "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        "type": "duration_invalid",
    }
    kinds = client.post(f"/flows/{flow['id']}/steps", json={"position": 1, "kind": "teleport"})
    assert fields(kinds) == [("kind", "kind_unknown")]
    assert client.get(f"/flows/{flow['id']}").json()["steps"] == []

    # A change that breaks a stored step is refused the same way, and changes nothing.
    step = client.post(f"/flows/{flow['id']}/steps", json=APPROVAL).json()
    broken = client.patch(
        f"/flows/{flow['id']}/steps/{step['id']}", json={"mode": "most", "remind": "daily"}
    )
    assert sorted(fields(broken)) == [("mode", "mode_invalid"), ("remind", "duration_invalid")]
    assert client.get(f"/flows/{flow['id']}").json()["steps"] == [step]


def test_a_bad_flow_answers_422_and_a_renamed_flow_must_keep_a_free_name(
    client: TestClient,
) -> None:
    refused = client.post(
        "/flows", json={"name": "x" * 201, "start": "sometimes", "condition": "amount >"}
    )
    assert refused.status_code == 422
    assert sorted(fields(refused)) == [
        ("condition", "condition_invalid"),
        ("name", "name_too_long"),
        ("start", "start_invalid"),
    ]
    first = client.post("/flows", json=BIG_ORDERS).json()
    other = client.post("/flows", json={"name": "Small", "start": "manual"}).json()
    taken = client.patch(f"/flows/{other['id']}", json={"name": "Big orders"})
    assert fields(taken) == [("name", "name_taken")]
    assert client.patch(f"/flows/{other['id']}", json={"id": first["id"]}).status_code == 422
    assert client.post("/flows", json={**BIG_ORDERS, "name": "New", "id": 5}).status_code == 422
    assert client.get("/flows").json() == [first, other]
    paused = client.patch(f"/flows/{first['id']}", json={"active": False})
    assert paused.json() == {**first, "active": False}


def test_validate_judges_exactly_as_a_save_and_saves_nothing(client: TestClient) -> None:
    flow = client.post("/flows", json=BIG_ORDERS).json()
    assert client.post("/flows/validate", json=BIG_ORDERS).json() == {
        "valid": False,
        "detail": [
            {
                "loc": ["body", "name"],
                "msg": "there is already a flow named 'Big orders'",
                "type": "name_taken",
            }
        ],
    }
    # Its own name is no clash: with its id, the row is judged as that flow's update.
    as_update = client.post("/flows/validate", json={"id": flow["id"], "condition": "amount > 5"})
    assert as_update.json() == {"valid": True, "detail": []}
    fine = client.post("/flows/validate", json={"name": "Another", "start": "manual"})
    assert (fine.status_code, fine.json()) == (200, {"valid": True, "detail": []})

    url = f"/flows/{flow['id']}/steps/validate"
    assert client.post(url, json=APPROVAL).json() == {"valid": True, "detail": []}
    judged = client.post(url, json={"position": 1, "kind": "branch", "goto": 9})
    assert judged.status_code == 200 and judged.json()["valid"] is False
    assert sorted((e["loc"][-1], e["type"]) for e in judged.json()["detail"]) == [
        ("condition", "column_required"),
        ("goto", "goto_unknown"),
    ]
    # Nothing was kept: no flow named Another, no step.
    assert client.get("/flows").json() == [flow]
    assert client.get(f"/flows/{flow['id']}").json()["steps"] == []
    assert client.post("/flows/999/steps/validate", json=APPROVAL).status_code == 404


def test_deletes_keep_the_rows_valid_and_unknowns_answer_404(client: TestClient) -> None:
    flow = client.post("/flows", json=BIG_ORDERS).json()
    base = f"/flows/{flow['id']}/steps"
    target = client.post(base, json=APPROVAL).json()
    client.post(
        base, json={"position": 2, "kind": "branch", "condition": "status = open", "goto": 1}
    )
    # The branch still goes to position 1: its only step cannot go.
    needed = client.delete(f"{base}/{target['id']}")
    assert needed.status_code == 422
    assert fields(needed) == [("position", "goto_target_in_use")]
    assert len(client.get(f"/flows/{flow['id']}").json()["steps"]) == 2

    assert client.delete(f"{base}/999").json() == {
        "detail": f"there is no step 999 in flow {flow['id']}",
        "code": "step_unknown",
    }
    other = client.post("/flows", json={"name": "Other", "start": "manual"}).json()
    # A step addressed under a flow it is not in is not there.
    assert client.delete(f"/flows/{other['id']}/steps/{target['id']}").status_code == 404
    assert client.patch(f"/flows/{other['id']}/steps/{target['id']}", json={}).status_code == 404

    assert client.delete(f"/flows/{flow['id']}").status_code == 204
    assert client.get(f"/flows/{flow['id']}").status_code == 404
    assert client.delete(f"/flows/{flow['id']}").json() == {
        "detail": f"there is no flow {flow['id']}",
        "code": "flow_unknown",
    }
    assert client.get("/flows").json() == [other]
    assert client.post("/flows/12345/steps", json=APPROVAL).status_code == 404


def test_ids_past_what_their_column_holds_name_nothing_and_never_reach_the_database(
    client: TestClient,
) -> None:
    flow = client.post("/flows", json=BIG_ORDERS).json()
    # The tables' ids are 32-bit integers: PostgreSQL would refuse the larger ones.
    for address in (f"/flows/{2**31}", f"/flows/{2**63 - 1}"):
        assert client.get(address).status_code == 404, address
        assert client.delete(address).status_code == 404, address
    # What is not an id at all (flowrunner.foundations.ids) is refused with a sentence.
    for address in (f"/flows/{2**63}", f"/flows/{-(2**70)}", "/flows/0"):
        for refused in (client.get(address), client.delete(address)):
            assert refused.status_code == 422, address
            assert refused.json()["code"] == "id_invalid"
            assert "is not a flow's id: give a whole number from 1 to" in refused.json()["detail"]
    assert client.delete(f"/flows/{flow['id']}/steps/{2**40}").status_code == 404
    assert client.patch(f"/flows/{flow['id']}/steps/{2**40}", json={}).status_code == 404
    assert client.get("/flows/abc").status_code == 422  # not a number at all: FastAPI's own
    assert client.get("/flows").json() == [flow]


def test_the_routes_take_the_apps_own_dependencies(driver: testing.FlowDriver) -> None:
    from fastapi import Depends, Header, HTTPException

    def editor(x_role: str = Header(default="")) -> None:
        if x_role != "editor":
            raise HTTPException(403, "only editors edit flows")

    app = FastAPI()
    web.install(app)
    app.include_router(
        web.router(driver.runner, prefix="/admin/flows", dependencies=[Depends(editor)])
    )
    client = TestClient(app)
    assert client.post("/admin/flows", json=BIG_ORDERS).status_code == 403
    made = client.post("/admin/flows", json=BIG_ORDERS, headers={"x-role": "editor"})
    assert made.status_code == 201
    assert client.get("/admin/flows", headers={"x-role": "editor"}).json() == [made.json()]
