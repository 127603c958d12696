"""When a job at times runs: its slots, on a named zone's wall clock, through daylight saving.

A schedule is five cron fields (``0 6 * * 1-5``: six in the morning, Monday to Friday)
or one of ``@hourly``, ``@daily``, ``@weekly``, ``@monthly``, read on a time zone's wall
clock (``America/New_York``; UTC by default). The cron fields are read and matched by
``cronsim`` (Debian cron's rules); this module adds the zone, turns every slot into a
UTC moment, and answers the two questions the engine asks: the first slot after a
moment (``next_slot``) and the latest slot due by now since the last one run
(``latest_slot``). Pure: no clock, no SQL.

Daylight saving, as Debian's cron does it:

- A job at a set time of day (its minute and hour fields both name values, not ``*``)
  keeps that wall-clock time: ``0 6 * * *`` runs at six in winter and in summer.
- A set time the clock skips (``30 2 * * *`` on the night the clocks go forward, when
  02:30 never happens) runs at the first minute after the jump (03:00 that night).
- A set time the clock passes twice (``30 1 * * *`` on the night the clocks go back)
  runs once, at the first of the two (01:30 before the change).
- A job whose minute or hour field is ``*``-based (``*/15 * * * *``, ``@hourly``) follows
  elapsed time: every quarter-hour that happens runs once, the repeated hour twice
  over, the skipped hour not at all.

>>> s = parse("0 6 * * 1-5", "America/New_York")
>>> s.next_slot(datetime(2026, 3, 6, 12, tzinfo=UTC)).isoformat()  # Fri noon UTC → Mon
'2026-03-09T10:00:00+00:00'
>>> s.next_slot(datetime(2026, 3, 6, 10, tzinfo=UTC)).isoformat()  # six, still winter
'2026-03-06T11:00:00+00:00'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import cronsim

from flowrunner import errors

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

    def next_slot(self, after: datetime) -> datetime:
        """The first slot strictly after ``after`` (an aware moment), as a UTC moment.

        >>> parse("@daily").next_slot(datetime(2026, 1, 1, tzinfo=UTC)).isoformat()
        '2026-01-02T00:00:00+00:00'
        """
        after = _aware(after)
        start = after.astimezone(self.zone)
        for slot in cronsim.CronSim(self.every, start):
            moment = slot.astimezone(UTC)
            # A set time is matched on the wall clock: its first occurrence may lie
            # before a moment that falls in the hour the clock passes twice.
            if moment > after:
                return moment
        raise errors.BindingError(f"the schedule {self.every!r} has no slot after {after}")

    def slots(self, after: datetime, until: datetime) -> list[datetime]:
        """Every slot strictly after ``after`` and at or before ``until``, in order (UTC).

        >>> [t.isoformat() for t in parse("0 */12 * * *").slots(
        ...     datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))]
        ['2026-01-01T12:00:00+00:00', '2026-01-02T00:00:00+00:00']
        """
        found: list[datetime] = []
        moment = self.next_slot(after)
        while moment <= _aware(until):
            found.append(moment)
            moment = self.next_slot(moment)
        return found

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
        moment = self.next_slot(after)
        for _ in range(WALK):
            if moment > now:
                return latest
            latest, moment = moment, self.next_slot(moment)
        # Many slots missed: find the last one going backwards, then walk forwards from
        # a little before it, so the forward rules (a skipped time moved, a repeated one
        # once) decide which slot it is.
        start = max(after, self._before(now) - SHIFT)
        moment = self.next_slot(start)
        walked = None
        while moment <= now:
            walked, moment = moment, self.next_slot(moment)
        return walked if walked is not None else self._walk(latest, now)

    def _before(self, now: datetime) -> datetime:
        """A slot at or before ``now`` found going backwards (a starting point only)."""
        start = (now + timedelta(seconds=1)).replace(microsecond=1).astimezone(self.zone)
        return next(iter(cronsim.CronSim(self.every, start, reverse=True))).astimezone(UTC)

    def _walk(self, latest: datetime | None, now: datetime) -> datetime | None:
        moment = latest
        while moment is not None:
            following = self.next_slot(moment)
            if following > now:
                return moment
            moment = following
        return None

    def words(self) -> str:
        """The schedule as people say it: ``0 6 * * 1-5 (America/New_York)``."""
        return f"{self.every} ({self.timezone})"


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


def _aware(moment: datetime) -> datetime:
    """A moment as UTC; a naive one is taken as UTC, as the engine's timestamps are."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
