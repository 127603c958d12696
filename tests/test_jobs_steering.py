"""Jobs people steer, as an operations team describes them: after a stop a job runs the
latest missed slot, every one, or none, as it chose; a slot that comes while the last
one still runs waits, is skipped, or runs beside it; a job runs every 90 seconds; an
operator pauses and resumes a job and backfills a range of its slots, journaled. Two
workers serve every case, and no slot runs twice. On SQLite and PostgreSQL, through
the test driver's clock."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from running import mount

from flowrunner import Job, Jobs, errors, testing
from flowrunner.engine import commands, worker

START = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)  # a Monday, half past eight UTC
# Longer than any slot here runs on the test clock: a lease outlives its slot.
LEASE = timedelta(days=1)


class Slots:
    """A command that notes each slot it ran (``HH:MM`` UTC, or ``by hand``) and its key."""

    def __init__(self, then: Callable[[commands.CommandContext], None] | None = None) -> None:
        self.ran: list[str] = []
        self.keys: list[str] = []
        self.running = 0
        self.most = 0  # the most slots that ran at once
        self.then = then

    def __call__(self, ctx: commands.CommandContext) -> None:
        slot = ctx.inputs["slot"]
        self.ran.append("by hand" if slot is None else f"{datetime.fromisoformat(str(slot)):%H:%M}")
        self.keys.append(ctx.idempotency_key)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            if self.then is not None:
                self.then(ctx)
        finally:
            self.running -= 1


def hourly(
    engine: sa.Engine,
    command: Slots,
    *,
    every: str = "0 * * * *",
    catch_up: str = "latest",
    overlap: str = "wait",
) -> tuple[testing.FlowDriver, Jobs]:
    driver = mount(engine, "tickets", flows="[]", commands={"close": command}, start=START)
    job = Job(every=every, command="close", run_as="clock", catch_up=catch_up, overlap=overlap)
    return driver, Jobs(driver.runner, {"close": job})


def said(driver: testing.FlowDriver, jobs: Jobs) -> list[str]:
    run = jobs.scheduled_run("close")
    assert run is not None
    return [line.sentence for line in driver.history(run.id)]


def two_workers(driver: testing.FlowDriver) -> list[int]:
    """Two workers serve the app at once until neither finds anything due; how many runs
    each advanced."""
    served = [0, 0]

    def serve(index: int) -> None:
        hand = worker.Worker(driver.runner, lease_ttl=LEASE)
        idle = rounds = 0
        while idle < 3:
            rounds += 1
            assert rounds < 1000, "work still due after 1000 claims: a loop?"
            claimed = hand.run_due(limit=1)
            served[index] += claimed
            idle = idle + 1 if claimed == 0 else 0

    threads = [threading.Thread(target=serve, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return served


def once_each(close: Slots) -> None:
    twice = [key for key, times in Counter(close.keys).items() if times > 1]
    assert twice == [], f"slots run twice: {twice}"


# -- after a stop --------------------------------------------------------------------------


def stopped(engine: sa.Engine, catch_up: str) -> tuple[Slots, testing.FlowDriver, Jobs]:
    """An hourly job that ran at nine, then no worker served until 13:20."""
    close = Slots()
    driver, jobs = hourly(engine, close, catch_up=catch_up)
    driver.advance("40 minutes")
    assert close.ran == ["09:00"]
    driver.advance_to(datetime(2026, 3, 2, 13, 20, tzinfo=UTC), run=False)
    two_workers(driver)
    return close, driver, jobs


def test_after_a_stop_the_latest_slot_runs(any_engine: sa.Engine) -> None:
    close, driver, jobs = stopped(any_engine, "latest")
    assert close.ran == ["09:00", "13:00"]
    assert said(driver, jobs)[-1] == (
        "Ran close for the slot Mon 2 Mar 13:00; the slots missed from Mon 2 Mar 10:00 were skipped"
    )
    driver.advance("1 hour")
    assert close.ran[-1] == "14:00"
    once_each(close)


def test_after_a_stop_every_missed_slot_runs_in_order(any_engine: sa.Engine) -> None:
    close, driver, jobs = stopped(any_engine, "all")
    assert close.ran == ["09:00", "10:00", "11:00", "12:00", "13:00"]
    assert said(driver, jobs)[-4:] == [
        "Ran close for the slot Mon 2 Mar 10:00",
        "Ran close for the slot Mon 2 Mar 11:00",
        "Ran close for the slot Mon 2 Mar 12:00",
        "Ran close for the slot Mon 2 Mar 13:00",
    ]
    driver.advance("1 hour")
    assert close.ran[-1] == "14:00"
    once_each(close)


def test_after_a_stop_no_missed_slot_runs_and_the_next_one_does(any_engine: sa.Engine) -> None:
    close, driver, jobs = stopped(any_engine, "none")
    assert close.ran == ["09:00"]
    assert said(driver, jobs)[-1] == (
        "Skipped the slots Mon 2 Mar 10:00 to Mon 2 Mar 13:00, as no worker served or the "
        "job was paused; the job runs next at Mon 2 Mar 14:00"
    )
    driver.advance("1 hour")
    assert close.ran == ["09:00", "14:00"]  # on time again: it runs
    once_each(close)


# -- a slot that comes while the last one still runs ---------------------------------------


def slow_nine(box: dict[str, object]) -> Callable[[commands.CommandContext], None]:
    """The nine o'clock slot takes two and a half hours: the clock moves past 10:00 and
    11:00 while it runs. On PostgreSQL another worker looks meanwhile (on SQLite the
    slot's transaction holds the one writer's lock: nobody else can write)."""

    def slow(ctx: commands.CommandContext) -> None:
        if ctx.inputs["slot"] != "2026-03-02T09:00:00+00:00":
            return
        driver = box["driver"]
        assert isinstance(driver, testing.FlowDriver)
        driver.now = box["after"] = driver.now + timedelta(hours=2, minutes=30)
        if driver.runner.engine.dialect.name == "postgresql":
            other = worker.Worker(driver.runner, lease_ttl=LEASE)
            looked = box.setdefault("looked", [])
            assert isinstance(looked, list)
            while (claimed := other.run_due(limit=1)) != 0:
                looked.append(claimed)
            looked.append(0)

    return slow


def overlapping(
    engine: sa.Engine, overlap: str, catch_up: str = "latest"
) -> tuple[Slots, testing.FlowDriver, Jobs, list[object]]:
    box: dict[str, object] = {}
    close = Slots(slow_nine(box))
    driver, jobs = hourly(engine, close, overlap=overlap, catch_up=catch_up)
    box["driver"] = driver
    driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)
    driver.advance("30 minutes")  # 09:00: the slow slot runs until 11:30
    after = box["after"]
    assert isinstance(after, datetime)
    driver.now = after  # the driver's advance ends at 09:00, where it was told to
    two_workers(driver)
    looked = box.get("looked", [])
    assert isinstance(looked, list)
    return close, driver, jobs, looked


def test_a_slot_that_comes_meanwhile_waits_then_the_latest_runs(any_engine: sa.Engine) -> None:
    close, driver, _jobs, looked = overlapping(any_engine, "wait")
    assert looked in ([], [0])  # another worker found the job held: it waited
    assert close.ran == ["09:00", "11:00"]
    assert close.most == 1
    driver.advance("1 hour")
    assert close.ran[-1] == "12:00"
    once_each(close)


def test_slots_that_come_meanwhile_wait_and_each_runs_when_all_are_caught_up(
    any_engine: sa.Engine,
) -> None:
    close, _driver, _, looked = overlapping(any_engine, "wait", catch_up="all")
    assert looked in ([], [0])
    assert close.ran == ["09:00", "10:00", "11:00"]
    assert close.most == 1
    once_each(close)


def test_a_slot_that_comes_meanwhile_is_skipped(any_engine: sa.Engine) -> None:
    close, driver, jobs, looked = overlapping(any_engine, "skip", catch_up="all")
    assert looked in ([], [0])
    assert close.ran == ["09:00"]  # 10:00 and 11:00 came while nine's ran
    assert said(driver, jobs)[-1] == (
        "Skipped the slots Mon 2 Mar 10:00 to Mon 2 Mar 11:00, which came while the last one "
        "ran; the job runs next at Mon 2 Mar 12:00"
    )
    driver.advance("1 hour")
    assert close.ran == ["09:00", "12:00"]
    once_each(close)


def test_a_slot_that_comes_meanwhile_runs_beside_the_last_one(any_engine: sa.Engine) -> None:
    close, driver, jobs, looked = overlapping(any_engine, "allow")
    assert close.ran == ["09:00", "11:00"]
    if any_engine.dialect.name == "postgresql":
        assert close.most == 2  # 11:00's ran on the other worker while 09:00's still ran
        assert sum(n for n in looked if isinstance(n, int)) >= 2
    assert said(driver, jobs)[1].startswith("Started run ")
    driver.advance("1 hour")
    assert close.ran[-1] == "12:00"
    once_each(close)


# -- an interval ---------------------------------------------------------------------------


def test_a_job_every_90_seconds_runs_on_the_interval(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, jobs = hourly(any_engine, close, every="90 seconds")
    driver.advance("5 minutes")  # 08:30 to 08:35
    assert close.keys == [
        "job:close:2026-03-02T08:31:30+00:00",
        "job:close:2026-03-02T08:33:00+00:00",
        "job:close:2026-03-02T08:34:30+00:00",
    ]
    assert said(driver, jobs)[:2] == [
        "Scheduled every 90 seconds; first slot Mon 2 Mar 08:31",
        "Ran close for the slot Mon 2 Mar 08:31",
    ]
    driver.advance("10 minutes", run=False)  # stopped: the latest slot only, as by default
    two_workers(driver)
    assert close.keys[-1] == "job:close:2026-03-02T08:45:00+00:00"
    once_each(close)


# -- operators -----------------------------------------------------------------------------


def test_a_paused_job_runs_no_slot_until_resumed_then_catches_up_as_chosen(
    any_engine: sa.Engine,
) -> None:
    close = Slots()
    driver, jobs = hourly(any_engine, close, catch_up="all")
    driver.advance("40 minutes")
    assert close.ran == ["09:00"]
    jobs.pause("close", operator="olga")
    driver.advance("3 hours")
    assert close.ran == ["09:00"]
    assert jobs.list()[0].paused_by == "olga"
    jobs.resume("close", operator="olga")
    two_workers(driver)
    assert close.ran == ["09:00", "10:00", "11:00", "12:00"]  # every slot missed while paused
    entries = [(e.operator, e.action) for e in driver.runner.journal().rows]
    assert ("olga", "job_pause") in entries and ("olga", "job_resume") in entries
    lines = said(driver, jobs)
    assert "olga paused the job" in lines and "olga resumed the job" in lines
    once_each(close)


def test_a_job_resumed_with_no_catch_up_waits_for_its_next_slot(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, jobs = hourly(any_engine, close, catch_up="none")
    jobs.pause("close", operator="olga")
    driver.advance("3 hours")  # 11:30
    jobs.resume("close", operator="pat")
    driver.advance("1 hour")
    assert close.ran == ["12:00"]
    entries = driver.runner.journal().rows  # newest first
    assert [(e.operator, e.action) for e in entries[:2]] == [
        ("pat", "job_resume"),
        ("olga", "job_pause"),
    ]


def test_a_backfill_runs_each_slot_of_the_range_once(any_engine: sa.Engine) -> None:
    close = Slots()
    driver, jobs = hourly(any_engine, close)
    driver.advance("3 hours")  # 09:00, 10:00 and 11:00 ran; now 11:30
    assert close.ran == ["09:00", "10:00", "11:00"]
    first = jobs.backfill(
        "close",
        start=datetime(2026, 3, 2, 6, tzinfo=UTC),
        end=datetime(2026, 3, 2, 10, tzinfo=UTC),
        operator="olga",
    )
    assert [f"{slot:%H:%M}" for slot in first.slots] == [
        "06:00",
        "07:00",
        "08:00",
        "09:00",
        "10:00",
    ]
    assert [f"{slot:%H:%M}" for slot in first.ran_already] == ["09:00", "10:00"]
    assert len(first.started) == 3
    again = jobs.backfill(
        "close",
        start=datetime(2026, 3, 2, 6, tzinfo=UTC),
        end=datetime(2026, 3, 2, 10, tzinfo=UTC),
        operator="olga",
    )
    assert again.started == []  # the same range again starts nothing new
    two_workers(driver)
    assert sorted(close.ran) == ["06:00", "07:00", "08:00", "09:00", "10:00", "11:00"]
    once_each(close)
    actions = [(e.operator, e.action) for e in driver.runner.journal().rows]
    assert actions.count(("olga", "job_backfill")) == 2


def test_a_backfill_that_ends_after_now_or_before_it_starts_is_refused(
    sqlite_engine: sa.Engine,
) -> None:
    _driver, jobs = hourly(sqlite_engine, Slots())
    with pytest.raises(errors.OperatorError, match="after now"):
        jobs.backfill("close", start=START, end=START + timedelta(days=1), operator="olga")
    with pytest.raises(errors.OperatorError, match="before it starts"):
        jobs.backfill("close", start=START, end=START - timedelta(days=1), operator="olga")
    with pytest.raises(errors.OperatorError, match="name the operator"):
        jobs.pause("close", operator=" ")


# -- declarations refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "sentence"),
    [
        (
            {"every": "@daily", "catch_up": "some"},
            "the job running 'close' has catch_up='some': catch_up is one of 'latest', "
            "'all', 'none'",
        ),
        (
            {"every": "@daily", "overlap": "queue"},
            "the job running 'close' has overlap='queue': overlap is one of 'wait', 'skip', "
            "'allow'",
        ),
        (
            {"every": "@daily", "realm": "world"},
            "the job running 'close' has realm='world': realm is one of 'platform', 'tenant'",
        ),
        (
            {"on": "po.decided", "schedule": print, "catch_up": "all"},
            "the job on 'po.decided' runs when an event plans it: catch_up and overlap are "
            "for a job at times (every=...)",
        ),
        (
            {"every": "ninety seconds"},
            "the schedule 'ninety seconds' is neither five cron fields",
        ),
        ({"every": "1 month"}, "not months"),
        ({"every": "0 seconds"}, "at least one second long"),
    ],
)
def test_a_bad_declaration_is_refused_with_a_sentence(
    options: dict[str, object], sentence: str
) -> None:
    with pytest.raises(errors.BindingError) as refused:
        Job(command="close", run_as="clock", **options)  # type: ignore[arg-type]
    assert sentence in str(refused.value)


def test_a_tenant_job_on_a_binding_without_tenants_is_refused(sqlite_engine: sa.Engine) -> None:
    driver = mount(sqlite_engine, "tickets", flows="[]", commands={"close": Slots()})
    job = Job(every="@daily", command="close", run_as="clock", realm="tenant")
    with pytest.raises(errors.BindingError, match="belong to no tenants: leave realm out"):
        Jobs(driver.runner, {"close": job})


def test_a_backfill_given_while_the_job_is_paused_waits_until_it_is_resumed(
    any_engine: sa.Engine,
) -> None:
    close = Slots()
    driver, jobs = hourly(any_engine, close, catch_up="none")
    driver.advance("3 hours")  # 09:00, 10:00, 11:00 ran
    jobs.pause("close", operator="olga")
    done = jobs.backfill(
        "close",
        start=datetime(2026, 3, 2, 7, tzinfo=UTC),
        end=datetime(2026, 3, 2, 8, tzinfo=UTC),
        operator="olga",
    )
    two_workers(driver)
    assert close.ran == ["09:00", "10:00", "11:00"]  # paused: the backfill waits
    [first, _] = done.started
    assert [line.sentence for line in driver.history(first)][-1] == (
        "The job is paused: the slot Mon 2 Mar 07:00 waits until it is resumed"
    )
    jobs.resume("close", operator="olga")
    two_workers(driver)
    assert sorted(close.ran) == ["07:00", "08:00", "09:00", "10:00", "11:00"]
    assert [line.sentence for line in driver.history(first)][-1] == (
        "Ran close for the slot Mon 2 Mar 07:00"
    )
    once_each(close)
