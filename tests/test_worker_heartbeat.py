"""Long commands keep their lease; a command past its timeout does not.

Through the real worker on SQLite and PostgreSQL, with a lease of one second by the
runner's clock (the test moves it) and a command that waits on an event the test sets.
On PostgreSQL a heartbeat renews the lease from its own connection while the command
runs; on SQLite the step's transaction holds the one write lock, so no other worker can
claim anything until it ends.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import SEND, app, count, mount, order

from flowrunner import FlowBinding, Kind, testing
from flowrunner.engine import commands, worker
from flowrunner.runner import flow_runner
from flowrunner.store import dialects
from flowrunner.store import operations as ops

PO = app("purchase_orders")
LEASE = timedelta(seconds=1)
SEND_COMMAND = "send_purchase_order"


def binding(**send: Any) -> FlowBinding:
    """The purchasing binding, its ``send`` kind given ``send``'s options."""
    kinds = dict(PO.binding.kinds)
    kinds["send"] = Kind(command="send_purchase_order", **send)
    return FlowBinding(**{**PO.binding.model_dump(exclude={"kinds"}), "kinds": kinds})


class Slow:
    """The send command: writes its effect, then — the first time only — waits for the test."""

    def __init__(self, *, dies: bool = False) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.keys: list[str] = []
        self.dies = dies

    def __call__(self, ctx: commands.CommandContext) -> Mapping[str, Any] | None:
        self.keys.append(ctx.idempotency_key)
        ctx.conn.execute(
            sa.insert(PO.approval_reminder).values(
                order_id=ctx.record["id"], run_id=ctx.run_id, reminder=len(self.keys)
            )
        )
        if len(self.keys) == 1:
            self.started.set()
            assert self.release.wait(30), "the test never released the command"
            if self.dies:
                raise worker.Crash("in the command")  # the process dies mid-command
        return {"sent": True}


class Background:
    """``target`` in a thread of its own, keeping whatever it raised."""

    def __init__(self, target: Callable[[], object]) -> None:
        self.error: BaseException | None = None
        self._target = target
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._target()
        except BaseException as exc:  # a Crash, as a killed worker
            self.error = exc

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()


class Beats:
    """A worker's hook: renewals seen after the test moved the clock, and what to do then."""

    def __init__(self, driver: testing.FlowDriver) -> None:
        self.driver = driver
        self.moved = False
        self.after_move = 0
        self.twice = threading.Event()

    def move(self, by: timedelta) -> None:
        self.driver.now += by
        self.moved = True

    def __call__(self, point: str) -> None:
        if point == "heartbeat" and self.moved:
            # The first renewal seen may have read the clock before the move; the
            # second began after the first was seen, so after the move.
            self.after_move += 1
            if self.after_move == 2:
                self.twice.set()


@pytest.fixture
def rival() -> Iterator[Callable[[testing.FlowDriver], worker.Worker]]:
    """Another worker on the same database (on SQLite: its own engine, waiting 0.1 s)."""
    engines: list[sa.Engine] = []

    def make(driver: testing.FlowDriver) -> worker.Worker:
        engine = driver.runner.engine
        if not dialects.is_sqlite(engine):
            return worker.Worker(driver.runner, lease_ttl=LEASE)
        own = sa.create_engine(engine.url)
        engines.append(own)
        runner = flow_runner(
            driver.runner.binding,
            own,
            commands=driver.runner.commands,
            clock=lambda: driver.now,
        )
        own.dispose()  # connections made from now on get the short wait below

        @sa.event.listens_for(own, "connect")
        def impatient(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA busy_timeout = 100")
            cursor.close()

        return worker.Worker(runner, lease_ttl=LEASE)

    yield make
    for engine in engines:
        engine.dispose()


def effects(driver: testing.FlowDriver) -> int:
    """The send command's own database writes that committed."""
    return count(driver.runner.engine, PO.approval_reminder)


def test_a_command_longer_than_its_lease_is_not_taken_over(
    any_engine: sa.Engine, rival: Callable[[testing.FlowDriver], worker.Worker]
) -> None:
    slow = Slow()
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: slow})
    beats = Beats(driver)
    first = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=beats)
    second = rival(driver)
    driver.create(order(1), run=False)
    running = Background(first.run_due)
    assert slow.started.wait(30)
    beats.move(5 * LEASE)  # by the runner's clock the claim is long past its lease
    if dialects.is_sqlite(any_engine):
        # The step's transaction holds the write lock: no one can even try to claim.
        with pytest.raises(sa.exc.OperationalError, match="locked"):
            second.run_due()
    else:
        assert beats.twice.wait(30)
        assert second.run_due() == 0  # the heartbeat kept the lease
        with any_engine.connect() as conn:
            holder = ops.lease_holder(conn, name="run:1")
        assert holder is not None and holder[0] == first.owner and holder[2] > driver.now
    slow.release.set()
    running.join()
    assert running.error is None
    assert first.stats.advanced == 1 and first.stats.refused == 0
    assert second.run_due() == 0
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert len(slow.keys) == 1 and effects(driver) == 1


def test_a_long_command_keeps_the_later_claims_of_its_batch(pg_engine: sa.Engine) -> None:
    slow = Slow()
    driver = mount(pg_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: slow})
    beats = Beats(driver)
    first = worker.Worker(driver.runner, lease_ttl=LEASE, batch=2, crash_at=beats)
    second = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.create(order(1), run=False)
    driver.create(order(2), run=False)
    running = Background(first.run_due)
    assert slow.started.wait(30)
    beats.move(5 * LEASE)
    assert beats.twice.wait(30)
    assert second.run_due() == 0  # neither the running run nor the one after it
    slow.release.set()
    running.join()
    assert running.error is None
    assert first.stats.advanced == 2 and first.stats.refused == 0
    assert [r.status for n in (1, 2) for r in driver.runs(n)] == ["done", "done"]
    assert len(set(slow.keys)) == 2 and effects(driver) == 2


def test_a_command_past_its_timeout_loses_its_lease_and_its_late_save_is_refused(
    pg_engine: sa.Engine,
) -> None:
    """The heartbeat keeps a lease only up to the attempt's deadline.

    (On SQLite the stuck step keeps every other writer out instead: see the test above.)
    """
    slow = Slow()
    driver = mount(
        pg_engine,
        "purchase_orders",
        flows=SEND,
        binding=binding(timeout="1 second"),
        commands={SEND_COMMAND: slow},
    )
    first = worker.Worker(driver.runner, lease_ttl=LEASE)
    second = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.create(order(1), run=False)
    running = Background(first.run_due)
    assert slow.started.wait(30)
    driver.now += 10 * LEASE  # past the timeout: nothing renews the lease any more
    assert second.run_due() == 1  # the run is taken over and done
    assert second.stats.advanced == 1
    slow.release.set()
    running.join()
    assert running.error is None
    assert first.stats.refused == 1 and first.stats.advanced == 0
    assert [r.status for r in driver.runs(1)] == ["done"]
    # Called twice with one idempotency key (outside effects are at least once), its
    # own database write committed once.
    assert len(slow.keys) == 2 and len(set(slow.keys)) == 1
    assert effects(driver) == 1


def test_a_lease_the_heartbeat_finds_taken_over_refuses_the_step_at_once(
    pg_engine: sa.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    slow = Slow()
    driver = mount(pg_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: slow})
    paused, resume, found = threading.Event(), threading.Event(), threading.Event()
    beats = {"n": 0}

    def hook(point: str) -> None:
        if point != "heartbeat":
            return
        beats["n"] += 1
        if beats["n"] == 1:  # hold the heartbeat between two renewals
            paused.set()
            assert resume.wait(30)
        elif beats["n"] == 2:
            found.set()

    first = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=hook)
    second = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.create(order(1), run=False)
    running = Background(first.run_due)
    assert slow.started.wait(30) and paused.wait(30)
    driver.now += 5 * LEASE
    assert second.run_due() == 1  # the lease lapsed while the heartbeat stood still
    resume.set()
    assert found.wait(30)  # the next renewal found the lease another's
    with caplog.at_level(logging.INFO, logger="flowrunner.engine.worker"):
        slow.release.set()
        running.join()
    assert running.error is None
    assert first.stats.refused == 1 and first.stats.advanced == 0
    assert "taken over while its command ran" in caplog.text
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert len(slow.keys) == 2 and effects(driver) == 1


def test_a_worker_crashing_at_a_heartbeat_repeats_no_effect(pg_engine: sa.Engine) -> None:
    slow = Slow()
    driver = mount(pg_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: slow})
    crashed = threading.Event()

    def hook(point: str) -> None:
        if point == "heartbeat":
            crashed.set()
            raise worker.Crash(point)

    dead = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=hook)
    driver.create(order(1), run=False)
    running = Background(dead.run_due)
    assert slow.started.wait(30) and crashed.wait(30)
    slow.release.set()
    running.join()
    assert isinstance(running.error, worker.Crash) and running.error.point == "heartbeat"
    assert effects(driver) == 0  # its transaction rolled back with it
    heir = worker.Worker(driver.runner, lease_ttl=LEASE)
    assert heir.run_due() == 0  # the renewed lease still holds
    driver.now += LEASE + timedelta(seconds=1)
    assert heir.run_due() == 1
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert len(slow.keys) == 2 and len(set(slow.keys)) == 1
    assert effects(driver) == 1


def test_a_worker_dying_mid_command_stops_its_heartbeat_and_repeats_no_effect(
    any_engine: sa.Engine,
) -> None:
    slow = Slow(dies=True)
    driver = mount(any_engine, "purchase_orders", flows=SEND, commands={SEND_COMMAND: slow})
    dead = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.create(order(1), run=False)
    running = Background(dead.run_due)
    assert slow.started.wait(30)
    slow.release.set()
    running.join()
    assert isinstance(running.error, worker.Crash)
    assert not [t for t in threading.enumerate() if t.name == "flowrunner-heartbeat"]
    assert effects(driver) == 0
    heir = worker.Worker(driver.runner, lease_ttl=LEASE)
    assert heir.run_due() == 0
    driver.now += LEASE + timedelta(seconds=1)
    assert heir.run_due() == 1
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert len(slow.keys) == 2 and effects(driver) == 1
