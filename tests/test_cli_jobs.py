"""``flowrunner jobs``: an operator lists the purchasing app's jobs and runs the nightly
close now, through click's runner and once as a real process; what cannot be done is
refused in one line."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import forked
import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.purchase_orders.scheduled:runner"
TICKETS = "fixtures.tickets.app:runner"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(url)
    migrated.upgrade(engine)
    engine.dispose()
    return url


def jobs(url: str, *args: str, app: str = APP) -> Result:
    return CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["jobs", args[0], "--app", app, "--database", url, *args[1:]]
    )


def document(url: str, *args: str, code: int = 0) -> Any:
    result = jobs(url, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_the_list_names_each_job_with_when_it_runs(url: str) -> None:
    result = jobs(url, "list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["job", "when", "command", "as", "next", "last"]
    assert lines[1].startswith(
        "nightly_close  every weekday at 06:00 (America/New_York)  close_stale_orders"
    )
    assert lines[2].split() == [
        "remind_buyer",
        "on",
        "the",
        "po",
        "decided",
        "event",
        "remind_buyer",
        "clock",
        "-",
        "-",
    ]
    found = {job["name"]: job for job in document(url, "list")["jobs"]}
    assert found["nightly_close"]["run"] is not None  # listing made the job's run
    assert found["nightly_close"]["timezone"] == "America/New_York"
    assert lines[1].split()[-2:] == ["06:00", "-"]  # the next slot on New York's clock
    assert found["nightly_close"]["next_at"].endswith(("T10:00:00+00:00", "T11:00:00+00:00"))
    assert found["remind_buyer"] == {
        "name": "remind_buyer",
        "when": "on po.decided",
        "command": "remind_buyer",
        "run_as": "clock",
        "timezone": None,
        "run": None,
        "next_at": None,
        "last_slot": None,
        "paused_by": None,
    }


def test_a_job_run_now_is_journaled_and_shows_in_its_runs_history(url: str) -> None:
    ran = document(url, "run", "nightly_close", "--operator", "olga")
    assert ran == {"job": "nightly_close", "run": ran["run"], "ok": True, "error": None}
    shown = CliRunner().invoke(
        cli, ["runs", "show", str(ran["run"]), "--app", APP, "--database", url, "--json"]
    )
    assert shown.exit_code == 0, shown.output
    sentences = [line["sentence"] for line in json.loads(shown.stdout)["history"]]
    assert sentences[-1] == "olga ran close stale orders by hand"
    listed = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["runs", "list", "--app", APP, "--database", url]
    )
    [row] = [re.split(r"\s{2,}", line.strip()) for line in listed.stdout.splitlines()[1:]]
    assert row[1:4] == ["nightly_close", "", "waiting"] or row[1:3] == ["nightly_close", "waiting"]
    assert any(cell.startswith("runs at ") for cell in row), row
    journal = CliRunner().invoke(
        cli, ["runs", "journal", "--app", APP, "--database", url, "--json"]
    )
    [entry] = json.loads(journal.stdout)["entries"]
    assert (entry["operator"], entry["action"], entry["run"]) == ("olga", "job_run", ran["run"])
    assert entry["sentence"] == f"olga ran job 'nightly_close' now (run {ran['run']})"


@pytest.mark.parametrize(
    ("args", "app", "says"),
    [
        (
            ("run", "nightly", "--operator", "olga"),
            APP,
            "Error: there is no job 'nightly' (jobs: nightly_close, remind_buyer)",
        ),
        (
            ("run", "remind_buyer", "--operator", "olga"),
            APP,
            "Error: job 'remind_buyer' runs on event 'po.decided': it runs when an event "
            "plans it, not by hand",
        ),
        (
            ("run", "nightly_close", "--operator", "olga"),
            TICKETS,
            "Error: there is no job 'nightly_close': the app mounts no jobs",
        ),
    ],
)
def test_what_cannot_be_run_is_refused_in_one_line(
    url: str, args: tuple[str, ...], app: str, says: str
) -> None:
    result = jobs(url, *args, app=app)
    assert result.exit_code == 2
    assert result.output.strip() == says


def test_an_app_without_jobs_lists_none(url: str) -> None:
    result = jobs(url, "list", app=TICKETS)
    assert (result.exit_code, result.stdout.strip()) == (0, "the app mounts no jobs")
    assert document(url, "list")["jobs"]


def test_jobs_run_as_a_real_process(url: str) -> None:
    done = forked.run(
        [
            sys.executable,
            "-m",
            "flowrunner",
            "jobs",
            "run",
            "nightly_close",
            "--app",
            APP,
            "--database",
            url,
            "--operator",
            "olga",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ran job nightly_close (run ")


def test_an_operator_pauses_and_resumes_a_job_journaled(url: str) -> None:
    paused = document(url, "pause", "nightly_close", "--operator", "olga")
    assert paused["job"] == "nightly_close" and paused["paused"] is True
    [job] = [job for job in document(url, "list")["jobs"] if job["name"] == "nightly_close"]
    assert (job["paused_by"], job["next_at"]) == ("olga", None)
    listed = jobs(url, "list")
    assert "paused by olga" in listed.stdout
    resumed = jobs(url, "resume", "nightly_close", "--operator", "pat")
    assert (resumed.exit_code, resumed.stdout.strip()) == (0, "resumed job nightly_close")
    [job] = [job for job in document(url, "list")["jobs"] if job["name"] == "nightly_close"]
    assert job["paused_by"] is None
    journal = CliRunner().invoke(
        cli, ["runs", "journal", "--app", APP, "--database", url, "--json"]
    )
    said = [entry["sentence"] for entry in json.loads(journal.stdout)["entries"]]
    assert said == ["pat resumed job 'nightly_close'", "olga paused job 'nightly_close'"]


def test_an_operator_backfills_a_week_of_slots_once(url: str) -> None:
    today = datetime.now(UTC).date()
    monday = datetime.combine(today - timedelta(days=today.weekday() + 7), time(), UTC)
    since, until = monday.isoformat(), (monday + timedelta(days=4, hours=23)).isoformat()
    args = ("backfill", "nightly_close", "--operator", "olga", "--from", since, "--to", until)
    first = document(url, *args)
    assert len(first["slots"]) == 5  # Monday to Friday at six in New York
    assert len(first["started"]) == 5 and first["ran_already"] == []
    again = jobs(url, *args)
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == (
        "backfilled job nightly_close: 5 slots, 0 runs started, 0 had run already"
    )
    journal = CliRunner().invoke(
        cli, ["runs", "journal", "--app", APP, "--database", url, "--json"]
    )
    [latest, earlier] = json.loads(journal.stdout)["entries"]
    assert (latest["operator"], latest["action"]) == ("olga", "job_backfill")
    assert earlier["sentence"].startswith("olga backfilled job 'nightly_close' from ")
    assert earlier["sentence"].endswith(": 5 slots, 5 started")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("backfill", "nightly_close", "--operator", "olga", "--from", "monday", "--to", "x"),
            "Error: --from 'monday' is not a moment: write it as 2026-03-02T06:00 (UTC) or "
            "2026-03-02T06:00-05:00",
        ),
        (
            ("pause", "remind_buyer", "--operator", "olga"),
            "Error: job 'remind_buyer' runs on event 'po.decided': it runs when an event "
            "plans it, not by hand",
        ),
    ],
)
def test_what_cannot_be_steered_is_refused_in_one_line(
    url: str, args: tuple[str, ...], says: str
) -> None:
    result = jobs(url, *args)
    assert result.exit_code == 2
    assert result.output.strip() == says


@pytest.mark.parametrize("command", ["list", "run", "pause", "resume", "backfill"])
def test_each_command_explains_itself_with_an_example(command: str) -> None:
    result = CliRunner().invoke(cli, ["jobs", command, "--help"])
    assert result.exit_code == 0
    assert f"flowrunner jobs {command} " in result.output
