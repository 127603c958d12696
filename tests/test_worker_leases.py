"""Workers and leases: takeover after expiry, a paused worker's late write refused.

Run through the real worker on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
from running import MARK_AND_TELL, T0, count, mount, ticket

from flowrunner.engine import worker
from flowrunner.store import operations as ops

LEASE = timedelta(minutes=1)


def test_a_paused_worker_loses_its_lease_and_its_late_write_is_refused(
    pg_engine: sa.Engine,
) -> None:
    """The race for real, on PostgreSQL: two threads, one run.

    The slow worker writes the step's effects, then pauses past its lease. The fast one
    claims the run (the lease has expired) and starts the same step, blocking on the
    slow one's row locks. The slow one wakes, is refused at its fence and rolls back;
    the fast one then does the step. (On SQLite the slow worker's write transaction
    keeps every other writer out, so this race cannot happen there.)
    """
    driver = mount(pg_engine, "tickets", flows=MARK_AND_TELL)
    runner = driver.runner
    driver.create(ticket(1), run=False)
    paused, claimed, resume = threading.Event(), threading.Event(), threading.Event()

    def slow_hook(point: str) -> None:
        if point == "before-save":
            paused.set()
            assert resume.wait(30)

    def fast_hook(point: str) -> None:
        if point == "claimed":
            claimed.set()

    slow = worker.Worker(runner, lease_ttl=LEASE, crash_at=slow_hook)
    fast = worker.Worker(runner, lease_ttl=LEASE, crash_at=fast_hook)
    slow_thread = threading.Thread(target=slow.run_due)
    slow_thread.start()
    assert paused.wait(30)
    # While the slow worker holds the lease, nobody else may take the run.
    assert ops.claim_due(pg_engine, now=driver.now, owner=fast.owner, limit=10, ttl=LEASE) == []
    driver.now += LEASE + timedelta(seconds=1)  # the slow worker's lease runs out
    fast_thread = threading.Thread(target=fast.run_due)
    fast_thread.start()
    assert claimed.wait(30)
    resume.set()
    slow_thread.join(30)
    fast_thread.join(30)
    assert slow.stats.refused == 1 and slow.stats.advanced == 0
    assert fast.stats.advanced == 1
    assert len(driver.notices()) == 1
    [run] = driver.runs(1)
    assert run.status == "done"
    assert count(pg_engine, runner.tables.resource, priority="high") == 1


def test_a_crashed_workers_run_is_taken_over_once_its_lease_expires(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    driver.create(ticket(1), run=False)

    def die(point: str) -> None:
        if point == "before-commit":
            raise worker.Crash(point)

    dead = worker.Worker(driver.runner, lease_ttl=LEASE, crash_at=die)
    with pytest.raises(worker.Crash):
        dead.run_due()
    heir = worker.Worker(driver.runner, lease_ttl=LEASE)
    assert heir.run_due() == 0  # the dead worker's lease still holds
    driver.now += LEASE
    assert heir.run_due() == 1
    assert [r.status for r in driver.runs(1)] == ["done"]
    assert len(driver.notices()) == 1


def test_a_restarted_process_inherits_no_lease(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    driver.create(ticket(1), run=False)
    first = worker.Worker(driver.runner, lease_ttl=LEASE)
    claims = ops.claim_due(any_engine, now=driver.now, owner=first.owner, limit=5, ttl=LEASE)
    assert len(claims) == 1
    # Same host, same pid, same code: a new owner id all the same.
    again = worker.Worker(driver.runner, lease_ttl=LEASE)
    assert again.owner != first.owner
    assert again.run_due() == 0


def test_a_batch_isolates_each_run(any_engine: sa.Engine) -> None:
    """One run's failure inside a batched transaction does not undo another's step."""
    flows = (
        MARK_AND_TELL
        + """
- name: Broken at run time
  start: created
  condition: id = 2
  steps:
    - {position: 1, kind: set, title: Bad, field: priority, value: high}
"""
    )
    driver = mount(any_engine, "tickets", flows=flows, start=T0)
    steps = driver.runner.tables.steps
    with any_engine.begin() as conn:
        conn.execute(sa.update(steps).where(steps.c.title == "Bad").values(value="x" * 300))
    driver.worker = worker.Worker(driver.runner, batch=10)
    driver.create(ticket(1), run=False)
    driver.create(ticket(2), run=False)
    driver.run_until_idle()
    statuses = sorted((r.record_id, r.flow_name, r.status) for r in driver.runs(1) + driver.runs(2))
    assert ("1", "Tell", "done") in statuses
    assert ("2", "Tell", "done") in statuses
    assert len(driver.notices()) == 2


def test_claims_that_lapse_behind_a_slow_run_are_renewed_or_given_up(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=MARK_AND_TELL)
    driver.create(ticket(1), run=False)
    driver.create(ticket(2), run=False)
    driver.create(ticket(3), run=False)
    other = worker.Worker(driver.runner, lease_ttl=LEASE)
    groups = {"n": 0}

    def slow(point: str) -> None:
        if point != "committed":
            return
        groups["n"] += 1
        if groups["n"] == 1:  # the first run took 40 s: past half the lease, renewed
            driver.now += timedelta(seconds=40)
        elif groups["n"] == 2:  # the second took 2 minutes: the third's lease lapsed
            driver.now += timedelta(minutes=2)
            assert other.run_due() == 1  # ...and another worker took it over

    # One claim of three runs, one transaction each.
    first = worker.Worker(driver.runner, lease_ttl=LEASE, claim=3, crash_at=slow)
    assert first.run_due() == 3
    assert first.stats.advanced == 2 and first.stats.refused == 1
    assert other.stats.advanced == 1
    assert len(driver.notices()) == 3
    assert [r.status for n in (1, 2, 3) for r in driver.runs(n)] == ["done"] * 3
