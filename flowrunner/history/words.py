"""How a run's history says things: moments on the wall clock, lists of names,
ordinals, conditions and values in words, and the line a sentence is being made from
(``Say``).

Shared by ``history_text`` (the sentences of a flow's lines) and ``history_programs``
(those of the lines jobs, code workflows and timers write). Pure: no SQL, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal
from typing import Any, Protocol

from flowrunner.flows import snapshot
from flowrunner.foundations import shapes
from flowrunner.query import words

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# How many names a sentence lists before it counts the rest.
_NAMES_SHOWN = 6
_ISO_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


class Line(Protocol):
    """What a sentence is made from: a history line (``LogRow``, or the interpreter's
    ``Log`` effect)."""

    @property
    def what(self) -> str: ...

    @property
    def detail(self) -> object: ...

    @property
    def kind(self) -> str | None: ...

    @property
    def position(self) -> int | None: ...


def when(moment: datetime | str, tz: tzinfo | None = None) -> str:
    """A moment as a history shows it, on the wall clock ``tz``: ``Tue 3 Mar 09:00``.

    >>> when("2026-03-03T09:00:00+00:00")
    'Tue 3 Mar 09:00'
    """
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(tz or UTC)
    return f"{_DAYS[local.weekday()]} {local.day} {_MONTHS[local.month - 1]} {local:%H:%M}"


def listed(names: Sequence[object]) -> str:
    """``ann``, ``ann and bob``, ``ann, bob and cara`` (a long list ends ``and 4 more``)."""
    words = [str(n) for n in names]
    if len(words) > _NAMES_SHOWN:
        rest = len(words) - (_NAMES_SHOWN - 1)
        words = [*words[: _NAMES_SHOWN - 1], f"{rest} more"]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd``."""
    suffix = "th" if 10 <= number % 100 <= 20 else _SUFFIXES.get(number % 10, "th")
    return f"{number}{suffix}"


def condition_words(text: str, *, negated: bool = False, tz: tzinfo | None = None) -> str:
    """A condition as a sentence reads it, or (``negated``) what holds when it does not
    (``flowrunner.query.words``), its times on the wall clock ``tz``.

    >>> condition_words("status not in (rejected, withdrawn)", negated=True)
    'status is rejected or withdrawn'
    """
    return words.describe(text, negated=negated, value=lambda v: value_words(v, tz))


class Say:
    """One line being put into words: its detail, step, snapshot and wall clock."""

    def __init__(
        self,
        line: Line,
        detail: shapes.Payload,
        snap: snapshot.FlowSnapshot | None,
        tz: tzinfo | None,
        tried: bool = False,
    ) -> None:
        self.line = line
        self.detail = detail
        self.snap = snap
        self.tz = tz
        self.tried = tried

    def get(self, key: str, default: Any = None) -> Any:
        value = self.detail.get(key)
        return default if value is None else value

    def time(self, key: str) -> str | None:
        value = self.detail.get(key)
        if not value:
            return None
        try:
            return when(str(value), self.tz)
        except ValueError:
            return str(value)

    def value(self, value: object) -> str:
        return value_words(value, self.tz)

    @property
    def kind(self) -> str:
        return self.line.kind or "step"

    @property
    def title(self) -> str | None:
        """The step's title, where the line has one (a ``LogRow``'s, a ``Log``'s)."""
        title = getattr(self.line, "title", None)
        return str(title) if title else None


def who_did(who: object) -> str:
    """Who did what a line says: a name, or ``an operator`` for the engine's word."""
    return "an operator" if who == "operator" else str(who)


def value_words(value: object, tz: tzinfo | None) -> str:
    """A value as a sentence shows it: ``empty``, ``true``, a date or moment on ``tz``."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return when(value, tz)
    if isinstance(value, date):
        return f"{_DAYS[value.weekday()]} {value.day} {_MONTHS[value.month - 1]} {value.year}"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str) and _ISO_MOMENT.match(value):
        try:
            return when(value, tz)
        except ValueError:
            return value
    return str(value)
