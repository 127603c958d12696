"""Column types of the query language and the normalization of values to them.

Five types: text, number, boolean, date, timestamp. ``column_types`` reads them from a
SQLAlchemy table or a mapping; ``coerce`` brings a record's value to one of them so
that Python evaluation compares exactly what SQL compares. A value that is not of the
type (``'abc'`` for a number), or a moment outside the calendar (years 1 to 9999 in
UTC), coerces to ``None`` and so behaves like null. ``Beyond`` stands for a moment a
condition computes past either end of the calendar (``now() + 100 years`` in year 9950).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import TypeAlias

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.foundations import sqltypes


class ColumnType(enum.Enum):
    TEXT = "text"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"

    @property
    def noun(self) -> str:
        """How a business user calls a value of this type (for messages)."""
        return _NOUNS[self]


_NOUNS = {
    ColumnType.TEXT: "text",
    ColumnType.NUMBER: "a number",
    ColumnType.BOOLEAN: "true or false",
    ColumnType.DATE: "a date",
    ColumnType.TIMESTAMP: "a date and time",
}

# A SQL type may be given as its class (``sa.Float``) or an instance (``sa.Numeric(12, 2)``).
ColumnsArg = sa.Table | Mapping[str, "ColumnType | str | sqltypes.SqlType | type[sqltypes.SqlType]"]

# ASCII digits only: ``\d`` would also take ``٣``, which no database reads as a number.
_NUMBER_TEXT = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")


def sql_type_to_column_type(sql_type: sqltypes.SqlType) -> ColumnType | None:
    """The query type of a SQLAlchemy type, or None when conditions cannot use it."""
    if isinstance(sql_type, sa.types.TypeDecorator):
        sql_type = sql_type.impl_instance
    # Boolean before Integer: some dialect booleans subclass integer types.
    if isinstance(sql_type, sa.Boolean):
        return ColumnType.BOOLEAN
    if isinstance(sql_type, sa.DateTime):
        return ColumnType.TIMESTAMP
    if isinstance(sql_type, sa.Date):
        return ColumnType.DATE
    if isinstance(sql_type, sa.Integer | sa.Numeric | sa.Float):
        return ColumnType.NUMBER
    if isinstance(sql_type, sa.String | sa.Enum):
        return ColumnType.TEXT
    return None


def column_types(columns: ColumnsArg) -> dict[str, ColumnType]:
    """Column name → ``ColumnType``, from a table or a mapping.

    A table's columns of types conditions cannot use (JSON, binary, intervals...) are
    left out, so a condition naming one is told the column is unknown. In a mapping,
    such a type (or an unknown type name) raises ``BindingError``.

    >>> column_types({"status": "text", "amount": sa.Numeric()})["amount"]
    <ColumnType.NUMBER: 'number'>
    """
    if isinstance(columns, sa.Table):
        out: dict[str, ColumnType] = {}
        for column in columns.columns:
            found = sql_type_to_column_type(column.type)
            if found is not None:
                out[column.name] = found
        return out
    result: dict[str, ColumnType] = {}
    for name, spec in columns.items():
        if isinstance(spec, ColumnType):
            result[name] = spec
        elif isinstance(spec, str):
            try:
                result[name] = ColumnType(spec.strip().lower())
            except ValueError:
                known = ", ".join(t.value for t in ColumnType)
                raise errors.BindingError(
                    f"column {name!r} has type {spec!r}; conditions know: {known}"
                ) from None
        else:
            sql_type = spec() if isinstance(spec, type) else spec
            found = sql_type_to_column_type(sql_type)
            if found is None:
                raise errors.BindingError(
                    f"column {name!r} has type {sql_type!r}, which conditions cannot compare"
                )
            result[name] = found
    return result


def to_number(value: object) -> int | Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        return value if value.is_finite() else None
    if isinstance(value, float):
        # The shortest text that reads back as the same float: what SQLite's REAL
        # comparison against a literal of at most 15 significant digits amounts to.
        return Decimal(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value.strip()):
        try:
            return Decimal(value.strip())
        except InvalidOperation:  # pragma: no cover - the pattern admits only numbers
            return None
    return None


def to_boolean(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "false": False, "1": True, "0": False}.get(value.strip().lower())
    return None


def to_timestamp(value: object) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:  # e.g. 9999-12-31T23:00-05:00, which is in year 10000 in UTC
            return None
    if isinstance(value, date):
        return datetime.combine(value, time(), UTC)
    return None


def outside_calendar(text: str) -> bool:
    """Whether ``text`` is a date and time that lies outside years 1 to 9999 in UTC.

    >>> outside_calendar("9999-12-31T23:59-14:00"), outside_calendar("9999-12-31T23:59Z")
    (True, False)
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return to_timestamp(moment) is None


@dataclass(frozen=True)
class Beyond:
    """A moment past the calendar's last instant (``later``) or before its first.

    ``now() + 100 years`` in year 9950 is one: no date or time can hold it, yet every
    stored date lies before it. So it compares as later (or earlier) than every date and
    time and equals none, and a comparison against it is decided, never an error.

    >>> from datetime import date
    >>> date(9999, 12, 31) < Beyond(later=True), date(1, 1, 1) < Beyond(later=False)
    (True, False)
    """

    later: bool

    def __lt__(self, other: object) -> bool:
        if isinstance(other, date):
            return not self.later
        return NotImplemented

    def __le__(self, other: object) -> bool:
        return self.__lt__(other)

    def __gt__(self, other: object) -> bool:
        if isinstance(other, date):
            return self.later
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.__gt__(other)


def to_date(value: object) -> date | None:
    if isinstance(value, datetime):
        moment = to_timestamp(value)
        return None if moment is None else moment.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text)
        except ValueError:
            moment = to_timestamp(text)
            return None if moment is None else moment.date()
    return None


def to_text(value: object) -> str | None:
    return str(value) if isinstance(value, str) else None


# A value as conditions compare it: text, a number, true or false, a date or a date and
# time (in UTC), a moment past the calendar's ends (``Beyond``), or null.
Compared: TypeAlias = str | int | Decimal | bool | date | Beyond | None

_COERCERS: dict[ColumnType, Callable[[object], Compared]] = {
    ColumnType.TEXT: to_text,
    ColumnType.NUMBER: to_number,
    ColumnType.BOOLEAN: to_boolean,
    ColumnType.DATE: to_date,
    ColumnType.TIMESTAMP: to_timestamp,
}


def coerce(value: object, column_type: ColumnType) -> Compared:
    """``value`` as the query language compares it for ``column_type``; None if it is not one.

    Naive datetimes are UTC and aware ones move to UTC; ISO strings are read for dates
    and timestamps; a float becomes the Decimal of its shortest text; 0/1 are booleans.

    >>> coerce("2024-05-01T10:00:00+02:00", ColumnType.TIMESTAMP)
    datetime.datetime(2024, 5, 1, 8, 0, tzinfo=datetime.timezone.utc)
    """
    if value is None:
        return None
    if isinstance(value, Beyond):
        return value
    return _COERCERS[column_type](value)
