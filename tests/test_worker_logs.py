"""What a worker logs: each claim at INFO (how many runs, whose, what became of them, how
long) and each run that failed at ERROR (which run, flow and record, and why, masked, on
one line). On SQLite and PostgreSQL; ``flowrunner worker``'s ``--log-level`` and progress
as real processes."""

from __future__ import annotations

import logging
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import desk
import forked
import pytest
import sqlalchemy as sa
from running import T0, mount, ticket

from flowrunner import errors, testing

ROOT = Path(__file__).resolve().parent.parent
CLAIM = re.compile(
    r"claimed (\d+) run\(s\)(?: for tenants? ([\w, ]+))?: (\d+) advanced \((\d+) failed\)"
    r"(, \d+ refused \(lease taken over\))?(, \d+ not advanced for an error)?, in \d+\.\d\d s$"
)

HAND_OVER = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
"""


def refuse(ctx: Any) -> None:
    raise errors.CommandRefused("the desk said no: password=hunter2\nask again tomorrow")


def claims(caplog: pytest.LogCaptureFixture) -> list[tuple[str, ...]]:
    """The claim lines logged, as (claimed, tenants, advanced, failed) each."""
    found: list[tuple[str, ...]] = []
    for record in caplog.records:
        if record.name == "flowrunner.engine.worker" and record.getMessage().startswith("claimed"):
            assert record.levelno == logging.INFO
            match = CLAIM.match(record.getMessage())
            assert match is not None, record.getMessage()
            found.append((match[1], match[2] or "", match[3], match[4]))
    return found


def test_each_claim_is_one_info_line_naming_its_tenants(
    any_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    runner = desk.runner(any_engine)
    with any_engine.begin() as conn:
        for tenant in ("acme", "globex"):
            flow = runner.save_flow(
                conn, {"name": "Triage", "start": "created", "tenant_id": tenant}
            )
            runner.save_step(
                conn,
                {"flow_id": flow, "position": 1, "kind": "set", "field": "status",
                 "value": "seen", "tenant_id": tenant},
            )  # fmt: skip
    driver = testing.FlowDriver(runner, start=T0)
    caplog.set_level(logging.INFO, logger="flowrunner.engine.worker")
    driver.create({"id": 1, "tenant_id": "acme"})
    assert claims(caplog) == [("1", "acme", "1", "0")]
    caplog.clear()
    for n, tenant in ((2, "globex"), (3, "acme"), (4, "globex")):
        driver.create({"id": n, "tenant_id": tenant}, run=False)
    driver.run_until_idle()  # one claim takes the three; a round that finds none says nothing
    assert claims(caplog) == [("3", "acme, globex", "3", "0")]


def test_a_failed_run_is_one_error_line_with_its_reason_masked(
    any_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    driver = mount(any_engine, "tickets", flows=HAND_OVER, commands={"assign_ticket": refuse})
    caplog.set_level(logging.INFO, logger="flowrunner.engine.worker")
    driver.create(ticket(7))
    [run] = driver.runs(7)
    assert run.status == "failed"
    [line] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.getMessage() == (
        f"run {run.id} of flow 'Hand over' on ticket 7 failed: step 'Hand over' (assign, "
        "position 1) failed: the command refused: the desk said no: password=[redacted] "
        "ask again tomorrow"
    )
    assert claims(caplog) == [("1", "", "1", "1")]
    assert driver.worker.stats.failed == 1


def test_an_idle_worker_logs_nothing(
    sqlite_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    driver = mount(sqlite_engine, "tickets", flows=HAND_OVER)
    caplog.set_level(logging.DEBUG, logger="flowrunner.engine.worker")
    assert driver.run_until_idle() == 0
    assert caplog.records == []


# -- flowrunner worker, as a real process -----------------------------------------------------

# The tickets app with its assign command refusing, for a run that fails.
REFUSING_APP = """\
import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner import errors
from flowrunner.runner import flow_runner


def refuse(ctx):
    raise errors.CommandRefused("the desk said no: token=abc123")


def runner(url=None):
    commands = {**tickets.COMMANDS, "assign_ticket": refuse}
    return flow_runner(tickets.binding, sa.create_engine(url), commands=commands)
"""

TELL_OR_HAND_OVER = """
- name: Tell
  start: created
  condition: status = open
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Hello}
- name: Hand over
  start: created
  condition: status = handover
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
"""


@pytest.fixture
def desk_with_due_runs(tmp_path: Path) -> str:
    """Five tickets whose runs are due: four to tell, one to hand over (which fails)."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    (tmp_path / "refusing_app.py").write_text(REFUSING_APP, encoding="utf-8")
    engine = sa.create_engine(url)
    driver = mount(engine, "tickets", flows=TELL_OR_HAND_OVER)
    for n in range(1, 6):
        driver.create({**ticket(n), "status": "handover" if n == 5 else "open"}, run=False)
    engine.dispose()
    return url


def command(url: str, *args: str) -> list[str]:
    app = ["--app", "refusing_app:runner", "--database", url]
    return [sys.executable, "-m", "flowrunner", "worker", *app, "--once", *args]


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}


def worker(cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run(
        command(url, *args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        check=False,
    )


@pytest.mark.slow
def test_the_worker_logs_claims_at_info_and_failures_always(
    tmp_path: Path, desk_with_due_runs: str
) -> None:
    url = desk_with_due_runs
    quiet = worker(tmp_path, url, "--log-level", "error")
    assert quiet.returncode == 0, quiet.stderr
    [line] = quiet.stderr.splitlines()  # the failure alone, no claim, no library chatter
    assert " ERROR flowrunner.engine.worker run 5 of flow 'Hand over' on ticket 5 failed: " in line
    assert line.endswith("the command refused: the desk said no: token=[redacted]")
    assert quiet.stdout.startswith("advanced 5 run(s) of 5 claimed (1 failed); 0 refused")


@pytest.mark.slow
def test_log_levels_are_named_in_any_case_and_others_refused(
    tmp_path: Path, desk_with_due_runs: str
) -> None:
    url = desk_with_due_runs
    loud = worker(tmp_path, url, "--log-level", "Info", "--batch", "2")
    assert loud.returncode == 0, loud.stderr
    lines = loud.stderr.splitlines()
    infos = [
        line.partition(" INFO flowrunner.engine.worker ")[2] for line in lines if " INFO " in line
    ]
    # Claims of --batch runs each: 2, 2, then 1; the failure among them at ERROR.
    assert [re.findall(r"^claimed (\d+) run", line) for line in infos] == [["2"], ["2"], ["1"]]
    assert sum(" ERROR flowrunner.engine.worker run 5 " in line for line in lines) == 1
    assert "alembic" not in loud.stderr
    refused = worker(tmp_path, url, "--log-level", "loud")
    assert refused.returncode == 2
    assert "'loud' is not one of 'debug', 'info', 'warning', 'error'" in refused.stderr


@pytest.mark.slow
def test_once_shows_a_progress_bar_on_a_terminal_and_a_summary(
    tmp_path: Path, desk_with_due_runs: str
) -> None:
    leader, follower = pty.openpty()  # standard error is a terminal; standard output a pipe
    process = forked.popen(
        command(desk_with_due_runs, "--log-level", "warning"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
        env=ENV,
    )
    os.close(follower)
    shown = b""
    try:
        while chunk := _read(leader):
            shown += chunk
    finally:
        os.close(leader)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    terminal = shown.decode("utf-8", "replace")
    assert "advancing due runs" in terminal and "5/5" in terminal
    assert out.startswith("advanced 5 run(s) of 5 claimed (1 failed)")
    # Without a terminal, no bar: the summary and the failure's line alone.
    piped = worker(tmp_path, desk_with_due_runs, "--log-level", "error")
    assert piped.returncode == 0 and piped.stdout.startswith("advanced 0 run(s) of 0 claimed")
    assert piped.stderr == ""  # no bar, and nothing failed


def _read(fd: int) -> bytes:
    """What the terminal shows next; empty once the process closed it."""
    try:
        return os.read(fd, 65536)
    except OSError:  # Linux: EIO once the other end is closed
        return b""


def test_the_command_leaves_the_callers_logging_as_it_found_it(desk_with_due_runs: str) -> None:
    from click.testing import CliRunner

    from flowrunner.cli import cli

    root, alembic = logging.getLogger(), logging.getLogger("alembic")
    before = (list(root.handlers), root.level, alembic.level)
    app = ["--app", "fixtures.tickets.app:runner", "--database", desk_with_due_runs]
    result = CliRunner().invoke(cli, ["worker", *app, "--once", "--log-level", "debug"])
    assert result.exit_code == 0, result.output
    assert (
        " INFO flowrunner.engine.worker claimed 1 run(s): 1 advanced (0 failed), in "
        in result.stderr
    )
    assert (list(root.handlers), root.level, alembic.level) == before
