"""A worker outlives its database: a connection cut mid-step, a database that fails for a
while, a command whose error cannot even be printed.

The cut is real: ``pg_terminate_backend`` on the worker's own PostgreSQL connections,
found by the ``application_name`` the test gives them (never anyone else's).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import forked
import psycopg
import pytest
import sqlalchemy as sa
from running import SEND, app, count, mount, order

from flowrunner import FlowBinding, Kind, RetryPolicy, testing
from flowrunner.engine import commands, worker
from flowrunner.runner import utc_now
from flowrunner.store import dialects, engine_tables

HERE = Path(__file__).parent
PO = app("purchase_orders")
SEND_COMMAND = "send_purchase_order"


MARK_TELL_SEND = """
- name: Mark, tell and send
  start: created
  steps:
    - {position: 1, kind: set, title: Urgent, field: priority, value: high}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: on its way}
    - {position: 3, kind: send, title: Send to supplier}
"""


def sent(driver: testing.FlowDriver) -> int:
    """The send command's own writes that committed."""
    return count(driver.runner.engine, PO.approval_reminder)


def write(ctx: commands.CommandContext) -> None:
    ctx.conn.execute(
        sa.insert(PO.approval_reminder).values(
            order_id=ctx.record["id"], run_id=ctx.run_id, reminder=1
        )
    )


class Serving:
    """``worker.serve`` in a thread of its own, stopped and joined when the block ends."""

    def __init__(self, serving: worker.Worker, poll: float = 0.05, listen: bool = True) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, args=(serving, poll, listen))
        self._thread.start()

    def _serve(self, serving: worker.Worker, poll: float, listen: bool) -> None:
        try:
            serving.serve(self.stop, poll=poll, listen=listen)
        except BaseException as exc:  # surfaced by the test: serve must not stop on its own
            self.error = exc

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


def wait_for(condition: Any, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.02)


def status_of(engine: sa.Engine, record_id: int) -> str:
    """The status of the record's one run, read on ``engine``."""
    runs = engine_tables.runs
    with engine.connect() as conn:
        return str(
            conn.execute(
                sa.select(runs.c.status).where(runs.c.record_id == str(record_id))
            ).scalar_one()
        )


# -- an exception that cannot be printed --------------------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot say")


def test_a_command_whose_error_cannot_be_printed_fails_its_step_cleanly(
    any_engine: sa.Engine,
) -> None:
    def send_purchase_order(ctx: commands.CommandContext) -> None:
        write(ctx)
        raise Unprintable()

    kinds = dict(PO.binding.kinds)
    kinds["send"] = Kind(command=SEND_COMMAND, retry=RetryPolicy(max_attempts=1))
    binding = FlowBinding(**{**PO.binding.model_dump(exclude={"kinds"}), "kinds": kinds})
    driver = mount(
        any_engine,
        "purchase_orders",
        flows=SEND,
        binding=binding,
        commands={SEND_COMMAND: send_purchase_order},
    )
    driver.create(order(1))
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.error is not None and "Unprintable: <unprintable>" in str(run.error["message"])
    assert driver.worker.stats.errors == 0  # a command's failure, not the engine's
    assert sent(driver) == 0  # its own write rolled back with it


def test_an_engine_error_that_cannot_be_printed_fails_the_run_cleanly(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})

    def bug(point: str) -> None:
        if point == "before-save":
            raise Unprintable()

    driver.worker = worker.Worker(driver.runner, crash_at=bug)
    driver.create(order(1))
    [run] = driver.runs(1)
    assert run.status == "failed" and driver.worker.stats.errors == 1
    assert run.error is not None and run.error["message"] == "Unprintable: <unprintable>"
    assert sent(driver) == 0


# -- a connection cut in the middle of a step ---------------------------------------------


@pytest.fixture
def named(pg_engine: sa.Engine) -> Iterator[tuple[sa.Engine, str]]:
    """The test's PostgreSQL schema on connections named for this test alone, and the name."""
    with pg_engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar_one()
    name = f"flowrunner-test-{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(
        pg_engine.url, connect_args={"options": f"-csearch_path={schema}", "application_name": name}
    )
    yield engine, name
    engine.dispose()


def cut(admin: sa.Engine, name: str) -> int:
    """Terminate every connection named ``name`` (this test's own); how many were cut."""
    with admin.connect() as conn:
        killed = conn.execute(
            sa.text(
                "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity"
                " where application_name = :name and pid <> pg_backend_pid()"
            ),
            {"name": name},
        ).scalar_one()
    return int(killed)


@pytest.mark.parametrize("command", ["raises", "swallows the error"])
def test_a_connection_cut_mid_step_rolls_the_step_back_and_the_worker_goes_on(
    named: tuple[sa.Engine, str],
    pg_engine: sa.Engine,
    command: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    named_engine, name = named
    calls: list[int] = []

    def send_purchase_order(ctx: commands.CommandContext) -> None:
        write(ctx)
        calls.append(ctx.run_id)
        if len(calls) == 1:
            assert cut(pg_engine, name) >= 1
            try:
                ctx.conn.execute(sa.text("select 1"))  # the connection is gone
            except sa.exc.DBAPIError:
                if command == "raises":
                    raise

    driver = mount(
        named_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: send_purchase_order}
    )
    driver.create(order(1), run=False)
    serving = worker.Worker(driver.runner)
    with (
        caplog.at_level(logging.WARNING, logger="flowrunner.engine.worker"),
        Serving(serving) as running,
    ):
        # Read on connections of our own: the cut is for the worker's.
        wait_for(lambda: status_of(pg_engine, 1) == "done")
        assert running.alive
    assert running.error is None
    assert len(calls) == 2 and sent(driver) == 1  # the first attempt rolled back
    assert serving.stats.database_failures == 1
    # Handed back at once: the run did not wait for its lease (30 s) to run out.
    assert serving.stats.handed_back == 1
    failed = [r for r in caplog.records if "the database failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is None
    assert "\n" not in failed[0].getMessage()


def test_after_a_failover_a_connection_to_the_read_only_server_is_replaced(
    named: tuple[sa.Engine, str], pg_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker's first connection reaches a read-only server, as one still open to the
    old primary after a failover does: its write is refused, and the worker goes on
    with a new connection instead of meeting the refusal again and again."""
    named_engine, _ = named
    driver = mount(named_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    driver.create(order(1), run=False)
    named_engine.dispose()
    opened = {"n": 0}

    @sa.event.listens_for(named_engine, "connect")
    def standby_first(dbapi_connection: Any, _record: Any) -> None:
        opened["n"] += 1
        if opened["n"] == 1:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("set session characteristics as transaction read only")
            dbapi_connection.commit()

    serving = worker.Worker(driver.runner)
    # Without wake-ups: listening takes a connection of its own first, and this test is
    # about the first connection the worker's steps are given.
    with (
        caplog.at_level(logging.WARNING, logger="flowrunner.engine.worker"),
        Serving(serving, listen=False) as running,
    ):
        wait_for(lambda: status_of(pg_engine, 1) == "done")
    assert running.error is None
    assert serving.stats.database_failures == 1 and opened["n"] >= 2
    assert "ReadOnlySqlTransaction" in caplog.text
    assert sent(driver) == 1


def test_a_connection_the_server_ended_inside_a_pipeline_is_dropped_not_rolled_back(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Cut while psycopg was in pipeline mode (executemany), a connection raises "cannot
    exit pipeline mode while busy" over the server's own error and looks alive: the
    worker's engine closes it instead of rolling it back, which would fail again and
    print a traceback into the worker's log."""
    engine = dialects.reconnect_when_read_only(sa.create_engine(pg_url))
    cut = {"next": True}

    @sa.event.listens_for(engine, "before_cursor_execute")
    def ended_in_a_pipeline(*_: Any) -> None:
        if cut["next"]:
            cut["next"] = False
            try:
                raise psycopg.errors.AdminShutdown("terminating connection")
            except psycopg.Error:
                raise psycopg.OperationalError(
                    "sending query failed: cannot exit pipeline mode while busy"
                ) from None

    try:
        with caplog.at_level(logging.ERROR, logger="sqlalchemy.pool"):
            with pytest.raises(sa.exc.OperationalError) as raised, engine.connect() as conn:
                conn.execute(sa.text("select 1"))
            assert raised.value.connection_invalidated
            with engine.connect() as conn:  # a new connection serves the next try
                assert conn.execute(sa.text("select 1")).scalar_one() == 1
        assert "Traceback" not in caplog.text and "reset" not in caplog.text
    finally:
        engine.dispose()


def test_serve_waits_and_tries_again_while_the_database_fails(
    any_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    driver.create(order(1), run=False)
    down = {"left": 3}

    def unreachable(point: str) -> None:
        if point == "claimed" and down["left"]:
            down["left"] -= 1
            raise sa.exc.OperationalError(
                "SELECT 1", {}, Exception("could not connect to server\nIs it running?")
            )

    serving = worker.Worker(driver.runner, crash_at=unreachable)
    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING, logger="flowrunner.engine.worker"),
        Serving(serving) as running,
    ):
        wait_for(lambda: status_of(any_engine, 1) == "done")
    assert running.error is None
    # Three failures in a row: waits of about 0.2, 0.4 and 0.8 s.
    assert time.monotonic() - started >= 0.8 * (0.2 + 0.4 + 0.8)
    assert serving.stats.database_failures == 3 and serving.stats.handed_back == 3
    lines = [r.getMessage() for r in caplog.records if "the database failed" in r.getMessage()]
    assert len(lines) == 3
    assert all("\n" not in line and "could not connect to server" in line for line in lines)
    assert sent(driver) == 1


def test_serve_stops_on_what_is_not_the_databases_failing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: write})
    driver.create(order(1), run=False)

    def bug(point: str) -> None:
        if point == "claimed":
            raise KeyError("a bug in the engine")

    with Serving(worker.Worker(driver.runner, crash_at=bug)) as running:
        wait_for(lambda: not running.alive)
    assert isinstance(running.error, KeyError)


def test_the_wait_after_a_failure_doubles_up_to_its_cap() -> None:
    waits = [worker.backoff(n) for n in range(1, 12)]
    assert 0.16 <= waits[0] <= 0.2
    assert all(0.8 * min(10, 0.2 * 2**i) <= w <= min(10, 0.2 * 2**i) for i, w in enumerate(waits))
    assert max(worker.backoff(n) for n in (50, 1000, 10**6)) <= worker.BACKOFF_CAP


# -- two worker processes, their connections cut about every second -----------------------

RUNS = 300


@pytest.mark.slow
def test_worker_processes_outlive_their_connections_being_cut(
    pg_engine: sa.Engine, tmp_path: Path
) -> None:
    """300 runs (a set, a notice and a command each) served by two worker processes whose
    every connection is terminated about once a second: no worker exits, every run
    finishes, and each effect happened once."""
    driver = mount(pg_engine, "purchase_orders", flows=MARK_TELL_SEND)
    runner = driver.runner
    runner.clock = utc_now  # the worker processes use the real clock too
    with pg_engine.begin() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar_one()
        # Every committed write of the set step, counted by the database itself.
        conn.execute(sa.text("create table set_writes (order_id integer not null)"))
        conn.execute(
            sa.text(
                "create function note_set() returns trigger language plpgsql as $$ begin"
                " insert into set_writes values (new.id); return new; end $$"
            )
        )
        conn.execute(
            sa.text(
                "create trigger set_written after update of priority on purchase_order"
                " for each row when (new.priority = 'high') execute function note_set()"
            )
        )
        for n in range(1, RUNS + 1):
            conn.execute(sa.insert(PO.purchase_order).values(**order(n)))
            runner.record_created(conn, order(n))

    name = f"flowrunner-fault-{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "FAULT_DB": pg_engine.url.render_as_string(hide_password=False),
        "FAULT_OPTIONS": f"-csearch_path={schema}",
        "FAULT_NAME": name,
        "FAULT_LEASE": "3",
        "FAULT_POLL": "0.1",
        "FAULT_PAUSE": "0.02",
        "FAULT_BATCH": "2",
    }
    logs = [tmp_path / f"worker-{n}.log" for n in range(2)]
    workers = []
    for log in logs:
        with log.open("w") as stderr:  # the process writes to its own copy
            workers.append(
                forked.popen(
                    [sys.executable, str(HERE / "faulty_worker.py")],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    text=True,
                )
            )
    for process in workers:  # mounted and serving: the cuts are for serve to survive
        assert process.stdout is not None and process.stdout.readline() == "serving\n"
    started = time.monotonic()
    kills = rounds = 0
    runs = engine_tables.runs

    def exited() -> str:
        return "a worker exited: " + " | ".join(log.read_text() for log in logs)

    try:
        while True:
            time.sleep(1.0)
            assert [w.poll() for w in workers] == [None, None], exited()
            with pg_engine.connect() as conn:
                done = conn.execute(
                    sa.select(sa.func.count()).where(runs.c.status == "done")
                ).scalar_one()
            if done == RUNS:
                break
            assert time.monotonic() - started < 50, f"only {done} of {RUNS} runs done"
            rounds += 1
            kills += cut(pg_engine, name)
        seconds = time.monotonic() - started
        assert [w.poll() for w in workers] == [None, None], exited()
    finally:
        for process in workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        outputs = [w.communicate(timeout=60)[0] for w in workers]
    errs = [log.read_text() for log in logs]
    for process, err in zip(workers, errs, strict=True):
        assert process.returncode == 0, err
        assert "Traceback" not in err, err
    stats = [dict(line.split("=") for line in out.split()) for out in outputs]
    failures = sum(int(s["database_failures"]) for s in stats)
    handed_back = sum(int(s["handed_back"]) for s in stats)
    # One line per failure: each one the worker survived is a line in its log.
    assert sum(err.count("the database failed") for err in errs) >= failures > 0
    assert handed_back > 0  # cuts landed in the middle of claims, and the runs went back

    with pg_engine.connect() as conn:
        statuses = conn.execute(
            sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status)
        ).all()
        assert [tuple(row) for row in statuses] == [("done", RUNS)]

        def once(query: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in conn.execute(sa.text(query))]

        assert once("select count(*), count(distinct order_id) from set_writes") == [(RUNS, RUNS)]
        assert once("select count(*), count(distinct run_id) from flowrunner_notices") == [
            (RUNS, RUNS)
        ]
        assert once("select count(*), count(distinct order_id) from approval_reminder") == [
            (RUNS, RUNS)
        ]
        assert once("select count(*) from purchase_order where status = 'sent'") == [(RUNS,)]
    assert kills >= 4, f"only {kills} connections cut"
    print(
        f"\n{RUNS} runs in {seconds:.1f} s: {kills} connections cut in {rounds} rounds; "
        f"{failures} database failures survived, {handed_back} claims handed back"
    )
