"""The passive AST of a condition: frozen dataclass nodes and their canonical text.

The parser builds these nodes; the evaluator and the SQL builder walk them. Positions
(``line``/``column``) ride along for error messages but take no part in equality, so
``parse(str(c)) == c`` holds for every condition ``c``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from flowrunner import errors
from flowrunner.foundations import durations
from flowrunner.query import types

MAX_DEPTH = 32

# Operators of a Compare node, in the words users write.
COMPARE_OPS = ("=", "!=", "<", "<=", ">", ">=", "contains", "starts with")
ORDER_OPS = frozenset({"<", "<=", ">", ">="})
TEXT_OPS = frozenset({"contains", "starts with"})


@dataclass(frozen=True)
class Ref:
    """A column of the record (``status``) or a field of the latest event (``event.decision``)."""

    name: str
    scope: str = "record"
    line: int = field(default=1, compare=False, repr=False)
    column: int = field(default=1, compare=False, repr=False)

    def __str__(self) -> str:
        return self.name if self.scope == "record" else f"{self.scope}.{self.name}"


@dataclass(frozen=True)
class Literal:
    """A constant value; ``type`` is None only for ``null``."""

    value: Any  # of ``type``: str, int or Decimal, bool, date, datetime; None for null
    type: types.ColumnType | None
    line: int = field(default=1, compare=False, repr=False)
    column: int = field(default=1, compare=False, repr=False)

    def resolve(self, now: datetime) -> Any:
        return self.value

    def __str__(self) -> str:
        return render_value(self.value)


@dataclass(frozen=True)
class Relative:
    """``now()`` or ``today()``, optionally plus or minus a duration."""

    base: str  # "now" | "today"
    offset: durations.Duration | None = None
    line: int = field(default=1, compare=False, repr=False)
    column: int = field(default=1, compare=False, repr=False)
    # Set when the value goes into a timestamp: today() then resolves to midnight UTC.
    as_timestamp: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.offset is not None and self.offset.is_zero:
            object.__setattr__(self, "offset", None)

    @property
    def type(self) -> types.ColumnType:
        if self.base == "today" and (self.offset is None or self.offset.seconds == 0):
            return types.ColumnType.DATE
        return types.ColumnType.TIMESTAMP

    def resolve(self, now: datetime) -> date | datetime:
        """The value at ``now`` (naive = UTC): a UTC datetime, or a date for ``today()``.

        ``QueryError`` when it falls outside the calendar (years 1 to 9999 in UTC), as
        ``now() + 100 years`` does in year 9950; a comparison uses ``bounded`` instead.
        """
        try:
            now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
            if self.base == "now":
                return now if self.offset is None else self.offset.add_to(now, UTC)
            midnight = datetime.combine(now.date(), time(), UTC)
            moment = midnight if self.offset is None else self.offset.add_to(midnight, UTC)
        except (OverflowError, ValueError):  # DurationError is a ValueError
            edge = "after 9999-12-31" if self._later(now) else "before 0001-01-01"
            raise errors.QueryError(
                f"{self} at {now.isoformat()} falls {edge}, outside the calendar",
                line=self.line,
                column=self.column,
                found=str(self),
            ) from None
        if self.type is types.ColumnType.DATE and not self.as_timestamp:
            return moment.date()
        return moment

    def bounded(self, now: datetime) -> date | datetime | types.Beyond:
        """``resolve(now)``, or ``types.Beyond`` where the value is outside the calendar.

        What comparisons use: ``due_at < now() + 100 years`` in year 9950 holds for every
        due date, as it would if dates went on, rather than failing the flow.
        """
        try:
            return self.resolve(now)
        except errors.QueryError:
            return types.Beyond(later=self._later(now))

    def _later(self, now: datetime) -> bool:
        if self.offset is not None:
            return not self.offset.is_negative
        return now.year > 1  # only an offset of ``now`` itself at an end of the calendar

    def __str__(self) -> str:
        head = f"{self.base}()"
        if self.offset is None:
            return head
        if self.offset.is_negative:
            return f"{head} - {-self.offset}"
        return f"{head} + {self.offset}"


ValueExpr = Literal | Relative


def _depth(*children: Node) -> int:
    return 1 + max((c.depth for c in children), default=0)


@dataclass(frozen=True)
class Compare:
    """``left op right`` for ``= != < <= > >= contains starts with``."""

    left: Ref
    op: str
    right: ValueExpr
    # The type both sides are compared as; set by the type check, not part of equality.
    ctype: types.ColumnType | None = field(default=None, compare=False, repr=False)
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class In:
    """``left in (a, b)`` or, negated, ``left not in (a, b)``."""

    left: Ref
    values: tuple[Literal, ...]
    negated: bool = False
    ctype: types.ColumnType | None = field(default=None, compare=False, repr=False)
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __str__(self) -> str:
        word = "not in" if self.negated else "in"
        return f"{self.left} {word} ({', '.join(str(v) for v in self.values)})"


@dataclass(frozen=True)
class IsNull:
    """``left is null`` or ``left is not null``."""

    left: Ref
    negated: bool = False
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.left} is {'not ' if self.negated else ''}null"


@dataclass(frozen=True)
class Not:
    item: Node
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "depth", _depth(self.item))

    def __str__(self) -> str:
        if isinstance(self.item, And | Or):
            return f"not ({self.item})"
        return f"not {self.item}"


def _flatten(cls: type[And] | type[Or], items: tuple[Node, ...]) -> tuple[Node, ...]:
    flat: list[Node] = []
    for item in items:
        flat.extend(item.items if isinstance(item, cls) else (item,))
    if len(flat) < 2:
        raise ValueError(f"{cls.__name__} needs at least two items")
    return tuple(flat)


@dataclass(frozen=True)
class And:
    """All items hold. Nested ``And`` items are flattened: ``and`` is associative."""

    items: tuple[Node, ...]
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _flatten(And, self.items))
        object.__setattr__(self, "depth", _depth(*self.items))

    def __str__(self) -> str:
        return " and ".join(f"({i})" if isinstance(i, Or) else str(i) for i in self.items)


@dataclass(frozen=True)
class Or:
    """Any item holds. Nested ``Or`` items are flattened."""

    items: tuple[Node, ...]
    depth: int = field(default=1, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _flatten(Or, self.items))
        object.__setattr__(self, "depth", _depth(*self.items))

    def __str__(self) -> str:
        return " or ".join(str(i) for i in self.items)


Node = Compare | In | IsNull | Not | And | Or


def render_value(value: object) -> str:
    """The canonical text of a constant: strings always quoted, timestamps in UTC."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        moment = value.astimezone(UTC).replace(tzinfo=None)
        return moment.isoformat() + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str):
        return "'" + "".join(_ESCAPES.get(ch, ch) for ch in value) + "'"
    raise TypeError(f"not a query value: {value!r}")


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_UNESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def unescape(body: str) -> str:
    """The text inside quotes with its backslash escapes undone (``\\n``, ``\\'``, ``\\\\``)."""
    if "\\" not in body:
        return body
    out: list[str] = []
    chars = iter(body)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "\\")
            out.append(_UNESCAPES.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


def walk(node: Node) -> list[Node]:
    """Every node under ``node`` (itself included), parents before children."""
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        if isinstance(current, And | Or):
            stack.extend(reversed(current.items))
        elif isinstance(current, Not):
            stack.append(current.item)
    return out
