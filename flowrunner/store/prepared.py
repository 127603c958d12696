"""Statements the worker sends on every step, built once and executed with parameters.

Building a SQLAlchemy statement (and its cache key) costs far more than executing a
prepared one — about 200 µs against 20 µs here — and a step sends a dozen. Each entry
is keyed by what makes it differ (the dialect, which optional clauses it has).

The statements every run sends go further: ``compiled`` turns one into its SQL text
once per dialect and sends it through the driver (``exec_driver_sql``) with each
value already converted by its column's type — what SQLAlchemy does on every execute,
without looking the statement up in its cache by a key it hashes anew each time (a
cost that grows with the statement: about a third of a run's start). Such a statement
takes no ``schema_translate_map`` and no IN list that grows with its values, and its
rows come back as the driver gives them: ids, counts and text. For many rows at once
(a step's history lines, its commands' idempotency records) each distinct value is
converted once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from flowrunner.store import dialects

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


class Result:
    """What the driver gave back for a compiled statement: its rows as the driver gives
    them (ids, counts, text: tuples) and the count of rows it changed."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)

    def all(self) -> list[Any]:
        return list(self.rows)

    def first(self) -> Any:
        """The first row, or None."""
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        """The first row's first value, or None."""
        return self.rows[0][0] if self.rows else None

    def one(self) -> Any:
        """The one row; SQLAlchemy's ``NoResultFound`` or ``MultipleResultsFound`` else."""
        if len(self.rows) != 1:
            if not self.rows:
                raise sa.exc.NoResultFound("No row was found when one was required")
            raise sa.exc.MultipleResultsFound("Multiple rows were found when one was required")
        return self.rows[0]

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalar_one_or_none(self) -> Any:
        if not self.rows:
            return None
        return self.scalar_one()


@dataclass(frozen=True)
class Param:
    """One parameter as the driver takes it: its name, how its value is converted, and
    the value the statement holds itself (a constant), already converted."""

    name: str
    convert: Convert | None
    fixed: bool = False
    value: Any = None


@dataclass(frozen=True)
class Compiled:
    """A statement as one dialect's driver takes it: its SQL and its parameters in the
    order the SQL takes them."""

    sql: str
    params: tuple[Param, ...]
    positional: bool
    # A query compiled ``typed``: its columns' names and how each value it gives back is
    # converted by the column's type (JSON parsed, times made aware), for ``fetch``.
    names: tuple[str, ...] = ()
    results: tuple[Convert | None, ...] = ()

    def execute(self, conn: sa.Connection, values: Mapping[str, Any]) -> Result:
        """Send the statement with ``values`` (each parameter's by its name)."""
        sent = [
            p.value
            if p.fixed
            else values[p.name]
            if p.convert is None
            else p.convert(values[p.name])
            for p in self.params
        ]
        return _send(conn, self.sql, self._shaped(sent))

    def fetch(self, conn: sa.Connection, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Send a query compiled ``typed`` with ``values``: its rows, each a dict of its
        columns' values converted by their types (what SQLAlchemy's rows would hold)."""
        names, results = self.names, self.results
        return [
            {
                name: value if convert is None or value is None else convert(value)
                for name, convert, value in zip(names, results, row, strict=True)
            }
            for row in self.execute(conn, values).rows
        ]

    def execute_many(self, conn: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Send the statement once for all ``rows`` (each maps every name to its value)."""
        columns = [
            [p.value] * len(rows) if p.fixed else _converted([r[p.name] for r in rows], p.convert)
            for p in self.params
        ]
        shaped = [self._shaped(row) for row in zip(*columns, strict=True)]
        _send(conn, self.sql, shaped, many=True)

    def _shaped(self, sent: Sequence[Any]) -> Any:
        if self.positional:
            return tuple(sent)
        return {p.name: value for p, value in zip(self.params, sent, strict=True)}


def _send(conn: sa.Connection, sql: str, params: Any, *, many: bool = False) -> Result:
    """Send a compiled statement: to SQLite's driver directly, elsewhere through SQLAlchemy."""
    sent = dialects.driver_execute(conn, sql, params, many=many)
    if sent is not None:
        return Result(*sent)
    result = conn.exec_driver_sql(sql, params)
    return Result(list(result.fetchall()) if result.returns_rows else [], result.rowcount)


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


def compiled(
    conn: sa.Connection,
    key: Hashable,
    build: Callable[[], Any],
    *,
    many: bool = False,
    typed: bool = False,
) -> Compiled:
    """``build``'s statement compiled for ``conn``'s dialect the first time it is asked
    for (``many``: for many rows at once; ``typed``: a query for ``Compiled.fetch``)."""
    dialect = conn.dialect
    return statement(
        ("compiled", type(dialect), dialect.paramstyle, many, typed, key),
        lambda: compile_for(build(), dialect, many=many, typed=typed),
    )


def compile_for(
    stmt: Any, dialect: sa.Dialect, *, many: bool = False, typed: bool = False
) -> Compiled:
    """``stmt`` as ``dialect``'s driver takes it (for a cache of the caller's own);
    ``typed``: a query whose values ``Compiled.fetch`` converts by their columns' types."""
    done = stmt.compile(dialect=dialect, for_executemany=many)
    if done.literal_execute_params or done.post_compile_params:
        raise ValueError("a compiled statement takes no IN list that grows with its values")
    if not dialect.positional:
        # The driver's names are the statement's own (ours need no escaping).
        assert not done.escaped_bind_names, done.escaped_bind_names
    params = []
    for name in done.positiontup or done.binds:
        bind = done.binds[name]
        convert = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if bind.required:  # a value the caller gives
            params.append(Param(name, convert))
        else:
            value = bind.effective_value
            params.append(Param(name, None, True, value if convert is None else convert(value)))
    if not typed:
        return Compiled(done.string, tuple(params), dialect.positional)
    columns = list(stmt.selected_columns)
    return Compiled(
        done.string,
        tuple(params),
        dialect.positional,
        tuple(column.name for column in columns),
        tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        ),
    )
