"""What the driver feeds the interpreter: the record as it is, new events, command answers.

The interpreter never reads the database or the clock; whatever happened since the
last advance reaches it as one frozen ``Happened``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class EventIn:
    """An event about the run's record, as stored (``id`` grows with arrival order)."""

    id: int
    name: str
    payload: Mapping[str, Any]
    at: datetime


@dataclass(frozen=True)
class CommandResult:
    """The answer to one ``RunCommand`` effect of the previous advance, matched by ``key``.

    ``error`` is a sanitized envelope when ``ok`` is false; ``refused`` means the
    command refused for good (no retry).
    """

    key: str
    ok: bool
    answer: Mapping[str, Any] | None = None
    error: Mapping[str, Any] | None = None
    refused: bool = False


@dataclass(frozen=True)
class Happened:
    """Everything new for one advance.

    ``record`` is the record as it is now (``None``: it was deleted); ``events`` are the
    events about it with ids above the state's ``last_event_id``, in id order;
    ``latest_event_id`` is the highest event id the driver knows for the record (also
    when ``events`` is empty); ``results`` answer the previous advance's commands;
    ``cancel`` is an operator's cancel with its reason.
    """

    record: Mapping[str, Any] | None
    events: tuple[EventIn, ...] = ()
    latest_event_id: int = 0
    results: tuple[CommandResult, ...] = ()
    cancel: str | None = None
