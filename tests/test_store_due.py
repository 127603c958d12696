"""The due-work index: claims under leases, wake-ups, tenant fairness, concurrent claimers."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import migrated
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storing import T0, at_once, new_run

from flowrunner.store import dialects, due, engine_tables, leases
from flowrunner.store import operations as ops

TTL = timedelta(minutes=5)


def due_at(engine: sa.Engine, run_id: int) -> datetime | None:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(engine_tables.due.c.due_at).where(engine_tables.due.c.run_id == run_id)
        ).scalar_one_or_none()


def claim(engine: sa.Engine, owner: str, now: datetime = T0, limit: int = 10) -> list[due.Claim]:
    return ops.claim_due(engine, now=now, owner=owner, limit=limit, ttl=TTL)


def test_set_due_and_next_due(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        first = new_run(conn, "1", due_at=T0 + timedelta(hours=1))
        new_run(conn, "2", due_at=T0 + timedelta(hours=2))
        assert ops.next_due(conn) == T0 + timedelta(hours=1)
        assert ops.due_count(conn, now=T0 + timedelta(hours=1)) == 1
        ops.set_due(conn, run_id=first, due_at=None)
        assert ops.next_due(conn) == T0 + timedelta(hours=2)
        ops.set_due(conn, run_id=first, due_at=T0)
        assert ops.due_count(conn, now=T0 + timedelta(hours=3)) == 2


def test_only_due_runs_are_claimed_and_held_until_the_lease_runs_out(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        now_run = new_run(conn, "1", due_at=T0)
        new_run(conn, "2", due_at=T0 + timedelta(minutes=1))
    claims = claim(engine, "A")
    assert [(c.run_id, c.epoch, c.due_at) for c in claims] == [(now_run, 1, T0)]
    assert due_at(engine, now_run) == T0 + TTL
    with engine.connect() as conn:
        holder = leases.lease_holder(conn, name=f"run:{now_run}")
        assert holder is not None and holder[:2] == ("A", 1)
        [left] = leases.time_left(conn, names=[f"run:{now_run}"], now=T0).values()
    assert TTL - timedelta(seconds=5) < left <= TTL
    # Claimed work is not handed out twice ...
    assert [c.run_id for c in claim(engine, "B", T0 + timedelta(seconds=59))] == []
    # ... until its worker is presumed dead: then another takes it over at a new epoch.
    # (On PostgreSQL the database's clock judges leases: the test moves them instead.)
    leases.age_leases(engine, by=TTL)
    taken = claim(engine, "B", T0 + TTL)
    assert {(c.run_id, c.epoch) for c in taken} == {(now_run, 2), (now_run + 1, 1)}


def test_a_run_leased_elsewhere_is_skipped_until_that_lease_runs_out(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = new_run(conn, "1", due_at=T0)
        leases.acquire_lease(
            conn, name=f"run:{run_id}", owner="operator", now=T0, ttl=timedelta(minutes=1)
        )
    assert claim(engine, "A") == []
    # Due again when that lease runs out: the time it has left, counted from our now.
    due_again = due_at(engine, run_id)
    assert due_again is not None
    assert T0 + timedelta(seconds=55) < due_again <= T0 + timedelta(minutes=1)
    leases.age_leases(engine, by=timedelta(minutes=1))
    assert [c.run_id for c in claim(engine, "A", T0 + timedelta(minutes=1))] == [run_id]


def test_wake_record_makes_open_runs_due_now(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        waiting = new_run(conn, "7", due_at=T0 + timedelta(days=2))
        early = new_run(
            conn,
            "7",
            flow_id="f2",
            flow_name="Other",
            status="running",
            due_at=T0 - timedelta(hours=1),
        )
        ended = new_run(conn, "7", flow_id="f3", flow_name="Done", status="done")
        other_record = new_run(conn, "8")
        woken = ops.wake_record(conn, resource="po", record_id="7", now=T0)
    assert woken == [waiting, early]
    assert due_at(engine, waiting) == T0
    assert due_at(engine, early) == T0 - timedelta(hours=1)  # an earlier time is kept
    assert ended is not None and due_at(engine, ended) is None
    assert due_at(engine, other_record) is None


def test_a_wake_during_a_claim_is_not_lost(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        run_id = new_run(conn, "1", due_at=T0)
    (mine,) = claim(engine, "A")
    # While A works, an event arrives and wakes the record.
    with dialects.begin(engine) as conn:
        ops.wake_record(conn, resource="po", record_id="1", now=T0 + timedelta(seconds=5))
    # A finishes, planning nothing more: the wake it did not see keeps the run due.
    with dialects.begin(engine) as conn:
        assert not ops.set_due(conn, run_id=run_id, due_at=None, claim=mine)
    assert due_at(engine, run_id) == T0
    with dialects.begin(engine) as conn:
        leases.release_lease(conn, name=f"run:{run_id}", owner="A", epoch=mine.epoch)
    (again,) = claim(engine, "A", T0 + timedelta(seconds=6))
    # Without a wake in between, the claimant's plan is applied.
    with dialects.begin(engine) as conn:
        assert ops.set_due(conn, run_id=run_id, due_at=T0 + timedelta(days=1), claim=again)
    assert due_at(engine, run_id) == T0 + timedelta(days=1)


def test_no_tenants_backlog_holds_up_another(engine: sa.Engine) -> None:
    with dialects.begin(engine) as conn:
        for i in range(50):  # a big, older backlog
            new_run(conn, f"a{i}", tenant="acme", due_at=T0 - timedelta(hours=1, seconds=i))
        for i in range(3):
            new_run(conn, f"b{i}", tenant="bolt", due_at=T0)
        for i in range(4):
            new_run(conn, f"c{i}", tenant="cora", due_at=T0 - timedelta(minutes=1))
    claims = claim(engine, "A", limit=9)
    by_tenant = Counter(c.tenant for c in claims)
    assert by_tenant == {"acme": 3, "bolt": 3, "cora": 3}
    # The oldest of each tenant go first.
    acme = sorted(c.due_at for c in claims if c.tenant == "acme")
    assert acme == [T0 - timedelta(hours=1, seconds=s) for s in (49, 48, 47)]
    # When other tenants run out, the rest of the slots go to who still has work.
    more = Counter(c.tenant for c in claim(engine, "A", limit=10))
    assert more == {"acme": 9, "cora": 1}


def test_a_tenant_alone_gets_every_slot_and_a_tenant_can_be_claimed_alone(
    engine: sa.Engine,
) -> None:
    with dialects.begin(engine) as conn:
        for i in range(12):
            new_run(conn, f"a{i}", tenant="acme", due_at=T0)
        new_run(conn, "b", tenant="bolt", due_at=T0)
    only_bolt = ops.claim_due(engine, now=T0, owner="A", limit=5, ttl=TTL, tenant="bolt")
    assert [c.tenant for c in only_bolt] == ["bolt"]
    assert len(claim(engine, "A", limit=10)) == 10


def test_concurrent_claimers_never_claim_the_same_run(engine: sa.Engine) -> None:
    """Four workers, each on its own connection, drain 120 due runs at the same moment."""
    with dialects.begin(engine) as conn:
        runs = [
            new_run(conn, str(i), tenant=f"t{i % 3}", due_at=T0 - timedelta(seconds=i))
            for i in range(120)
        ]
    claimed: dict[str, list[int]] = {}

    def work(owner: str) -> None:
        mine = claimed[owner] = []
        while batch := claim(engine, owner, limit=7):
            mine.extend(c.run_id for c in batch)

    at_once(work, 4)
    everything = [run_id for ids in claimed.values() for run_id in ids]
    assert len(everything) == len(set(everything))
    assert sorted(everything) == sorted(runs)
    with engine.connect() as conn:
        owners = {
            row.name: row.owner for row in conn.execute(sa.select(engine_tables.leases)).all()
        }
    for owner, ids in claimed.items():
        assert all(owners[f"run:{run_id}"] == owner for run_id in ids)


def test_claiming_nothing(engine: sa.Engine) -> None:
    assert claim(engine, "A") == []
    assert ops.claim_due(engine, now=T0, owner="A", limit=0, ttl=TTL) == []
    with engine.connect() as conn:
        assert ops.next_due(conn) is None


def test_a_claimer_passes_by_a_run_whose_worker_is_mid_transaction(pg_engine: sa.Engine) -> None:
    """A worker holds its lease row (checked) and will write its due row; a claimer must
    not wait on that lease while holding the due row, or the two would deadlock."""
    migrated.upgrade(pg_engine)
    with pg_engine.connect() as conn:
        schema_name = conn.execute(sa.text("SELECT current_schema()")).scalar()
    # A safety net, not a timing assertion: a regression fails here instead of hanging.
    claimer = sa.create_engine(
        pg_engine.url, connect_args={"options": f"-csearch_path={schema_name} -clock_timeout=10s"}
    )
    try:
        with dialects.begin(pg_engine) as conn:
            run_id = new_run(conn, "1", due_at=T0)
        (first,) = claim(pg_engine, "A")
        with dialects.begin(pg_engine) as conn:  # woken while A works
            ops.wake_record(conn, resource="po", record_id="1", now=T0)
        with dialects.begin(pg_engine) as worker:
            leases.check_lease(worker, name=f"run:{run_id}", owner="A", epoch=first.epoch)
            assert ops.claim_due(claimer, now=T0, owner="B", limit=5, ttl=TTL) == []
            ops.set_due(worker, run_id=run_id, due_at=None, claim=first)
        assert due_at(pg_engine, run_id) == T0  # the wake is kept for the next claim
    finally:
        claimer.dispose()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(
    backlogs=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=5),
    limit=st.integers(min_value=1, max_value=20),
)
def test_every_tenant_gets_its_share_of_the_slots(
    engine: sa.Engine, backlogs: list[int], limit: int
) -> None:
    with dialects.begin(engine) as conn:
        conn.execute(sa.delete(engine_tables.due))
        conn.execute(sa.delete(engine_tables.leases))
        run_id = 0
        for index, backlog in enumerate(backlogs):
            for age in range(backlog):
                run_id += 1
                # Earlier tenants' work is older, so age alone would starve the later ones.
                moment = T0 - timedelta(days=len(backlogs) - index, seconds=age)
                ops.set_due(conn, run_id=run_id, due_at=moment, tenant=f"t{index}")
    claims = ops.claim_due(engine, now=T0, owner="A", limit=limit, ttl=TTL)
    got = Counter(c.tenant for c in claims)
    waiting = {f"t{i}": n for i, n in enumerate(backlogs) if n}
    assert len(claims) == min(limit, sum(backlogs))
    assert len({c.run_id for c in claims}) == len(claims)
    share = limit // len(waiting) if waiting else 0
    for tenant, backlog in waiting.items():
        assert got[tenant] >= min(backlog, share), (tenant, got)


def test_a_claimer_takes_the_next_due_runs_past_those_another_claimer_holds(
    pg_engine: sa.Engine,
) -> None:
    """Two workers reaching for the same oldest runs: the second passes the rows the first
    holds locked and claims the next ones, instead of coming back empty (and resting its
    poll interval while work is due)."""
    migrated.upgrade(pg_engine)
    with dialects.begin(pg_engine) as conn:
        runs = [new_run(conn, str(i), due_at=T0 - timedelta(minutes=10 - i)) for i in range(5)]
    due_rows = engine_tables.due
    with dialects.begin(pg_engine) as other:  # mid-claim: the two oldest rows locked
        other.execute(
            sa.select(due_rows.c.run_id).where(due_rows.c.run_id.in_(runs[:2])).with_for_update()
        ).all()
        first = ops.claim_due(pg_engine, now=T0, owner="B", limit=1, ttl=TTL)
        assert [c.run_id for c in first] == [runs[2]]
        more = ops.claim_due(pg_engine, now=T0, owner="C", limit=2, ttl=TTL)
        assert [c.run_id for c in more] == runs[3:5]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(
    ages=st.lists(st.integers(min_value=-30, max_value=30), min_size=1, max_size=12),
    limit=st.integers(min_value=1, max_value=8),
)
def test_without_tenants_a_claim_takes_the_oldest_due_runs_of_its_resource(
    engine: sa.Engine, ages: list[int], limit: int
) -> None:
    """A binding without tenants needs no sharing: its worker's claim (``fair=False``)
    reads the oldest due runs of its resource straight off the index, up to its limit."""
    with dialects.begin(engine) as conn:
        conn.execute(sa.delete(engine_tables.due))
        conn.execute(sa.delete(engine_tables.leases))
        conn.execute(sa.delete(engine_tables.runs))
        due_at = {
            new_run(conn, str(i), due_at=T0 + timedelta(minutes=age)): T0 + timedelta(minutes=age)
            for i, age in enumerate(ages)
        }
        new_run(conn, "other", resource="ticket", due_at=T0 - timedelta(days=1))
    claims = ops.claim_due(
        engine, now=T0, owner="A", limit=limit, ttl=TTL, resource="po", fair=False
    )
    due_now = sorted(t for t in due_at.values() if t <= T0)
    assert sorted(c.due_at for c in claims) == due_now[:limit]
    assert all(due_at[c.run_id] == c.due_at for c in claims)
