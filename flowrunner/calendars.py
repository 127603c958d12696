"""Business time: a calendar's open hours in its zone and its holidays, and time counted
on it — the seed's SLA clock, ``add_business_time(instant, duration, calendar)``.

A ``Calendar`` names its hours by weekday (``{"mon-fri": "09:00-17:00", "sat":
"10:00-14:00"}``; several ranges a day as ``"09:00-12:00, 13:00-17:00"``; ``24:00``
ends a day), its zone, and its holidays: dates, and (with ``country=``) a country's
public holidays from the ``holidays`` library (``pip install 'flowrunner[calendars]'``).

Business time is counted on the calendar's wall clock in its zone:

- ``N business minutes`` / ``N business hours`` is the moment by which N minutes of open
  time have passed, counted from the instant itself (from the next opening when it is
  closed). Open time is elapsed time: an open range that a daylight-saving change
  shortens is shorter.
- ``N business days`` is the same time of the working day N working days later (a
  working day: one with open hours that is no holiday), counted from the instant itself
  when it is open, else from the next opening; a day whose hours do not reach that time
  gives its nearest open moment (a Saturday half-day's close, say).
- Zero business time is the instant itself.

>>> from datetime import datetime, UTC
>>> desk = Calendar("desk", "America/New_York", {"mon-fri": "09:00-17:00"})
>>> friday_4pm = datetime(2026, 3, 6, 21, 0, tzinfo=UTC)  # 16:00 in New York
>>> add_business_time(friday_4pm, "4 business hours", desk).isoformat()
'2026-03-09T16:00:00+00:00'
>>> add_business_time(friday_4pm, "2 business days", desk).isoformat()
'2026-03-10T20:00:00+00:00'
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from functools import cached_property
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flowrunner import errors

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# How far a count walks before it says the calendar never opens enough (ten years).
MAX_DAYS = 3660
# How many days' open ranges a calendar keeps counted (about ten years).
KEPT_DAYS = 4000

_RANGE = re.compile(r"^\s*([0-9]{1,2}):([0-9]{2})\s*-\s*([0-9]{1,2}):([0-9]{2})\s*$")
_BUSINESS = re.compile(
    r"^\s*([0-9]+)\s+business\s+(minutes?|mins?|hours?|hrs?|days?)\s*$", re.IGNORECASE
)


@dataclass(frozen=True)
class BusinessDuration:
    """A length of business time: whole working days, or minutes of open time."""

    days: int = 0
    minutes: int = 0

    def __str__(self) -> str:
        if self.days:
            return f"{self.days} business day{'s' if self.days != 1 else ''}"
        if self.minutes and self.minutes % 60 == 0:
            hours = self.minutes // 60
            return f"{hours} business hour{'s' if hours != 1 else ''}"
        return f"{self.minutes} business minute{'s' if self.minutes != 1 else ''}"


def parse_business(text: str) -> BusinessDuration | None:
    """``2 business days``, ``4 business hours``, ``30 business minutes`` as a
    ``BusinessDuration``; None when the text is not business time.

    >>> parse_business("4 Business Hours")
    BusinessDuration(days=0, minutes=240)
    >>> parse_business("2 days") is None
    True
    """
    found = _BUSINESS.match(text or "")
    if found is None:
        return None
    amount, unit = int(found.group(1)), found.group(2).lower()
    if amount > 36_600 * 24 * 60:
        raise errors.DurationError(f"{text.strip()!r} is longer than any business wait")
    if unit.startswith("d"):
        return BusinessDuration(days=amount)
    return BusinessDuration(minutes=amount * (60 if unit.startswith("h") else 1))


def is_business(text: object) -> bool:
    """Whether a duration's text counts business time (``2 business days``)."""
    return isinstance(text, str) and "business" in text.lower()


@dataclass(frozen=True)
class Calendar:
    """Open hours by weekday in a zone, and holidays (see the module's docstring)."""

    name: str
    zone: str
    hours: Mapping[str, str]
    holidays: Iterable[date | str] = ()
    country: str | None = None
    subdivision: str | None = None
    _days: tuple[date, ...] = field(init=False, repr=False, compare=False)
    _week: tuple[tuple[tuple[int, int], ...], ...] = field(init=False, repr=False, compare=False)
    # Each day's open ranges as counted once (a count walks the same days again and again).
    _ranges: dict[date, tuple[tuple[datetime, datetime], ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise errors.BindingError("a calendar needs a name")
        try:
            ZoneInfo(self.zone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise errors.BindingError(
                f"calendar {self.name!r}: {self.zone!r} is not a time zone (e.g. 'Europe/Berlin')"
            ) from None
        object.__setattr__(self, "_week", _week(self.name, self.hours))
        if not any(self._week):
            raise errors.BindingError(f"calendar {self.name!r} is open at no hour of the week")
        days = []
        for day in self.holidays:
            try:
                days.append(day if isinstance(day, date) else date.fromisoformat(str(day)))
            except ValueError:
                raise errors.BindingError(
                    f"calendar {self.name!r}: holiday {day!r} is not a date (YYYY-MM-DD)"
                ) from None
        object.__setattr__(self, "_days", tuple(sorted(set(days))))
        if self.country is not None:
            self._country_days(2000)  # a country the library knows, or a sentence now

    @cached_property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    @cached_property
    def _holiday_set(self) -> frozenset[date]:
        return frozenset(self._days)

    def _country_days(self, year: int) -> frozenset[date]:
        return _country(self.name, self.country or "", self.subdivision, year)

    def is_holiday(self, day: date) -> bool:
        if day in self._holiday_set:
            return True
        return self.country is not None and day in self._country_days(day.year)

    def with_holidays(self, days: Iterable[date | str]) -> Calendar:
        """The same calendar with more holidays (those an application keeps in a table)."""
        return Calendar(
            self.name,
            self.zone,
            self.hours,
            (*self._days, *days),
            self.country,
            self.subdivision,
        )

    def open_ranges(self, day: date) -> tuple[tuple[datetime, datetime], ...]:
        """The day's open ranges as UTC instants (none on a holiday)."""
        kept = self._ranges.get(day)
        if kept is not None:
            return kept
        found: tuple[tuple[datetime, datetime], ...] = ()
        if not self.is_holiday(day):
            pairs = [(self._at(day, a), self._at(day, b)) for a, b in self._week[day.weekday()]]
            found = tuple((a, b) for a, b in pairs if b > a)
        if len(self._ranges) >= KEPT_DAYS:
            self._ranges.clear()
        self._ranges[day] = found
        return found

    def working(self, day: date) -> bool:
        return bool(self.open_ranges(day))

    def _at(self, day: date, minute: int) -> datetime:
        """The wall-clock ``minute`` of ``day`` (24:00 is the next midnight), in UTC: a
        time the clock shows twice is its first showing, one it skips the moment it
        jumps past it."""
        if minute >= 24 * 60:
            day, minute = day + timedelta(days=1), minute - 24 * 60
        local = datetime.combine(day, time(minute // 60, minute % 60), tzinfo=self.tz)
        moment = local.astimezone(UTC)
        wall = local.replace(tzinfo=None)
        if moment.astimezone(self.tz).replace(tzinfo=None) == wall:
            return moment
        # Skipped: the first instant whose wall clock reads at or past it.
        low, high = local.replace(fold=1).astimezone(UTC), moment
        while high - low > timedelta(seconds=1):
            middle = low + (high - low) / 2
            if middle.astimezone(self.tz).replace(tzinfo=None) >= wall:
                high = middle
            else:
                low = middle
        return high.replace(microsecond=0) + timedelta(seconds=1 if high.microsecond else 0)

    def local_day(self, instant: datetime) -> date:
        return instant.astimezone(self.tz).date()

    def ranges_from(self, instant: datetime) -> Iterator[tuple[datetime, datetime]]:
        """The open ranges that end after ``instant``, in order (the first may have begun)."""
        day = self.local_day(instant) - timedelta(days=1)
        for _ in range(MAX_DAYS):
            for start, end in self.open_ranges(day):
                if end > instant:
                    yield start, end
            day += timedelta(days=1)
        raise errors.DurationError(
            f"calendar {self.name!r} does not open within {MAX_DAYS // 366} years"
        )

    def next_open(self, instant: datetime) -> datetime:
        """``instant`` when the calendar is open then, else its next opening."""
        start, _ = next(self.ranges_from(instant))
        return max(start, instant)


def add_business_time(
    instant: datetime, duration: BusinessDuration | str, calendar: Calendar
) -> datetime:
    """``instant`` plus business time on ``calendar`` (see the module's docstring)."""
    if isinstance(duration, str):
        parsed = parse_business(duration)
        if parsed is None:
            raise errors.DurationError(
                f"{duration!r} is not business time — write e.g. '4 business hours'"
            )
        duration = parsed
    if instant.tzinfo is None:
        raise ValueError("business time is added to an aware instant")
    instant = instant.astimezone(UTC)
    if duration.days:
        return _add_days(instant, duration.days, calendar)
    return _add_minutes(instant, duration.minutes, calendar)


def _add_minutes(instant: datetime, minutes: int, calendar: Calendar) -> datetime:
    if minutes <= 0:
        return instant
    left = timedelta(minutes=minutes)
    for start, end in calendar.ranges_from(instant):
        begin = max(start, instant)
        if left <= end - begin:
            return begin + left
        left -= end - begin
    raise AssertionError("ranges_from ends by raising")  # pragma: no cover


def _add_days(instant: datetime, days: int, calendar: Calendar) -> datetime:
    start = calendar.next_open(instant)
    wall = start.astimezone(calendar.tz)
    minute = wall.hour * 60 + wall.minute
    day = wall.date()
    counted = 0
    for _ in range(MAX_DAYS):
        day += timedelta(days=1)
        if calendar.working(day):
            counted += 1
            if counted == days:
                return _nearest_open(calendar, day, minute, wall)
    raise errors.DurationError(
        f"calendar {calendar.name!r} has no {days} working days within {MAX_DAYS // 366} years"
    )


def _nearest_open(calendar: Calendar, day: date, minute: int, wall: datetime) -> datetime:
    """The working ``day`` at the wall-clock ``minute`` (its seconds as ``wall``'s), or
    its nearest open moment: before it opens, its opening; between two ranges, the next
    one's opening; after it closes, its close."""
    local = datetime.combine(
        day, time(minute // 60, minute % 60, wall.second, wall.microsecond), tzinfo=calendar.tz
    ).astimezone(UTC)
    ranges = calendar._week[day.weekday()]
    for first, last in ranges:
        if minute < first:
            return calendar._at(day, first)  # before this range: its opening
        if minute < last:
            return min(max(local, calendar._at(day, first)), calendar._at(day, last))
    return calendar._at(day, ranges[-1][1])  # after the day's close: its close


def _week(name: str, hours: Mapping[str, str]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The open ranges of each weekday (Monday first), in minutes after midnight."""
    if not isinstance(hours, Mapping) or not hours:
        raise errors.BindingError(
            f"calendar {name!r} needs its hours, e.g. {{'mon-fri': '09:00-17:00'}}"
        )
    week: list[list[tuple[int, int]]] = [[] for _ in WEEKDAYS]
    for days, text in hours.items():
        for index in _days_of(name, str(days)):
            week[index].extend(_ranges(name, str(days), str(text)))
    for index, ranges in enumerate(week):
        ranges.sort()
        for (_, end), (start, _) in itertools.pairwise(ranges):
            if start < end:
                raise errors.BindingError(
                    f"calendar {name!r}: the hours of {WEEKDAYS[index]} overlap"
                )
    return tuple(tuple(ranges) for ranges in week)


def _days_of(name: str, text: str) -> list[int]:
    found: list[int] = []
    for part in text.lower().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in WEEKDAYS or (last and last not in WEEKDAYS):
            raise errors.BindingError(
                f"calendar {name!r}: {text!r} is not weekdays — write e.g. 'mon-fri' or 'sat'"
            )
        a = WEEKDAYS.index(first)
        b = WEEKDAYS.index(last) if last else a
        found.extend(range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)])
    return found


def _ranges(name: str, days: str, text: str) -> list[tuple[int, int]]:
    found = []
    for part in text.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise errors.BindingError(
                f"calendar {name!r}, {days}: {part.strip()!r} is not hours — write e.g. "
                "'09:00-17:00'"
            )
        h1, m1, h2, m2 = (int(g) for g in match.groups())
        start, end = h1 * 60 + m1, h2 * 60 + m2
        if m1 > 59 or m2 > 59 or start >= 24 * 60 or end > 24 * 60 or end <= start:
            raise errors.BindingError(
                f"calendar {name!r}, {days}: {part.strip()!r} is not a range within one day"
            )
        found.append((start, end))
    return found


_COUNTRIES: dict[tuple[str, str | None, int], frozenset[date]] = {}


def _country(name: str, country: str, subdivision: str | None, year: int) -> frozenset[date]:
    key = (country, subdivision, year)
    if key not in _COUNTRIES:
        try:
            import holidays
        except ModuleNotFoundError:
            raise errors.BindingError(
                f"calendar {name!r} takes {country}'s holidays from the holidays library: "
                "pip install 'flowrunner[calendars]'"
            ) from None
        try:
            found = holidays.country_holidays(country, subdiv=subdivision, years=year)
        except NotImplementedError:
            raise errors.BindingError(
                f"calendar {name!r}: the holidays library knows no country {country!r}"
            ) from None
        _COUNTRIES[key] = frozenset(found)
    return _COUNTRIES[key]


__all__ = [
    "BusinessDuration",
    "Calendar",
    "add_business_time",
    "is_business",
    "parse_business",
]
