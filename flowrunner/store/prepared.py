"""Statements the worker sends on every step, built once and executed with parameters.

Building a SQLAlchemy statement (and its cache key) costs far more than executing a
prepared one — about 200 µs against 20 µs here — and a step sends a dozen. Each entry
is keyed by what makes it differ (the dialect, which optional clauses it has).

The few statements that write many rows per step (its history lines, its commands'
idempotency records) go further: ``bulk`` compiles one to its SQL text once per
dialect and sends it through the driver with every row's values already converted by
their columns' types — what SQLAlchemy does for each row, without its per-row work.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

S = TypeVar("S")

_built: dict[Hashable, Any] = {}


def statement(key: Hashable, build: Callable[[], S]) -> S:
    """The statement for ``key``, built by ``build`` the first time it is asked for."""
    try:
        found: S = _built[key]
    except KeyError:
        found = _built[key] = build()
    return found


def param(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
    """A bound parameter typed as ``column``, so its type's conversions apply (UTC, JSON)."""
    return sa.bindparam(name, type_=column.type)


Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class Bulk:
    """A statement for many rows as one dialect's driver takes it: the SQL, the
    parameters' names in the order the SQL takes them, and each one's conversion."""

    sql: str
    names: tuple[str, ...]
    converts: tuple[Convert | None, ...]
    positional: bool

    def execute(self, conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Send the statement once for all ``rows`` (each maps every name to its value)."""
        columns = [_converted([row[name] for row in rows], convert) for name, convert in self.pairs]
        values = zip(*columns, strict=True)
        if self.positional:
            params: list[Any] = list(values)
        else:
            params = [dict(zip(self.names, row, strict=True)) for row in values]
        conn.exec_driver_sql(self.sql, params)

    @property
    def pairs(self) -> tuple[tuple[str, Convert | None], ...]:
        return tuple(zip(self.names, self.converts, strict=True))


def _converted(values: list[Any], convert: Convert | None) -> list[Any]:
    """``values`` converted, each distinct plain value once (a step's lines share their
    time, and most of their details are a few short words)."""
    if convert is None:
        return values
    done: dict[tuple[Any, ...], Any] = {}
    out: list[Any] = []
    for value in values:
        if value is None or type(value) in _PLAIN:
            key = (type(value), value, getattr(value, "tzinfo", None))
            if key not in done:
                done[key] = convert(value)
            out.append(done[key])
        else:
            out.append(convert(value))
    return out


# Values that are immutable and hash by what they hold; each is told apart by its type
# too (1, 1.0 and True are equal) and a datetime by its zone.
_PLAIN = frozenset({str, int, float, bool, datetime})


def bulk(conn: sa.Connection, key: Hashable, build: Callable[[], sa.Insert]) -> Bulk:
    """``build``'s INSERT (its values bound by column name), compiled for ``conn``'s
    dialect the first time it is asked for; every parameter is a column's value."""
    dialect = conn.dialect
    return statement(("bulk", dialect.name, key), lambda: _compile(build(), dialect))


def _compile(stmt: sa.Insert, dialect: sa.Dialect) -> Bulk:
    table = stmt.table
    assert isinstance(table, sa.Table)
    compiled = stmt.compile(dialect=dialect, for_executemany=True)
    names = tuple(compiled.positiontup or compiled.binds)
    converts = []
    for name in names:
        bind = compiled.binds[name]
        if bind.value is not None or bind.callable is not None:
            raise ValueError(f"a bulk statement takes every value from its rows, not {name!r}")
        converts.append(bind.type.dialect_impl(dialect).bind_processor(dialect))
    sql = compiled.string
    if not dialect.positional:
        # The driver's names are the statement's own (no escaping needed for column names).
        assert not compiled.escaped_bind_names, compiled.escaped_bind_names
    return Bulk(sql, names, tuple(converts), dialect.positional)
