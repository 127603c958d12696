"""Acceptance: ``flowrunner worker --metrics-port`` — an operator scrapes a running worker
during a small workload and reads the same figures the database holds; ``/healthz`` says
it is alive; ``/readyz`` fails while its database cannot be read and recovers after.

Real worker processes on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from running import mount, ticket
from serving import free_port

from flowrunner.engine import commands, metrics, worker

ROOT = Path(__file__).resolve().parent.parent
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]
OPTIONS = ("--poll", "0.1", "--log-level", "warning", "--metrics-port")
JSON_DEBUG = ("--poll", "0.1", "--log-format", "json", "--log-level", "debug", "--metrics-port")
TICKETS = 12  # every fourth one's handover is refused

# The desk's handover, refused for every fourth ticket (the run fails at that step).
APP = """\
from fixtures.tickets import app as tickets
from flowrunner import errors
from flowrunner.runner import flow_runner
import sqlalchemy as sa


def assign(ctx):
    if ctx.record["id"] % 4 == 0:
        raise errors.CommandRefused("nobody takes this one")
    tickets.assign_ticket(ctx)


def runner(url):
    commands = {**tickets.COMMANDS, "assign_ticket": assign}
    return flow_runner(tickets.binding, sa.create_engine(url), commands=commands)
"""

FLOWS = """
- name: Hand over
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
    - {position: 2, kind: set, title: Urgent, field: priority, value: urgent}
    - {position: 3, kind: notify, title: Tell, audience: requester, message: it is handed over}
"""


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def scraped(port: int) -> dict[str, float]:
    """The samples of ``/metrics``: ``name{labels}`` -> value."""
    status, text = get(port, "/metrics")
    assert status == 200, text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def until(condition: Callable[[], bool], what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while not condition():
        assert process.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, f"not within 90 s: {what}"
        time.sleep(0.05)


def start_worker(folder: Path, url: str, port: int) -> subprocess.Popen[str]:
    (folder / "desk.py").write_text(APP, encoding="utf-8")
    return forked.popen(
        [*FLOWRUNNER, "worker", "--app", "desk:runner", "--database", url, *OPTIONS, str(port)],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}"},
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_the_scraped_figures_are_the_databases(database_url: str, tmp_path: Path) -> None:
    engine = sa.create_engine(database_url)
    driver = mount(engine, "tickets", flows=FLOWS)
    port = free_port()
    process = start_worker(tmp_path, database_url, port)
    try:
        until(lambda: _answers(port), "the metrics answer", process)
        for n in range(1, TICKETS + 1):  # the workload arrives while it serves
            driver.create(ticket(n), run=False)
        until(lambda: scraped(port)["flowrunner_due_runs"] == 0, "nothing due", process)
        until(
            lambda: scraped(port)["flowrunner_worker_advanced_runs_total"] >= TICKETS,
            "every run advanced",
            process,
        )
        samples = scraped(port)
        assert get(port, "/healthz") == (200, "alive\n")
        assert get(port, "/readyz") == (200, "ready\n")
    finally:
        stop(process)
    with engine.connect() as conn:
        by_status = {
            (flow, status): n
            for flow, status, n in conn.execute(
                sa.text("select flow_name, status, count(*) from flowrunner_runs group by 1, 2")
            )
        }
        handed = conn.execute(
            sa.text("select count(*) from ticket where assignee = 'triage'")
        ).scalar_one()
        notices = conn.execute(
            sa.text("select count(*) from flowrunner_notices where delivered_at is null")
        ).scalar_one()
    engine.dispose()
    refused = TICKETS // 4
    assert by_status == {("Hand over", "done"): TICKETS - refused, ("Hand over", "failed"): refused}
    for (flow, status), n in by_status.items():
        assert samples[f'flowrunner_runs{{flow="{flow}",program="flow",status="{status}"}}'] == n
    assert samples["flowrunner_worker_claimed_runs_total"] == TICKETS
    assert samples["flowrunner_worker_failed_runs_total"] == refused
    assert samples['flowrunner_step_seconds_count{program="flow"}'] == TICKETS
    ok = 'flowrunner_command_seconds_count{command="assign_ticket",outcome="ok"}'
    assert samples[ok] == handed == TICKETS - refused
    failures = 'flowrunner_command_failures_total{command="assign_ticket",outcome="refused"}'
    assert samples[failures] == refused
    assert samples["flowrunner_notices_waiting"] == notices == TICKETS - refused
    assert samples["flowrunner_notices_failed"] == 0
    assert samples["flowrunner_oldest_due_run_age_seconds"] == 0
    assert samples["flowrunner_database_up"] == 1


def _answers(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except OSError:
        return False


@pytest.mark.slow
def test_readyz_fails_while_the_database_is_locked_and_recovers(tmp_path: Path) -> None:
    path = tmp_path / "desk.db"
    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    mount(engine, "tickets", flows=FLOWS)
    engine.dispose()
    port = free_port()
    process = start_worker(tmp_path, url, port)
    try:
        until(lambda: _answers(port), "the metrics answer", process)
        assert get(port, "/readyz") == (200, "ready\n")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # nobody else reads the file now
        try:
            status, said = get(port, "/readyz")
            assert status == 503 and said.startswith("not ready: "), said
            assert "locked" in said
            assert get(port, "/healthz") == (200, "alive\n")  # alive all the same
            # Reading goes on beside the lock: a scrape holds up no worker, nor waits.
            assert scraped(port)["flowrunner_database_up"] == 1
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert get(port, "/readyz") == (200, "ready\n")
        assert scraped(port)["flowrunner_database_up"] == 1
    finally:
        stop(process)


@pytest.mark.parametrize("any_engine", ["sqlite", "postgresql"], indirect=True)
def test_the_oldest_due_run_is_aged_on_the_runners_clock(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=FLOWS)
    driver.create(ticket(1), run=False)
    driver.create(ticket(2), run=False)
    driver.now += timedelta(minutes=10)  # nobody served them for ten minutes
    serving = worker.Worker(driver.runner)
    gathered = metrics.Metrics(serving)

    def sample(name: str) -> float:
        [value] = re.findall(rf"^{name} (\S+)$", gathered.exposition().decode(), re.M)
        return float(value)

    assert sample("flowrunner_due_runs") == 2
    assert sample("flowrunner_oldest_due_run_age_seconds") == 600
    while serving.run_due():
        pass
    assert sample("flowrunner_due_runs") == 0
    assert sample("flowrunner_oldest_due_run_age_seconds") == 0
    assert sample("flowrunner_worker_advanced_runs_total") == 2


@pytest.mark.parametrize("any_engine", ["sqlite"], indirect=True)
def test_a_retried_command_counts_its_failures_and_retries(any_engine: sa.Engine) -> None:
    from test_kind_retry import POLICY, mount_timed, order

    attempts: list[int] = []

    def send(ctx: commands.CommandContext) -> None:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("the supplier did not answer")

    driver = mount_timed(any_engine, {"send_purchase_order": send, "ship_order": lambda ctx: None})
    gathered = metrics.Metrics(driver.worker)
    driver.create(order(1))
    driver.advance("1 hour")  # the policy's waits go by: two retries, the third answers
    assert attempts == [1, 2, 3] and POLICY.max_attempts == 3
    text = gathered.exposition().decode()
    failed = 'flowrunner_command_failures_total{command="send_purchase_order",outcome="failed"}'
    assert f"{failed} 2.0" in text
    assert 'flowrunner_command_retries_total{command="send_purchase_order"} 2.0' in text
    ok = 'flowrunner_command_seconds_count{command="send_purchase_order",outcome="ok"}'
    assert f"{ok} 1.0" in text


@pytest.mark.slow
def test_a_scraper_that_hangs_up_leaves_the_log_one_json_object_a_line(tmp_path: Path) -> None:
    """A load balancer's health check times out and hangs up before its answer: the
    worker's log stays what --log-format json promises, and the metrics go on."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    mount(engine, "tickets", flows=FLOWS)
    engine.dispose()
    port = free_port()
    (tmp_path / "desk.py").write_text(APP, encoding="utf-8")
    log = tmp_path / "worker.log"
    with log.open("w", encoding="utf-8") as written:
        process = forked.popen(
            [
                *FLOWRUNNER,
                "worker",
                "--app",
                "desk:runner",
                "--database",
                url,
                *JSON_DEBUG,
                str(port),
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=written,
            text=True,
            env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
        )
        try:
            until(lambda: _answers(port), "the metrics answer", process)
            for path in ("/metrics", "/readyz", "/healthz") * 10:
                client = socket.create_connection(("127.0.0.1", port))
                # Closed at once with a reset, the request unanswered.
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.sendall(f"GET {path} HTTP/1.1\r\nHost: worker\r\n\r\n".encode())
                client.close()
            assert get(port, "/healthz") == (200, "alive\n")
            assert scraped(port)["flowrunner_database_up"] == 1
        finally:
            stop(process)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines, "the worker logged nothing at debug level"
    for line in lines:
        record = json.loads(line)  # one JSON object a line, not a traceback
        assert "Traceback" not in record["message"], line
    assert any(
        "hung up before its answer was sent" in json.loads(line)["message"] for line in lines
    )


def test_metrics_are_served_only_by_a_serving_worker() -> None:
    from click.testing import CliRunner

    from flowrunner.cli import cli

    app = ["--app", "fixtures.tickets.app:runner", "--database", "sqlite://"]
    done = CliRunner().invoke(cli, ["worker", *app, "--once", "--metrics-port", "9100"])
    assert done.exit_code == 2
    assert "--metrics-port serves while the worker does: not with --once" in done.output


class Cuttable:
    """A TCP relay to PostgreSQL that the test cuts (every connection closed, new ones
    refused) and restores on the same port: the database away, then back."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.links: list[socket.socket] = []
        self.listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                near, _ = listener.accept()
            except OSError:
                return  # cut
            far = socket.create_connection(self.upstream)
            self.links += [near, far]
            for one, other in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(one, other), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        assert self.listener is not None
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        for link in self.links:
            with contextlib.suppress(OSError):
                link.shutdown(socket.SHUT_RDWR)
            link.close()
        self.links.clear()


@pytest.mark.slow
def test_readyz_fails_while_postgresql_is_away_and_recovers(pg_url: str, tmp_path: Path) -> None:
    schema = f"m_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    direct = sa.make_url(pg_url)
    relay = Cuttable((direct.host or "127.0.0.1", direct.port or 5432))
    url = direct.set(host="127.0.0.1", port=relay.port).update_query_dict(
        {"options": f"-csearch_path={schema}"}
    )
    engine = sa.create_engine(url)
    mount(engine, "tickets", flows=FLOWS)
    engine.dispose()
    port = free_port()
    process = start_worker(tmp_path, url.render_as_string(hide_password=False), port)
    try:
        until(lambda: _answers(port), "the metrics answer", process)
        assert get(port, "/readyz") == (200, "ready\n")
        relay.cut()
        status, said = get(port, "/readyz")
        assert status == 503 and said.startswith("not ready: "), said
        assert get(port, "/healthz") == (200, "alive\n")
        assert scraped(port)["flowrunner_database_up"] == 0
        relay.restore()
        until(lambda: get(port, "/readyz") == (200, "ready\n"), "ready again", process)
        assert scraped(port)["flowrunner_database_up"] == 1
    finally:
        stop(process)
        relay.cut()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
