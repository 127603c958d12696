"""``flowrunner deliver`` and ``flowrunner worker --deliver`` through the real command
line, on a desk whose requester is told through a webhook on 127.0.0.1: what is due is
sent once (``--once``), the worker sends it beside its runs, a served deliverer stops
gracefully on SIGTERM, and a binding without channels is refused in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import forked
import pytest
import receivers
import sqlalchemy as sa
from click.testing import CliRunner
from running import mount

from flowrunner.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]

MYAPP = """\
import asyncio
import os

import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner import FlowBinding, NotifyRule, flow_runner
from flowrunner.delivery import Deliver, Webhook

values = {name: getattr(tickets.binding, name) for name in FlowBinding.model_fields}
values["channels"] = {"hooks": Webhook(url=os.environ["DESK_HOOK_URL"])}
values["notify"] = [
    NotifyRule(audience="requester", to="requester_id", channel="hooks"),
    NotifyRule(audience="assignee", to="assignee"),
]
binding = FlowBinding(**values)


def runner(url=None):
    engine = sa.create_engine(url or "sqlite:///desk.db")
    return flow_runner(binding, engine, commands=tickets.COMMANDS)


def _cancelled(message):
    raise asyncio.CancelledError()  # the app's task cancelled under it: not an Exception


cancelling = FlowBinding(**{**values, "channels": {"hooks": Deliver(_cancelled)}})


def cancelled(url=None):
    engine = sa.create_engine(url or "sqlite:///desk.db")
    return flow_runner(cancelling, engine, commands=tickets.COMMANDS)


def plain(url=None):
    return flow_runner(
        tickets.binding, sa.create_engine(url or "sqlite:///desk.db"), commands=tickets.COMMANDS
    )
"""

TELL = """
- name: Tell
  start: created
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Seen.}
"""


@pytest.fixture
def hooks() -> Iterator[receivers.Hooks]:
    with receivers.webhook_receiver() as receiver:
        yield receiver


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hooks: receivers.Hooks) -> Iterator[Path]:
    """The folder: myapp.py, and desk.db with two tickets whose notices are due."""
    monkeypatch.setenv("DESK_HOOK_URL", hooks.url)
    (tmp_path / "myapp.py").write_text(MYAPP, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import myapp  # type: ignore[import-not-found]  # the app the command loads

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'desk.db'}")
    driver = mount(engine, "tickets", flows=TELL, binding=myapp.binding)
    for n in (1, 2):
        driver.create({"id": n, "title": f"T{n}", "requester_id": f"r{n}", "status": "open"})
    engine.dispose()
    yield tmp_path
    sys.modules.pop("myapp", None)


def test_deliver_once_sends_what_is_due_and_says_so(desk: Path, hooks: receivers.Hooks) -> None:
    done = CliRunner().invoke(
        cli, ["deliver", "--app", "myapp:runner", "--once", "--json", "--log-level", "error"]
    )
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert {k: summary[k] for k in ("claimed", "sent", "retried", "failed")} == {
        "claimed": 2,
        "sent": 2,
        "retried": 0,
        "failed": 0,
    }
    assert sorted(hooks.accepted) == ["1", "2"]
    again = CliRunner().invoke(cli, ["deliver", "--app", "myapp:runner", "--once"])
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("sent 0 notice(s) of 0 claimed")
    assert len(hooks.received) == 2


def test_the_worker_delivers_beside_its_runs(desk: Path, hooks: receivers.Hooks) -> None:
    done = CliRunner().invoke(
        cli,
        [
            "worker",
            "--app",
            "myapp:runner",
            "--once",
            "--deliver",
            "--json",
            "--log-level",
            "error",
        ],
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["delivery"]["sent"] == 2
    assert sorted(hooks.accepted) == ["1", "2"]


def test_a_binding_without_channels_is_refused_in_one_line(desk: Path) -> None:
    done = CliRunner().invoke(cli, ["deliver", "--app", "myapp:plain", "--once"])
    assert done.exit_code == 2
    assert "the binding names no channels" in done.stderr
    worker = CliRunner().invoke(cli, ["worker", "--app", "myapp:plain", "--once", "--deliver"])
    assert worker.exit_code == 2
    assert "--deliver: the binding names no channels" in worker.stderr


def test_a_served_deliverer_stops_gracefully_on_sigterm(desk: Path, hooks: receivers.Hooks) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(desk)])}
    process = forked.popen(
        [sys.executable, "-m", "flowrunner", "deliver", "--app", "myapp:runner", "--poll", "0.05"],
        cwd=desk,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        lines = []
        # The two notices sent: each a log line; then the stop.
        for line in process.stderr:
            lines.append(line)
            if sum("sent notice" in seen for seen in lines) == 2:
                break
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "finishing the notice in hand, then stopping" in err
    assert out.startswith("sent 2 notice(s) of 2 claimed; 0 to try again, 0 failed for good")
    assert sorted(hooks.accepted) == ["1", "2"]


def test_a_worker_whose_deliverer_dies_stops_and_says_why(desk: Path) -> None:
    """The deliverer beside the runs dies of something its own failures do not cover:
    the worker does not serve on without delivering; it stops, exits 1, says why."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(desk)])}
    done = forked.run(
        [*FLOWRUNNER, "worker", "--app", "myapp:cancelled", "--deliver", "--log-format", "json"],
        cwd=desk,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    *logged, last = done.stderr.strip().splitlines()
    assert last == (
        "Error: the deliverer stopped (CancelledError), so the worker stopped too: "
        "its runs were handed back"
    )
    messages = [json.loads(line)["message"] for line in logged]
    assert "the deliverer stopped (CancelledError); stopping the worker" in messages
    engine = sa.create_engine(f"sqlite:///{desk / 'desk.db'}")
    with engine.connect() as conn:
        sent = conn.execute(
            sa.text("SELECT count(*) FROM flowrunner_notices WHERE sent_at IS NOT NULL")
        )
        assert sent.scalar_one() == 0
    engine.dispose()
