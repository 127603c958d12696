"""When a job at times runs: its slots, on a named zone's wall clock, through daylight saving.

A schedule is five cron fields (``0 6 * * 1-5``: six in the morning, Monday to Friday)
or one of ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, read on a time zone's wall
clock (``America/New_York``; UTC by default). The cron fields are read and matched by
``cronsim`` on the wall clock's readings alone (no zone); this module walks the zone's
clock itself, turns every matched reading into the UTC moments it runs at by the rules
below, and answers the two questions the engine asks: the first slot after a moment
(``next_slot``) and the latest slot due by now since the last one run (``latest_slot``).
Pure: no clock, no SQL.

A schedule may also be an interval of elapsed time (``every="90 seconds"``, ``"2 hours"``):
its slots fall on whole multiples of the interval counted from 1970-01-01 00:00 UTC, so
every worker, and every restart, finds the same slots (``"1 hour"`` on the hour, UTC;
``"90 seconds"`` at 00:00:00, 00:01:30, 00:03:00…). ``read`` takes either; ``Slots`` is
what both answer.

Daylight saving, as Debian's cron does it, in every zone, however far its clocks move
and at whatever minute (an hour at two in the morning; half an hour on Lord Howe
Island; an hour at a quarter to three on the Chatham Islands):

- A job at a set time of day (its minute and hour fields both name values, not ``*``)
  keeps that wall-clock time: ``0 6 * * *`` runs at six in winter and in summer.
- A set time the clock skips (``30 2 * * *`` on the night the clocks go forward, when
  02:30 never happens) runs at the first minute after the jump (03:00 that night).
- A set time the clock passes twice (``30 1 * * *`` on the night the clocks go back)
  runs once, at the first of the two (01:30 before the change).
- A job whose minute or hour field is ``*``-based (``*/15 * * * *``, ``@hourly``) follows
  elapsed time: every reading that happens runs each time it happens — the repeated
  stretch's twice over, the skipped stretch's not at all.

(``cronsim`` given the zone steps through it by whole hours of elapsed time; where the
clocks move by half an hour it lands on the wrong minute and skips slots that happen, so
it is given the wall clock's readings only.)

>>> s = parse("0 6 * * 1-5", "America/New_York")
>>> s.next_slot(datetime(2026, 3, 6, 12, tzinfo=UTC)).isoformat()  # Fri noon UTC → Mon
'2026-03-09T10:00:00+00:00'
>>> s.next_slot(datetime(2026, 3, 6, 10, tzinfo=UTC)).isoformat()  # six, still winter
'2026-03-06T11:00:00+00:00'
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import cronsim

from flowrunner import errors
from flowrunner.foundations import durations, spoken

# The named schedules, as the five fields each stands for.
NICKNAMES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}

# How many slots ``latest_slot`` walks forward from the last one run before it jumps
# near ``now`` instead (a worker that was stopped a long time).
WALK = 64
# How far before the candidate ``latest_slot`` found going backwards the forward walk
# starts again: more than any zone's daylight-saving shift, so a slot moved by one is seen.
SHIFT = timedelta(hours=3)


@dataclass(frozen=True)
class Schedule:
    """Five cron fields on a zone's wall clock (see the module's docstring)."""

    every: str
    """The five fields, as cron reads them (a nickname already spelled out)."""
    timezone: str
    """The IANA name of the wall clock: ``America/New_York``, ``UTC``."""

    @property
    def zone(self) -> tzinfo:
        return zone(self.timezone)

    @property
    def _set_time(self) -> bool:
        """Whether the fields name a set time of day (minute and hour fields both name
        values) rather than an interval (either is ``*``-based): the rules differ."""
        minute, hour = self.every.split()[:2]
        return not minute.startswith("*") and not hour.startswith("*")

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after`` (an aware moment), as a UTC moment.

        >>> parse("@daily").next_slot(datetime(2026, 1, 1, tzinfo=UTC)).isoformat()
        '2026-01-02T00:00:00+00:00'
        """
        for moment in self._following(after):
            return moment
        raise errors.BindingError(f"the schedule {self.every!r} has no slot after {after}")

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        """Every slot strictly after ``after`` and at or before ``until``, in order (UTC).

        >>> [t.isoformat() for t in parse("0 */12 * * *").slots(
        ...     datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))]
        ['2026-01-01T12:00:00+00:00', '2026-01-02T00:00:00+00:00']
        """
        until = _aware(until)
        return list(itertools.takewhile(lambda moment: moment <= until, self._following(after)))

    def latest_slot(self, after: datetime, now: datetime) -> datetime | None:
        """The latest slot strictly after ``after`` and at or before ``now``; None if
        none is due. The slots between are the missed ones a job at times skips.

        >>> s = parse("0 6 * * *", "America/New_York")
        >>> s.latest_slot(datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 10, 12,
        ...     tzinfo=UTC)).isoformat()  # nine mornings missed: the tenth's runs
        '2026-03-10T10:00:00+00:00'
        >>> s.latest_slot(datetime(2026, 3, 10, 10, tzinfo=UTC), datetime(2026, 3, 10, 12,
        ...     tzinfo=UTC)) is None
        True
        """
        after, now = _aware(after), _aware(now)
        latest: datetime | None = None
        for moment in itertools.islice(self._following(after), WALK):
            if moment > now:
                return latest
            latest = moment
        if latest is None:
            return None
        # Many slots missed: find the last one going backwards, then walk forwards from
        # a little before it, so the forward rules (a skipped time moved, a repeated one
        # once) decide which slot it is. (Walked from too late a start the walk finds
        # none, and the walk from the last slot seen decides.)
        try:
            start = max(after, self._before(now) - SHIFT)
        except OverflowError:  # ``now`` at the calendar's end: walk from ``after``
            start = after
        return self._last(start, now) or self._last(latest, now) or latest

    def _last(self, after: datetime, now: datetime) -> datetime | None:
        """The last slot strictly after ``after`` and at or before ``now``, walking forwards."""
        last = None
        for moment in self._following(after):
            if moment > now:
                break
            last = moment
        return last

    def _following(self, after: datetime) -> Iterator[datetime]:
        """Every slot strictly after ``after``, in order (UTC), up to the calendar's end
        (the year 9999), where the slots end."""
        try:
            yield from self._walk(after)
        except OverflowError:
            return

    def _walk(self, after: datetime) -> Iterator[datetime]:
        """Every slot strictly after ``after``, in order (UTC): the zone's clock walked from
        about ``after``'s reading, each reading the fields match turned into its runs."""
        after = _aware(after)
        waiting: list[datetime] = []
        given = after
        for reading in cronsim.CronSim(self.every, self._start(after)):
            runs = self._runs(reading)
            waiting = sorted({*waiting, *(moment for moment in runs if moment > given)})
            # The readings still to come run no earlier than this one first runs (a
            # reading's first run moves on with the reading): the runs up to it are due.
            while runs and waiting and waiting[0] <= runs[0]:
                given = waiting.pop(0)
                yield given
        yield from waiting  # the fields match nothing more (cronsim looks 50 years ahead)

    def _before(self, now: datetime) -> datetime:
        """A slot near ``now`` found going backwards (a starting point only)."""
        start = (now + timedelta(seconds=1)).replace(microsecond=1).astimezone(self.zone)
        naive = start.replace(tzinfo=None)
        reading = next(iter(cronsim.CronSim(self.every, naive, reverse=True)))
        return _moment(reading, self.zone, fold=0)

    def _start(self, after: datetime) -> datetime:
        """The reading after which the walk for the first slot after ``after`` starts: the
        clock's reading at ``after``, or, when that reading is one the clock passes twice,
        as much earlier as the clock goes back (the readings just before it may yet run
        a second time)."""
        local = after.astimezone(self.zone)
        reading = local.replace(tzinfo=None)
        first, second = (reading.replace(tzinfo=self.zone, fold=f).utcoffset() for f in (0, 1))
        back = first - second if first is not None and second is not None else timedelta(0)
        return reading - max(back, timedelta(0))

    def _runs(self, reading: datetime) -> tuple[datetime, ...]:
        """The UTC moments a matched wall-clock reading runs at, by the module's rules: once
        where the clock reads it once; where twice, a set time at the first, an interval
        at both; where never, a set time at the first minute after the jump, an interval
        not at all."""
        zone = self.zone
        either = {_moment(reading, zone, fold=0), _moment(reading, zone, fold=1)}
        happens = tuple(sorted(moment for moment in either if _reading(moment, zone) == reading))
        if not self._set_time:
            return happens
        if happens:
            return happens[:1]
        later = reading + timedelta(minutes=1)
        while _reading(_moment(later, zone, fold=0), zone) != later:
            later += timedelta(minutes=1)
        return (_moment(later, zone, fold=0),)

    def words(self) -> str:
        """The schedule as written, for programs: ``0 6 * * 1-5 (America/New_York)``."""
        return f"{self.every} ({self.timezone})"

    def said(self) -> str:
        """The schedule as people say it: ``every weekday at 06:00 (America/New_York)``."""
        return f"{spoken.cron(self.every)} ({self.timezone})"


# Where an interval's slots are counted from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Slots(Protocol):
    """What a job at times asks of its schedule, cron fields or an interval alike."""

    @property
    def every(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    def next_slot(self, after: datetime) -> datetime: ...
    def slots(self, after: datetime, until: datetime) -> list[datetime]: ...
    def latest_slot(self, after: datetime, now: datetime) -> datetime | None: ...
    def words(self) -> str: ...
    def said(self) -> str: ...


@dataclass(frozen=True)
class Interval:
    """A slot every ``seconds`` of elapsed time, counted from ``EPOCH`` (see the module's
    docstring); ``timezone`` only shows the slots on a wall clock.

    >>> i = read("90 seconds")
    >>> i.next_slot(datetime(2026, 1, 1, 0, 1, tzinfo=UTC)).isoformat()
    '2026-01-01T00:01:30+00:00'
    >>> i.latest_slot(datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 5,
    ...     tzinfo=UTC)).isoformat()
    '2026-01-01T00:04:30+00:00'
    """

    every: str
    """The interval as written: ``90 seconds``."""
    seconds: int
    timezone: str = "UTC"

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after``."""
        gone = int((_aware(after) - EPOCH).total_seconds() // self.seconds)
        return EPOCH + timedelta(seconds=(gone + 1) * self.seconds)

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        """Every slot strictly after ``after`` and at or before ``until``, in order."""
        found, moment, until = [], self.next_slot(after), _aware(until)
        while moment <= until:
            found.append(moment)
            moment += timedelta(seconds=self.seconds)
        return found

    def latest_slot(self, after: datetime, now: datetime) -> datetime | None:
        """The latest slot strictly after ``after`` and at or before ``now``; None if none."""
        gone = int((_aware(now) - EPOCH).total_seconds() // self.seconds)
        latest = EPOCH + timedelta(seconds=gone * self.seconds)
        return latest if latest > _aware(after) else None

    def words(self) -> str:
        """``every 90 seconds``."""
        return f"every {self.every}"

    def said(self) -> str:
        """``every 90 seconds``, as people say it too."""
        return self.words()


def read(every: str, timezone: str = "UTC") -> Slots:
    """A job's ``every``: an interval of elapsed time (``90 seconds``, ``2 hours``) or cron
    fields on ``timezone``'s wall clock (``parse``); ``BindingError`` with a sentence for
    what is neither.

    >>> read("90 seconds")
    Interval(every='90 seconds', seconds=90, timezone='UTC')
    >>> read("@daily").every
    '0 0 * * *'
    >>> read("ninety seconds")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: the schedule 'ninety seconds' is neither five cron fields ...
    """
    if not isinstance(every, str) or not every.strip():
        raise errors.BindingError(
            "a job at times needs a schedule: five cron fields, @daily, or an interval "
            "such as '90 seconds'"
        )
    text = " ".join(every.split())
    if text.startswith("@") or "*" in text or len(text.split()) == 5:
        return parse(every, timezone)
    try:
        length = durations.parse_duration(text)
    except errors.DurationError:
        raise errors.BindingError(
            f"the schedule {every!r} is neither five cron fields (minute hour day month "
            "weekday), one of @hourly, @daily, @weekly, @monthly, nor an interval such as "
            "'90 seconds' or '2 hours'"
        ) from None
    if not isinstance(timezone, str):
        raise errors.BindingError(
            f"a time zone is named by text such as 'America/New_York', not {timezone!r}"
        )
    zone(timezone)
    if length.months:
        raise errors.BindingError(
            f"the interval {every!r} is elapsed time: seconds, minutes, hours or days, "
            "not months (a monthly job is cron fields: '@monthly' or '0 6 1 * *')"
        )
    seconds = length.days * 86400 + length.seconds
    if seconds < 1:
        raise errors.BindingError(f"the interval {every!r} is at least one second long")
    return Interval(every=text, seconds=seconds, timezone=timezone)


def parse(every: str, timezone: str = "UTC") -> Schedule:
    """A schedule from cron fields or a nickname and a zone's name; ``BindingError`` with
    a sentence for what cannot be read.

    >>> parse("@weekly", "Europe/Berlin")
    Schedule(every='0 0 * * 0', timezone='Europe/Berlin')
    >>> parse("0 6 * *")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: the schedule '0 6 * *' is not five cron fields (minute ...
    >>> parse("0 25 * * *")
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: the schedule '0 25 * * *' cannot be read: Bad hour
    >>> parse("@daily", "Mars/Olympus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: there is no time zone 'Mars/Olympus': name one such as ...
    """
    if not isinstance(every, str) or not every.strip():
        raise errors.BindingError("a job at times needs a schedule: five cron fields or @daily")
    text = " ".join(every.split())
    fields = NICKNAMES.get(text.lower(), text)
    if len(fields.split()) != 5:
        raise errors.BindingError(
            f"the schedule {every!r} is not five cron fields (minute hour day month weekday) "
            "or one of @hourly, @daily, @weekly, @monthly"
        )
    if not isinstance(timezone, str):
        raise errors.BindingError(
            f"a time zone is named by text such as 'America/New_York', not {timezone!r}"
        )
    zone(timezone)
    try:
        cronsim.CronSim(fields, datetime(2026, 1, 1, tzinfo=UTC))
    except cronsim.CronSimError as exc:
        raise errors.BindingError(f"the schedule {every!r} cannot be read: {exc}") from None
    return Schedule(every=fields, timezone=timezone)


@functools.lru_cache(maxsize=64)
def zone(name: str) -> tzinfo:
    """The wall clock named ``name`` (``UTC`` is UTC); ``BindingError`` for none such."""
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.BindingError(
            f"there is no time zone {name!r}: name one such as 'America/New_York' or 'UTC'"
        ) from None


def _moment(reading: datetime, clock: tzinfo, fold: int) -> datetime:
    """The UTC moment a naive wall-clock reading stands for on ``clock``: ``fold`` 0 the
    first of two, 1 the second (for a reading the clock skips, neither reads back)."""
    return reading.replace(tzinfo=clock, fold=fold).astimezone(UTC)


def _reading(moment: datetime, clock: tzinfo) -> datetime:
    """What ``clock`` reads at ``moment``, naive."""
    return moment.astimezone(clock).replace(tzinfo=None, fold=0)


def _aware(moment: datetime) -> datetime:
    """A moment as UTC; a naive one is taken as UTC, as the engine's timestamps are."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def flow_schedule(text: str) -> Schedule:
    """A flow's ``schedule`` as a business user writes it: five cron fields or a nickname,
    then the name of the time zone whose wall clock they are read on (UTC without one).
    ``BindingError`` with a sentence for what cannot be read.

    >>> flow_schedule("0 6 * * mon Europe/Berlin")
    Schedule(every='0 6 * * mon', timezone='Europe/Berlin')
    >>> flow_schedule(" @daily ")
    Schedule(every='0 0 * * *', timezone='UTC')
    >>> flow_schedule("0 6 * * mon Berlin")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: there is no time zone 'Berlin': name one such as ...
    >>> flow_schedule("0 6 * mon")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.BindingError: the schedule '0 6 * mon' is not five cron fields ...
    """
    if not isinstance(text, str) or not text.strip():
        raise errors.BindingError(
            "a schedule is five cron fields such as '0 6 * * mon', then a time zone "
            "such as 'Europe/Berlin'"
        )
    words = text.split()
    count = 1 if words[0].lower() in NICKNAMES else 5
    if len(words) not in (count, count + 1):
        raise errors.BindingError(
            f"the schedule {text.strip()!r} is not five cron fields (minute hour day month "
            "weekday) or one of @hourly, @daily, @weekly, @monthly, followed by a time zone "
            "such as 'Europe/Berlin' (UTC without one)"
        )
    every = " ".join(words[:count])
    return parse(every, words[count] if len(words) > count else "UTC")


def in_words(text: str) -> str:
    """A flow's ``schedule`` in words, its zone named; one that cannot be read, as written.

    >>> in_words("0 6 * * mon Europe/Berlin")
    'every Monday at 06:00 (Europe/Berlin)'
    """
    try:
        return flow_schedule(text).said()
    except errors.BindingError:
        return str(text)


def written(schedule: Schedule) -> str:
    """A schedule as ``flow_schedule`` reads it back: ``0 6 * * mon Europe/Berlin``.

    >>> written(flow_schedule("0 6 * * mon Europe/Berlin"))
    '0 6 * * mon Europe/Berlin'
    """
    return f"{schedule.every} {schedule.timezone}"
