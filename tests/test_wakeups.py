"""Idle workers wake the moment work falls due: a start, an event or an operator's action
commits, and a worker resting a long poll interval takes the run at once (PostgreSQL).

Each scenario gives the worker a 30-second poll interval and the run 10 seconds: only
the wake-up can make it in time. Waits are on events with a timeout, never a sleep.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import forked
import migrated
import psycopg
import pytest
import sqlalchemy as sa
from running import ACKNOWLEDGE, mount, stored, ticket

from flowrunner import testing
from flowrunner.engine import worker
from flowrunner.store import dialects, wakeups
from flowrunner.store import operations as ops

ROOT = Path(__file__).resolve().parent.parent
FLOWRUNNER = [sys.executable, "-m", "flowrunner"]
LONG_POLL = 30.0  # what the worker would rest without a wake-up
IN_TIME = 10.0  # what the test gives it


class Serving:
    """A worker serving in a thread, telling when it first found nothing to do (idle)
    and when it committed a step."""

    def __init__(self, driver: testing.FlowDriver) -> None:
        self.idle = threading.Event()
        self.committed = threading.Event()
        self.stop = threading.Event()
        self.worker = worker.Worker(driver.runner, crash_at=self._passed)
        self.failed: list[BaseException] = []
        self.thread = threading.Thread(target=self._serve)

    def _passed(self, point: str) -> None:
        if point == "claimed":
            self.idle.set()
        elif point == "committed":
            self.committed.set()

    def _serve(self) -> None:
        try:
            self.worker.serve(self.stop, poll=LONG_POLL)
        except BaseException as exc:
            self.failed.append(exc)


@contextmanager
def serving(driver: testing.FlowDriver) -> Iterator[Serving]:
    """A worker serving the driver's runner until the block ends; idle when the block begins."""
    served = Serving(driver)
    served.thread.start()
    try:
        assert served.idle.wait(IN_TIME), "the worker never looked for work"
        yield served
    finally:
        served.stop.set()
        served.thread.join(IN_TIME)
    assert not served.thread.is_alive(), "the worker did not stop"
    assert not served.failed, served.failed


def waiting_for_a_reply(pg_engine: sa.Engine) -> tuple[testing.FlowDriver, int]:
    """A ticket whose run waits for the requester's reply (due only in a day)."""
    driver = mount(pg_engine, "tickets", flows=ACKNOWLEDGE)
    (run_id,) = driver.create(ticket(1))
    assert ops_status(driver, run_id) == "waiting"
    return driver, run_id


def ops_status(driver: testing.FlowDriver, run_id: int) -> str:
    with driver.runner.engine.connect() as conn:
        return str(ops.load_run(conn, run_id).status)


def test_an_idle_worker_takes_a_waiting_run_on_as_soon_as_the_reply_arrives(
    pg_engine: sa.Engine,
) -> None:
    driver, run_id = waiting_for_a_reply(pg_engine)
    with serving(driver) as served:
        driver.emit("ticket.replied", {"ticket": 1}, run=False)
        assert served.committed.wait(IN_TIME), "the worker slept through the reply"
    assert ops_status(driver, run_id) == "done"
    assert stored(driver, 1)["status"] == "answered"


def test_an_idle_worker_starts_a_new_tickets_run_as_soon_as_it_is_created(
    pg_engine: sa.Engine,
) -> None:
    driver, _ = waiting_for_a_reply(pg_engine)
    with serving(driver) as served:
        (run_id,) = driver.create(ticket(2), run=False)
        assert served.committed.wait(IN_TIME), "the worker slept through the new ticket"
    assert ops_status(driver, run_id) == "waiting"  # assigned to triage, waiting for a reply


def test_an_idle_worker_ends_a_run_as_soon_as_an_operator_cancels_it(
    pg_engine: sa.Engine,
) -> None:
    driver, run_id = waiting_for_a_reply(pg_engine)
    with serving(driver) as served:
        driver.runner.cancel(run_id, operator="olga", reason="duplicate")
        assert served.committed.wait(IN_TIME), "the worker slept through the cancel"
    assert ops_status(driver, run_id) == "cancelled"
    assert served.worker.stats.advanced == 1


# -- the notices themselves ----------------------------------------------------------


@contextmanager
def observer(engine: sa.Engine) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own that listens on the engine's wake-up channel."""
    with engine.connect() as sa_conn:
        name = sa_conn.execute(sa.select(wakeups.channel())).scalar_one()
    raw = engine.raw_connection()
    conn = raw.driver_connection
    raw.detach()
    assert isinstance(conn, psycopg.Connection)
    conn.rollback()
    conn.autocommit = True
    conn.execute(f'LISTEN "{name}"')
    try:
        yield conn
    finally:
        raw.close()


def first_notice(conn: psycopg.Connection[Any]) -> str:
    for notice in conn.notifies(timeout=IN_TIME, stop_after=1):
        return notice.payload
    raise AssertionError("no notice arrived")


def mark(engine: sa.Engine, payload: str) -> None:
    """A notice on the channel from a committed transaction of the test's own."""
    with engine.begin() as conn:
        conn.execute(sa.select(sa.func.pg_notify(wakeups.channel(), payload)))


def test_a_committed_event_wakes_with_the_resource_name_and_nothing_more(
    pg_engine: sa.Engine,
) -> None:
    driver, _ = waiting_for_a_reply(pg_engine)
    with observer(pg_engine) as listening:
        driver.emit("ticket.replied", {"ticket": 1, "text": "secret"}, run=False)
        assert first_notice(listening) == "ticket"


def test_a_rolled_back_event_wakes_nobody_and_leaves_nothing_to_claim(
    pg_engine: sa.Engine,
) -> None:
    driver, _ = waiting_for_a_reply(pg_engine)
    with observer(pg_engine) as listening:
        with dialects.begin(pg_engine) as conn:
            driver.runner.emit(conn, "ticket.replied", {"ticket": 1})
            conn.rollback()
        # Notices arrive in commit order: had the rolled-back emit sent one, it would
        # come before this mark.
        mark(pg_engine, "mark")
        assert first_notice(listening) == "mark"
    assert ops.claim_due(pg_engine, now=driver.now, owner="w", limit=10, ttl=60) == []


def test_an_emit_refused_in_its_savepoint_sends_nothing(pg_engine: sa.Engine) -> None:
    driver, _ = waiting_for_a_reply(pg_engine)
    with observer(pg_engine) as listening:
        with dialects.begin(pg_engine) as conn:
            with pytest.raises(Exception, match="does not exist"):
                driver.runner.emit(conn, "ticket.replied", {"ticket": 99})
            driver.runner.emit(conn, "ticket.replied", {"ticket": 1})
            conn.rollback()
        mark(pg_engine, "mark")
        assert first_notice(listening) == "mark"


def test_each_schema_has_its_own_channel(pg_engine: sa.Engine, pg_url: str) -> None:
    with pg_engine.connect() as conn:
        ours = conn.execute(sa.select(wakeups.channel())).scalar_one()
    other = sa.create_engine(pg_url, connect_args={"options": "-csearch_path=public"})
    try:
        with other.connect() as conn:
            theirs = conn.execute(sa.select(wakeups.channel())).scalar_one()
    finally:
        other.dispose()
    assert ours != theirs
    assert ours.startswith(wakeups.CHANNEL_PREFIX) and len(ours) < 64


# -- the listening connection ---------------------------------------------------------


def test_a_lost_listening_connection_falls_back_to_polling_and_comes_back(
    pg_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    migrated.upgrade(pg_engine)
    stop = threading.Event()
    with caplog.at_level(logging.DEBUG), wakeups.Listener(pg_engine, "ticket") as listener:
        assert listener.listening
        pid = listener._conn.info.backend_pid
        with pg_engine.begin() as conn:
            conn.execute(sa.select(sa.func.pg_terminate_backend(pid)))
        # The loss is noticed on the next wait, which then only polls.
        assert not listener.wait(stop, 0.5)
        assert not listener.listening
        # On a later wait it listens again, and looks at once: wakes were missed meanwhile.
        monkeypatch.setattr(wakeups, "RETRY_AFTER", 0.0)
        listener._retry_at = 0.0
        assert listener.wait(stop, IN_TIME)
        assert listener.listening
        woke: list[bool] = []
        waiting = threading.Thread(target=lambda: woke.append(listener.wait(stop, IN_TIME)))
        waiting.start()
        mark(pg_engine, "ticket")
        waiting.join(IN_TIME)
        assert woke == [True]
    # The loss is one line, without a traceback, from this module or the pool's.
    [lost] = [r for r in caplog.records if "wake-up connection was lost" in r.getMessage()]
    assert lost.levelno == logging.WARNING and "\n" not in lost.getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def test_a_notice_for_another_resource_does_not_end_the_wait(pg_engine: sa.Engine) -> None:
    stop = threading.Event()
    with wakeups.Listener(pg_engine, "ticket") as listener:
        mark(pg_engine, "purchase_order")
        mark(pg_engine, "ticket")
        assert listener.wait(stop, IN_TIME)
        assert listener.wakes == 1


def test_stopping_ends_a_long_wait(pg_engine: sa.Engine) -> None:
    stop = threading.Event()
    with wakeups.Listener(pg_engine, "ticket") as listener:
        done: list[bool] = []
        waiting = threading.Thread(target=lambda: done.append(listener.wait(stop, LONG_POLL)))
        waiting.start()
        stop.set()
        waiting.join(IN_TIME)
        assert done == [False]


def test_on_sqlite_a_worker_only_polls(sqlite_engine: sa.Engine) -> None:
    stop = threading.Event()
    stop.set()
    with wakeups.Listener(sqlite_engine, "ticket") as listener:
        assert not listener.listening
        assert not listener.wait(stop, LONG_POLL)  # returns at once: stopped


@pytest.mark.slow
@pytest.mark.parametrize("listen", ["--listen", "--no-listen"])
def test_flowrunner_worker_resting_an_hour_stops_at_once_on_sigterm(
    pg_engine: sa.Engine, listen: str
) -> None:
    """The command as a user runs it: its wait between polls still hears the signal."""
    migrated.upgrade(pg_engine)
    with pg_engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar_one()
    url = pg_engine.url.update_query_dict({"options": f"-csearch_path={schema}"})
    database = url.render_as_string(hide_password=False)
    app = "fixtures.tickets.app:runner"
    process = forked.popen(
        [*FLOWRUNNER, "worker", "--app", app, "--database", database, "--poll", "3600", listen],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    assert "serving ticket" in process.stderr.readline()
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=IN_TIME)
    assert process.returncode == 0, rest
    assert "worker stopped" in rest


def test_a_busy_worker_reads_its_notices_as_it_goes(pg_engine: sa.Engine) -> None:
    """PostgreSQL keeps a notice until every listener has read it: a worker that is never
    idle reads them between claims, and none is left to wake it later."""
    stop = threading.Event()
    with wakeups.Listener(pg_engine, "ticket") as listener:
        for payload in ("ticket", "ticket", "ticket", "purchase_order"):
            mark(pg_engine, payload)
        read = 0
        while read < 4:
            ready, _, _ = select.select([listener._conn.fileno()], [], [], IN_TIME)
            assert ready, f"only {read} of 4 notices arrived"
            read += listener.drain()
        assert read == 4
        assert not listener.wait(stop, 0.3)  # nothing stale is left to wake it
