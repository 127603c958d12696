"""Names written for programs, said as a person says them: a schedule's cron fields
(``0 6 * * 1-5`` is ``every weekday at 06:00``) and an event's name (``po.decided`` is
``the po decided event``).

Where a reader meets a schedule or an event (a history line, the jobs and flows listed,
a flow's page, a run's waits) it reads these words; the names stay where programs read
them. ``cron`` never raises: fields it cannot say (a typo the schedule's own check
refuses) read ``on its schedule``. Pure: no clock.

>>> cron("*/15 * * * *"), cron("30 2 1,15 * *"), cron("@weekly")
('every 15 minutes', 'on the 1st and 15th of every month at 02:30', 'every Sunday at 00:00')
"""

from __future__ import annotations

import re
from collections.abc import Sequence

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
UNSAID = "on its schedule"

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAY_NAMES = {name[:3].lower(): n for n, name in enumerate(_DAYS)}
_MONTH_NAMES = {name[:3].lower(): n + 1 for n, name in enumerate(_MONTHS)}
_PART = re.compile(r"^(?:(?P<all>[*?])|(?P<a>\w+)(?:-(?P<b>\w+))?)(?:/(?P<step>\d+))?$")
_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


class _Unsaid(Exception):
    """Fields these words cannot say."""


def event(name: object, *, article: str = "the") -> str:
    """An event as a sentence names it, its name as people write it: ``po.decided`` →
    ``the po decided event``; ``article=""`` for ``no po decided event``; no name →
    ``an event``.

    >>> event("ticket.replied"), event("credit_reported", article="a")
    ('the ticket replied event', 'a credit reported event')
    """
    text = " ".join(re.sub(r"[._\-]+", " ", str(name or "")).split())
    if not text:
        return "an event"
    return f"{article} {text} event" if article else f"{text} event"


def cron(every: str) -> str:
    """Cron fields (or a nickname: ``@daily``) as a reader says them; ``on its
    schedule`` for fields that are not cron's.

    >>> cron("0 6 * * 1-5"), cron("0 6 * * mon")
    ('every weekday at 06:00', 'every Monday at 06:00')
    """
    try:
        return _words(every)
    except (_Unsaid, ValueError, IndexError, TypeError, AttributeError):
        return UNSAID


def _words(every: str) -> str:
    text = " ".join(str(every).split()).lower()
    fields = NICKNAMES.get(text, text).split()
    if len(fields) != 5:
        raise _Unsaid(every)
    minute, hour, day, month, weekday = fields
    minutes = _values(minute, 0, 59)
    hours = _values(hour, 0, 23)
    when = _time(minute, hour, minutes, hours)
    days = _days(day, month, weekday)
    if when.startswith("at ") and " and every " not in days:
        return f"{days} {when}"
    return when if days == "every day" else f"{when}, {days}"


def _values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> list[int]:
    """Every value the field matches, in order."""
    found: set[int] = set()
    for part in field.split(","):
        match = _PART.match(part)
        if match is None:
            raise _Unsaid(field)
        step = int(match["step"] or 1)
        if step < 1:
            raise _Unsaid(field)
        if match["all"]:
            start, end = low, high
        else:
            start = _value(match["a"], names)
            end = _value(match["b"], names) if match["b"] else (high if match["step"] else start)
        if not (low <= start <= high and low <= end <= high) or end < start:
            raise _Unsaid(field)
        found.update(range(start, end + 1, step))
    return sorted(found)


def _value(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text in names:
        return names[text]
    if not text.isdigit():
        raise _Unsaid(text)
    return int(text)


def _step_of(field: str) -> int | None:
    """``*/15`` → 15; ``*`` → 1; None for a field that names values."""
    if field == "*":
        return 1
    match = re.fullmatch(r"\*/(\d+)", field)
    return int(match.group(1)) if match else None


def _time(minute: str, hour: str, minutes: list[int], hours: list[int]) -> str:
    minute_step, hour_step = _step_of(minute), _step_of(hour)
    if minute_step is not None:
        every = "every minute" if minute_step == 1 else f"every {minute_step} minutes"
        if hour_step == 1:
            return every
        return f"{every} {_hours_said(hour, hours)}"
    if hour_step is not None:
        past = "on the hour" if minutes == [0] else f"at {_listed(minutes)} minutes past the hour"
        return f"every hour, {past}" if hour_step == 1 else f"every {hour_step} hours, {past}"
    if len(minutes) * len(hours) <= 6:
        return "at " + _listed([f"{h:02d}:{m:02d}" for h in hours for m in minutes])
    if len(minutes) == 1 and hours == list(range(hours[0], hours[-1] + 1)):
        first, last = (f"{h:02d}:{minutes[0]:02d}" for h in (hours[0], hours[-1]))
        return f"every hour from {first} to {last}"
    return f"at {_listed(minutes)} minutes past each hour {_hours_said(hour, hours)}"


def _hours_said(hour: str, hours: list[int]) -> str:
    """``from 09:00 to 17:59``, ``in the hours 09:00, 12:00 and 15:00``."""
    if len(hours) > 1 and hours == list(range(hours[0], hours[-1] + 1)):
        return f"from {hours[0]:02d}:00 to {hours[-1]:02d}:59"
    if len(hours) == 1:
        return f"from {hours[0]:02d}:00 to {hours[0]:02d}:59"
    return "in the hours " + _listed([f"{h:02d}:00" for h in hours])


def _days(day: str, month: str, weekday: str) -> str:
    months = _values(month, 1, 12, _MONTH_NAMES)
    in_months = (
        "" if months == list(range(1, 13)) else f" in {_listed([_MONTHS[m - 1] for m in months])}"
    )
    any_day, any_weekday = day in ("*", "?"), weekday in ("*", "?")
    on_days = "" if any_day else f"on the {_dates(day)}"
    on_weekdays = "" if any_weekday else _weekdays(weekday)
    if any_day and any_weekday:
        return f"every day{in_months}"
    month_said = f" of{in_months.replace(' in', '')}" if in_months else " of every month"
    if any_day:
        if "of every month" in on_weekdays:  # the last Friday of every month
            return on_weekdays.replace(" of every month", month_said)
        return f"{on_weekdays}{in_months}"
    if any_weekday:
        return f"{on_days}{month_said}"
    # Cron runs on a day either field names when both name days.
    return f"{on_days}{month_said} and {on_weekdays}{in_months}"


def _dates(day: str) -> str:
    """``1st and 15th``, ``1st to the 7th``, ``last day``."""
    if day == "l":
        return "last day"
    dates = _values(day, 1, 31)
    if len(dates) > 2 and dates == list(range(dates[0], dates[-1] + 1)):
        return f"{_ordinal(dates[0])} to the {_ordinal(dates[-1])}"
    return _listed([_ordinal(d) for d in dates])


def _weekdays(weekday: str) -> str:
    """``every weekday``, ``every Monday and Friday``, ``the last Friday of every month``."""
    last = re.fullmatch(r"(\w+)l", weekday)
    if last:
        return f"on the last {_DAYS[_value(last.group(1), _DAY_NAMES) % 7]} of every month"
    nth = re.fullmatch(r"(\w+)#([1-5])", weekday)
    if nth:
        named = _DAYS[_value(nth.group(1), _DAY_NAMES) % 7]
        return f"on the {_ordinal(int(nth.group(2)))} {named} of every month"
    days = sorted({d % 7 for d in _values(weekday, 0, 7, _DAY_NAMES)})
    if days == [1, 2, 3, 4, 5]:
        return "every weekday"
    if days == [0, 6]:
        return "every Saturday and Sunday"
    if days == list(range(7)):
        return "every day"
    return "every " + _listed([_DAYS[d] for d in days])


def _listed(items: Sequence[object]) -> str:
    said = [str(item) for item in items]
    if len(said) > 8:
        said = [*said[:7], f"{len(said) - 7} more"]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else _SUFFIXES.get(number % 10, "th")
    return f"{number}{suffix}"
