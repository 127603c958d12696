"""Leases with fencing epochs, on real SQLite and PostgreSQL.

Each test moves through moments from ``T0``. On SQLite the moment is the ``now`` leases
are judged by; on PostgreSQL the database's own clock judges them, so moving to a later
moment brings the leases nearer their end instead (``leases.age_leases``), as the test
driver does, and a lease's end is read as the time it has left.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta

import migrated
import pytest
import sqlalchemy as sa
from storing import T0, at_once, new_run

from flowrunner import errors
from flowrunner.store import dialects, leases
from flowrunner.store import operations as ops

TTL = timedelta(seconds=30)


# How far the database's clock may move on while a test runs (PostgreSQL).
SLACK = timedelta(seconds=5)
# Each test engine's moment.
MOMENTS: dict[int, datetime] = {}


@pytest.fixture
def engine(any_engine: sa.Engine) -> sa.Engine:
    migrated.upgrade(any_engine)
    MOMENTS[id(any_engine)] = T0
    return any_engine


def at(engine: sa.Engine, moment: datetime) -> datetime:
    """Move the test to ``moment`` (never back): the leases age with it on PostgreSQL."""
    passed = moment - MOMENTS[id(engine)]
    if passed > timedelta(0):
        leases.age_leases(engine, by=passed)
        MOMENTS[id(engine)] = moment
    return moment


def acquire(engine: sa.Engine, owner: str, now: datetime, name: str = "run:1") -> int | None:
    with dialects.begin(engine) as conn:
        return leases.acquire_lease(conn, name=name, owner=owner, now=at(engine, now), ttl=TTL)


def check(engine: sa.Engine, owner: str, epoch: int, name: str = "run:1") -> None:
    with dialects.begin(engine) as conn:
        leases.check_lease(conn, name=name, owner=owner, epoch=epoch)


def holder(engine: sa.Engine, name: str = "run:1") -> tuple[str, int, datetime] | None:
    """The lease's owner, epoch and end, the end read as the test's moment + time left."""
    now = MOMENTS[id(engine)]
    with engine.connect() as conn:
        found = leases.lease_holder(conn, name=name)
        left = leases.time_left(conn, names=[name], now=now).get(name, timedelta(0))
    return None if found is None else (found[0], found[1], now + left)


def holds(engine: sa.Engine, owner: str, epoch: int, until: datetime) -> bool:
    """Whether ``owner`` holds the lease at ``epoch`` until ``until``: exactly on SQLite;
    on PostgreSQL the database's clock went on a little since, so a little before it."""
    found = holder(engine)
    if found is None or found[:2] != (owner, epoch):
        return False
    if dialects.database_clock(engine) is None:
        return found[2] == until
    return until - SLACK < found[2] <= until


def test_acquire_when_missing_then_renew_when_ours(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    assert acquire(engine, "A", T0 + timedelta(seconds=10)) == 1
    assert holds(engine, "A", 1, T0 + timedelta(seconds=40))


def test_another_owner_is_refused_while_the_lease_runs(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    assert acquire(engine, "B", T0 + timedelta(seconds=25)) is None
    assert holds(engine, "A", 1, T0 + TTL)


def test_takeover_after_expiry_bumps_the_epoch(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    assert acquire(engine, "B", T0 + TTL) == 2
    assert acquire(engine, "A", T0 + 2 * TTL) == 3
    # Renewing one's own lease keeps the epoch.
    assert acquire(engine, "A", T0 + 2 * TTL + timedelta(seconds=1)) == 3


def test_a_paused_worker_is_fenced_off_after_a_takeover(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = new_run(conn, state={"at": 1}, status="running")
    assert run_id is not None
    name = leases.run_lease(run_id)
    epoch_a = acquire(engine, "A", T0, name)
    assert epoch_a == 1
    with engine.connect() as conn:
        read_by_a = ops.load_run(conn, run_id)
    # A pauses past its lease; B takes the run over and moves it on.
    epoch_b = acquire(engine, "B", T0 + TTL + timedelta(seconds=1), name)
    assert epoch_b == 2
    with dialects.begin(engine) as conn:
        leases.check_lease(conn, name=name, owner="B", epoch=2)
        ops.save_run(
            conn,
            run_id,
            expected_version=read_by_a.version,
            state={"at": 2},
            status="waiting",
            now=T0 + TTL,
        )
    # A wakes up and tries to write: both fences refuse it.
    with pytest.raises(errors.LeaseLost, match="no longer held by A"):
        check(engine, "A", 1, name)
    with pytest.raises(errors.LeaseLost), dialects.begin(engine) as conn:
        ops.save_run(
            conn,
            run_id,
            expected_version=read_by_a.version,
            state={"at": "late"},
            status="running",
            now=T0 + 2 * TTL,
        )
    with engine.connect() as conn:
        assert ops.load_run(conn, run_id).state == {"at": 2}


def test_an_expired_lease_nobody_took_still_lets_its_owner_write(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    check(engine, "A", 1)  # long past T0 + TTL, but no one else took it


def test_refresh_extends_only_our_own_lease(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    with dialects.begin(engine) as conn:
        later = at(engine, T0 + timedelta(seconds=20))
        assert leases.refresh_lease(conn, name="run:1", owner="A", epoch=1, now=later, ttl=TTL)
        assert not leases.refresh_lease(conn, name="run:1", owner="B", epoch=1, now=later, ttl=TTL)
        assert not leases.refresh_lease(conn, name="run:1", owner="A", epoch=7, now=later, ttl=TTL)
    assert holds(engine, "A", 1, T0 + timedelta(seconds=50))
    assert acquire(engine, "B", T0 + timedelta(seconds=45)) is None


def test_release_frees_the_lease_at_once_and_keeps_the_epoch_growing(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    with dialects.begin(engine) as conn:
        assert not leases.release_lease(conn, name="run:1", owner="B", epoch=1)
        assert leases.release_lease(conn, name="run:1", owner="A", epoch=1)
    assert acquire(engine, "B", T0 + timedelta(seconds=1)) == 2


def test_an_operator_can_expire_a_lease(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    with dialects.begin(engine) as conn:
        assert leases.expire_lease(conn, name="run:1", now=T0 + timedelta(seconds=5))
    assert acquire(engine, "B", T0 + timedelta(seconds=5)) == 2
    with pytest.raises(errors.LeaseLost):
        check(engine, "A", 1)


def test_forgetting_a_lease_deletes_it(engine: sa.Engine) -> None:
    assert acquire(engine, "A", T0) == 1
    with dialects.begin(engine) as conn:
        leases.forget_lease(conn, name="run:1")
    assert holder(engine) is None


@pytest.mark.parametrize("lease", ["expired", "missing"])
def test_racing_owners_get_the_lease_once(engine: sa.Engine, lease: str) -> None:
    """Eight threads, each on its own connection, try to take one lease at once."""
    if lease == "expired":
        assert acquire(engine, "old", T0) == 1
    later = at(engine, T0 + TTL)
    won: list[tuple[str, int | None]] = []
    at_once(lambda owner: won.append((owner, acquire(engine, owner, later))), 8)
    winners = [(owner, epoch) for owner, epoch in won if epoch is not None]
    epoch = 2 if lease == "expired" else 1
    assert winners == [(winners[0][0], epoch)]
    assert holds(engine, winners[0][0], epoch, later + TTL)


def test_owner_ids_are_new_in_every_process() -> None:
    code = "from flowrunner.store import leases; print(leases.new_owner_id())"
    ids = [
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True
        ).stdout.strip()
        for _ in range(2)
    ]
    assert ids[0] != ids[1]
    assert all(i.startswith("worker:") for i in ids)
    assert leases.new_owner_id("cli") != leases.new_owner_id("cli")
