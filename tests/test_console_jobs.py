"""The Operations room's Jobs page over HTTP: the jobs of the purchasing app, when each
runs; an operator pauses and resumes the nightly close there, journaled with their name;
a reader who does not operate sees no buttons and is refused. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import migrated
import pytest
import sqlalchemy as sa
from console import OPERATOR, READER, Session, console, refusal, said, text

from fixtures.purchase_orders import app, scheduled
from flowrunner import Jobs, flow_runner, testing


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    migrated.upgrade(any_engine)
    app.metadata.create_all(any_engine)
    scheduled.metadata.create_all(any_engine)
    runner = flow_runner(
        app.binding,
        any_engine,
        commands={**app.COMMANDS, **scheduled.JOB_COMMANDS},
        authorize=scheduled.grants,
    )
    scheduled.mount(runner)
    return testing.FlowDriver(runner, start=datetime(2026, 3, 5, 12, tzinfo=UTC))


def job_row(page: str, name: str) -> str:
    found = re.search(rf'<tr data-job="{name}">(.*?)</tr>', page, re.S)
    assert found is not None, page
    return text(found.group(1))


def test_an_operator_pauses_and_resumes_a_job_journaled(driver: testing.FlowDriver) -> None:
    ui = console(driver, OPERATOR)
    page = ui.get("/ops/jobs")
    assert page.status_code == 200
    assert job_row(page.text, "nightly_close").startswith(
        "nightly_close every weekday at 06:00 (America/New_York) close_stale_orders (as clock)"
    )
    assert job_row(page.text, "remind_buyer").startswith("remind_buyer on the po decided event")

    paused = ui.follow(ui.post("/ops/jobs/pause", {"job": "nightly_close"}))
    assert said(paused.text) == "Paused job nightly_close: it runs no slot until resumed."
    assert "paused by olga" in job_row(paused.text, "nightly_close")
    driver.advance("2 days")  # Friday's slot comes and goes: the job is paused
    jobs = driver.runner.jobs
    assert isinstance(jobs, Jobs)
    run = jobs.scheduled_run("nightly_close")
    assert run is not None
    assert [line.what for line in driver.history(run.id)][-1] == "job_paused"

    resumed = ui.follow(ui.post("/ops/jobs/resume", {"job": "nightly_close"}))
    assert said(resumed.text) == "Resumed job nightly_close."
    assert "Resume" not in job_row(resumed.text, "nightly_close")
    journal = ui.get("/ops/journal").text
    assert "olga resumed job 'nightly_close'" in text(journal)
    assert "olga paused job 'nightly_close'" in text(journal)


def test_a_reader_who_does_not_operate_sees_no_buttons_and_is_refused(
    driver: testing.FlowDriver,
) -> None:
    ui = console(driver, READER)
    page = ui.get("/ops/jobs").text
    assert "Pause" not in job_row(page, "nightly_close")
    refused = ui.post("/ops/jobs/pause", {"job": "nightly_close"})
    assert refused.status_code == 403
    assert refusal(refused.text) == "rita may not pause a job"


def test_an_unknown_job_is_refused_with_the_names_there_are(driver: testing.FlowDriver) -> None:
    ui: Session = console(driver, OPERATOR)
    refused = ui.post("/ops/jobs/pause", {"job": "nightly"})
    assert refused.status_code == 404
    assert refusal(refused.text) == "there is no job 'nightly' (jobs: nightly_close, remind_buyer)"
