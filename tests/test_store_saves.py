"""A step's save: the lease fence, the run's new state and its due row, all or nothing.

On PostgreSQL the three are one statement, on SQLite three; these hold on both: a save
under a lease still held gives the lease up, writes the state and moves the due row
on; a save whose lease was taken over, or whose run changed since it was read, is
refused and leaves all three as they were; a wake-up the worker did not see keeps the
run due.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from storing import T0, new_run

from flowrunner import errors
from flowrunner.store import dialects, due, engine_tables, leases
from flowrunner.store import operations as ops

TTL = timedelta(minutes=5)
LATER = T0 + timedelta(days=1)


def claimed(engine: sa.Engine, owner: str = "A", *, now: datetime = T0) -> tuple[int, due.Claim]:
    """A waiting run, due at T0, claimed by ``owner``."""
    with dialects.begin(engine) as conn:
        run_id = new_run(conn, "1", due_at=T0)
    (claim,) = ops.claim_due(engine, now=now, owner=owner, limit=1, ttl=TTL)
    return run_id, claim


def save(
    engine: sa.Engine,
    run_id: int,
    claim: due.Claim,
    *,
    owner: str = "A",
    status: str = "waiting",
    version: int = 1,
    due_at: datetime | None = LATER,
) -> None:
    with dialects.begin(engine) as conn:
        ops.save_step(
            conn,
            run_id=run_id,
            expected_version=version,
            state={"position": 2},
            status=status,
            now=T0 + timedelta(seconds=1),
            owner=owner,
            claim=claim,
            due_at=due_at,
        )


def stored(engine: sa.Engine, run_id: int) -> tuple[int, str, datetime | None, object]:
    """The run's version and status, its due time, and its lease row (owner, expiry)."""
    with engine.connect() as conn:
        run = ops.load_run(conn, run_id)
        due_at = conn.execute(
            sa.select(engine_tables.due.c.due_at).where(engine_tables.due.c.run_id == run_id)
        ).scalar_one_or_none()
        lease = leases.lease_holder(conn, name=leases.run_lease(run_id))
    return run.version, run.status, due_at, None if lease is None else lease[0]


def test_a_step_saved_under_its_lease_moves_everything_on(engine: sa.Engine) -> None:
    run_id, claim = claimed(engine)
    save(engine, run_id, claim)
    assert stored(engine, run_id) == (2, "waiting", LATER, "A")
    with engine.connect() as conn:
        assert ops.load_run(conn, run_id).state == {"position": 2}
        lease = leases.lease_holder(conn, name=leases.run_lease(run_id))
    assert lease is not None and lease[2] <= T0  # given up: anyone may take it now


def test_an_ended_run_drops_its_due_row_and_its_lease(engine: sa.Engine) -> None:
    run_id, claim = claimed(engine)
    save(engine, run_id, claim, status="done", due_at=None)
    assert stored(engine, run_id) == (2, "done", None, None)


def test_a_save_whose_lease_was_taken_over_changes_nothing(engine: sa.Engine) -> None:
    run_id, mine = claimed(engine, "A")
    # A pauses past its lease; B claims the run, A's late save is refused. (PostgreSQL
    # judges leases by its own clock: the lease is aged instead.)
    ops.age_leases(engine, by=TTL * 2)
    claimed_by_b = ops.claim_due(engine, now=T0 + TTL * 2, owner="B", limit=1, ttl=TTL)
    assert [c.run_id for c in claimed_by_b] == [run_id]
    before = stored(engine, run_id)
    with pytest.raises(errors.LeaseLost, match="no longer held by A"):
        save(engine, run_id, mine)
    assert stored(engine, run_id) == before
    assert before[3] == "B"


def test_a_save_over_a_changed_run_changes_nothing(engine: sa.Engine) -> None:
    run_id, claim = claimed(engine)
    before = stored(engine, run_id)
    with pytest.raises(errors.LeaseLost, match="changed since version 7"):
        save(engine, run_id, claim, version=7)
    # The refusal rolled back with its transaction: the lease is still A's, unchanged.
    assert stored(engine, run_id) == before == (1, "waiting", before[2], "A")


def test_a_wake_the_worker_did_not_see_keeps_the_run_due(engine: sa.Engine) -> None:
    run_id, claim = claimed(engine)
    with dialects.begin(engine) as conn:
        ops.wake_record(conn, resource="po", record_id="1", now=T0 + timedelta(seconds=5))
    save(engine, run_id, claim, due_at=LATER)
    version, status, due_at, _ = stored(engine, run_id)
    assert (version, status) == (2, "waiting")
    assert due_at == T0  # no later than its claim's due time, not tomorrow


def checkpoint(
    engine: sa.Engine,
    run_id: int,
    claim: due.Claim,
    *,
    status: str,
    stored_status: str | None,
    owner: str = "A",
    version: int = 1,
) -> int:
    with dialects.begin(engine) as conn:
        return ops.checkpoint_run(
            conn,
            run_id=run_id,
            expected_version=version,
            state={"position": 3},
            status=status,
            now=T0 + timedelta(seconds=1),
            owner=owner,
            epoch=claim.epoch,
            stored_status=stored_status,
        )


@pytest.mark.parametrize("stored_status", ["waiting", None])
def test_a_checkpoint_writes_a_status_the_row_does_not_hold(
    engine: sa.Engine, stored_status: str | None
) -> None:
    """A run that waited goes on running: its checkpoint writes the new status (as it
    does when the status it read is not given)."""
    run_id, claim = claimed(engine)
    due_at = stored(engine, run_id)[2]
    assert checkpoint(engine, run_id, claim, status="running", stored_status=stored_status) == 2
    assert stored(engine, run_id) == (2, "running", due_at, "A")  # the lease still A's
    with engine.connect() as conn:
        assert ops.load_run(conn, run_id).state == {"position": 3}


def test_a_checkpoint_of_the_status_the_row_holds_saves_the_state(engine: sa.Engine) -> None:
    """The status left alone (the row holds it): the state and the version move on."""
    run_id, claim = claimed(engine)
    due_at = stored(engine, run_id)[2]
    assert checkpoint(engine, run_id, claim, status="waiting", stored_status="waiting") == 2
    assert stored(engine, run_id) == (2, "waiting", due_at, "A")
    with engine.connect() as conn:
        assert ops.load_run(conn, run_id).state == {"position": 3}


@pytest.mark.parametrize("stored_status", ["waiting", None])
def test_a_checkpoint_whose_lease_was_taken_over_changes_nothing(
    engine: sa.Engine, stored_status: str | None
) -> None:
    run_id, mine = claimed(engine, "A")
    ops.age_leases(engine, by=TTL * 2)
    (theirs,) = ops.claim_due(engine, now=T0 + TTL * 2, owner="B", limit=1, ttl=TTL)
    before = stored(engine, run_id)
    with pytest.raises(errors.LeaseLost):
        checkpoint(engine, run_id, mine, status="waiting", stored_status=stored_status)
    assert stored(engine, run_id) == before
    assert before[3] == "B" and theirs.run_id == run_id
