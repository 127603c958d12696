"""Which slot a claimed job at times runs, as the pure rule decides it: the catch_up
choice after a stop, the overlap choice for slots that came while the last one ran,
on cron fields and on an interval."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowrunner.jobs import catch_up, schedules

HOURLY = schedules.parse("@hourly")


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 3, 2, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("choice", "runs", "skipped"),
    [
        ("latest", at(13), (at(10), at(12))),
        ("all", at(10), None),
        ("none", None, (at(10), at(13))),
    ],
)
def test_after_a_stop_each_choice_picks_its_slot(
    choice: str, runs: datetime | None, skipped: tuple[datetime, datetime] | None
) -> None:
    decided = catch_up.decide(HOURLY, last=at(9), ended=at(9), now=at(13, 20), catch_up=choice)
    assert decided.slot == runs
    shown = None if decided.skipped_from is None else (decided.skipped_from, decided.skipped_to)
    assert shown == skipped


def test_none_runs_the_one_slot_due_when_claimed_on_time() -> None:
    on_time = catch_up.decide(HOURLY, last=at(9), ended=None, now=at(10, 0), catch_up="none")
    assert on_time.slot == at(10)
    late = catch_up.decide(HOURLY, last=at(9), ended=None, now=at(10, 5), catch_up="none")
    assert (late.slot, late.why) == (None, "missed")


def test_slots_that_came_while_the_last_one_ran_are_skipped_not_the_ones_missed_before() -> None:
    # Caught up after a stop: the 07:00 slot was claimed at 10:30 and ran until 12:30.
    decided = catch_up.decide(
        HOURLY,
        last=at(7),
        began=at(10, 30),
        ended=at(12, 30),
        now=at(12, 30),
        catch_up="all",
        overlap="skip",
    )
    assert decided.slot == at(8)  # missed before the run began: it still runs
    right_after = catch_up.decide(
        HOURLY,
        last=at(10),
        began=at(10),
        ended=at(12, 30),
        now=at(12, 30),
        catch_up="all",
        overlap="skip",
    )
    assert right_after.slot is None  # 11:00 and 12:00 came while 10:00's ran
    assert (right_after.skipped_from, right_after.skipped_to, right_after.why) == (
        at(11),
        at(12),
        "overlap",
    )


def test_with_none_a_slot_that_waited_for_the_last_one_is_not_missed() -> None:
    decided = catch_up.decide(
        HOURLY, last=at(9), began=at(9), ended=at(10, 30), now=at(10, 30), catch_up="none"
    )
    assert decided.slot == at(10)


def test_an_interval_counts_its_slots_from_the_epoch() -> None:
    every = schedules.read("90 seconds")
    start = datetime(2026, 3, 2, 9, 0, 10, tzinfo=UTC)
    assert every.slots(start, start + timedelta(minutes=3)) == [
        datetime(2026, 3, 2, 9, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 2, 9, 3, tzinfo=UTC),
    ]
    assert schedules.read("2 hours").next_slot(start) == datetime(2026, 3, 2, 10, tzinfo=UTC)
    assert every.words() == "every 90 seconds"
