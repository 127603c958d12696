"""The query language of conditions: ``status = open and amount > 1000``.

``parse`` reads a condition (cached by text, columns and ``event``) into a
``Condition`` that evaluates over a record in Python (``matches``) or compiles to a
SQLAlchemy clause (``to_sql``) — the two agree on every record. ``parse_value`` reads
one value, as a set step's value. See docs/query-language.md for the language.
"""

from __future__ import annotations

import functools

from flowrunner import errors
from flowrunner.query import ast, check, parser
from flowrunner.query.ast import Literal, Relative, ValueExpr
from flowrunner.query.condition import Condition
from flowrunner.query.types import ColumnsArg, ColumnType, coerce, column_types

__all__ = [
    "ColumnType",
    "Condition",
    "Literal",
    "Relative",
    "ValueExpr",
    "coerce",
    "column_types",
    "parse",
    "parse_value",
]

_Frozen = tuple[tuple[str, ColumnType], ...] | None


def parse(text: str, columns: ColumnsArg | None = None, *, event: bool = False) -> Condition:
    """Read ``text`` into a ``Condition``; raise ``QueryError`` with line and column if it fails.

    ``columns`` (a SQLAlchemy ``Table`` or a mapping of name → type) turns on the type
    check: unknown columns, values that cannot be the column's type and operators that
    do not fit are refused. ``event=True`` allows ``event.<field>`` on the left side.

    >>> parse("region in (EU, 'US') and not (priority = low)").columns == {"region", "priority"}
    True
    >>> try:
    ...     parse("status = open and amont > 5", {"status": "text", "amount": "number"})
    ... except errors.QueryError as error:
    ...     print(error.line, error.column, error.message)
    1 19 unknown column 'amont' — did you mean 'amount'? The columns are: amount, status
    """
    frozen: _Frozen = None
    if columns is not None:
        frozen = tuple(sorted(column_types(columns).items()))
    if not isinstance(text, str):
        raise errors.QueryError(f"a condition must be text, not {type(text).__name__}")
    return _parse(text, frozen, event)


@functools.lru_cache(maxsize=4096)
def _parse(text: str, columns: _Frozen, event: bool) -> Condition:
    types_ = dict(columns) if columns is not None else None
    node = check.check(parser.parse_node(text), types_, event=event, text=text)
    return Condition(node, text=text, columns=types_, event=event)


def parse_value(text: str, column_type: ColumnType | str | None = None) -> ValueExpr:
    """Read one value (``'open'``, ``42``, ``true``, ``null``, ``today() + 2 days``...).

    With ``column_type``, the value must fit it (``'12'`` for a number becomes 12);
    ``resolve(now)`` gives the Python value.

    >>> parse_value("today() + 2 days", "date").type
    <ColumnType.DATE: 'date'>
    """
    kind = ColumnType(column_type) if isinstance(column_type, str) else column_type
    if not isinstance(text, str):
        return _read_value(text, kind)
    return _cached_value(text, kind)


def _read_value(text: str, kind: ColumnType | None) -> ValueExpr:
    value = parser.parse_value_node(text)
    if kind is None:
        return value
    return check.fit_value(value, kind, text, "the field")


# Cached as conditions are (a set step's value is read at every run): the AST is frozen.
_cached_value = functools.lru_cache(maxsize=4096)(_read_value)


def render(node: ast.Node) -> str:
    """The canonical text of an AST node (same as ``str(node)``)."""
    return str(node)
