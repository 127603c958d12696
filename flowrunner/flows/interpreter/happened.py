"""What the driver feeds the interpreter: the record as it is, new events, command answers.

The interpreter never reads the database or the clock; whatever happened since the
last advance reaches it as one frozen ``Happened``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flowrunner.foundations import shapes


@dataclass(frozen=True)
class EventIn:
    """An event about the run's record, as stored (``id`` grows with arrival order)."""

    id: int
    name: str
    payload: shapes.Payload
    at: datetime


@dataclass(frozen=True)
class CommandResult:
    """The answer to one ``RunCommand`` effect of the previous advance, matched by ``key``.

    ``error`` is a sanitized envelope when ``ok`` is false; ``refused`` means the
    command refused for good (no retry).
    """

    key: str
    ok: bool
    answer: shapes.Payload | None = None
    error: shapes.Payload | None = None
    refused: bool = False


@dataclass(frozen=True)
class ChildEnded:
    """A subflow's child run that ended: ``status`` is ``done``, ``failed`` or
    ``cancelled`` (or ``gone``: there is no such run), ``reason`` its sentence."""

    run: int
    status: str
    reason: str | None = None


@dataclass(frozen=True)
class Happened:
    """Everything new for one advance.

    ``record`` is the record as it is now (``None``: it was deleted); ``results`` answer
    the previous call's commands (and a subflow's start); ``cancel`` is an operator's
    cancel with its reason; ``children`` the child runs of waiting subflow steps that
    ended (read like the record: at the driver's time).

    ``events`` are the events about the record with ids above the given state's
    ``last_event_id`` (for ``start``: above its event floor), in any order — the
    interpreter reads them by ``at``, then ``id``. It moves ``last_event_id`` past every
    event it takes and keeps those it has not read yet in the state
    (``RunState.unread``), so:

    - the first call of an advance passes every such event the driver has;
    - each follow-up call with command results passes the events recorded since
      (ids above the new state's ``last_event_id``, such as one a command emitted), or
      none; passing the earlier ones again is harmless, they are ignored;
    - an event left out is read by a later advance, which the driver must then make
      due (as ``emit`` does), at the moment that advance has reached.

    ``at`` is when the event was recorded; one later than the driver's ``now`` is read
    at ``now``. ``latest_event_id`` is the highest event id the driver knows for the
    record; only ``start`` reads it, as the default event floor.
    """

    record: shapes.Payload | None
    events: tuple[EventIn, ...] = ()
    latest_event_id: int = 0
    results: tuple[CommandResult, ...] = ()
    cancel: str | None = None
    children: tuple[ChildEnded, ...] = ()
