"""Timers on a record's date: the rules between a binding's ``at`` and the runs it arms.

``At(column="warn_at", command="warn_sla", when="status = open")`` on a binding
(``binding.At``) runs ``warn_sla`` once the record's ``warn_at`` has passed, if the
record then matches ``when`` — once for each instant the column holds: writing a new
instant arms it again. Pure: the instant a column's value means (``instant_of``), which
timers a record's change arms (``to_arm``), and the keys that make an instant arm once
and its command run once. Arming and firing, on the engine's own runs, are
``flowrunner.timers``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, tzinfo

from flowrunner import binding, errors, query
from flowrunner.foundations import shapes

# The program a timer's run executes (``engine.mounted.program_of`` reads it from the snapshot).
PROGRAM = "at"


def instant_of(raw: object, kind: query.ColumnType, tz: tzinfo | None) -> datetime | None:
    """The instant a date or timestamp column's value means, in UTC; None when empty.

    A timestamp is its own instant (naive ones are UTC); a date means its first moment
    on the binding's wall clock ``tz`` (UTC without one). A value that is not a date
    (``"soon"``) means none, as the query language reads it.

    >>> from zoneinfo import ZoneInfo
    >>> instant_of(date(2026, 3, 2), query.ColumnType.DATE, ZoneInfo("Europe/Paris"))
    datetime.datetime(2026, 3, 1, 23, 0, tzinfo=datetime.timezone.utc)
    >>> instant_of(None, query.ColumnType.TIMESTAMP, None) is None
    True
    """
    try:
        value = query.coerce(raw, kind)
    except (errors.FlowrunnerError, ValueError, TypeError):
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        moment = datetime.combine(value, time(0), tzinfo=tz or UTC)
    else:
        return None
    return moment.astimezone(UTC)


def iso(moment: datetime) -> str:
    """An instant as its keys and snapshots write it: ISO 8601 in UTC, to the microsecond."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Arming:
    """One timer to arm for one record: its run's flow id, start key, and when it is due."""

    timer: binding.At
    instant: datetime

    @property
    def flow_id(self) -> str:
        return f"{PROGRAM}:{self.timer.column}"

    @property
    def flow_name(self) -> str:
        return f"at {self.timer.column}"

    def start_key(self, record_id: str, tenant: object) -> str:
        """Unique per resource and column (with ``flow_id``): the same instant arms once."""
        owner = "" if tenant is None else f"{tenant}/"
        return f"{PROGRAM}:{self.timer.column}:{owner}{record_id}:{iso(self.instant)}"

    def snapshot(self) -> shapes.JsonDict:
        """What the run keeps: the program, the column and the instant it was armed for."""
        return {"program": PROGRAM, "column": self.timer.column, "instant": iso(self.instant)}


def to_arm(
    timers: Sequence[binding.At],
    columns: Mapping[str, query.ColumnType],
    record: Mapping[str, object],
    tz: tzinfo | None,
    changed: Collection[str] | None = None,
) -> Iterator[Arming]:
    """The timers ``record`` arms: each whose column holds an instant (and, for a change,
    is among the ``changed`` columns). A column the record does not give arms nothing.

    >>> timer = binding.At(column="warn_at", command="warn_sla")
    >>> kinds = {"warn_at": query.ColumnType.TIMESTAMP}
    >>> record = {"warn_at": "2026-03-02T09:00:00Z"}
    >>> [a.instant.hour for a in to_arm([timer], kinds, record, None)]
    [9]
    >>> list(to_arm([timer], kinds, record, None, changed={"status"}))
    []
    """
    for timer in timers:
        if changed is not None and timer.column not in changed:
            continue
        if timer.column not in record:
            continue
        instant = instant_of(record[timer.column], columns[timer.column], tz)
        if instant is not None:
            yield Arming(timer, instant)


def idempotency_key(resource: str, tenant: object, record_id: str, column: str, at: str) -> str:
    """The command's idempotency record: one per record, column and instant."""
    owner = "" if tenant is None else f"{tenant}/"
    return f"{PROGRAM}:{resource}:{owner}{record_id}:{column}:{at}"
