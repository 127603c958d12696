"""Acceptance: what ``flowrunner worker --help`` says SIGTERM does, it does — a worker
signalled in the middle of a run's slow command finishes that run (the command, and the
steps after it) and commits it before it exits; and with ``--log-format json`` every
line the worker and the console write on standard error is one JSON object."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import forked
import migrated
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import mount, ticket
from serving import free_port

from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]

# The desk's handover, slow: its command takes two seconds, and a set step follows it.
SLOW_APP = """\
import pathlib
import time

import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner.runner import flow_runner


def slow_assign(ctx):
    pathlib.Path("started").write_text("yes")
    time.sleep(2)
    tickets.assign_ticket(ctx)


def runner(url=None):
    engine = sa.create_engine(url or "sqlite:///desk.db")
    return flow_runner(
        tickets.binding, engine, commands={**tickets.COMMANDS, "assign_ticket": slow_assign}
    )
"""

FLOWS = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
    - {position: 2, kind: set, title: Urgent, field: priority, value: urgent}
"""


def test_the_help_says_what_a_signal_does() -> None:
    shown = CliRunner().invoke(cli, ["worker", "--help"]).output
    assert "SIGTERM or Ctrl-C: it finishes the runs in hand" in " ".join(shown.split())
    assert "current step" not in shown


@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_signalled_worker_finishes_the_run_in_hand(tmp_path: Path, log_format: str) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'desk.db'}")
    mount(engine, "tickets", flows=FLOWS).create(ticket(1), run=False)
    (tmp_path / "slowdesk.py").write_text(SLOW_APP, encoding="utf-8")
    process = forked.popen(
        [
            *FLOWRUNNER,
            "worker",
            "--app",
            "slowdesk:runner",
            "--poll",
            "0.1",
            "--log-format",
            log_format,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():  # the slow command has begun
        assert time.monotonic() < deadline and process.poll() is None, process.stderr
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "advanced 1 run(s) of 1 claimed (0 failed)" in out
    with engine.connect() as conn:
        status = conn.execute(sa.text("select status from flowrunner_runs")).scalar_one()
        row = conn.execute(sa.text("select assignee, priority from ticket")).one()
    engine.dispose()
    assert (status, tuple(row)) == ("done", ("triage", "urgent"))
    if log_format == "text":
        assert "finishing the runs in hand, then stopping" in err and "worker stopped" in err
        return
    lines = [json.loads(line) for line in err.splitlines()]  # every one of them JSON
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    messages = [line["message"] for line in lines]
    assert "received signal 15; finishing the runs in hand, then stopping" in messages
    assert messages[-1] == "worker stopped"
    assert any(m.startswith("claimed 1 run(s)") for m in messages), messages


@pytest.mark.slow
def test_the_console_writes_json_lines_uvicorns_too(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    engine = sa.create_engine(url)
    migrated.upgrade(engine)
    engine.dispose()
    port = free_port()
    app = ["--app", "fixtures.purchase_orders.app:runner", "--database", url]
    options = ["--token", "0123456789abcdef", "--port", str(port), "--log-format", "json"]
    process = forked.popen(
        [*FLOWRUNNER, "console", *app, *options],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        if "Uvicorn running on" in line:
            break
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/console.js") as answer:
        assert answer.status == 200
    process.terminate()
    seen += process.stderr.readlines()
    process.wait(timeout=30)
    process.stderr.close()
    lines = [json.loads(line) for line in seen]  # every one of them JSON
    messages = [line["message"] for line in lines]
    assert messages[0].startswith("The console of purchase_order on http://127.0.0.1:")
    assert any("GET /static/console.js" in m for m in messages), messages  # uvicorn's access
    assert {line["logger"] for line in lines} >= {"flowrunner.cli", "uvicorn.error"}
