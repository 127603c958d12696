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
(a step's history lines, its commands' idempotency records) a value all rows share (the
step's time) is converted once, and so is each distinct value of a column. JSON on
SQLite is written by one encoder built once (``json_text``): the text ``json.dumps``
gives, without its per-call steps.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.sql.compiler import SQLCompiler

from flowrunner.foundations import sanitize, shapes, sqltypes
from flowrunner.store import dialects

S = TypeVar("S")

_built: dict[Hashable, object] = {}


def statement(key: Hashable, build: Callable[[], S]) -> S:
    """The statement for ``key``, built by ``build`` the first time it is asked for."""
    try:
        found = cast(S, _built[key])
    except KeyError:
        found = build()
        _built[key] = found
    return found


def param(name: str, column: sqltypes.TableColumn) -> sa.BindParameter[Any]:
    """A bound parameter typed as ``column``, so its type's conversions apply (UTC, JSON)."""
    return sa.bindparam(name, type_=column.type)


# How a value is converted for the driver (a column type's bind processor).
Convert = Callable[[object], object]


class Result:
    """What the driver gave back for a compiled statement: its rows as the driver gives
    them (ids, counts, text: tuples) and the count of rows it changed."""

    __slots__ = ("rowcount", "rows")

    def __init__(self, rows: list[dialects.DriverRow], rowcount: int) -> None:
        self.rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[dialects.DriverRow]:
        return iter(self.rows)

    def all(self) -> list[dialects.DriverRow]:
        return list(self.rows)

    def first(self) -> dialects.DriverRow | None:
        """The first row, or None."""
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        """The first row's first value, or None."""
        return self.rows[0][0] if self.rows else None

    def one(self) -> dialects.DriverRow:
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
    value: object = None


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

    # Each parameter as (name, how it is converted, whether it is a constant, its
    # value if so): what ``execute`` reads for every value it sends.
    plan: tuple[tuple[str, Convert | None, bool, object], ...] = field(
        init=False, repr=False, compare=False
    )

    # The columns of a ``typed`` query whose values its types convert, with how.
    converting: tuple[tuple[str, Convert], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plan = tuple((p.name, p.convert, p.fixed, p.value) for p in self.params)
        object.__setattr__(self, "plan", plan)
        converting = tuple(
            (name, convert)
            for name, convert in zip(self.names, self.results, strict=True)
            if convert is not None
        )
        object.__setattr__(self, "converting", converting)

    def execute(self, conn: sa.Connection, values: Mapping[str, object]) -> Result:
        """Send the statement with ``values`` (each parameter's by its name)."""
        sent = [
            value if fixed else values[name] if convert is None else convert(values[name])
            for name, convert, fixed, value in self.plan
        ]
        return _send(conn, self.sql, tuple(sent) if self.positional else self._named(sent))

    def fetch(self, conn: sa.Connection, values: Mapping[str, object]) -> list[shapes.RowDict]:
        """Send a query compiled ``typed`` with ``values``: its rows, each a dict of its
        columns' values converted by their types (what SQLAlchemy's rows would hold)."""
        found = []
        for row in self.execute(conn, values).rows:
            fields = dict(zip(self.names, row, strict=True))
            for name, convert in self.converting:
                value = fields[name]
                if value is not None:
                    fields[name] = convert(value)
            found.append(fields)
        return found

    def execute_many(
        self,
        conn: sa.Connection,
        columns: Mapping[str, Sequence[object]],
        shared: Mapping[str, object] | None = None,
    ) -> None:
        """Send the statement once for many rows, given column by column: ``columns``
        maps a name to its value in each row, in order; ``shared`` maps each other name
        to the one value all rows have, converted once (a step's time, its run)."""
        count = len(next(iter(columns.values())))
        sent: list[Iterable[object]] = []
        for name, convert, fixed, value in self.plan:
            if fixed:
                sent.append(repeat(value, count))
            elif shared is not None and name in shared:
                one = shared[name]
                sent.append(repeat(one if convert is None else convert(one), count))
            elif convert is None:
                sent.append(columns[name])
            else:
                sent.append(_converted(columns[name], convert))
        rows = zip(*sent, strict=True)
        _send(
            conn,
            self.sql,
            list(rows) if self.positional else [self._named(row) for row in rows],
            many=True,
        )

    def _named(self, sent: Sequence[object]) -> dict[str, object]:
        return {p.name: value for p, value in zip(self.params, sent, strict=True)}


def _send(
    conn: sa.Connection, sql: str, params: dialects.DriverParams, *, many: bool = False
) -> Result:
    """Send a compiled statement: to SQLite's driver directly, elsewhere through SQLAlchemy."""
    sent = dialects.driver_execute(conn, sql, params, many=many)
    if sent is not None:
        return Result(*sent)
    result = conn.exec_driver_sql(sql, params)
    return Result(list(result.fetchall()) if result.returns_rows else [], result.rowcount)


def _converted(values: Sequence[object], convert: Convert) -> list[object]:
    """``values`` converted, each distinct plain value once (a step's lines share their
    time, and most of their details are a few short words)."""
    done: dict[tuple[object, ...], object] = {}
    out: list[object] = []
    last: object = _NOTHING
    last_sent: object = None
    for value in values:
        if value is last:  # the same object as the row before's: converted alike
            out.append(last_sent)
            continue
        kind = type(value)
        if kind in _PLAIN:
            key = (kind, value, value.tzinfo) if isinstance(value, datetime) else (kind, value)
            sent = done.get(key, _NOTHING)
            if sent is _NOTHING:
                sent = done[key] = convert(value)
        else:
            sent = convert(value)
        out.append(sent)
        last, last_sent = value, sent
    return out


# Values that are immutable and hash by what they hold; each is told apart by its type
# too (1, 1.0 and True are equal) and a datetime by its zone.
_PLAIN = frozenset({type(None), str, int, float, bool, datetime})
_NOTHING = object()


def compiled(
    conn: sa.Connection,
    key: Hashable,
    build: Callable[[], sa.ClauseElement],
    *,
    many: bool = False,
    typed: bool = False,
) -> Compiled:
    """``build``'s statement compiled for ``conn``'s dialect the first time it is asked
    for (``many``: for many rows at once; ``typed``: a query for ``Compiled.fetch``)."""
    dialect = conn.dialect
    full_key = ("compiled", type(dialect), dialect.paramstyle, many, typed, key)
    found = cast("Compiled | None", _built.get(full_key))
    if found is None:  # ``statement``, without making its ``build`` on every step
        found = compile_for(build(), dialect, many=many, typed=typed)
        _built[full_key] = found
    return found


def compile_for(
    stmt: sa.ClauseElement, dialect: sa.Dialect, *, many: bool = False, typed: bool = False
) -> Compiled:
    """``stmt`` as ``dialect``'s driver takes it (for a cache of the caller's own);
    ``typed``: a query whose values ``Compiled.fetch`` converts by their columns' types."""
    done = cast(SQLCompiler, stmt.compile(dialect=dialect, for_executemany=many))
    if done.literal_execute_params or done.post_compile_params:
        raise ValueError("a compiled statement takes no IN list that grows with its values")
    if not dialect.positional:
        # The driver's names are the statement's own (ours need no escaping).
        assert not done.escaped_bind_names, done.escaped_bind_names
    params = []
    for name in done.positiontup or done.binds:
        bind = done.binds[name]
        convert = converter(bind.type, dialect)
        if bind.required:  # a value the caller gives
            params.append(Param(name, convert))
        else:
            value = bind.effective_value
            params.append(Param(name, None, True, value if convert is None else convert(value)))
    if not typed:
        return Compiled(done.string, tuple(params), dialect.positional)
    columns = list(cast(sa.SelectBase, stmt).selected_columns)
    return Compiled(
        done.string,
        tuple(params),
        dialect.positional,
        tuple(column.name for column in columns),
        tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        ),
    )


def converter(type_: sqltypes.SqlType, dialect: sa.Dialect) -> Convert | None:
    """How a value bound as ``type_`` is converted for ``dialect``'s driver: as the type's
    own bind processor does, with JSON on SQLite encoded by ``json_text``."""
    impl = type_.dialect_impl(dialect)
    convert = impl.bind_processor(dialect)
    if convert is None or not _dumps_json(impl, dialect, convert):
        return convert
    generic = convert

    def to_json(value: object) -> object:
        if type(value) in _JSON_PLAIN:
            return json_text(value)
        return generic(value)  # None, SQL NULL, and what json.dumps is to judge

    return to_json


def _dumps_json(impl: sqltypes.SqlType, dialect: sa.Dialect, convert: Convert) -> bool:
    """Whether ``convert``, ``impl``'s bind processor, is SQLAlchemy's JSON one with
    ``json.dumps`` and nothing after it: SQLite's, unless the engine was given a
    ``json_serializer`` (and as long as it writes a sample as ``json_text`` does)."""
    return (
        dialect.name == "sqlite"
        and type(impl).bind_processor is sa.JSON.bind_processor
        and getattr(dialect, "_json_serializer", None) is None
        and convert(_JSON_SAMPLE) == json_text(_JSON_SAMPLE)
    )


_JSON_SAMPLE = {"é": [1, 2.5, None, True, "a\n"]}


_encode_text = json.encoder.encode_basestring_ascii

# What ``json_text`` writes as ``json.dumps`` would, by exact type: text, a list, a dict
# (and the sanitizer's dict of fields made safe, a history line's detail).
_JSON_PLAIN = frozenset({str, list, dict, sanitize.Sanitized})


def _json_encoder() -> Callable[[object, int], Iterable[str]] | None:
    """The C encoder with the settings ``json.dumps`` gives it by default, built once;
    None where there is none. It keeps no list of the containers it is inside (that
    list would be shared by every thread): a value that contains itself recurses until
    Python's recursion limit stops it, and ``json_text`` then asks ``json.dumps``."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has it
        return None
    dumps = json.JSONEncoder()  # what json.dumps(value) encodes with
    return make(  # type: ignore[no-any-return]
        None,
        dumps.default,
        _encode_text,
        dumps.indent,
        dumps.key_separator,
        dumps.item_separator,
        dumps.sort_keys,
        dumps.skipkeys,
        dumps.allow_nan,
    )


_ENCODE = _json_encoder()


def json_text(value: object) -> str:
    """``json.dumps(value)``, character for character, in a third of its time.

    ``json.dumps`` with its default settings takes a few Python-level steps and builds
    the C encoder anew for each value; this one is built once (``_json_encoder``).
    """
    if type(value) is str:
        return _encode_text(value)
    if _ENCODE is None:  # pragma: no cover - CPython has it
        return json.dumps(value)
    try:
        return "".join(_ENCODE(value, 0))
    except RecursionError:
        # Nested too deep, or containing itself: refused as json.dumps refuses it.
        return json.dumps(value)
