"""Business time against an independent reference: a straightforward minute-by-minute walk
of each calendar's wall clock.

Three calendars, as the desks that use them would state them: Monday to Friday 09–17 in
New York without the US public holidays; Monday to Friday 09–17 and a Saturday
half-day 10–14 in Berlin without Berlin's; and a support desk open around the clock
Monday to Friday in London. For random (instant, duration) pairs over 2026–2027 —
business minutes, hours and days — ``add_business_time`` must give what the walk gives:
the minute by which N open minutes have passed; the same time of the working day N
working days on (its nearest open moment on a shorter day). Moderate by default, 10,000
pairs per calendar in a long run (``HYPOTHESIS_PROFILE=long``); ``-s`` prints the count
and our time per call.
"""

from __future__ import annotations

import random
import time as clock
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sizes import sized

from flowrunner import errors
from flowrunner.calendars import BusinessDuration, Calendar, add_business_time, parse_business

MINUTE = timedelta(minutes=1)

NEW_YORK = Calendar("desk", "America/New_York", {"mon-fri": "09:00-17:00"}, country="US")
BERLIN = Calendar(
    "büro",
    "Europe/Berlin",
    {"mon-fri": "09:00-17:00", "sat": "10:00-14:00"},
    country="DE",
    subdivision="BE",
)
AROUND_THE_CLOCK = Calendar("support", "Europe/London", {"mon-fri": "00:00-24:00"})
CALENDARS = {"new-york": NEW_YORK, "berlin": BERLIN, "24x5": AROUND_THE_CLOCK}


# -- the reference: the wall clock, minute by minute ----------------------------------------


def open_minute(calendar: Calendar) -> Callable[[datetime], bool]:
    """Whether the calendar is open during the minute that starts at ``moment`` (UTC), read
    off the wall clock: its weekday, its hours, its holidays."""
    zone = ZoneInfo(calendar.zone)
    ranges: dict[int, list[tuple[int, int]]] = {}
    for days, text in calendar.hours.items():
        first, _, last = days.partition("-")
        names = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        for day in range(names.index(first), names.index(last or first) + 1):
            for part in text.split(","):
                a, b = part.strip().split("-")
                ranges.setdefault(day, []).append((_minutes(a), _minutes(b)))

    def is_open(moment: datetime) -> bool:
        wall = moment.astimezone(zone)
        if calendar.is_holiday(wall.date()):
            return False
        minute = wall.hour * 60 + wall.minute
        return any(a <= minute < b for a, b in ranges.get(wall.weekday(), ()))

    return is_open


def _minutes(text: str) -> int:
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def walk_minutes(calendar: Calendar, instant: datetime, minutes: int) -> datetime:
    is_open, moment, left = open_minute(calendar), instant, minutes
    while left:
        if is_open(moment):
            left -= 1
        moment += MINUTE
    return moment


def walk_days(calendar: Calendar, instant: datetime, days: int) -> datetime:
    is_open, zone = open_minute(calendar), ZoneInfo(calendar.zone)
    start = instant
    while not is_open(start):
        start += MINUTE
    wall = start.astimezone(zone)
    target = wall.hour * 60 + wall.minute
    day, counted = wall.date(), 0
    while counted < days:
        day += timedelta(days=1)
        if opened_minutes(is_open, zone, day):
            counted += 1
    found = opened_minutes(is_open, zone, day)
    same = [moment for moment, minute in found if minute == target]
    if same:
        return same[0]
    later = [moment for moment, minute in found if minute > target]
    if later:
        return later[0]  # before it opens, or between two ranges: the next opening
    return found[-1][0] + MINUTE  # after it closes: its close


def opened_minutes(
    is_open: Callable[[datetime], bool], zone: ZoneInfo, day: date
) -> list[tuple[datetime, int]]:
    """Every open minute of the local ``day``: (its start in UTC, its wall-clock minute)."""
    moment = datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)
    found = []
    while moment.astimezone(zone).date() == day:
        if is_open(moment):
            wall = moment.astimezone(zone)
            found.append((moment, wall.hour * 60 + wall.minute))
        moment += MINUTE
    return found


# -- the comparison ------------------------------------------------------------------------


def pairs(count: int, seed: int) -> list[tuple[datetime, BusinessDuration]]:
    chance = random.Random(seed)
    begin = datetime(2026, 1, 1, tzinfo=UTC)
    drawn = []
    for _ in range(count):
        instant = begin + timedelta(minutes=chance.randrange(2 * 365 * 24 * 60))
        unit = chance.choice(["minutes", "hours", "days"])
        if unit == "minutes":
            length = BusinessDuration(minutes=chance.randrange(0, 600))
        elif unit == "hours":
            length = BusinessDuration(minutes=60 * chance.randrange(0, 40))
        else:
            length = BusinessDuration(days=chance.randrange(1, 8))
        drawn.append((instant, length))
    return drawn


@pytest.mark.parametrize("name", list(CALENDARS))
def test_business_time_is_what_a_minute_by_minute_walk_of_the_wall_clock_finds(
    name: str,
) -> None:
    calendar = CALENDARS[name]
    drawn = pairs(sized(60, 10_000), seed=len(name))
    differences = []
    took = 0.0
    for instant, length in drawn:
        began = clock.perf_counter()
        ours = add_business_time(instant, length, calendar)
        took += clock.perf_counter() - began
        if length.days:
            expected = walk_days(calendar, instant, length.days)
        else:
            expected = walk_minutes(calendar, instant, length.minutes)
        if ours != expected:
            differences.append((instant.isoformat(), str(length), ours, expected))
    assert differences == []
    print(f"\n{name}: {len(drawn)} pairs, 0 differences, {took / len(drawn) * 1e6:.0f} µs a call")


# -- as the desks state it ------------------------------------------------------------------


def test_four_business_hours_from_friday_4pm_is_monday_noon() -> None:
    friday_4pm = datetime(2026, 3, 6, 16, tzinfo=ZoneInfo("America/New_York"))
    monday_noon = datetime(2026, 3, 9, 12, tzinfo=ZoneInfo("America/New_York"))
    assert add_business_time(friday_4pm, "4 business hours", NEW_YORK) == monday_noon


def test_a_public_holiday_is_not_business_time() -> None:
    # Friday 3 July 2026 is the US holiday for the Fourth: Thursday's last hour, then Monday.
    thursday_4pm = datetime(2026, 7, 2, 16, tzinfo=ZoneInfo("America/New_York"))
    monday_10am = datetime(2026, 7, 6, 10, tzinfo=ZoneInfo("America/New_York"))
    assert add_business_time(thursday_4pm, "2 business hours", NEW_YORK) == monday_10am
    closed = NEW_YORK.with_holidays(["2026-07-06"])  # and a desk's own day off
    assert add_business_time(thursday_4pm, "2 business hours", closed) == monday_10am + timedelta(
        days=1
    )


def test_two_working_days_after_a_saturday_half_day() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # Friday 15:00 + 1 working day is Saturday, which closes at 14:00.
    friday_3pm = datetime(2026, 3, 13, 15, tzinfo=berlin)
    assert add_business_time(friday_3pm, "1 business day", BERLIN) == datetime(
        2026, 3, 14, 14, tzinfo=berlin
    )
    assert add_business_time(friday_3pm, "2 business days", BERLIN) == datetime(
        2026, 3, 16, 15, tzinfo=berlin
    )


def test_the_around_the_clock_desk_counts_elapsed_time_through_a_clock_change() -> None:
    london = ZoneInfo("Europe/London")
    # Clocks go forward on Sunday 29 March 2026, but the desk is closed on Sundays anyway;
    # on Friday 23 October 2026 it is open: 48 business hours from Friday noon end on
    # Tuesday noon, the closed weekend (with its extra hour) skipped.
    friday_noon = datetime(2026, 10, 23, 12, tzinfo=london)
    assert add_business_time(friday_noon, "48 business hours", AROUND_THE_CLOCK) == datetime(
        2026, 10, 27, 12, tzinfo=london
    )


def test_calendars_that_cannot_be_say_so() -> None:
    with pytest.raises(errors.BindingError, match="'mon-frei' is not weekdays"):
        Calendar("x", "UTC", {"mon-frei": "09:00-17:00"})
    with pytest.raises(errors.BindingError, match="'9-5' is not hours"):
        Calendar("x", "UTC", {"mon-fri": "9-5"})
    with pytest.raises(errors.BindingError, match="'Mars/Olympus' is not a time zone"):
        Calendar("x", "Mars/Olympus", {"mon-fri": "09:00-17:00"})
    with pytest.raises(errors.BindingError, match="the hours of mon overlap"):
        Calendar("x", "UTC", {"mon": "09:00-12:00, 11:00-13:00"})
    with pytest.raises(errors.DurationError, match="is not business time"):
        add_business_time(datetime(2026, 1, 1, tzinfo=UTC), "2 days", NEW_YORK)
    assert parse_business("30 business minutes") == BusinessDuration(minutes=30)
