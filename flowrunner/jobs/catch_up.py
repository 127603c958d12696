"""Which slot a job at times runs when its run is claimed: the job's ``catch_up`` choice
for the slots missed while no worker served (or while it was paused), and its
``overlap`` choice for the slots that came while its last slot still ran.

``catch_up``:

- ``"latest"`` (the default): the latest slot due runs; the missed ones before it are
  skipped.
- ``"all"``: every missed slot runs, one after the other, oldest first.
- ``"none"``: the missed slots are skipped; the job runs at its next slot. A slot runs
  only when it is the one slot due and is claimed within ``ON_TIME`` of its time; with
  more than one slot due, or claimed later, they were all missed (a slot that waited for
  the last one to end is not missed: it waited by the ``overlap`` choice).

``overlap`` (a slot that comes while the last one still runs):

- ``"wait"`` (the default): it waits for the last one, then runs as ``catch_up`` says.
- ``"skip"``: it is skipped; the job runs at the first slot after the last one ended.
- ``"allow"``: it runs beside the last one, as a run of its own (``program`` starts it).

Pure: ``decide`` takes the moments and answers a ``Decision``; no clock, no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from flowrunner.jobs import schedules

CATCH_UP = ("latest", "all", "none")
OVERLAP = ("wait", "skip", "allow")

# How late a claim may come and its slot still count as on time (``catch_up="none"``):
# a worker claims a due run within seconds; one claimed later than this was missed.
ON_TIME = timedelta(minutes=1)


@dataclass(frozen=True)
class Decision:
    """What a claimed job at times does now.

    ``slot`` is the slot to run (None: none now). ``skipped_from`` and ``skipped_to`` are
    the first and last slot passed over (None: none), ``why`` says why (``"missed"``: no
    worker served, or the job was paused; ``"overlap"``: they came while the last slot
    ran). ``after`` is the moment the next decision counts from: no slot at or before it
    runs any more.
    """

    slot: datetime | None
    after: datetime
    skipped_from: datetime | None = None
    skipped_to: datetime | None = None
    why: str | None = None


def decide(
    slots: schedules.Slots,
    *,
    last: datetime,
    ended: datetime | None,
    now: datetime,
    catch_up: str = "latest",
    overlap: str = "wait",
    began: datetime | None = None,
) -> Decision:
    """The slot to run now, given the last slot handled (``last``), when its run began
    and ended (``began``, ``ended``; None before any), and ``now``. The slots that came
    while the last one ran are those after it began (and after ``last``) up to its end.

    >>> daily = schedules.parse("0 6 * * *")
    >>> from datetime import UTC
    >>> d = decide(daily, last=datetime(2026, 3, 1, 6, tzinfo=UTC), ended=None,
    ...     now=datetime(2026, 3, 4, 7, tzinfo=UTC), catch_up="all")
    >>> d.slot.isoformat()  # the first missed morning
    '2026-03-02T06:00:00+00:00'
    >>> d = decide(daily, last=datetime(2026, 3, 1, 6, tzinfo=UTC), ended=None,
    ...     now=datetime(2026, 3, 4, 7, tzinfo=UTC), catch_up="none")
    >>> d.slot, d.skipped_from.day, d.skipped_to.day, d.why
    (None, 2, 4, 'missed')
    """
    start = last if began is None else max(last, began)
    came = None
    if overlap == "skip" and ended is not None and ended > start:
        came = slots.latest_slot(start, ended)
    after = last
    first = slots.next_slot(last)
    skipped_from: datetime | None = None
    skipped_to: datetime | None = None
    why: str | None = None
    if came is not None and first > start:
        # The slots from the first after the last run began to its end came while it ran.
        skipped_from, skipped_to, why = slots.next_slot(start), came, "overlap"
        after, first = came, slots.next_slot(came)
    latest = slots.latest_slot(after, now)
    if latest is None:
        return Decision(None, after, skipped_from, skipped_to, why)
    if catch_up == "all":
        return Decision(first, first, skipped_from, skipped_to, why)
    waited = overlap == "wait" and ended is not None and latest <= ended
    on_time = latest == first and now - latest <= ON_TIME
    if catch_up == "none" and not on_time and not waited:
        return Decision(None, latest, skipped_from or first, latest, why or "missed")
    if first != latest:
        skipped_from, skipped_to = skipped_from or first, _before(slots, first, latest)
        why = why or ("overlap" if waited else "missed")
    return Decision(latest, latest, skipped_from, skipped_to, why)


def _before(slots: schedules.Slots, first: datetime, latest: datetime) -> datetime:
    """The slot just before ``latest`` (at least ``first``): the last one skipped."""
    found = slots.latest_slot(first, latest - timedelta(microseconds=1))
    return found if found is not None else first
