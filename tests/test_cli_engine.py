"""Acceptance: the engine's commands as a user runs them, each a real subprocess.

migrate → flows import → flows start (records older than their flows) → worker → demo.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
APP = "fixtures.tickets.app:runner"
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = forked.run(
        [*FLOWRUNNER, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},  # wide enough that tables do not wrap
    )
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_a_new_database_from_migrate_to_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    before = run("flows", "validate", "--app", APP, "--database", url, check=False)
    assert before.returncode == 2
    assert "flowrunner migrate up" in before.stderr + before.stdout
    assert "Traceback" not in before.stderr

    run("migrate", "up", "--app", APP, "--database", url)
    assert "current" in run("migrate", "status", "--app", APP, "--database", url).stdout
    run("flows", "import", "fixtures/tickets/flows.yaml", "--app", APP, "--database", url)

    engine = sa.create_engine(url)
    ticket = sa.Table("ticket", sa.MetaData(), autoload_with=engine)
    due = datetime.now(UTC) - timedelta(hours=1)
    with engine.begin() as conn:  # records written before any flow watched them
        conn.execute(
            sa.insert(ticket),
            [
                {
                    "id": n,
                    "title": f"T{n}",
                    "requester_id": "ann",
                    "status": "open" if n <= 3 else "resolved",
                    "due_at": due,
                    # The SLA timer (``at``) of ticket 2 is armed too, for tomorrow.
                    "warn_at": due + timedelta(days=1) if n == 2 else None,
                }
                for n in range(1, 6)
            ],
        )
    args = ["flows", "start", "ticket", "--app", APP, "--database", url]
    first = run(*args, "--where", "status = open").stdout
    assert "started 3 run(s)" in first and "armed 1 timer(s)" in first
    again = run(*args, "--where", "status = open").stdout
    assert "started 0 run(s)" in again and "armed 0 timer(s)" in again
    bad = run(*args, "--where", "stauts = open", check=False)
    assert bad.returncode == 2 and "unknown column 'stauts'" in bad.stderr

    done = run("worker", "--app", APP, "--database", url, "--once")
    assert "advanced" in done.stdout
    with engine.connect() as conn:
        statuses = conn.execute(sa.text("select status from flowrunner_runs")).scalars().all()
        priorities = conn.execute(sa.text("select priority from ticket where id <= 3")).all()
    assert sorted(statuses) == ["done"] * 3 + ["waiting"]  # the timer waits for tomorrow
    assert {p for (p,) in priorities} == {"high"}
    engine.dispose()


@pytest.mark.slow
def test_the_worker_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    run("migrate", "up", "--app", APP, "--database", url)
    process = forked.popen(
        [*FLOWRUNNER, "worker", "--app", APP, "--database", url, "--poll", "0.1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # printed once the worker serves
    assert "serving ticket" in first
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "worker stopped" in rest


@pytest.mark.slow
def test_the_demo_runs_both_sample_apps(tmp_path: Path) -> None:
    result = run("demo", "--dir", str(tmp_path / "demo"))
    out = result.stdout
    assert "Support desk" in out and "Purchase orders" in out
    assert "PO-1001: Your order was approved and goes to the supplier now." in out
    assert "Ticket 2: This ticket is due in four hours." in out
    again = run("demo", "--dir", str(tmp_path / "demo"), check=False)
    assert again.returncode == 2 and "already holds a demo" in again.stderr
