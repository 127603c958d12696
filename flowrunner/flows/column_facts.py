"""What a set step may write into a column: the column's facts, and the one rule fitting a value.

``ColumnFacts`` holds what the database says about one resource column — its query type,
whether it takes null, its length, its numeric precision and scale, the whole numbers it
holds — read from the SQLAlchemy column (declared or reflected). ``read`` fits a set
step's value text to those facts when the step is saved; ``to_write`` does the same at
run time and gives the Python value the worker writes. Both are the same rule, so a value
the save accepts is written without error, and SQLite (which enforces no lengths or
ranges) answers exactly as PostgreSQL does: the rule is by the declared type, never by
what one database happens to tolerate.

A value that does not fit raises ``Refused`` with a stable ``code`` and a sentence saying
what to write instead (``01/03/2026`` → year-month-day; ``1,000`` → ``1000``;
``O'Brien`` → quotes). Grammar words never reach the user.

    >>> import sqlalchemy as sa
    >>> small = facts_of_column(sa.Column("rank", sa.SmallInteger, nullable=False))
    >>> to_write("12", small, now=datetime(2026, 3, 2, tzinfo=UTC))
    12
    >>> try:
    ...     read("40000", small)
    ... except Refused as refused:
    ...     print(refused.code, "-", refused.reason)
    value_out_of_range - it holds whole numbers from -32768 to 32767
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

import sqlalchemy as sa

from flowrunner import errors, query
from flowrunner.foundations import payloads, sqltypes
from flowrunner.query import check as query_check
from flowrunner.query import types as query_types

T = query.ColumnType

# The largest finite magnitudes of 4-byte (REAL) and 8-byte (DOUBLE PRECISION) floats,
# and the smallest normal ones: PostgreSQL refuses a value beyond either end.
_FLOAT4 = (Decimal("1.175494351e-38"), Decimal("3.402823466e38"))
_FLOAT8 = (Decimal("2.2250738585072014e-308"), Decimal("1.7976931348623157e308"))
# A whole number written plainly (ASCII digits; at most 100, so int() is quick).
_WHOLE = re.compile(r"[+-]?[0-9]{1,100}")


@dataclass(frozen=True)
class ColumnFacts:
    """One resource column as a set step may write it.

    ``low``/``high`` bound an integer column (by its declared size: SMALLINT 16 bits,
    INTEGER 32, BIGINT 64); ``precision``/``scale`` a NUMERIC; ``magnitude`` the
    smallest and largest size of a number that is not 0 in a REAL or DOUBLE column
    (``approximate``, written as a float) or an unconstrained NUMERIC (a double on
    SQLite); ``length`` a VARCHAR; ``choices`` an ENUM; ``naive`` a timestamp column
    without a time zone (written as UTC wall time).
    """

    type: query.ColumnType
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    low: int | None = None
    high: int | None = None
    magnitude: tuple[Decimal, Decimal] | None = None
    approximate: bool = False
    choices: tuple[str, ...] | None = None
    naive: bool = False

    @property
    def whole(self) -> bool:
        """Whether the column holds whole numbers only."""
        return self.low is not None or self.scale == 0


def facts_of_type(sql_type: sqltypes.SqlType, *, nullable: bool = True) -> ColumnFacts | None:
    """The facts of a column of ``sql_type``, or None when conditions and sets cannot use it.

    >>> price = facts_of_type(sa.Numeric(8, 2))
    >>> price.type, price.precision, price.scale
    (<ColumnType.NUMBER: 'number'>, 8, 2)
    """
    if isinstance(sql_type, sa.types.TypeDecorator):
        sql_type = sql_type.impl_instance
    kind = query_types.sql_type_to_column_type(sql_type)
    if kind is None:
        return None
    facts = ColumnFacts(kind, nullable=nullable)
    if kind is T.NUMBER:
        return _number_facts(facts, sql_type)
    if kind is T.TEXT:
        choices = tuple(sql_type.enums) if isinstance(sql_type, sa.Enum) else ()
        length = getattr(sql_type, "length", None)
        return dataclasses.replace(facts, length=length, choices=choices or None)
    if kind is T.TIMESTAMP:
        return dataclasses.replace(facts, naive=not getattr(sql_type, "timezone", False))
    return facts


def _number_facts(facts: ColumnFacts, sql_type: sqltypes.SqlType) -> ColumnFacts:
    if isinstance(sql_type, sa.Integer):
        bits = 16 if isinstance(sql_type, sa.SmallInteger) else 32
        bits = 64 if isinstance(sql_type, sa.BigInteger) else bits
        return dataclasses.replace(facts, low=-(2 ** (bits - 1)), high=2 ** (bits - 1) - 1)
    if isinstance(sql_type, sa.Float):
        single = isinstance(sql_type, sa.REAL) or (sql_type.precision or 53) <= 24
        return dataclasses.replace(
            facts, magnitude=_FLOAT4 if single else _FLOAT8, approximate=True
        )
    if isinstance(sql_type, sa.Numeric) and sql_type.precision is not None:
        return dataclasses.replace(facts, precision=sql_type.precision, scale=sql_type.scale or 0)
    # An unconstrained NUMERIC: PostgreSQL holds any size, SQLite a double; the double wins.
    return dataclasses.replace(facts, magnitude=_FLOAT8)


def facts_of_column(column: sqltypes.TableColumn) -> ColumnFacts | None:
    """The facts of a table's column (its type and whether it takes null)."""
    return facts_of_type(column.type, nullable=bool(column.nullable))


class ResourceColumns(Mapping[str, query.ColumnType]):
    """The resource's columns conditions and set steps can use: name → type, with each
    column's facts (``facts``). Columns of other types (JSON, binary) are left out.

    >>> table = sa.Table("t", sa.MetaData(), sa.Column("code", sa.String(4)))
    >>> columns = ResourceColumns.of_table(table)
    >>> dict(columns), columns.facts("code").length
    ({'code': <ColumnType.TEXT: 'text'>}, 4)
    """

    def __init__(self, facts: Mapping[str, ColumnFacts]) -> None:
        self._facts = dict(facts)

    @classmethod
    def of_table(cls, table: sa.Table) -> ResourceColumns:
        found = {str(c.name): facts_of_column(c) for c in table.columns}
        return cls({name: f for name, f in found.items() if f is not None})

    def facts(self, name: str) -> ColumnFacts | None:
        return self._facts.get(name)

    def __getitem__(self, name: str) -> query.ColumnType:
        return self._facts[name].type

    def __iter__(self) -> Iterator[str]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def __repr__(self) -> str:
        return f"ResourceColumns({dict(self)!r})"


def facts_of(columns: Mapping[str, query.ColumnType], name: str) -> ColumnFacts | None:
    """The facts of column ``name``: in full from ``ResourceColumns``; from a plain mapping
    of types, only its type (no limits known); None for a column not in ``columns``."""
    if isinstance(columns, ResourceColumns):
        return columns.facts(name)
    kind = columns.get(name)
    return None if kind is None else ColumnFacts(kind)


class Refused(ValueError):
    """A value that does not fit its column: a stable ``code`` and the ``reason`` to act on."""

    def __init__(self, code: str, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(reason)


# -- the rule ------------------------------------------------------------------------


@functools.lru_cache(maxsize=2048)
def read(text: str, facts: ColumnFacts) -> query.ValueExpr:
    """``text`` read as a value of the column, fitted to its facts; ``Refused`` if it cannot be.

    A constant comes back holding the Python value to write; ``today()``/``now()`` (with a
    duration) comes back as such, and ``to_write`` resolves it at the run's moment.
    """
    value: query.ValueExpr
    if facts.low is not None and _WHOLE.fullmatch(text.strip()):
        # Read as itself: the language keeps a number to 15 digits (what a double holds
        # exactly), but an integer column holds all of its 64 bits on both databases.
        value = query.Literal(int(text.strip()), T.NUMBER)
    else:
        try:
            value = query.parse_value(text)
        except errors.QueryError as error:
            raise Refused("value_invalid", _unreadable(text, facts, error)) from None
    if isinstance(value, query.Relative) and facts.type is T.DATE and value.type is T.TIMESTAMP:
        raise Refused(
            "value_invalid",
            f"it holds a date, and {value} is a moment — write today() with days, "
            "e.g. today() + 2 days",
        )
    try:
        value = query_check.fit_value(value, facts.type, text, "the field")
    except errors.QueryError as error:
        said = error.message
        if facts.type is T.TEXT and getattr(value, "type", None) is T.BOOLEAN:
            # A YAML file reads yes, no, on and off without quotes as true and false.
            said += (
                f" — to write the word, put it in quotes ('{text.strip()}'); in a YAML file, "
                "yes, no, on and off without quotes are read as true and false too"
            )
        raise Refused("value_invalid", said) from None
    if isinstance(value, query.Literal):
        value = dataclasses.replace(value, value=_fit(value.value, facts))
    return value


def to_write(text: str | None, facts: ColumnFacts | None, now: datetime) -> Any:
    """The Python value a set step writing ``text`` puts into the column, at ``now``.

    ``text`` None (an empty value) is null. Without ``facts`` (a column the runner was not
    told about) the value is read without a type. ``Refused`` if it does not fit.
    """
    if facts is None:
        try:
            return query.parse_value(text or "null").resolve(now)
        except errors.QueryError as error:
            raise Refused("value_invalid", error.message) from None
    value = read(text or "null", facts)
    if isinstance(value, query.Literal):
        return value.value
    try:
        moment = value.resolve(now)
    except errors.QueryError as error:
        raise Refused("value_invalid", error.message) from None
    return _stored_moment(moment, facts)


def _fit(value: Any, facts: ColumnFacts) -> Any:
    """A constant of the column's type as the column holds it, or ``Refused``."""
    if value is None:
        if not facts.nullable:
            raise Refused(
                "value_required", "the column always has a value — write one instead of null"
            )
        return None
    if facts.type is T.NUMBER:
        return _fit_number(value, facts)
    if facts.type is T.TEXT:
        return _fit_text(value, facts)
    if facts.type is T.TIMESTAMP:
        return _stored_moment(value, facts)
    return value


def _fit_number(value: int | Decimal, facts: ColumnFacts) -> int | Decimal | float:
    number = Decimal(value)
    if facts.whole:
        if number != number.to_integral_value():
            low = number.to_integral_value(rounding=ROUND_FLOOR)
            high = number.to_integral_value(rounding=ROUND_CEILING)
            raise Refused("value_not_whole", f"it holds whole numbers — write e.g. {low} or {high}")
        number = number.to_integral_value()
    if facts.low is not None and facts.high is not None:
        if not facts.low <= number <= facts.high:
            raise Refused(
                "value_out_of_range", f"it holds whole numbers from {facts.low} to {facts.high}"
            )
        return int(number)
    if facts.precision is not None:
        return _fit_numeric(number, facts.precision, facts.scale or 0)
    if facts.magnitude is not None:
        smallest, largest = facts.magnitude
        if number and not smallest <= abs(number) <= largest:
            raise Refused(
                "value_out_of_range",
                f"it holds numbers from {smallest:.3g} to {largest:.3g} in size, or 0",
            )
        if facts.approximate:
            return float(number)
    return value  # as read: no facts bind it further (an unconstrained NUMERIC)


def _fit_numeric(number: Decimal, precision: int, scale: int) -> int | Decimal:
    exponent = number.normalize().as_tuple().exponent
    places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    if places > scale:
        example = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        raise Refused(
            "value_too_precise",
            f"it holds at most {scale} digit{'s' if scale != 1 else ''} after the point "
            f"— write e.g. {example}",
        )
    largest = Decimal(10) ** (precision - scale) - Decimal(1).scaleb(-scale)
    if abs(number) > largest:
        raise Refused("value_out_of_range", f"it holds numbers from -{largest} to {largest}")
    return int(number) if scale == 0 else number


def _fit_text(value: str, facts: ColumnFacts) -> str:
    problem = payloads.text_problem(value)
    if problem is not None:
        raise Refused("value_invalid", f"the text {problem}")
    if facts.choices is not None and value not in facts.choices:
        raise Refused("value_invalid", f"it holds one of {', '.join(facts.choices)}")
    if facts.length is not None and len(value) > facts.length:
        raise Refused(
            "value_too_long",
            f"it holds at most {facts.length} characters, and this text has {len(value)}",
        )
    return value


def _stored_moment(moment: date | datetime, facts: ColumnFacts) -> date | datetime:
    """A date and time as the column keeps it: UTC wall time where it has no time zone."""
    naive = facts.type is T.TIMESTAMP and facts.naive
    if naive and isinstance(moment, datetime) and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


# -- what to write instead -------------------------------------------------------------

# 01/03/2026, 1.3.26, 13-03-2026: day and month in some order, then the year.
_DMY = re.compile(r"(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{2}|\d{4})(?:[ T].*)?")
# 2026/03/01, 2026.3.1, 2026-3-1: the year first, but not as ISO writes it.
_YMD = re.compile(r"(\d{4})[/.\-](\d{1,2})[/.\-](\d{1,2})(?:[ T].*)?")
# 1,000 and 1,000.50 (commas group thousands); 1.000,50 (points group, a comma decimals).
_COMMA_GROUPS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_POINT_GROUPS = re.compile(r"[+-]?\d{1,3}(?:\.\d{3})+,\d+")
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")
# 1 000, 1'000, 1_000: other marks between groups of digits.
_OTHER_GROUPS = re.compile(r"[+-]?\d{1,3}(?:[ '_\u00a0\u202f]\d{3})+(?:\.\d+)?")
_PLAIN = re.compile(r"[+-]?\d+(?:\.\d+)?")
# A number between currency signs, percent or units (no digits): $100, 100 €, 25%, 10kg.
_AROUND = re.compile(r"([^\d\s+\-.,]*)\s*([+-]?\d[\d.,' _\u00a0\u202f]*?)\s*([^\d\s.,]*)")


def _unreadable(text: str, facts: ColumnFacts, error: errors.QueryError) -> str:
    """Why ``text`` cannot be read as a value of the column, and what to write instead."""
    raw = text.strip()
    if isinstance(error, errors.DurationError) or not error.expected:
        # The reader's own sentence about a value it did read ('2026-02-30' is not a
        # date of the calendar; '2 dayz' is not a duration — write e.g. ...).
        return error.message
    if facts.type in (T.DATE, T.TIMESTAMP):
        hint = _date_hint(raw, facts.type)
        if hint is not None:
            return hint
    if facts.type is T.NUMBER:
        return _number_hint(raw, facts)
    if facts.type is T.TEXT:
        return _text_hint(raw)
    return _HOW[facts.type]


_HOW = {
    T.BOOLEAN: "write true or false",
    T.DATE: "write a date as year-month-day, e.g. 2026-03-01, or today() + 2 days",
    T.TIMESTAMP: (
        "write a date and time as 2026-03-01T09:30 (in UTC; add e.g. +02:00 for another "
        "offset), or now() + 2 hours"
    ),
}


def _date_hint(raw: str, kind: query.ColumnType) -> str | None:
    time = "; then the time after a T, e.g. 2026-03-01T09:30" if kind is T.TIMESTAMP else ""
    found = _YMD.fullmatch(raw)
    if found is not None:
        year, month, day = (int(g) for g in found.groups())
        iso = _iso(year, month, day)
        if iso is not None:
            return f"write a date as year-month-day with hyphens and two-digit parts: {iso}{time}"
        return f"write a date as year-month-day, e.g. 2026-03-01{time}"
    found = _DMY.fullmatch(raw)
    if found is None:
        return None
    first, second, year_text = found.groups()
    if len(year_text) == 2:
        return f"write a date as year-month-day with the year in full, e.g. 2026-03-01{time}"
    year, a, b = int(year_text), int(first), int(second)
    readings = dict.fromkeys(filter(None, (_iso(year, b, a), _iso(year, a, b))))
    shown = raw.split()[0].split("T")[0]
    if len(readings) == 2:
        day_first, month_first = readings
        return (
            f"{shown} is ambiguous: it could be {_words(day_first)} or {_words(month_first)}. "
            f"Write a date as year-month-day: {day_first} for {_words(day_first)}, "
            f"{month_first} for {_words(month_first)}{time}"
        )
    if len(readings) == 1:
        (only,) = readings
        return f"write a date as year-month-day: {only}{time}"
    return f"{shown} is not a date of the calendar; write a date as year-month-day{time}"


_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _iso(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def _words(iso: str) -> str:
    moment = date.fromisoformat(iso)
    return f"{moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def _number_hint(raw: str, facts: ColumnFacts) -> str:
    found = _AROUND.fullmatch(raw)
    plain = None if found is None else _plain(found.group(2))
    if found is not None and plain is not None:
        if found.group(1) or found.group(3):
            return f"write only the number, {plain}, without signs or units"
        return f"write {plain}: digits only, no separators, a point for decimals"
    what = "a whole number such as 1250" if facts.whole else "a number such as 1250 or 12.5"
    return f"write {what}: digits only, no separators or symbols, a point for decimals"


def _plain(core: str) -> str | None:
    """A number written with separators (``1,000.50``, ``1.000,50``) as the language has it."""
    if _PLAIN.fullmatch(core):
        return core
    if _COMMA_GROUPS.fullmatch(core) or _OTHER_GROUPS.fullmatch(core):
        return re.sub(r"[, '_\u00a0\u202f]", "", core)
    if _POINT_GROUPS.fullmatch(core):
        return core.replace(".", "").replace(",", ".")
    if _DECIMAL_COMMA.fullmatch(core):
        return core.replace(",", ".")
    return None


def _text_hint(raw: str) -> str:
    inner = raw
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        inner = raw[1:-1]
    if "'" in inner and '"' not in inner:
        return (
            f'text goes in quotes — write "{inner}" in double quotes, or '
            f"{_quoted(inner)} with a backslash before each quote inside"
        )
    if " " in inner:
        return f"text with spaces goes in quotes — write {_quoted(inner)} with the quotes"
    return f"text goes in quotes — write {_quoted(inner)} with the quotes"


def _quoted(value: str) -> str:
    """``value`` as a quoted text value of the query language (quotes inside escaped)."""
    return str(query.Literal(value, T.TEXT))
