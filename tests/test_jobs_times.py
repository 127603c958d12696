"""Jobs at times, as an operations team describes them: the nightly close runs at six in
the morning New York time, Monday to Friday, through both daylight-saving changes; a
first start never runs a missed slot; after a stop only the latest missed slot runs; a
slot that falls due while the last one still runs waits for it; a failing slot is tried
again, and one that keeps failing waits for the next slot. Run on SQLite and PostgreSQL
through the test driver's clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa
from running import mount

from flowrunner import Job, Jobs, errors, testing
from flowrunner.engine import commands, worker
from flowrunner.store import operations as ops

NY = ZoneInfo("America/New_York")


class Slots:
    """A command that notes each slot it ran, on New York's wall clock."""

    def __init__(self, then: Callable[[commands.CommandContext], None] | None = None) -> None:
        self.ran: list[str] = []
        self.keys: list[str] = []
        self.then = then

    def __call__(self, ctx: commands.CommandContext) -> None:
        slot = ctx.inputs["slot"]
        shown = "by hand" if slot is None else _wall(datetime.fromisoformat(str(slot)))
        self.ran.append(shown)
        self.keys.append(ctx.idempotency_key)
        if self.then is not None:
            self.then(ctx)


def _wall(moment: datetime) -> str:
    return moment.astimezone(NY).strftime("%a %d %b %H:%M %Z")


def timed(
    engine: sa.Engine,
    every: str,
    command: Callable[[commands.CommandContext], object],
    *,
    start: datetime,
    timezone: str = "America/New_York",
) -> tuple[testing.FlowDriver, Jobs]:
    driver = mount(engine, "tickets", flows="[]", commands={"close": command}, start=start)
    job = Job(every=every, timezone=timezone, command="close", run_as="clock")
    jobs = Jobs(driver.runner, {"nightly_close": job})
    return driver, jobs


def sentences(driver: testing.FlowDriver, jobs: Jobs) -> list[str]:
    run = jobs.scheduled_run("nightly_close")
    assert run is not None
    return [line.sentence for line in driver.history(run.id)]


def test_six_in_the_morning_stays_six_as_the_clocks_go_forward(any_engine: sa.Engine) -> None:
    close = Slots()
    start = datetime(2026, 3, 5, 12, tzinfo=UTC)  # Thu 5 Mar, after the morning's slot
    driver, jobs = timed(any_engine, "0 6 * * 1-5", close, start=start)
    driver.run_until_idle()
    assert close.ran == []  # a first start waits for the next slot: none is missed
    driver.advance("6 days")
    assert close.ran == [
        "Fri 06 Mar 06:00 EST",
        "Mon 09 Mar 06:00 EDT",  # summer time began on Sunday: still six
        "Tue 10 Mar 06:00 EDT",
        "Wed 11 Mar 06:00 EDT",
    ]
    assert close.keys[:2] == [
        "job:nightly_close:2026-03-06T11:00:00+00:00",
        "job:nightly_close:2026-03-09T10:00:00+00:00",
    ]
    assert sentences(driver, jobs)[:3] == [
        "Scheduled every weekday at 06:00 (America/New_York); first slot Fri 6 Mar 06:00",
        "Ran close for the slot Fri 6 Mar 06:00",
        "Ran close for the slot Mon 9 Mar 06:00",
    ]


def test_six_in_the_morning_stays_six_as_the_clocks_go_back(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, _ = timed(any_engine, "0 6 * * *", close, start=datetime(2026, 10, 30, tzinfo=UTC))
    driver.advance("4 days")
    assert close.ran == [
        "Fri 30 Oct 06:00 EDT",
        "Sat 31 Oct 06:00 EDT",
        "Sun 01 Nov 06:00 EST",
        "Mon 02 Nov 06:00 EST",
    ]


def test_the_skipped_and_the_repeated_half_past_run_once_each(any_engine: sa.Engine) -> None:
    skipped = Slots()
    driver, _ = timed(any_engine, "30 2 * * *", skipped, start=datetime(2026, 3, 7, tzinfo=UTC))
    driver.advance("3 days")
    assert skipped.ran == [
        "Sat 07 Mar 02:30 EST",
        "Sun 08 Mar 03:00 EDT",  # 02:30 never happened that night: right after the jump
        "Mon 09 Mar 02:30 EDT",
    ]


def test_the_hour_passed_twice_runs_a_set_time_once(any_engine: sa.Engine) -> None:
    repeated = Slots()
    start = datetime(2026, 10, 31, 12, tzinfo=UTC)
    driver, _ = timed(any_engine, "30 1 * * *", repeated, start=start)
    driver.advance("2 days")
    assert repeated.ran == ["Sun 01 Nov 01:30 EDT", "Mon 02 Nov 01:30 EST"]


def test_after_a_stop_only_the_latest_missed_slot_runs(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, jobs = timed(any_engine, "0 6 * * 1-5", close, start=datetime(2026, 3, 2, tzinfo=UTC))
    driver.advance("1 day")
    assert close.ran == ["Mon 02 Mar 06:00 EST"]
    driver.advance("8 days", run=False)  # no worker served for eight days
    driver.run_until_idle()
    # Tue 10 Mar 20:00 in New York: six slots missed, the latest of them runs.
    assert close.ran == ["Mon 02 Mar 06:00 EST", "Tue 10 Mar 06:00 EDT"]
    assert sentences(driver, jobs)[-1] == (
        "Ran close for the slot Tue 10 Mar 06:00; the slots missed from Tue 3 Mar 06:00 "
        "were skipped"
    )
    driver.advance("1 day")
    assert close.ran[-1] == "Wed 11 Mar 06:00 EDT"


def test_a_slot_that_falls_due_while_the_last_runs_waits_for_it(pg_engine: sa.Engine) -> None:
    """Minutely, and the 09:00 slot takes 90 seconds: 09:01 falls due meanwhile. Another
    worker looking then finds the job's lease held and leaves it; the 09:01 slot runs as
    soon as 09:00's is done, not skipped and not beside it."""
    looked: list[int] = []
    box: dict[str, object] = {}

    def slow(ctx: commands.CommandContext) -> None:
        if ctx.inputs["slot"] == "2026-03-02T09:00:00+00:00":
            driver = box["driver"]
            assert isinstance(driver, testing.FlowDriver)
            driver.now = driver.now + timedelta(seconds=90)
            looked.append(box["other"].run_due())  # type: ignore[attr-defined]

    close = Slots(slow)
    driver, jobs = timed(
        pg_engine,
        "* * * * *",
        close,
        start=datetime(2026, 3, 2, 8, 59, 30, tzinfo=UTC),
        timezone="UTC",
    )
    box["driver"] = driver
    driver.worker = worker.Worker(driver.runner, lease_ttl=timedelta(minutes=10))
    box["other"] = worker.Worker(driver.runner, lease_ttl=timedelta(minutes=10))
    driver.advance("30 seconds")
    assert looked == [0]  # the other worker claimed nothing while the slot ran
    assert close.ran == ["Mon 02 Mar 04:00 EST", "Mon 02 Mar 04:01 EST"]
    said = sentences(driver, jobs)
    assert said[1:] == [
        "Ran close for the slot Mon 2 Mar 09:00",
        "Ran close for the slot Mon 2 Mar 09:01",
    ]


def test_a_failing_slot_is_tried_again_then_waits_for_the_next(any_engine: sa.Engine) -> None:
    tries: list[int] = []

    def flaky(ctx: commands.CommandContext) -> None:
        tries.append(ctx.attempt)
        if ctx.inputs["slot"] == "2026-03-02T11:00:00+00:00":
            raise ConnectionError("database of quotes is down")

    driver, jobs = timed(any_engine, "0 6 * * *", flaky, start=datetime(2026, 3, 2, tzinfo=UTC))
    driver.advance("2 days 12 hours")
    assert tries == [1, 2, 3, 4, 5, 1, 1]  # five attempts at Monday's slot, then on
    said = sentences(driver, jobs)
    assert said[1].startswith("Attempt 1 failed (ConnectionError: database of quotes is down)")
    assert said[5] == (
        "Close failed for the slot Mon 2 Mar 06:00 (ConnectionError: database of quotes is "
        "down); the job waits for its next slot"
    )
    assert said[6:] == [
        "Ran close for the slot Tue 3 Mar 06:00",
        "Ran close for the slot Wed 4 Mar 06:00",
    ]
    run = jobs.scheduled_run("nightly_close")
    assert run is not None and run.status == "waiting"


def test_a_refused_slot_is_not_tried_again(any_engine: sa.Engine) -> None:
    def refuses(ctx: commands.CommandContext) -> None:
        raise errors.CommandRefused("quotes are frozen for the audit")

    driver, jobs = timed(any_engine, "@daily", refuses, start=datetime(2026, 3, 2, tzinfo=UTC))
    driver.advance("1 day 1 hour")
    said = sentences(driver, jobs)
    assert said[1:] == [
        "Close failed for the slot Mon 2 Mar 00:00 (quotes are frozen for the audit); the "
        "job waits for its next slot"
    ]


def test_the_job_store_keeps_one_run_per_job_however_often_prepared(
    any_engine: sa.Engine,
) -> None:
    driver, jobs = timed(any_engine, "@hourly", Slots(), start=datetime(2026, 3, 2, tzinfo=UTC))
    for _ in range(3):
        jobs.prepare()
        worker.Worker(driver.runner).run_due()
    with any_engine.connect() as conn:
        runs = ops.list_runs(conn, resource="ticket")
    assert [run.flow_name for run in runs] == ["nightly_close"]


def test_a_job_run_by_hand_runs_now_once_and_is_journaled(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, jobs = timed(any_engine, "0 6 * * 1-5", close, start=datetime(2026, 3, 2, tzinfo=UTC))
    ran = jobs.run_now("nightly_close", operator="olga")
    assert ran.ok and close.ran == ["by hand"]
    entry = driver.runner.journal().rows[0]
    assert close.keys == [f"job:nightly_close:manual:{entry.id}"]
    assert (entry.operator, entry.action, entry.run_id) == ("olga", "job_run", ran.run_id)
    assert sentences(driver, jobs)[-1] == "olga ran close by hand"
    driver.advance("1 day")  # the schedule goes on as it was
    assert close.ran == ["by hand", "Mon 02 Mar 06:00 EST"]


def test_a_job_run_by_hand_waits_while_a_worker_holds_it(pg_engine: sa.Engine) -> None:
    driver, jobs = timed(pg_engine, "@daily", Slots(), start=datetime(2026, 3, 2, tzinfo=UTC))
    jobs.prepare()
    run = jobs.scheduled_run("nightly_close")
    assert run is not None
    held = ops.claim_run(
        pg_engine, run_id=run.id, owner="another-worker", now=driver.now, ttl=timedelta(minutes=5)
    )
    assert held is not None
    with pytest.raises(errors.OperatorError, match=r"still running on a worker after 0\.2 seconds"):
        jobs.run_now("nightly_close", operator="olga", wait=0.2)


def test_an_unknown_job_is_refused_with_the_names_there_are(sqlite_engine: sa.Engine) -> None:
    _, jobs = timed(sqlite_engine, "@daily", Slots(), start=datetime(2026, 3, 2, tzinfo=UTC))
    with pytest.raises(
        errors.OperatorError, match=r"there is no job 'nightly' \(jobs: nightly_close\)"
    ):
        jobs.run_now("nightly", operator="olga")
