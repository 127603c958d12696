"""``flowrunner prune`` through click's runner, and once as a real process."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from running import PRUNABLE, mount

from flowrunner.cli import cli
from flowrunner.store import engine_tables

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.tickets.app:runner"


def ticket(n: int, status: str) -> dict[str, object]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "status": status}


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A desk whose three tickets were done 200 days ago; one waits, one is new."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "tickets", flows=PRUNABLE, start=datetime.now(UTC) - timedelta(days=200))
    for n in (1, 2, 3):
        driver.create(ticket(n, "open"))
    driver.create(ticket(4, "listen"))
    driver.emit("ticket.replied", {"ticket": 3})  # about a record no run listens to
    driver.advance("199 days")
    driver.create(ticket(5, "open"))  # too young, and the newest run
    driver.emit("ticket.replied", {"ticket": 5})  # too young, and the newest event
    for notice in driver.runner.notices():
        driver.runner.mark_delivered(notice.id)
    engine.dispose()
    return url


def prune(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["prune", *args])
    return result.exit_code, result.stdout, result.stderr


def runs(url: str) -> list[str]:
    engine = sa.create_engine(url)
    table = engine_tables.runs
    with engine.connect() as conn:
        found = conn.execute(sa.select(table.c.record_id).order_by(table.c.id)).scalars().all()
    engine.dispose()
    return list(found)


def test_a_dry_run_counts_and_a_prune_deletes_the_same(url: str) -> None:
    args = ["--app", APP, "--database", url, "--older-than", "90d"]
    code, out, err = prune(*args, "--dry-run", "--json")
    assert (code, err) == (0, "")
    planned = json.loads(out)
    assert planned.pop("dry_run") is True
    before = datetime.fromisoformat(planned.pop("before"))
    assert abs(before - (datetime.now(UTC) - timedelta(days=90))) < timedelta(minutes=5)
    # Three done tickets go with their history and notices, and the old event.
    assert planned["runs"] == 3 and planned["notices"] == 3 and planned["history"] > 3
    assert (planned["events"], planned["idempotency"]) == (1, 0)
    assert runs(url) == ["1", "2", "3", "4", "5"]

    code, out, _ = prune(*args, "--json", "--batch", "1")
    assert code == 0
    done = json.loads(out)
    assert done.pop("dry_run") is False
    del done["before"]
    assert done == planned
    assert runs(url) == ["4", "5"]

    code, out, _ = prune(*args)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("deleted, of what ended or happened before ")
    assert [line.split() for line in lines[1:]] == [
        ["ended", "runs", "0"],
        ["history", "lines", "0"],
        ["delivered", "notices", "0"],
        ["events", "0"],
        ["idempotency", "records", "0"],
        ["callback", "answers", "0"],
    ]

    code, out, _ = prune(*args, "--dry-run")
    assert code == 0
    assert out.startswith("would delete, of what")
    assert out.splitlines()[-1] == "nothing was deleted (dry run)"


def test_help_says_what_goes_what_stays_and_that_workers_may_run(url: str) -> None:
    code, out, _ = prune("--help")
    assert code == 0
    for words in (
        "--older-than DURATION",
        "90d",
        "--dry-run",
        "--include-failed",
        "--json",
        "--batch",
        "undelivered notices",
        "operator journal",
        "Safe while workers run",
        "Exit status: 0 done",
    ):
        assert words in out, words


def test_what_cannot_be_used_is_refused_in_one_line_with_exit_status_2(url: str) -> None:
    app = ["--app", APP, "--database", url]
    for args, expected in (
        ([*app, "--older-than", "90 dayz"], "'90 dayz' is not a duration"),
        ([*app, "--older-than", "10m"], "a prune keeps at least the last 1 hour"),
        ([*app, "--older-than", "90d", "--batch", "0"], "0 is not in the range 1<=x<=10000"),
        (["--app", APP, "--database", "not a url", "--older-than", "90d"], "not a database URL"),
        (["--app", "nocolon", "--database", url, "--older-than", "90d"], "MODULE:ATTR"),
    ):
        code, _, err = prune(*args)
        assert code == 2, (args, err)
        [line] = err.strip().splitlines()[-1:]
        assert line.startswith("Error: ") and expected in line, (args, err)
    assert runs(url) == ["1", "2", "3", "4", "5"]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    older_than=st.sampled_from(["90d", "2 hours", "P3M", "0s", "-5d", "1 yr", "9" * 12 + "d"])
    | st.text(max_size=12),
    batch=st.sampled_from(["1", "1000", "10000", "10001", "-1", "x"]),
    flags=st.lists(st.sampled_from(["--dry-run", "--json", "--include-failed"]), unique=True),
)
def test_any_command_line_is_done_or_refused_in_a_line(
    url: str, older_than: str, batch: str, flags: list[str]
) -> None:
    args = ["--app", APP, "--database", url, "--older-than", older_than, "--batch", batch]
    result = CliRunner().invoke(cli, ["prune", *args, *flags])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert result.stderr.strip().splitlines()[-1].startswith("Error: "), result.stderr


@pytest.mark.slow
def test_prune_as_a_real_process(url: str) -> None:
    args = ["prune", "--app", APP, "--database", url, "--older-than", "90 days"]
    done = forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.splitlines()[1].split() == ["ended", "runs", "3"]
    assert runs(url) == ["4", "5"]
