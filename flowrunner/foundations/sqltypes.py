"""Column types flowrunner stores with: timestamps that stay time-zone aware everywhere.

And SQLAlchemy's generic parts as flowrunner holds them, each named once: over columns
whose Python type the application chose (its tables are its own), so their values are
``Any`` to the type checker.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeAlias

import sqlalchemy as sa

SqlType: TypeAlias = sa.types.TypeEngine[Any]
"""A column's SQL type, whatever Python value it holds."""
TableColumn: TypeAlias = sa.Column[Any]
"""A column of a table: the engine's or the application's."""
Expression: TypeAlias = sa.ColumnElement[Any]
"""An SQL expression of any type (a column, a function of one, a literal)."""
# SQLAlchemy types a statement and its rows by each of their columns' types (a variadic
# generic); these three are of whatever columns. Quoted: only the type checker reads them.
Query: TypeAlias = "sa.Select[*tuple[Any, ...]]"
"""A SELECT statement, of whatever columns."""
ResultRow: TypeAlias = "sa.Row[*tuple[Any, ...]]"
"""A row a statement gave back."""
Results: TypeAlias = "sa.Result[*tuple[Any, ...]]"
"""What a statement gave back: its rows, of whatever columns."""

# A moment whose text tells SQLAlchemy's format for SQLite apart from any other.
_SAMPLE = datetime(2001, 2, 3, 4, 5, 6, 7, tzinfo=UTC)


def _sqlite_text(value: datetime) -> str:
    """What SQLite keeps of ``value`` (naive: taken as UTC): its UTC time as text, to the
    microsecond, as SQLAlchemy writes a DATETIME there (``2026-03-01 09:00:00.000000``)."""
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # The offset, if any, follows the 26 characters of the date and time.
    return value.isoformat(" ", "microseconds")[:26]


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A tz-aware datetime stored as UTC: ``timestamptz`` on PostgreSQL, UTC text on SQLite.

    SQLite drops offsets, so values are moved to UTC before they are written and come
    back marked UTC; naive values given to it are taken as UTC. Reads always return
    aware UTC datetimes, so comparisons never mix naive and aware values.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: object, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if not isinstance(value, datetime):
            raise TypeError(f"UTCDateTime needs a datetime, not {type(value).__name__}")
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        if dialect.name == "sqlite":
            return moment.replace(tzinfo=None)
        return moment

    def bind_processor(self, dialect: sa.Dialect) -> Callable[[datetime | None], Any] | None:
        """``process_bind_param`` then the column type's own conversion; on SQLite, an
        aware or naive datetime goes to its UTC text in one step (``_sqlite_text``)."""
        generic = super().bind_processor(dialect)
        if generic is None or dialect.name != "sqlite" or generic(_SAMPLE) != _sqlite_text(_SAMPLE):
            # Another format than SQLAlchemy's default for SQLite: its own conversion.
            return generic

        # The moment converted last and its text: a step writes its own time in most of
        # its statements, the same object each time (an immutable one, kept alive here,
        # so the same object is the same moment).
        last: list[tuple[datetime | None, str]] = [(None, "")]

        def process(value: datetime | None) -> object:
            if type(value) is not datetime:
                return generic(value)
            seen, text = last[0]
            if value is not seen:
                text = _sqlite_text(value)
                last[0] = (value, text)
            return text

        return process

    def process_result_value(self, value: object, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # pragma: no cover - drivers return datetimes
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
