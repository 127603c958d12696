"""A flow's dashboard over HTTP: its figures equal what the database says, counted in SQL
here, independently of the dashboard's own queries — runs started and ended per day, per
status, where runs wait now and where they failed, how many are late, the steps that
gave up, the median time to finish and at each step. The Operations room and a record's
page refresh themselves unless asked not to. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from typing import Any

import desk as desk_app
import pytest
import sqlalchemy as sa
from console import OPERATOR, Session, as_, console, text
from reviews import reviewed
from sizes import sized

from flowrunner import testing
from flowrunner.store import dashboard, dialects, flow_rows
from flowrunner.web.console import Principal

ACME = Principal("amy", tenant="acme", roles=frozenset({"operator", "editor"}))
GLOBEX = Principal("gus", tenant="globex", roles=frozenset({"operator", "editor"}))
TRIAGE = """
flows:
  - name: Triage
    start: created
    steps:
      - {position: 1, kind: waitFor, title: Reply, event: desk.replied, duration: 2 days}
"""


@pytest.fixture(scope="module")
def days() -> int:
    return sized(6, 24)


@pytest.fixture
def desk(any_engine: sa.Engine, days: int) -> testing.FlowDriver:
    return reviewed(any_engine, days)


@pytest.fixture
def ui(desk: testing.FlowDriver) -> Session:
    return console(desk, OPERATOR)


def table(page: str, name: str) -> list[dict[str, str]]:
    """The rows of the table ``name`` as their data attributes."""
    found = re.search(rf'<table class="figures" id="{name}">(.*?)</table>', page, re.S)
    assert found is not None, name
    return [
        dict(re.findall(r'data-([\w-]+)="([^"]*)"', row))
        for row in re.findall(r"<tr (data-[^>]*)>", found.group(1))
    ]


def sql(desk: testing.FlowDriver, postgres: str, sqlite: str, **params: Any) -> list[Any]:
    engine = desk.runner.engine
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("SET TIME ZONE 'UTC'"))
        query = sqlite if engine.dialect.name == "sqlite" else postgres
        return list(conn.execute(sa.text(query), params))


def test_runs_per_day_and_per_status_are_those_the_database_holds(
    desk: testing.FlowDriver, ui: Session, days: int
) -> None:
    page = ui.get("/flow/1/dashboard")
    assert page.status_code == 200, page.text
    started = dict(
        sql(
            desk,
            "SELECT CAST(started_at AS date)::text, count(*) FROM flowrunner_runs "
            "WHERE flow_id = '1' GROUP BY 1",
            "SELECT date(started_at), count(*) FROM flowrunner_runs WHERE flow_id = '1' GROUP BY 1",
        )
    )
    ended = dict(
        sql(
            desk,
            "SELECT CAST(ended_at AS date)::text, count(*) FROM flowrunner_runs "
            "WHERE flow_id = '1' AND ended_at IS NOT NULL GROUP BY 1",
            "SELECT date(ended_at), count(*) FROM flowrunner_runs "
            "WHERE flow_id = '1' AND ended_at IS NOT NULL GROUP BY 1",
        )
    )
    shown = table(page.text, "per-day-table")
    assert len(shown) == 30
    assert {r["day"]: int(r["started"]) for r in shown if r["started"] != "0"} == started
    assert {r["day"]: int(r["ended"]) for r in shown if r["ended"] != "0"} == ended
    assert sum(started.values()) == 3 * days + 4
    # The chart draws one bar per day with runs started, one per day with runs ended.
    assert page.text.count('class="bar started"') == len(started)
    assert page.text.count('class="bar ended"') == len(ended)

    statuses = dict(
        sql(
            desk,
            "SELECT status, count(*) FROM flowrunner_runs WHERE flow_id = '1' GROUP BY status",
            "SELECT status, count(*) FROM flowrunner_runs WHERE flow_id = '1' GROUP BY status",
        )
    )
    counts = dict(re.findall(r'data-status="(\w+)" data-count="(\d+)"', page.text))
    assert {k: int(v) for k, v in counts.items() if v != "0"} == statuses
    assert statuses["failed"] > 0 and statuses["done"] > 0 and statuses["waiting"] == 2


def test_where_runs_wait_now_how_many_are_late_and_where_they_failed(
    desk: testing.FlowDriver, ui: Session
) -> None:
    page = ui.get("/flow/1/dashboard").text
    at = {
        "postgresql": "(state->>'position')::int",
        "sqlite": "json_extract(state, '$.position')",
    }
    now = desk.now
    found: Counter[tuple[int, str, bool]] = Counter()
    for dialect, spelled in at.items():
        if desk.runner.engine.dialect.name != dialect:
            continue
        query = (
            f"SELECT {spelled}, r.status, d.due_at < :now FROM flowrunner_runs r "
            "LEFT JOIN flowrunner_due d ON d.run_id = r.id "
            "WHERE r.flow_id = '1' AND r.status IN ('running', 'waiting', 'failed')"
        )
        found = Counter(
            (-1 if p is None else int(p), str(state), bool(late))
            for p, state, late in sql(desk, query, query, now=now)
        )
    expected: dict[str, dict[str, int]] = defaultdict(lambda: {"w": 0, "l": 0, "f": 0})
    for (position, status_now, late), count in found.items():
        mine = expected[str(position)]
        if status_now == "failed":
            mine["f"] += count
        else:
            mine["w"] += count
            mine["l"] += count if late else 0
    shown = {
        r["position"]: {"w": int(r["waiting"]), "l": int(r["late"]), "f": int(r["failed"])}
        for r in table(page, "now-table")
    }
    assert shown == dict(expected)
    assert sum(p["l"] for p in shown.values()) == 2
    assert sum(p["f"] for p in shown.values()) > 0
    # The diagram's boxes carry them: the waiting step says how many wait there.
    box = r'<article class="frd-step"[^>]*data-step="2".*?class="frd-state"[^>]*><p>(.*?)</p>'
    reply = re.search(box, page, re.S)
    assert reply is not None
    assert text(reply.group(1)).endswith(f"{expected['2']['w']} waiting")


def test_the_steps_that_gave_up_and_the_median_times(desk: testing.FlowDriver, ui: Session) -> None:
    page = ui.get("/flow/1/dashboard").text
    gave_up = dict(
        sql(
            desk,
            "SELECT step_id, count(*) FROM flowrunner_step_log WHERE what = 'timed_out' "
            "GROUP BY step_id",
            "SELECT step_id, count(*) FROM flowrunner_step_log WHERE what = 'timed_out' "
            "GROUP BY step_id",
        )
    )
    assert {r["step"]: int(r["gave-up"]) for r in table(page, "breaches-table")} == gave_up

    took = sql(
        desk,
        "SELECT extract(epoch FROM ended_at - started_at) FROM flowrunner_runs "
        "WHERE flow_id = '1' AND status = 'done'",
        "SELECT (julianday(ended_at) - julianday(started_at)) * 86400 FROM flowrunner_runs "
        "WHERE flow_id = '1' AND status = 'done'",
    )
    [finish] = table(page, "finish-table")
    assert int(finish["count"]) == len(took)
    assert float(finish["median"]) == pytest.approx(statistics.median(float(t) for (t,) in took))

    # A step's time: from its first line to the line that ended the pass (flow's clock).
    lines = sql(
        desk,
        "SELECT run_id, step_id, pass, what, coalesce(due_at, at) FROM flowrunner_step_log "
        "WHERE step_id IS NOT NULL AND what NOT IN ('cancel_done', 'cancel_failed')",
        "SELECT run_id, step_id, pass, what, coalesce(due_at, at) FROM flowrunner_step_log "
        "WHERE step_id IS NOT NULL AND what NOT IN ('cancel_done', 'cancel_failed')",
    )
    passes: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for run_id, step_id, pass_, what, moment in lines:
        passes[(run_id, step_id, pass_)].append((what, moment))
    times: dict[str, list[float]] = defaultdict(list)
    for (_, step_id, _), seen in passes.items():
        if any(what in ("done", "arrived", "timed_out", "failed", "cancel") for what, _ in seen):
            moments = [m if not isinstance(m, str) else _moment(m) for _, m in seen]
            times[str(step_id)].append((max(moments) - min(moments)).total_seconds())
    shown = {r["step"]: r for r in table(page, "steps-table")}
    for step_id, seconds in times.items():
        assert int(shown[step_id]["count"]) == len(seconds)
        assert float(shown[step_id]["median"]) == pytest.approx(statistics.median(seconds))
    # The reply step: answered within hours, or given up after two days.
    assert 3600 <= float(shown["2"]["median"]) <= 2 * 86400
    assert int(shown["2"]["count"]) == int(shown["1"]["count"]) - 2  # two not yet answered


def _moment(value: str) -> Any:
    from datetime import UTC, datetime

    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def test_a_flow_links_to_its_dashboard_and_an_unknown_flow_has_none(ui: Session) -> None:
    assert 'href="/flow/1/dashboard"' in ui.get("/flow/1").text
    assert 'href="/flow/1/dashboard"' in ui.get("/").text
    assert ui.get("/flow/99/dashboard").status_code == 404


def test_the_operations_room_and_a_records_page_refresh_unless_asked_not_to(
    ui: Session,
) -> None:
    for path in ("/ops", "/record/1"):
        page = ui.get(path).text
        assert '<meta name="flowrunner-refresh" content="30">' in page
        assert f'href="{path}?refresh=off"' in page
        stopped = ui.get(path, refresh="off").text
        assert "flowrunner-refresh" not in stopped
        assert "This page does not refresh." in stopped
    assert "flowrunner-refresh" not in ui.get("/flow/1/dashboard").text


def test_with_more_runs_than_it_reads_the_steps_say_of_which(
    ui: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "RUNS", 5)
    page = ui.get("/flow/1/dashboard").text
    assert "Of the newest 5 runs started in these days." in text(page)
    # The newest five: two not yet at a step, three asked.
    assert {r["step"]: int(r["count"]) for r in table(page, "steps-table")}["1"] == 3


def test_a_tenant_sees_the_dashboard_of_its_own_flows_only(any_engine: sa.Engine) -> None:
    runner = desk_app.runner(any_engine)
    acme = Session(runner.console(principal=as_(ACME)))
    globex = Session(runner.console(principal=as_(GLOBEX)))
    for ui in (acme, globex):
        assert ui.post("/import", {"yaml": TRIAGE}).status_code == 303
    with runner.engine.connect() as conn:
        owner = {str(f["id"]): f["tenant_id"] for f in flow_rows.all_flows(conn, runner.tables)}
    mine = next(i for i, t in sorted(owner.items()) if t == "acme")
    theirs = next(i for i, t in sorted(owner.items()) if t == "globex")
    for n, tenant in ((1, "acme"), (2, "acme"), (3, "globex")):
        with dialects.begin(runner.engine) as conn:
            record = {"id": n, "tenant_id": tenant, "status": "new"}
            conn.execute(desk_app.ticket.insert().values(**record))
            runner.record_created(conn, record)
    runner.run_due()
    page = acme.get(f"/flow/{mine}/dashboard")
    assert page.status_code == 200
    assert sum(int(r["started"]) for r in table(page.text, "per-day-table")) == 2
    assert acme.get(f"/flow/{theirs}/dashboard").status_code == 404
    page = globex.get(f"/flow/{theirs}/dashboard")
    assert sum(int(r["started"]) for r in table(page.text, "per-day-table")) == 1


def test_a_step_the_reader_may_not_read_is_in_no_chart_table_or_box(
    desk: testing.FlowDriver,
) -> None:
    def reads(_principal: Principal, step: Any) -> bool:
        return bool(step.get("title") != "Hand over")

    ui = console(desk, OPERATOR, can_read=reads)
    page = ui.get("/flow/1/dashboard").text
    assert "Hand over" not in page
    assert "3" not in {r["step"] for r in table(page, "steps-table")}
    assert "3" not in {r["position"] for r in table(page, "now-table")}
    assert {r["step"] for r in table(page, "steps-table")} == {"1", "2"}
