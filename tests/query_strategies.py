"""Hypothesis strategies shared by the query-language property tests: a helper, not tests."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from hypothesis import strategies as st

from flowrunner.foundations import durations, sqltypes
from flowrunner.query import ast
from flowrunner.query.types import ColumnType as T

NOW = datetime(2025, 3, 30, 12, 30, tzinfo=UTC)

COLUMNS: dict[str, T] = {
    "title": T.TEXT,
    "status": T.TEXT,
    "amount": T.NUMBER,
    "qty": T.NUMBER,
    "flag": T.BOOLEAN,
    "due": T.DATE,
    "at": T.TIMESTAMP,
    "ratio": T.NUMBER,
    "naive_at": T.TIMESTAMP,
}
# Columns whose SQL type is not the default for their query type.
_SQL_OVERRIDES: dict[str, sa.types.TypeEngine[Any]] = {
    "ratio": sa.Float(),
    "naive_at": sa.DateTime(),
}

_SQL_TYPES: dict[T, sa.types.TypeEngine[Any]] = {
    T.TEXT: sa.String(),
    T.NUMBER: sa.Numeric(),
    T.BOOLEAN: sa.Boolean(),
    T.DATE: sa.Date(),
    T.TIMESTAMP: sqltypes.UTCDateTime(),
}


def table(name: str = "t") -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        *(
            sa.Column(col, _SQL_OVERRIDES.get(col, _SQL_TYPES[kind]))
            for col, kind in COLUMNS.items()
        ),
    )


_text_alphabet = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
TEXT_POOL = [
    "open",
    "Open",
    "OPEN",
    "closed",
    "",
    "a",
    "ab",
    "abc",
    "b",
    "é",
    "e\u0301",
    "日本",
    "Z",
    "z",
    "'",
    "%",
    "_",
    "a%b",
    "\\",
    "x y",
]
texts = st.one_of(st.sampled_from(TEXT_POOL), st.text(_text_alphabet, max_size=6))

NUMBER_POOL: list[Any] = [
    0,
    1,
    -1,
    100,
    Decimal("100.00"),
    Decimal("1.0"),
    Decimal("0.1"),
    Decimal("-0.5"),
    Decimal("99.99"),
    10**12,
    Decimal("123456789012.345"),
]
numbers = st.one_of(
    st.sampled_from(NUMBER_POOL),
    st.integers(-(10**12), 10**12),
    st.decimals(-(10**6), 10**6, places=2, allow_nan=False, allow_infinity=False),
)

DATE_POOL = [NOW.date() + timedelta(days=k) for k in (-40, -3, -2, -1, 0, 1, 2, 3, 31)]
dates = st.one_of(st.sampled_from(DATE_POOL), st.dates(date(2000, 1, 1), date(2040, 12, 31)))

_zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7, minutes=-30))]
)
TS_POOL = [NOW + timedelta(hours=k) for k in (-49, -48, -24, -1, 0, 1, 24, 48, 49)] + [
    datetime.combine(NOW.date(), datetime.min.time(), UTC)
]
timestamps = st.one_of(
    st.sampled_from(TS_POOL),
    st.builds(
        lambda moment, zone: moment.astimezone(zone),
        st.datetimes(datetime(2000, 1, 1), datetime(2040, 1, 1), timezones=st.just(UTC)),
        _zones,
    ),
)

VALUES = {
    T.TEXT: texts,
    T.NUMBER: numbers,
    T.BOOLEAN: st.booleans(),
    T.DATE: dates,
    T.TIMESTAMP: timestamps,
}

_offsets = st.builds(
    durations.Duration,
    months=st.integers(-2, 2),
    days=st.integers(-3, 3),
    seconds=st.sampled_from([0, 3600, -3600, 86400]),
).filter(lambda d: not (d.months > 0 and (d.days < 0 or d.seconds < 0)))


def _same_sign(d: durations.Duration) -> durations.Duration:
    # A Duration is all >= 0 or all <= 0.
    return durations.Duration(abs(d.months), abs(d.days), abs(d.seconds))


relatives = st.builds(
    lambda base, off, neg: ast.Relative(base, -_same_sign(off) if neg else _same_sign(off)),
    st.sampled_from(["now", "today"]),
    st.one_of(st.none().map(lambda _: durations.Duration()), _offsets),
    st.booleans(),
)


def literal(kind: T) -> st.SearchStrategy[ast.Literal]:
    return VALUES[kind].map(lambda v: ast.Literal(v, kind))


def _ops(kind: T) -> list[str]:
    """The comparison operators a column of ``kind`` takes."""
    ops = ["=", "!="]
    if kind is not T.BOOLEAN:
        ops += ["<", "<=", ">", ">="]
    if kind is T.TEXT:
        ops += ["contains", "starts with"]
    return ops


def _right(kind: T) -> st.SearchStrategy[ast.ValueExpr]:
    """What a column of ``kind`` is compared with: a literal, or a moment relative to now."""
    if kind is T.TIMESTAMP:
        return st.one_of(literal(kind), relatives)
    if kind is T.DATE:
        return st.one_of(literal(kind), relatives.filter(lambda r: r.type is T.DATE))
    return literal(kind)


def _in_list(column: str) -> st.SearchStrategy[ast.Node]:
    return st.builds(
        lambda values, negated: ast.In(ast.Ref(column), tuple(values), negated),
        st.lists(literal(COLUMNS[column]), min_size=1, max_size=4),
        st.booleans(),
    )


def _is_null(column: str) -> st.SearchStrategy[ast.Node]:
    return st.builds(lambda negated: ast.IsNull(ast.Ref(column), negated), st.booleans())


def _compare(column: str, op: str) -> st.SearchStrategy[ast.Node]:
    """``column op value``."""
    ref = ast.Ref(column)
    return _right(COLUMNS[column]).map(lambda value: ast.Compare(ref, op, value))


def _comparison(column: str) -> st.SearchStrategy[ast.Node]:
    """Any comparison of ``column``: with an operator (half the time), ``in`` or ``is null``."""
    compare = st.one_of([_compare(column, op) for op in _ops(COLUMNS[column])])
    return st.one_of(compare, compare, _in_list(column), _is_null(column))


def _compared_by(op: str) -> st.SearchStrategy[ast.Node]:
    """``column op value`` for any column that takes ``op``."""
    return st.one_of(
        [_compare(column, op) for column, kind in sorted(COLUMNS.items()) if op in _ops(kind)]
    )


# One strategy per column, made once: a column drawn and its comparison built for each
# draw (``flatmap``) made new strategies every time, which hypothesis checks anew, and
# took four fifths of the time a condition took to draw.
leaves = st.one_of([_comparison(column) for column in sorted(COLUMNS)])
# Lone comparisons with every operator in each draw, the eight, ``in`` and ``is null`` once
# each (drawn by column, ``starts with`` is one leaf in seventy, and hypothesis may draw
# one operator for a whole list).
every_operator = st.tuples(
    *[_compared_by(op) for op in ast.COMPARE_OPS],
    st.one_of([_in_list(column) for column in sorted(COLUMNS)]),
    st.one_of([_is_null(column) for column in sorted(COLUMNS)]),
).map(list)


conditions: st.SearchStrategy[ast.Node] = st.recursive(
    leaves,
    lambda inner: st.one_of(
        inner.map(ast.Not),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ast.And(tuple(items))),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ast.Or(tuple(items))),
    ),
    max_leaves=8,
)


def _python_view(kind: T, value: Any, draw: Any) -> Any:
    """The value as an application might hand it over in a record (floats, 0/1, naive UTC)."""
    if value is None:
        return None
    if kind is T.NUMBER and isinstance(value, Decimal) and draw(st.booleans()):
        return float(value)
    if kind is T.BOOLEAN and draw(st.booleans()):
        return int(value)
    if kind is T.TIMESTAMP and draw(st.booleans()):
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


# Each column's values, None a third of the time: built once, since hypothesis checks a
# strategy the first time it draws from it, and a record draws from each column.
_COLUMN_VALUES = {
    column: st.one_of(st.none(), VALUES[kind], VALUES[kind]) for column, kind in COLUMNS.items()
}


@st.composite
def records(draw: Any, ident: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the row stored in the database, the record the Python evaluator sees)."""
    row: dict[str, Any] = {"id": ident}
    record: dict[str, Any] = {"id": ident}
    for column, kind in COLUMNS.items():
        value = draw(_COLUMN_VALUES[column])
        if column == "naive_at" and value is not None:
            # A column without time zone holds UTC wall-clock times, written naive.
            row[column] = value.astimezone(UTC).replace(tzinfo=None)
        else:
            row[column] = value
        if value is None and draw(st.booleans()):
            continue  # missing from the record altogether
        record[column] = _python_view(kind, value, draw)
    return row, record


@st.composite
def record_batches(draw: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    size = draw(st.integers(1, 25))
    return [draw(records(i)) for i in range(1, size + 1)]


def anchored(node: ast.Node, rows: Sequence[dict[str, Any]], rnd: random.Random) -> ast.Node:
    """``node`` with about half its literals taken from the values ``rows`` hold.

    Drawn on their own, a condition and a batch seldom meet: ``amount <= 100`` needs a
    record whose amount is 100 to tell ``<=`` from ``<``, and ``title starts with 'op'``
    one whose title starts so. Here a literal becomes a value of its column in one of the
    rows (a piece of it for ``contains``, its start for ``starts with``), so boundaries
    and matches are common; the other literals stay as drawn.
    """
    if isinstance(node, ast.Not):
        return ast.Not(anchored(node.item, rows, rnd))
    if isinstance(node, ast.And | ast.Or):
        return type(node)(tuple(anchored(item, rows, rnd) for item in node.items))
    if isinstance(node, ast.Compare) and isinstance(node.right, ast.Literal):
        held = _held(node.left.name, rows, rnd)
        if held is None:
            return node
        if node.op == "starts with":
            held = held[: _cut(held, rnd)]
        elif node.op == "contains":
            start = rnd.randint(0, len(held) - 1) if held else 0
            held = held[start : start + _cut(held[start:], rnd)]
        return ast.Compare(node.left, node.op, ast.Literal(held, node.right.type))
    if isinstance(node, ast.In):
        values = list(node.values)
        for index, value in enumerate(values):
            held = _held(node.left.name, rows, rnd)
            if held is not None:
                values[index] = ast.Literal(held, value.type)
        return ast.In(node.left, tuple(values), node.negated)
    return node


def _held(column: str, rows: Sequence[dict[str, Any]], rnd: random.Random) -> Any:
    """Half the time, a value ``column`` holds in one of ``rows`` (None where all are null).

    The coin's low side anchors: hypothesis draws low values often, and takes them as the
    simpler, so a failing example shrinks towards a literal the batch holds.
    """
    held = [row[column] for row in rows if row[column] is not None]
    if not held or rnd.random() >= 0.5:
        return None
    value = held[rnd.randrange(len(held))]
    if column == "naive_at":
        return value.replace(tzinfo=UTC)  # stored as naive UTC wall-clock time
    return value


def _cut(text: str, rnd: random.Random) -> int:
    """A length to cut ``text`` to: mostly neither nothing nor all of it, where it has both."""
    if len(text) >= 2 and rnd.random() < 0.8:
        return rnd.randint(1, len(text) - 1)
    return rnd.randint(0, len(text))
