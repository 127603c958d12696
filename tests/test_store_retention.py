"""Pruning history: what goes (ended runs with their history and delivered notices, events
no run may read, completed idempotency records) and what stays (open runs, failed runs
unless asked, undelivered notices, unread events) — on SQLite and PostgreSQL, through the
real worker, including a prune whose batches interleave with a worker's steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from running import PRUNABLE, T0, count, mount, stored, whats

from flowrunner import OperatorError, errors, testing
from flowrunner.engine import commands
from flowrunner.store import dialects, engine_tables, retention
from flowrunner.store import operations as ops


def refuse(ctx: commands.CommandContext) -> None:
    raise errors.CommandRefused("triage is closed")


def desk(engine: sa.Engine) -> testing.FlowDriver:
    return mount(engine, "tickets", flows=PRUNABLE, commands={"assign_ticket": refuse})


def ticket(n: int, status: str) -> dict[str, Any]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "status": status}


def run_of(driver: testing.FlowDriver, record: int) -> ops.RunRow:
    [run] = driver.runs(record)
    return run


def deliver(driver: testing.FlowDriver, *records: int) -> None:
    for record in records:
        for notice in driver.notices(run_of(driver, record).id):
            assert driver.runner.mark_delivered(notice.id)


def run_ids(engine: sa.Engine) -> set[int]:
    runs = engine_tables.runs
    with engine.connect() as conn:
        return {int(i) for i in conn.execute(sa.select(runs.c.id)).scalars()}


def event_ids(engine: sa.Engine) -> set[int]:
    events = engine_tables.events
    with engine.connect() as conn:
        return {int(i) for i in conn.execute(sa.select(events.c.id)).scalars()}


def lines_of(engine: sa.Engine, run_ids: set[int]) -> int:
    log = engine_tables.step_log
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).where(log.c.run_id.in_(sorted(run_ids)))
            ).scalar_one()
        )


def orphans(engine: sa.Engine) -> list[str]:
    """History lines, notices and due rows whose run is gone (there must be none)."""
    runs = engine_tables.runs
    found = []
    with engine.connect() as conn:
        for table in (engine_tables.step_log, engine_tables.notices, engine_tables.due):
            lost = conn.execute(
                sa.select(table.c.run_id).where(~sa.exists().where(runs.c.id == table.c.run_id))
            ).scalars()
            found += [f"{table.name}: run {run_id}" for run_id in lost]
    return found


def test_prune_deletes_exactly_the_ended_runs_older_than_the_cutoff(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    for n in (1, 2, 3, 4):
        driver.create(ticket(n, "open"))  # Quick: a notice, then done
    driver.create(ticket(5, "listen"))  # waits for a reply for 400 days
    driver.create(ticket(6, "handover"))  # its command is refused: failed
    driver.create(ticket(7, "listen"))
    cancelled = run_of(driver, 7).id
    driver.runner.cancel(cancelled, operator="olga", reason="duplicate")
    driver.run_until_idle()
    deliver(driver, 1, 2, 4)  # 3's notice is still to be delivered
    old = {n: run_of(driver, n) for n in range(1, 8)}
    assert [old[n].status for n in range(1, 8)] == [
        "done",
        "done",
        "done",
        "done",
        "waiting",
        "failed",
        "cancelled",
    ]

    driver.advance("100 days")
    driver.create(ticket(8, "open"))  # ended a moment ago: too young
    deliver(driver, 8)
    gone = {old[n].id for n in (1, 2, 4, 7)}
    kept = run_ids(any_engine) - gone
    history = lines_of(any_engine, gone)
    kept_history = {run_id: driver.runner.history(run_id) for run_id in kept}
    notices_before = count(any_engine, engine_tables.notices)

    planned = driver.runner.prune(older_than="90d", dry_run=True)
    assert run_ids(any_engine) == gone | kept  # a dry run deletes nothing
    done = driver.runner.prune(older_than="90d")
    assert planned.counts() == done.counts()
    assert (planned.dry_run, done.dry_run) == (True, False)
    assert done.counts() == {
        "runs": 4,
        "history": history,
        "notices": 3,
        "events": 0,
        "idempotency": 0,
        "callbacks": 0,
    }
    assert run_ids(any_engine) == kept
    assert {run_id: driver.runner.history(run_id) for run_id in kept} == kept_history
    assert count(any_engine, engine_tables.notices) == notices_before - 3
    assert [n.delivered_at for n in driver.notices(old[3].id)] == [None]
    assert orphans(any_engine) == []
    assert driver.runner.prune(older_than="90d").total == 0  # nothing more to do

    # Failed runs go only when asked.
    failed = driver.runner.prune(older_than="90 days", include_failed=True)
    assert (failed.runs, run_ids(any_engine)) == (1, kept - {old[6].id})


def test_a_cancelled_run_still_telling_its_steps_and_a_run_with_undelivered_notices_stay(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, "listen"))
    driver.create(ticket(2, "open"))
    run = run_of(driver, 1)
    driver.runner.cancel(run.id, operator="olga")  # no worker has told its step yet
    driver.advance("100 days", run=False)
    driver.create(ticket(3, "open"), run=False)  # the newest run, not ended
    assert driver.runner.prune(older_than="90d").runs == 0
    assert run_of(driver, 1).status == "cancelled" and run_of(driver, 2).status == "done"
    driver.run_until_idle()  # the cancel is carried out
    deliver(driver, 2)
    driver.advance("91 days")
    assert driver.runner.prune(older_than="90d").runs == 2
    assert driver.runs(1) == [] and driver.runs(2) == []


def test_events_go_when_no_run_may_still_read_them(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    # Record 1: its only run is done; an event about it after that is read by no one.
    driver.create(ticket(1, "open"))
    unheard = driver.emit("ticket.replied", {"ticket": 1})
    # Record 2: an event before its manual run began, below the run's event floor.
    driver.create(ticket(2, "idle"))
    before_run = driver.emit("ticket.replied", {"ticket": 2})
    listening = driver.runner.start("Listen by hand", 2, operator="olga")
    # Record 3: waits; the reply came, but no worker has read it yet.
    driver.create(ticket(3, "listen"))
    unread = driver.emit("ticket.replied", {"ticket": 3}, run=False)
    driver.advance("100 days", run=False)
    newest = driver.emit("ticket.replied", {"ticket": 1}, run=False)  # young, and newest
    assert run_of(driver, 3).status == "waiting"

    planned = driver.runner.prune(older_than="90d", dry_run=True)
    done = driver.runner.prune(older_than="90d")
    assert planned.events == done.events == 2
    assert event_ids(any_engine) == {unread, newest}
    assert {unheard, before_run}.isdisjoint(event_ids(any_engine))
    driver.run_until_idle()  # the late worker still finds the reply
    assert run_of(driver, 3).status == "done"
    assert stored(driver, 3)["status"] == "answered"
    assert [r.status for r in driver.runs(2)] == ["waiting"]
    assert run_of(driver, 2).id == listening


def test_a_failed_run_holds_its_records_events_unless_failed_runs_are_pruned(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, "handover"))  # failed; an operator may retry it
    reply = driver.emit("ticket.replied", {"ticket": 1})
    driver.advance("100 days")
    driver.create(ticket(2, "listen"))  # the newest run
    driver.emit("ticket.replied", {"ticket": 2}, run=False)  # the newest event
    assert driver.runner.prune(older_than="90d").events == 0
    assert reply in event_ids(any_engine)
    pruned = driver.runner.prune(older_than="90d", include_failed=True)
    assert (pruned.runs, pruned.events) == (1, 1)
    assert reply not in event_ids(any_engine)


def test_the_newest_rows_stay_so_their_ids_are_never_given_again(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    driver.create(ticket(1, "open"))
    driver.create(ticket(2, "open"))
    deliver(driver, 1, 2)
    last = driver.emit("ticket.replied", {"ticket": 2})
    driver.advance("100 days")
    pruned = driver.runner.prune(older_than="90d")
    assert (pruned.runs, pruned.events) == (1, 0)
    assert [r.id for r in driver.runs(2)] and driver.runs(1) == []
    assert event_ids(any_engine) == {last}
    driver.create(ticket(3, "open"))
    assert run_of(driver, 3).id > run_of(driver, 2).id


def test_completed_idempotency_records_older_than_the_cutoff_go(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    with dialects.begin(any_engine) as conn:
        ops.record_idempotent(conn, key="run-1/a", result={"ok": True}, now=T0)
        ops.begin_idempotent(conn, key="run-1/b", now=T0)  # interrupted: kept
        ops.record_idempotent(conn, key="run-2/a", now=T0 + timedelta(days=20))
    driver.advance("100 days")
    assert driver.runner.prune(older_than="90d", dry_run=True).idempotency == 1
    assert driver.runner.prune(older_than="90d", batch=1).idempotency == 1
    with any_engine.connect() as conn:
        assert ops.find_idempotent(conn, key="run-1/a") is None
        assert ops.find_idempotent(conn, key="run-1/b") is not None
        assert ops.find_idempotent(conn, key="run-2/a") is not None


def test_a_prune_keeps_to_its_runners_resource(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    for n in (1, 2, 3):
        driver.create(ticket(n, "open"))
    deliver(driver, 1, 2, 3)
    driver.advance("100 days")
    with dialects.begin(any_engine) as conn:  # as though another runner's run
        conn.execute(
            sa.update(engine_tables.runs)
            .where(engine_tables.runs.c.id == run_of(driver, 1).id)
            .values(resource="invoice")
        )
    assert driver.runner.prune(older_than="90d").runs == 1  # 2; 3 is the newest run
    assert count(any_engine, engine_tables.runs, resource="invoice") == 1


def test_prune_refuses_a_cutoff_younger_than_an_hour_and_a_bad_batch(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    with pytest.raises(OperatorError, match="keeps at least the last 1 hour"):
        driver.runner.prune(older_than="30 minutes")
    with pytest.raises(OperatorError):
        driver.runner.prune(older_than=timedelta(0))
    with pytest.raises(errors.DurationError):
        driver.runner.prune(older_than="90 dayz")
    with pytest.raises(ValueError, match="batch"):
        driver.runner.prune(older_than="90d", batch=0)
    assert driver.runner.prune(older_than="1 hour").total == 0


def test_prune_batches_interleaved_with_a_worker_lose_nothing_a_run_needs(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    for n in range(1, 13):
        driver.create(ticket(n, "open"))
    deliver(driver, *range(1, 13))
    old = {run_of(driver, n).id for n in range(1, 13)}
    for n in range(101, 110):
        driver.create(ticket(n, "listen"))
    # Six listeners are answered before an outage; no worker reads the replies until
    # the prune is under way. The other three are answered while it runs.
    replies = {driver.emit("ticket.replied", {"ticket": n}, run=False) for n in range(101, 107)}
    driver.advance("100 days", run=False)

    calls: list[str] = []
    created = iter(range(201, 300))
    late = iter(range(107, 110))

    def meanwhile(stage: str, examined: int, total: int) -> None:
        # Between two batches: a record comes, a reply may arrive, a worker takes a
        # step now and then (slower than the prune, so some replies are still unread
        # when the prune reaches them).
        calls.append(stage)
        driver.create(ticket(next(created), "open"), run=False)
        if len(calls) % 6 == 0:
            driver.worker.run_due(limit=1)
        if len(calls) % 5 == 0 and (listener := next(late, None)) is not None:
            driver.emit("ticket.replied", {"ticket": listener}, run=False)

    pruned = driver.runner.prune(older_than="90d", batch=1, progress=meanwhile)
    assert {"runs", "events", "idempotency"} <= set(calls)
    # Every old run went but the one holding the newest notice (its id stays taken).
    assert old & run_ids(any_engine) == {run_of(driver, 12).id}
    assert pruned.runs == len(old) - 1
    # The replies a listener had read went; the ones still unread stayed.
    assert 0 < pruned.events < len(replies)
    assert len(replies - event_ids(any_engine)) == pruned.events
    assert orphans(any_engine) == []

    driver.run_until_idle()
    for n in range(101, 110):
        run = run_of(driver, n)
        assert (run.status, stored(driver, n)["status"]) == ("done", "answered"), n
        assert whats(driver, run.id)[:3] == ["Reply: started", "Reply: waiting", "Reply: arrived"]
    for n in range(201, 201 + len(calls)):
        assert run_of(driver, n).status == "done"
        assert len(driver.notices(run_of(driver, n).id)) == 1
    assert orphans(any_engine) == []


def test_cutoff_reads_durations_and_timedeltas() -> None:
    assert retention.cutoff(T0, "90d") == T0 - timedelta(days=90)
    assert retention.cutoff(T0, timedelta(hours=2)) == T0 - timedelta(hours=2)
    assert retention.cutoff(T0, "P3M").month == 12


def test_a_run_locked_by_someone_changing_it_is_left_for_the_next_prune(
    pg_engine: sa.Engine,
) -> None:
    driver = desk(pg_engine)
    for n in (1, 2, 3):
        driver.create(ticket(n, "open"))
    deliver(driver, 1, 2, 3)
    driver.advance("100 days")
    busy = run_of(driver, 1).id
    runs = engine_tables.runs
    with pg_engine.connect() as other, other.begin():  # say, an operator's transaction
        other.execute(sa.select(runs.c.id).where(runs.c.id == busy).with_for_update())
        assert driver.runner.prune(older_than="90d").runs == 1  # 2; 3 is the newest run
    assert run_ids(pg_engine) == {busy, run_of(driver, 3).id}
    assert driver.runner.prune(older_than="90d").runs == 1
