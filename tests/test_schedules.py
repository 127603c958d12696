"""A job at times' slots on a zone's wall clock: six in the morning stays six through
daylight saving, a skipped time runs after the jump, a repeated one once, and the latest
slot due is found however long the workers were stopped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowrunner import errors
from flowrunner.jobs import schedules

NY = ZoneInfo("America/New_York")


def local(moments: list[datetime], zone: ZoneInfo = NY) -> list[str]:
    return [m.astimezone(zone).strftime("%a %d %b %H:%M %Z") for m in moments]


def test_six_in_the_morning_stays_six_when_the_clocks_go_forward() -> None:
    s = schedules.parse("0 6 * * 1-5", "America/New_York")
    slots = s.slots(datetime(2026, 3, 5, tzinfo=UTC), datetime(2026, 3, 11, tzinfo=UTC))
    assert local(slots) == [
        "Thu 05 Mar 06:00 EST",
        "Fri 06 Mar 06:00 EST",
        "Mon 09 Mar 06:00 EDT",
        "Tue 10 Mar 06:00 EDT",
    ]
    assert [m.hour for m in slots] == [11, 11, 10, 10]  # UTC moves, the wall clock does not


def test_six_in_the_morning_stays_six_when_the_clocks_go_back() -> None:
    s = schedules.parse("0 6 * * *", "America/New_York")
    slots = s.slots(datetime(2026, 10, 31, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC))
    assert local(slots) == ["Sat 31 Oct 06:00 EDT", "Sun 01 Nov 06:00 EST", "Mon 02 Nov 06:00 EST"]


def test_a_time_the_clock_skips_runs_at_the_first_minute_after_the_jump() -> None:
    s = schedules.parse("30 2 * * *", "America/New_York")
    slots = s.slots(datetime(2026, 3, 7, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC))
    assert local(slots) == ["Sat 07 Mar 02:30 EST", "Sun 08 Mar 03:00 EDT", "Mon 09 Mar 02:30 EDT"]


def test_a_time_the_clock_passes_twice_runs_once_at_the_first() -> None:
    s = schedules.parse("30 1 * * *", "America/New_York")
    slots = s.slots(datetime(2026, 10, 31, 12, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))
    assert local(slots) == ["Sun 01 Nov 01:30 EDT", "Mon 02 Nov 01:30 EST"]
    # Asked from inside the repeated hour (after the first 01:30), the next is tomorrow's.
    inside = datetime(2026, 11, 1, 1, 10, tzinfo=NY).replace(fold=1)
    assert local([s.next_slot(inside)]) == ["Mon 02 Nov 01:30 EST"]


def test_an_interval_follows_elapsed_time_through_both_changes() -> None:
    s = schedules.parse("*/30 * * * *", "America/New_York")
    back = s.slots(datetime(2026, 11, 1, 5, 0, tzinfo=UTC), datetime(2026, 11, 1, 7, 0, tzinfo=UTC))
    assert local(back) == [
        "Sun 01 Nov 01:30 EDT",
        "Sun 01 Nov 01:00 EST",  # the repeated hour runs again: it is another half hour
        "Sun 01 Nov 01:30 EST",
        "Sun 01 Nov 02:00 EST",
    ]
    forward = s.slots(
        datetime(2026, 3, 8, 6, 0, tzinfo=UTC), datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    )
    assert local(forward) == ["Sun 08 Mar 01:30 EST", "Sun 08 Mar 03:00 EDT"]


@pytest.mark.parametrize(
    ("every", "expected"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("  0   6 * * 1-5 ", "0 6 * * 1-5"),
    ],
)
def test_nicknames_stand_for_their_five_fields(every: str, expected: str) -> None:
    assert schedules.parse(every).every == expected


@pytest.mark.parametrize(
    ("every", "zone", "says"),
    [
        ("0 6 * *", "UTC", "is not five cron fields"),
        ("0 6 * * * *", "UTC", "is not five cron fields"),
        ("@yearly-ish", "UTC", "is not five cron fields"),
        ("61 * * * *", "UTC", "cannot be read"),
        ("0 6 31 2 *", "UTC", "cannot be read"),
        ("", "UTC", "needs a schedule"),
        ("@daily", "Europe/Atlantis", "there is no time zone 'Europe/Atlantis'"),
        ("@daily", "../etc/passwd", "there is no time zone"),
    ],
)
def test_what_cannot_be_a_schedule_is_refused_with_a_sentence(
    every: str, zone: str, says: str
) -> None:
    with pytest.raises(errors.BindingError, match=says.replace("(", r"\(")):
        schedules.parse(every, zone)


SCHEDULES = ["* * * * *", "*/7 * * * *", "0 6 * * 1-5", "30 2 * * *", "30 1 * * 0", "15 */5 * * *"]
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]


@settings(max_examples=60, deadline=None)
@given(
    every=st.sampled_from(SCHEDULES),
    zone=st.sampled_from(ZONES),
    after=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31)),
    gap=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=6)),
)
def test_the_latest_slot_is_the_last_one_walking_forwards(
    every: str, zone: str, after: datetime, gap: timedelta
) -> None:
    """However long the stop, the slot run is the last of the slots between — the same
    one a walk through every slot finds (the jump near ``now`` changes nothing)."""
    s = schedules.parse(every, zone)
    start = after.replace(tzinfo=UTC)
    now = start + gap
    walked = None
    moment = s.next_slot(start)
    while moment <= now:
        walked, moment = moment, s.next_slot(moment)
    assert s.latest_slot(start, now) == walked
    if walked is not None:
        assert start < walked <= now < s.next_slot(walked)
