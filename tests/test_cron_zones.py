"""A job at times keeps the documented daylight-saving rules in every IANA zone, the
half-hour and quarter-to zones too: the slots a schedule gives are those a plain walk
through the zone's clock, minute by minute, finds by the rules of
``flowrunner.jobs.schedules``.

By default each zone's clock is walked through the twelve hours around every change of its
offset in 2026 and 2027 and through six ordinary hours; with ``FLOWRUNNER_CRON_ALL=1`` (or
``HYPOTHESIS_PROFILE=long``) through every minute of the two years (most of an hour on
one core). ``pytest -s`` prints how much was compared.
"""

from __future__ import annotations

import os
import time
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sizes import sized

from flowrunner.jobs import schedules

MINUTE = timedelta(minutes=1)
FROM, UNTIL = datetime(2026, 1, 1, tzinfo=UTC), datetime(2028, 1, 1, tzinfo=UTC)
EVERYTHING = bool(os.environ.get("FLOWRUNNER_CRON_ALL")) or (
    os.environ.get("HYPOTHESIS_PROFILE") in ("long", "thorough")
)
EXPRESSIONS = (
    "30 * * * *",
    "15 */3 * * *",
    "0 */2 * * *",
    "*/30 * * * *",
    "*/15 * * * *",
    "0 6 * * 1-5",
    "45 2 * * *",
    "0 0 * * *",
)
# How long before a window the walk starts reading the clock, so that it knows which
# readings it has seen: longer than any stretch a zone's clock passes twice.
LOOKBACK = timedelta(hours=3)
# The walk around a change of offset: six hours either side (what the change moves lies
# within an hour or two of it).
AROUND = timedelta(hours=6)
# Where, around a change, ``next_slot`` is also asked from moments that are no slot: every
# forty minutes (seven past) through two hours either side; every twenty in a long run.
NEAR = timedelta(hours=2)
_APART = sized(40, 20)
ASKED = [timedelta(minutes=7 + _APART * n) for n in range(-120 // _APART, 120 // _APART)]

LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
CHATHAM = ZoneInfo("Pacific/Chatham")


def on_the_clock(zone: ZoneInfo, *moments: datetime) -> list[str]:
    return [m.astimezone(zone).strftime("%a %d %b %H:%M %Z") for m in moments]


def slots_on_the_clock(every: str, start: datetime, end: datetime) -> list[str]:
    """The slots of ``every`` between two readings of a zone's clock, as it reads them."""
    zone = start.tzinfo
    assert isinstance(zone, ZoneInfo)
    schedule = schedules.parse(every, str(zone))
    return on_the_clock(zone, *schedule.slots(start, end))


def lord_howe(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, fold: int = 0
) -> datetime:
    """A reading of Lord Howe Island's clock (``fold=1``: the second time it reads so)."""
    return datetime(year, month, day, hour, minute, fold=fold, tzinfo=LORD_HOWE)


# -- as a workflow designer states them: Lord Howe Island, whose clocks move by half an hour --


def test_a_job_at_15_past_every_third_hour_in_lord_howe_runs_at_03_15_on_4_october_2026() -> None:
    # Summer time begins: at two the clocks go to half past two; 03:15 happens as ever.
    night = slots_on_the_clock("15 */3 * * *", lord_howe(2026, 10, 4), lord_howe(2026, 10, 4, 7))
    assert night == ["Sun 04 Oct 00:15 +1030", "Sun 04 Oct 03:15 +11", "Sun 04 Oct 06:15 +11"]


def test_a_job_at_half_past_every_hour_in_lord_howe_runs_at_02_30_the_night_summer_begins() -> None:
    # 02:30 is the first minute after the jump: it happens, so it runs.
    night = slots_on_the_clock("30 * * * *", lord_howe(2026, 10, 4, 1), lord_howe(2026, 10, 4, 4))
    assert night == ["Sun 04 Oct 01:30 +1030", "Sun 04 Oct 02:30 +11", "Sun 04 Oct 03:30 +11"]


def test_a_job_every_two_hours_in_lord_howe_runs_at_02_00_on_5_april_2026() -> None:
    # Summer time ends: at two the clocks go back to half past one; 02:00 then happens once.
    night = slots_on_the_clock("0 */2 * * *", lord_howe(2026, 4, 4, 23), lord_howe(2026, 4, 5, 4))
    assert night == ["Sun 05 Apr 00:00 +11", "Sun 05 Apr 02:00 +1030", "Sun 05 Apr 04:00 +1030"]


def test_a_job_at_half_past_every_hour_in_lord_howe_runs_at_01_30_both_times_it_happens() -> None:
    # An interval follows elapsed time: the half-hour the clock passes twice runs twice,
    # however the interval is written.
    start, end = lord_howe(2026, 4, 5, 1), lord_howe(2026, 4, 5, 1, 45, fold=1)
    for every in ("30 * * * *", "*/30 * * * *"):
        assert slots_on_the_clock(every, start, end) == [
            "Sun 05 Apr 01:30 +11",
            "Sun 05 Apr 01:30 +1030",
        ], every


def test_a_job_at_a_set_time_in_lord_howe_runs_after_the_jump_and_once_when_passed_twice() -> None:
    skipped = slots_on_the_clock("15 2 * * *", lord_howe(2026, 10, 3), lord_howe(2026, 10, 6))
    assert skipped == ["Sat 03 Oct 02:15 +1030", "Sun 04 Oct 02:30 +11", "Mon 05 Oct 02:15 +11"]
    repeated = slots_on_the_clock("45 1 * * *", lord_howe(2026, 4, 4), lord_howe(2026, 4, 7))
    assert repeated == ["Sat 04 Apr 01:45 +11", "Sun 05 Apr 01:45 +11", "Mon 06 Apr 01:45 +1030"]


def test_a_job_asked_from_inside_the_half_hour_lord_howe_passes_twice_runs_what_is_left() -> None:
    # 01:40 the second time round: the interval's 01:45 comes again, the set time's does not.
    inside = lord_howe(2026, 4, 5, 1, 40, fold=1)
    interval = schedules.parse("*/15 * * * *", "Australia/Lord_Howe")
    set_time = schedules.parse("45 1 * * *", "Australia/Lord_Howe")
    assert on_the_clock(LORD_HOWE, interval.next_slot(inside), set_time.next_slot(inside)) == [
        "Sun 05 Apr 01:45 +1030",
        "Mon 06 Apr 01:45 +1030",
    ]


def test_a_job_at_three_on_the_chatham_islands_runs_at_03_45_the_night_summer_begins() -> None:
    # At a quarter to three the clocks go to a quarter to four: three never happens.
    start = datetime(2026, 9, 26, 12, tzinfo=CHATHAM)
    night = slots_on_the_clock("0 3 * * *", start, start + timedelta(days=2))
    assert night == ["Sun 27 Sep 03:45 +1345", "Mon 28 Sep 03:00 +1345"]


# -- the walk: every minute read on the zone's clock, and the documented rules ---------------


@dataclass(frozen=True)
class Fields:
    """Five cron fields as the values each names; the day fields are both matched (every
    expression here leaves one of them ``*``)."""

    every: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    set_time: bool
    """Minute and hour fields both name values (neither starts with ``*``)."""

    @classmethod
    def of(cls, every: str) -> Fields:
        minute, hour, day, month, weekday = every.split()
        assert day.startswith("*") or weekday.startswith("*")
        return cls(
            every=every,
            minutes=values(minute, 0, 59),
            hours=values(hour, 0, 23),
            days=values(day, 1, 31),
            months=values(month, 1, 12),
            weekdays=frozenset(d % 7 for d in values(weekday, 0, 7)),
            set_time=not minute.startswith("*") and not hour.startswith("*"),
        )

    def match(self, reading: datetime) -> bool:
        return (
            reading.minute in self.minutes
            and reading.hour in self.hours
            and reading.day in self.days
            and reading.month in self.months
            and reading.isoweekday() % 7 in self.weekdays
        )


def values(field: str, low: int, high: int) -> frozenset[int]:
    """The values a cron field names: ``*``, ``*/N``, ``A``, ``A-B``, and lists of them."""
    found: set[int] = set()
    for part in field.split(","):
        spread, _, step = part.partition("/")
        first, _, last = spread.partition("-")
        if spread == "*":
            first, last = str(low), str(high)
        found.update(range(int(first), int(last or first) + 1, int(step or 1)))
    return frozenset(found)


ALL_FIELDS = tuple(Fields.of(every) for every in EXPRESSIONS)
# The minutes any expression names: a reading at another minute matches none of them.
ANY_MINUTE = frozenset().union(*(fields.minutes for fields in ALL_FIELDS))


def walked(zone: ZoneInfo, start: datetime, end: datetime) -> dict[str, list[datetime]]:
    """Every expression's slots in (start, end], found by reading ``zone``'s clock at
    every UTC minute and applying the rules as documented:

    - an interval runs at every minute whose reading its fields match — each time the
      clock reads it;
    - a set time runs at a minute whose reading its fields match, the first time the
      clock reads it; and at the first minute after a jump forward, when its fields
      match a reading the jump skipped.
    """
    found: dict[str, list[datetime]] = {f.every: [] for f in ALL_FIELDS}
    moment = start.replace(second=0, microsecond=0) - LOOKBACK
    before = moment.astimezone(zone).replace(tzinfo=None)
    highest = before
    while moment + MINUTE <= end:
        moment += MINUTE
        reading = moment.astimezone(zone).replace(tzinfo=None)
        skipped = []
        gap = before + MINUTE
        while gap < reading:
            skipped.append(gap)
            gap += MINUTE
        first_time = reading > highest
        if moment > start and (skipped or reading.minute in ANY_MINUTE):
            for fields in ALL_FIELDS:
                if fields.set_time:
                    due = (fields.match(reading) and first_time) or any(map(fields.match, skipped))
                else:
                    due = fields.match(reading)
                if due:
                    found[fields.every].append(moment)
        before, highest = reading, max(highest, reading)
    return found


def changes(zone: ZoneInfo) -> Iterator[datetime]:
    """The UTC minutes at which ``zone``'s offset changes between FROM and UNTIL: looked for
    every week (no zone changes and changes back within one), then found by halving."""
    moment = FROM
    while moment < UNTIL:
        later = min(moment + timedelta(days=7), UNTIL)
        low, high = moment, later
        if low.astimezone(zone).utcoffset() != high.astimezone(zone).utcoffset():
            while high - low > MINUTE:
                middle = low + (high - low) // MINUTE // 2 * MINUTE
                if middle.astimezone(zone).utcoffset() == low.astimezone(zone).utcoffset():
                    low = middle
                else:
                    high = middle
            yield high
        moment = later


def windows(zone: ZoneInfo, index: int) -> list[tuple[datetime, datetime]]:
    """The stretches of UTC time walked in ``zone``: the two years whole, or six hours
    either side of each change and six ordinary hours (somewhere else in each zone),
    overlapping ones joined."""
    if EVERYTHING:
        return [(FROM, UNTIL)]
    ordinary = FROM + timedelta(days=(index * 37) % 720, hours=(index * 5) % 24)
    spans = sorted(
        [(ordinary, ordinary + AROUND)] + [(t - AROUND, t + AROUND) for t in changes(zone)]
    )
    joined: list[tuple[datetime, datetime]] = []
    for start, end in spans:
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((max(start, FROM), min(end, UNTIL)))
    return joined


def test_every_zone_gives_the_slots_the_walk_through_its_clock_finds() -> None:
    began, cpu = time.perf_counter(), time.process_time()
    zones = sorted(zoneinfo.available_timezones())
    compared = minutes = asked = changed = 0
    wrong: list[str] = []
    for index, name in enumerate(zones):
        zone = ZoneInfo(name)
        moves = list(changes(zone))
        changed += len(moves)
        for start, end in windows(zone, index):
            expected = walked(zone, start, end)
            minutes += (end - start) // MINUTE
            for every, slots in expected.items():
                schedule = schedules.parse(every, name)
                got = schedule.slots(start, end)
                compared += len(slots)
                if got != slots:
                    extra, missing = sorted(set(got) - set(slots)), sorted(set(slots) - set(got))
                    wrong.append(
                        f"{name} {every!r}: runs {on_the_clock(zone, *extra)}, "
                        f"not {on_the_clock(zone, *missing)}"
                    )
                # Asked from moments that are no slot, around each change in the window.
                for change in (t for t in moves if start + NEAR <= t <= end - NEAR):
                    for offset in ASKED:
                        after = change + offset
                        following = [s for s in slots if s > after]
                        answer = schedule.next_slot(after)
                        asked += 1
                        if answer != following[0] if following else answer <= end:
                            wrong.append(f"{name} {every!r} after {on_the_clock(zone, after)}")
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    print(
        f"\n{len(zones)} zones ({changed} changes of offset) x {len(EXPRESSIONS)} expressions: "
        f"{compared} slots compared over {minutes} minutes walked, next_slot asked {asked} "
        f"times, in {seconds:.1f} s ({cpu:.1f} s of processor)"
        + (" (every minute of 2026 and 2027)" if EVERYTHING else "")
    )
    assert not wrong, "\n".join(wrong[:20])
