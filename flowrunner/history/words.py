"""How a run's history says things: moments on the wall clock, lists of names,
ordinals, conditions and values in words, and the line a sentence is being made from
(``Say``).

Shared by ``history_text`` (the sentences of a flow's lines) and ``history_programs``
(those of the lines jobs, code workflows and timers write). Pure: no SQL, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal
from typing import Any, Protocol

from flowrunner.flows import snapshot
from flowrunner.foundations import shapes, spoken
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
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.line = line
        self.detail = detail
        self.snap = snap
        self.tz = tz
        self.tried = tried
        self.names = names or {}

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

    def record(self, record_id: object) -> str:
        """A record as people name it (the binding's ``record_label``: ``PO-3299``), or
        ``record 3299`` where it has no name."""
        return self.names.get(str(record_id)) or f"record {record_id}"

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


# The past of the verbs a step's title starts with ("Send to supplier" → "Sent to
# supplier"); a verb not listed here takes the regular -ed.
_IRREGULAR = {
    "begin": "began",
    "bring": "brought",
    "build": "built",
    "buy": "bought",
    "choose": "chose",
    "do": "did",
    "draw": "drew",
    "find": "found",
    "get": "got",
    "give": "gave",
    "hold": "held",
    "keep": "kept",
    "leave": "left",
    "let": "let",
    "make": "made",
    "pay": "paid",
    "put": "put",
    "read": "read",
    "run": "ran",
    "say": "said",
    "sell": "sold",
    "send": "sent",
    "set": "set",
    "shut": "shut",
    "take": "took",
    "tell": "told",
    "withdraw": "withdrew",
    "write": "wrote",
}
# Regular verbs a title commonly starts with (others read as a name: "Manager approval").
_REGULAR = {
    "add": "added",
    "alert": "alerted",
    "allocate": "allocated",
    "approve": "approved",
    "archive": "archived",
    "ask": "asked",
    "assign": "assigned",
    "bill": "billed",
    "block": "blocked",
    "book": "booked",
    "call": "called",
    "cancel": "cancelled",
    "charge": "charged",
    "check": "checked",
    "close": "closed",
    "collect": "collected",
    "confirm": "confirmed",
    "copy": "copied",
    "create": "created",
    "deliver": "delivered",
    "email": "emailed",
    "escalate": "escalated",
    "export": "exported",
    "file": "filed",
    "flag": "flagged",
    "forward": "forwarded",
    "hand": "handed",
    "import": "imported",
    "inform": "informed",
    "invite": "invited",
    "invoice": "invoiced",
    "issue": "issued",
    "lock": "locked",
    "log": "logged",
    "mail": "mailed",
    "mark": "marked",
    "move": "moved",
    "notify": "notified",
    "open": "opened",
    "order": "ordered",
    "pack": "packed",
    "place": "placed",
    "post": "posted",
    "print": "printed",
    "publish": "published",
    "record": "recorded",
    "refund": "refunded",
    "register": "registered",
    "reject": "rejected",
    "release": "released",
    "remind": "reminded",
    "remove": "removed",
    "reopen": "reopened",
    "request": "requested",
    "reserve": "reserved",
    "return": "returned",
    "review": "reviewed",
    "schedule": "scheduled",
    "ship": "shipped",
    "sign": "signed",
    "start": "started",
    "stop": "stopped",
    "submit": "submitted",
    "sync": "synced",
    "text": "texted",
    "update": "updated",
    "upload": "uploaded",
    "verify": "verified",
    "warn": "warned",
}


def title_verb(title: str) -> tuple[str, str] | None:
    """A title that starts with a verb, split: ``("Send", "to supplier")``; None for a
    title that names a thing (``Manager approval``)."""
    first, _, rest = title.strip().partition(" ")
    if first.lower() in _IRREGULAR or first.lower() in _REGULAR:
        return first, rest
    return None


def verb_of(past: str) -> str | None:
    """The verb a past tense is of, as a button says it: ``approved`` → ``Approve``;
    None for a word that is no known verb's past.

    >>> verb_of("approved"), verb_of("Rejected"), verb_of("blue")
    ('Approve', 'Reject', None)
    """
    word = past.strip().lower()
    for verb, said in (*_IRREGULAR.items(), *_REGULAR.items()):
        if said == word:
            return verb[0].upper() + verb[1:]
    return None


def did(title: str, *, asks: bool = True) -> str:
    """What a step did, from its title: ``Send to supplier`` → ``Sent to supplier``; a
    title that names a thing → ``Asked for Manager approval`` (a step that ``asks`` for
    answers), else ``Ran Credit check``.

    >>> did("Send to supplier"), did("Manager approval"), did("notify the team")
    ('Sent to supplier', 'Asked for Manager approval', 'notified the team')
    """
    split = title_verb(title)
    if split is None:
        return f"Asked for {title.strip()}" if asks else f"Ran {title.strip()}"
    verb, rest = split
    past = _IRREGULAR.get(verb.lower()) or _REGULAR[verb.lower()]
    past = past[0].upper() + past[1:] if verb[:1].isupper() else past
    return f"{past} {rest}" if rest else past


def would(title: str, *, asks: bool = True) -> str:
    """What a step would do, from its title: ``would send to supplier``,
    ``would ask for Manager approval``."""
    split = title_verb(title)
    if split is None:
        return f"Would ask for {title.strip()}" if asks else f"Would run {title.strip()}"
    verb, rest = split
    return f"Would {verb.lower()} {rest}" if rest else f"Would {verb.lower()}"


def humane(name: str) -> str:
    """A name written for programs, as people write it: ``close_stale_orders`` →
    ``close stale orders``."""
    return name.replace("_", " ").strip()


def event_words(name: object, *, article: str = "the") -> str:
    """An event as a sentence names it: ``po.decided`` → ``the po decided event``
    (``foundations.spoken.event``)."""
    return spoken.event(name, article=article)


def times(count: int) -> str:
    """``once``, ``twice``, ``3 times``."""
    return {1: "once", 2: "twice"}.get(count, f"{count:,} times")
