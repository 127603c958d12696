"""A tenant app's console shows one tenant's rows only: the reader's tenant (from the
application's principal) owns what they create, and another tenant's flows, records,
runs, journal and notices are unknown to them (404) or absent from every list. On SQLite
and PostgreSQL."""

from __future__ import annotations

import desk
import pytest
import sqlalchemy as sa
from console import Session, as_, refusal, rows, text

from flowrunner import FlowRunner
from flowrunner.store import dialects, flow_rows
from flowrunner.web.console import Principal

ACME = Principal("amy", tenant="acme", roles=frozenset({"editor", "operator"}))
GLOBEX = Principal("gus", tenant="globex", roles=frozenset({"editor", "operator"}))
TRIAGE = """
flows:
  - name: Triage
    start: created
    steps:
      - {position: 1, kind: set, title: Seen, field: status, value: seen}
      - {position: 2, kind: waitFor, title: Reply, event: desk.replied, duration: 2 days}
  - name: Nudge
    start: manual
    steps:
      - {position: 1, kind: set, title: Nudge, field: priority, value: high}
"""


@pytest.fixture
def runner(any_engine: sa.Engine) -> FlowRunner:
    return desk.runner(any_engine)


def session(runner: FlowRunner, who: Principal | None) -> Session:
    return Session(runner.console(principal=as_(who)))


def ticket(runner: FlowRunner, n: int, tenant: str) -> None:
    with dialects.begin(runner.engine) as conn:
        record = {"id": n, "tenant_id": tenant, "status": "new"}
        conn.execute(desk.ticket.insert().values(**record))
        runner.record_created(conn, record)
    runner.run_due()


def test_each_tenant_sees_and_steers_only_its_own(runner: FlowRunner) -> None:
    acme, globex = session(runner, ACME), session(runner, GLOBEX)
    for ui in (acme, globex):
        imported = ui.post("/import", {"yaml": TRIAGE})
        assert imported.status_code == 303, imported.text
    with runner.engine.connect() as conn:
        flows = flow_rows.all_flows(conn, runner.tables)
    owner = {f["id"]: f["tenant_id"] for f in flows}
    assert sorted(owner.values()) == ["acme", "acme", "globex", "globex"]
    mine = [str(i) for i, t in owner.items() if t == "acme"]
    theirs = [str(i) for i, t in owner.items() if t == "globex"]
    assert rows(acme.get("/").text, "flow") == mine
    assert acme.get(f"/flow/{theirs[0]}").status_code == 404
    assert acme.post(f"/flow/{theirs[0]}", {"name": "Mine now"}).status_code == 404
    assert acme.get(f"/flow/{theirs[0]}/export.yaml").status_code == 404
    assert "globex" not in acme.get("/export.yaml").text

    ticket(runner, 1, "acme")
    ticket(runner, 2, "globex")
    assert acme.get("/record/1").status_code == 200
    assert acme.get("/record/2").status_code == 404
    [acme_run] = runner.runs(1, tenant="acme")
    [globex_run] = runner.runs(2, tenant="globex")
    assert acme.get(f"/run/{acme_run.id}").status_code == 200
    assert acme.get(f"/run/{globex_run.id}").status_code == 404
    assert rows(acme.get("/ops").text, "run") == [str(acme_run.id)]
    assert rows(globex.get("/ops").text, "run") == [str(globex_run.id)]

    # An action on another tenant's run is refused with the reason; none is done.
    page = acme.post("/ops/act", {"action": "cancel", "run": [str(globex_run.id)]})
    assert page.status_code == 409
    assert f"there is no run {globex_run.id}" in text(page.text)
    assert runner.runs(2, tenant="globex")[0].status == "waiting"
    assert acme.post(f"/run/{globex_run.id}/cancel", {"confirmed": "yes"}).status_code == 404

    # Starting a manual flow: only the tenant's own flows and records.
    nudge = next(f for f in flows if f["name"] == "Nudge" and f["tenant_id"] == "globex")
    started = acme.post("/record/1/start", {"flow": str(nudge["id"])})
    assert started.status_code == 409
    assert refusal(started.text) == f"there is no flow '{nudge['id']}'"
    assert acme.post("/record/2/start", {"flow": "Nudge"}).status_code == 404
    assert acme.post("/record/1/start", {"flow": "Nudge"}).status_code == 303

    journal = acme.get("/ops/journal").text
    assert "amy started flow 'Nudge' run 3 (desk_ticket 1)" in text(journal)
    assert "gus" not in journal
    assert "amy" not in globex.get("/ops/journal").text


def test_a_file_naming_another_tenant_is_refused(runner: FlowRunner) -> None:
    acme = session(runner, ACME)
    page = acme.post("/import", {"yaml": "- {name: Sneaky, start: manual, tenant_id: globex}"})
    assert page.status_code == 422
    assert "flow 'Sneaky' is another tenant's (globex)" in text(page.text)
    with runner.engine.connect() as conn:
        assert flow_rows.all_flows(conn, runner.tables) == []


def test_a_reader_of_no_tenant_is_refused_on_a_tenant_app(runner: FlowRunner) -> None:
    page = session(runner, Principal("nobody", roles=frozenset({"editor"}))).get("/")
    assert page.status_code == 403
    assert refusal(page.text) == (
        "desk_ticket records belong to tenants, and the application names no tenant of yours"
    )
