"""Durations as business users write them: ``30 minutes``, ``1 day 4 hours``, ``P1M2DT3H``.

Months and years are calendar months (``1 month`` after January 31 is the last day
of February); days and weeks move the wall clock of a time zone, so ``1 day`` across
a daylight-saving change lands on the same local time; hours, minutes and seconds
are elapsed time.

>>> parse_duration("1 day 4 hours")
Duration(months=0, days=1, seconds=14400)
>>> str(parse_duration("P1M2DT3H"))
'1 month 2 days 3 hours'
>>> str(parse_duration("-2 days", allow_sign=True))
'-2 days'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from dateutil.relativedelta import relativedelta

from flowrunner import errors

MAX_LENGTH = 200
# Far beyond any business wait, yet small enough that datetime arithmetic never overflows.
MAX_MONTHS = 12 * 100
MAX_DAYS = 366 * 100
MAX_SECONDS = MAX_DAYS * 86_400

_EXAMPLE = "write e.g. '2 days' or '30 minutes'"

# unit word -> (field, factor)
_UNITS: dict[str, tuple[str, int]] = {}
for _names, _field, _factor in (
    (("s", "sec", "secs", "second", "seconds"), "seconds", 1),
    (("m", "min", "mins", "minute", "minutes"), "seconds", 60),
    (("h", "hr", "hrs", "hour", "hours"), "seconds", 3600),
    (("d", "day", "days"), "days", 1),
    (("w", "wk", "wks", "week", "weeks"), "days", 7),
    (("mo", "mon", "month", "months"), "months", 1),
    (("y", "yr", "yrs", "year", "years"), "months", 12),
):
    for _name in _names:
        _UNITS[_name] = (_field, _factor)

# ASCII digits only, here and below: ``\d`` would also take ``٣``.
_ISO = re.compile(
    r"P(?:(?P<Y>[0-9]+)Y)?(?:(?P<M>[0-9]+)M)?(?:(?P<W>[0-9]+)W)?(?:(?P<D>[0-9]+)D)?"
    r"(?:T(?=[0-9])(?:(?P<h>[0-9]+)H)?(?:(?P<m>[0-9]+)M)?(?:(?P<s>[0-9]+)S)?)?",
    re.IGNORECASE,
)
_WORD = re.compile(r"([0-9]+)(\.[0-9]+)?\s*([A-Za-z]*)")


@dataclass(frozen=True)
class Duration:
    """A span of calendar months, wall-clock days and elapsed seconds.

    A negative duration has every part at or below zero.
    """

    months: int = 0
    days: int = 0
    seconds: int = 0

    @classmethod
    def parse(cls, text: str, *, allow_sign: bool = False) -> Duration:
        return parse_duration(text, allow_sign=allow_sign)

    @property
    def is_negative(self) -> bool:
        return self.months < 0 or self.days < 0 or self.seconds < 0

    @property
    def is_zero(self) -> bool:
        return self.months == 0 and self.days == 0 and self.seconds == 0

    def __neg__(self) -> Duration:
        return Duration(-self.months, -self.days, -self.seconds)

    def add_to(self, moment: datetime, tz: tzinfo | None = None) -> datetime:
        """``moment`` plus this duration; days move the wall clock of ``tz`` (default: moment's).

        A naive ``moment`` is taken as UTC. The result keeps ``moment``'s time zone.
        ``DurationError`` if it falls outside the calendar (years 1 to 9999).

        >>> try:
        ...     Duration(days=2).add_to(datetime(9999, 12, 31, tzinfo=UTC))
        ... except errors.DurationError as error:
        ...     print(error.message)
        9999-12-31T00:00:00+00:00 plus 2 days falls outside the calendar (years 1 to 9999)
        """
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        home = moment.tzinfo
        try:
            local = moment.astimezone(tz) if tz is not None else moment
            if self.months or self.days:
                # Aware datetime arithmetic is wall-clock arithmetic; going through UTC
                # afterwards settles a wall time that falls in a DST gap or overlap.
                local = local + relativedelta(months=self.months, days=self.days)
            instant = local.astimezone(UTC) + timedelta(seconds=self.seconds)
            return instant.astimezone(home)
        except (OverflowError, ValueError):
            message = (
                f"{moment.isoformat()} plus {self} falls outside the calendar (years 1 to 9999)"
            )
            error = errors.DurationError(message, found=str(self))
            error.args = (message,)  # about no text: no line and column in its sentence
            raise error from None

    def subtract_from(self, moment: datetime, tz: tzinfo | None = None) -> datetime:
        return (-self).add_to(moment, tz)

    def approx_seconds(self) -> float:
        """A rough length (a month as 30 days), for ordering and sanity checks only."""
        return self.months * 30 * 86_400 + self.days * 86_400 + self.seconds

    def __str__(self) -> str:
        if self.is_zero:
            return "0 seconds"
        sign = "-" if self.is_negative else ""
        months, days, seconds = abs(self.months), abs(self.days), abs(self.seconds)
        parts: list[tuple[int, str]] = [(months // 12, "year"), (months % 12, "month")]
        if days % 7 == 0:
            parts.append((days // 7, "week"))
        else:
            parts.append((days, "day"))
        parts += [
            (seconds // 3600, "hour"),
            (seconds % 3600 // 60, "minute"),
            (seconds % 60, "second"),
        ]
        words = [f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in parts if n]
        return sign + " ".join(words)

    def isoformat(self) -> str:
        """ISO 8601 text, e.g. ``P1M2DT3H``; a negative duration gets a leading ``-``."""
        if self.is_zero:
            return "PT0S"
        months, days, seconds = abs(self.months), abs(self.days), abs(self.seconds)
        date = "".join(
            f"{n}{u}" for n, u in ((months // 12, "Y"), (months % 12, "M"), (days, "D")) if n
        )
        h, rest = divmod(seconds, 3600)
        m, s = divmod(rest, 60)
        time = "".join(f"{n}{u}" for n, u in ((h, "H"), (m, "M"), (s, "S")) if n)
        sign = "-" if self.is_negative else ""
        return f"{sign}P{date}{'T' + time if time else ''}"


def _fail(text: str, column: int, message: str, found: str | None = None) -> errors.DurationError:
    # Messages end up in logs and forms: no newlines or control characters in them.
    message = "".join(ch if ch.isprintable() else " " for ch in message)
    return errors.DurationError(
        message,
        line=1,
        column=column,
        found=found,
        expected=("a number and a unit, e.g. '2 days' or '30 minutes'",),
        text=text,
    )


def _not_a_duration(text: str, column: int, found: str | None) -> errors.DurationError:
    return _fail(text, column, f"'{text.strip()}' is not a duration — {_EXAMPLE}", found)


def _checked(text: str, months: int, days: int, seconds: int, sign: int) -> Duration:
    if months > MAX_MONTHS or days > MAX_DAYS or seconds > MAX_SECONDS:
        raise _fail(text, 1, f"'{text.strip()}' is longer than a duration can be (100 years)")
    return Duration(sign * months, sign * days, sign * seconds)


def parse_duration(text: str, *, allow_sign: bool = False) -> Duration:
    """Read a duration; raise ``DurationError`` with a sentence saying what to write.

    >>> try:
    ...     parse_duration("2 dayz")
    ... except errors.DurationError as error:
    ...     print(error.column, error.message)
    3 '2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'
    """
    if not isinstance(text, str):
        raise _fail(str(text), 1, f"{text!r} is not a duration — {_EXAMPLE}")
    if len(text) > MAX_LENGTH:
        raise _fail(text[:40], 1, f"a duration is at most {MAX_LENGTH} characters long")
    body = text.strip()
    if not body:
        raise _fail(text, 1, f"a duration is empty — {_EXAMPLE}", "end of text")
    offset = len(text) - len(text.lstrip())
    sign = 1
    if body[0] in "+-":
        if not allow_sign:
            raise _fail(
                text,
                offset + 1,
                f"'{body}' cannot have a sign here — write e.g. '{body[1:].strip() or '2 days'}'",
                body[0],
            )
        sign = -1 if body[0] == "-" else 1
        body = body[1:].lstrip()
        if not body:
            raise _fail(text, len(text), f"a sign needs a duration after it — {_EXAMPLE}")
        offset = text.index(body)
    if body[0] in "pP":
        return _parse_iso(text, body, offset, sign)
    return _parse_words(text, body, offset, sign)


def parse_timeout(text: str) -> timedelta:
    """How long one attempt of a command may take: positive elapsed time, in days at most
    (a month has no length); ``ValueError`` with a sentence otherwise.

    >>> parse_timeout("90 seconds")
    datetime.timedelta(seconds=90)
    """
    try:
        length = parse_duration(text)
    except errors.DurationError as exc:
        raise ValueError(exc.message) from None
    if length.months:
        raise ValueError(f"{text!r} must be given in days or less, not months or years")
    if length.is_zero:
        raise ValueError(f"{text!r} must be longer than zero")
    return timedelta(days=length.days, seconds=length.seconds)


def _parse_iso(text: str, body: str, offset: int, sign: int) -> Duration:
    match = _ISO.fullmatch(body)
    if match is None or not any(match.groupdict().values()):
        raise _fail(
            text,
            offset + 1,
            f"'{body}' is not an ISO 8601 duration — write e.g. 'P2D' or 'PT30M'",
            body,
        )
    g = {k: int(v) if v else 0 for k, v in match.groupdict().items()}
    return _checked(
        text,
        g["Y"] * 12 + g["M"],
        g["W"] * 7 + g["D"],
        g["h"] * 3600 + g["m"] * 60 + g["s"],
        sign,
    )


def _parse_words(text: str, body: str, offset: int, sign: int) -> Duration:
    totals = {"months": 0, "days": 0, "seconds": 0}
    pos = 0
    seen = 0
    while pos < len(body):
        rest = body[pos:]
        stripped = rest.lstrip(" \t,")
        pos += len(rest) - len(stripped)
        if not stripped:
            break
        if stripped.lower().startswith("and ") and seen:
            pos += 4
            continue
        match = _WORD.match(stripped)
        column = offset + pos + 1
        if match is None:
            word = stripped.split()[0]
            raise _not_a_duration(text, column, word)
        number, fraction, unit = match.group(1), match.group(2), match.group(3)
        if not unit:
            raise _fail(
                text,
                column + len(match.group(0)),
                f"'{number}' needs a unit — write e.g. '{number} minutes' or '{number} days'",
                "end of text" if pos + len(match.group(0)) >= len(body) else None,
            )
        known = _UNITS.get(unit.lower())
        if known is None:
            raise _not_a_duration(text, column + match.group(0).index(unit), unit)
        field, factor = known
        if fraction:
            if field != "seconds":
                whole = _whole(match.group(0), field, factor, number + fraction)
                raise _fail(text, column, whole, match.group(0))
            value = round(float(number + fraction) * factor)
        else:
            if len(number) > 9:
                raise _fail(text, column, f"'{number}' is too large for a duration", number)
            value = int(number) * factor
        totals[field] += value
        seen += 1
        pos += len(match.group(0))
    if not seen:
        raise _not_a_duration(text, offset + 1, body)
    return _checked(text, totals["months"], totals["days"], totals["seconds"], sign)


# The plural a unit of days or months is told by: (field, factor) -> word.
_PLURALS = {("days", 1): "days", ("days", 7): "weeks", ("months", 1): "months"}


def _whole(written: str, field: str, factor: int, number: str) -> str:
    """Why a fraction of days, weeks, months or years is refused, and — for days and
    weeks, which are whole hours — what to write instead: ``'0.5 day' must be a whole
    number of days — write '12 hours'``."""
    noun = _PLURALS.get((field, factor), "years")
    if field == "days":
        hours = float(number) * factor * 24
        if hours.is_integer():
            return f"'{written}' must be a whole number of {noun} — write '{int(hours)} hours'"
    return f"'{written}' must be a whole number of {noun} — {_EXAMPLE}"
