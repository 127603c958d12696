"""The Operations room as each reader's roles open it, on the help desk that declares its
roles: olga's open workflows and deliveries, jo's jobs. An operator without the jobs area
sees no jobs — no Jobs tab, no Jobs page, no job's runs — and acts only where she sees.
Over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import authorities
import migrated
import pytest
import sqlalchemy as sa
from console import Session, as_, refusal, rows

from flowrunner import Jobs, RowInvalid, testing
from flowrunner.web.console import Principal

START = datetime(2026, 3, 2, 9, tzinfo=UTC)
OLGA = Principal("olga")  # her declared principal holds ops-flows
JO = Principal("jo")  # ops-jobs
ROLES_GIVEN = Principal("pat", roles=frozenset({"ops-jobs", "ops-flows"}))  # by the app
NOBODY = Principal("rita", roles=frozenset({"operator"}))  # no declared role: no area


@pytest.fixture
def desk(any_engine: sa.Engine) -> testing.FlowDriver:
    migrated.upgrade(any_engine)
    driver = testing.FlowDriver(authorities.build(any_engine), start=START)
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Triage", "start": "created"})
        wait = {"flow_id": flow, "position": 1, "kind": "wait", "duration": "2 days"}
        runner.save_step(conn, wait)
    driver.create({"id": 7, "status": "open"})
    jobs = runner.jobs
    assert isinstance(jobs, Jobs)
    jobs.prepare()  # the nightly job's own run, waiting for its slot
    return driver


def session(desk: testing.FlowDriver, reader: Principal) -> Session:
    return Session(desk.runner.console(principal=as_(reader)))


def job_run(desk: testing.FlowDriver) -> int:
    jobs = desk.runner.jobs
    assert isinstance(jobs, Jobs)
    found = jobs.scheduled_run("nightly")
    assert found is not None
    return found.id


def test_an_operator_without_the_jobs_area_sees_no_jobs(desk: testing.FlowDriver) -> None:
    ui = session(desk, OLGA)
    room = ui.get("/ops")
    assert room.status_code == 200
    [flow_run] = [r.id for r in desk.runs(7)]
    assert rows(room.text, "run") == [str(flow_run)]  # the job's run is not listed
    assert ">Jobs</a>" not in room.text and ">Notices</a>" in room.text
    assert ">Deliveries</a>" in room.text
    assert ui.get("/ops/deliveries").status_code == 200
    page = ui.get("/ops/jobs")
    assert page.status_code == 403
    assert refusal(page.text) == (
        "olga may not see jobs here: none of their roles opens the Operations room's jobs area"
    )
    assert ui.post("/ops/jobs/pause", {"job": "nightly"}).status_code == 403
    assert ui.get(f"/run/{job_run(desk)}").status_code == 403
    # She acts on what she sees: her role's area lets her cancel the flow's run.
    done = ui.post("/ops/act", {"action": "cancel", "run": str(flow_run), "confirmed": "yes"})
    assert done.status_code == 200, done.text
    assert [r.status for r in desk.runs(7)] == ["cancelled"]


def test_an_operator_with_the_jobs_area_sees_jobs_and_only_jobs(desk: testing.FlowDriver) -> None:
    ui = session(desk, JO)
    room = ui.get("/ops")
    assert rows(room.text, "run") == [str(job_run(desk))]
    assert ">Jobs</a>" in room.text and ">Notices</a>" not in room.text
    assert ">Deliveries</a>" not in room.text
    assert ui.get("/ops/jobs").status_code == 200
    assert refusal(ui.get("/ops/deliveries").text) == (
        "jo may not see deliveries here: none of their roles opens the Operations room's "
        "deliveries area"
    )
    paused = ui.follow(ui.post("/ops/jobs/pause", {"job": "nightly"}))
    assert "paused by jo" in paused.text
    assert ui.get("/ops/notices").status_code == 403
    [flow_run] = [r.id for r in desk.runs(7)]
    refused = ui.post("/ops/act", {"action": "cancel", "run": str(flow_run), "confirmed": "yes"})
    assert f"jo may not cancel run {flow_run}" in refused.text
    assert [r.status for r in desk.runs(7)] == ["waiting"]


def test_roles_the_application_gives_its_reader_open_their_areas(
    desk: testing.FlowDriver,
) -> None:
    ui = session(desk, ROLES_GIVEN)
    room = ui.get("/ops")
    assert sorted(rows(room.text, "run"), key=int) == sorted(
        [str(job_run(desk)), *(str(r.id) for r in desk.runs(7))], key=int
    )
    assert ui.get("/ops/jobs").status_code == 200
    assert ui.get("/ops/notices").status_code == 200


def test_a_reader_whose_roles_open_no_area_is_refused_the_room(desk: testing.FlowDriver) -> None:
    ui = session(desk, NOBODY)
    for path in ("/ops", "/ops/jobs", "/ops/notices", "/ops/journal"):
        assert ui.get(path).status_code == 403, path


def test_the_runner_lists_the_runs_of_the_areas_asked(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    flow_runs = [r.id for r in desk.runs(7)]
    assert [r.id for r in runner.list_runs(areas={"jobs"})] == [job_run(desk)]
    assert [r.id for r in runner.list_runs(areas={"workflows"})] == flow_runs
    assert len(runner.list_runs(areas={"workflows", "jobs"}).rows) == 2
    assert runner.count_runs(areas={"jobs"})["waiting"] == 1
    with pytest.raises(RowInvalid) as refused:
        runner.list_runs(areas={"deliveries"})
    assert [(f.field, f.message) for f in refused.value.errors] == [
        ("areas", "name the areas whose runs to list: workflows, jobs or both")
    ]
