"""The SQL builder: a typed AST → a SQLAlchemy boolean clause that is never NULL.

Every literal (and every ``event.x`` value) is a bound parameter. Each comparison is
guarded so that SQL's third truth value never appears: ``x = v`` becomes
``x IS NOT NULL AND x = v``, and ``!=``/``not in`` are ``NOT`` of those, which is then
exactly two-valued and agrees with the Python evaluator. Text is matched
case-sensitively and ordered by code point on every database: SQLite compares UTF-8
bytes; PostgreSQL is told ``COLLATE "C"``; ``contains``/``starts with`` use
``instr``/``strpos``/``starts_with`` rather than ``LIKE`` (case-insensitive on SQLite).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import functions
from sqlalchemy.sql.compiler import SQLCompiler

from flowrunner import errors
from flowrunner.foundations import shapes, sqltypes
from flowrunner.query import ast, types

T = types.ColumnType
_T = TypeVar("_T")
Clause = sa.ColumnElement[bool]


class _Contains(functions.FunctionElement[bool]):
    """``needle`` occurs in ``haystack``, case-sensitively."""

    type = sa.Boolean()
    inherit_cache = True
    name = "flowrunner_contains"


class _StartsWith(functions.FunctionElement[bool]):
    type = sa.Boolean()
    inherit_cache = True
    name = "flowrunner_starts_with"


class _CodePointOrder(functions.FunctionElement[str]):
    """Text to be ordered by code point (PostgreSQL: ``COLLATE "C"``)."""

    type = sa.String()
    inherit_cache = True
    name = "flowrunner_code_point_order"


class _EventValue(functions.FunctionElement[Any]):
    """An event field's value: a parameter, typed with a cast where the database needs one.

    PostgreSQL cannot infer the type of a lone parameter (``$1 IS NOT NULL``), so it gets
    ``CAST``; SQLite must not, since ``CAST(x AS DATE)`` would make a number of a date.
    """

    inherit_cache = True
    name = "flowrunner_event_value"

    def __init__(self, value: sa.BindParameter[Any]) -> None:
        super().__init__(value)
        self.type = value.type


def _args(element: functions.FunctionElement[_T], compiler: SQLCompiler, **kw: object) -> list[str]:
    return [compiler.process(arg, **kw) for arg in element.clauses]


@compiles(_Contains)
def _contains_default(element: _Contains, compiler: SQLCompiler, **kw: object) -> str:
    haystack, needle = _args(element, compiler, **kw)
    return f"(POSITION({needle} IN {haystack}) > 0)"


@compiles(_Contains, "sqlite")
def _contains_sqlite(element: _Contains, compiler: SQLCompiler, **kw: object) -> str:
    haystack, needle = _args(element, compiler, **kw)
    return f"(instr({haystack}, {needle}) > 0)"


@compiles(_Contains, "postgresql")
def _contains_pg(element: _Contains, compiler: SQLCompiler, **kw: object) -> str:
    haystack, needle = _args(element, compiler, **kw)
    return f"(strpos({haystack}, {needle}) > 0)"


@compiles(_StartsWith)
def _starts_default(element: _StartsWith, compiler: SQLCompiler, **kw: object) -> str:
    haystack, prefix = _args(element, compiler, **kw)
    return f"(POSITION({prefix} IN {haystack}) = 1)"


@compiles(_StartsWith, "sqlite")
def _starts_sqlite(element: _StartsWith, compiler: SQLCompiler, **kw: object) -> str:
    haystack, prefix = _args(element, compiler, **kw)
    return f"(instr({haystack}, {prefix}) = 1)"


@compiles(_StartsWith, "postgresql")
def _starts_pg(element: _StartsWith, compiler: SQLCompiler, **kw: object) -> str:
    haystack, prefix = _args(element, compiler, **kw)
    return f"starts_with({haystack}, {prefix})"


@compiles(_EventValue)
def _event_default(element: _EventValue, compiler: SQLCompiler, **kw: object) -> str:
    (value,) = _args(element, compiler, **kw)
    return value


@compiles(_EventValue, "postgresql")
def _event_pg(element: _EventValue, compiler: SQLCompiler, **kw: object) -> str:
    (value,) = _args(element, compiler, **kw)
    return f"CAST({value} AS {compiler.dialect.type_compiler_instance.process(element.type)})"


@compiles(_CodePointOrder)
def _order_default(element: _CodePointOrder, compiler: SQLCompiler, **kw: object) -> str:
    (text,) = _args(element, compiler, **kw)
    return text


@compiles(_CodePointOrder, "postgresql")
def _order_pg(element: _CodePointOrder, compiler: SQLCompiler, **kw: object) -> str:
    (text,) = _args(element, compiler, **kw)
    return f'({text} COLLATE "C")'


def _bind_type(ctype: types.ColumnType, column: sqltypes.Expression | None) -> Any:
    """The type a parameter compared with ``column`` is bound as."""
    if ctype in (T.DATE, T.TIMESTAMP) and column is not None:
        # The column's own type writes the parameter exactly as stored values are
        # written (SQLite keeps dates and times as text in one format).
        return column.type
    return {
        T.TEXT: sa.String(),
        # Numeric, never the column's Integer: PostgreSQL would cast 1.5 to 2.
        T.NUMBER: sa.Numeric(),
        T.BOOLEAN: sa.Boolean(),
        T.DATE: sa.Date(),
        T.TIMESTAMP: sqltypes.UTCDateTime(),
    }[ctype]


def _naive_column(column: sqltypes.Expression | None) -> bool:
    if column is None:
        return False
    sql_type = column.type
    if isinstance(sql_type, sa.types.TypeDecorator):
        return False
    return isinstance(sql_type, sa.DateTime) and not sql_type.timezone


class Builder:
    """Builds the clause of one typed node over ``table`` at ``now`` with ``event``."""

    def __init__(self, table: sa.Table, now: datetime, event: shapes.Payload | None) -> None:
        self.table = table
        self.now = now
        self.event = event or {}

    def clause(self, node: ast.Node) -> Clause:
        if isinstance(node, ast.And):
            return sa.and_(*(self.clause(i) for i in node.items)).self_group()
        if isinstance(node, ast.Or):
            return sa.or_(*(self.clause(i) for i in node.items)).self_group()
        if isinstance(node, ast.Not):
            return sa.not_(self.clause(node.item))
        if isinstance(node, ast.IsNull):
            if node.left.scope != "record":
                # An event value of any type: bind whether it is there, not the value.
                absent = self.event.get(node.left.name) is None
                holds = sa.bindparam(None, absent != node.negated, type_=sa.Boolean())
                return _EventValue(holds) == sa.true()
            left, _ = self.left(node.left, None)
            return left.is_not(None) if node.negated else left.is_(None)
        if isinstance(node, ast.In):
            return self.in_(node)
        return self.compare(node)

    def left(
        self, ref: ast.Ref, ctype: types.ColumnType | None
    ) -> tuple[sqltypes.Expression, sqltypes.Expression | None]:
        """The left side's expression, and the column it is (None for an event field)."""
        if ref.scope == "record":
            column = self.table.c.get(ref.name)
            if column is None:  # pragma: no cover - the type check refuses it first
                raise errors.QueryError(f"unknown column '{ref.name}'", found=ref.name)
            return column, column
        kind = ctype or T.TEXT
        value = types.coerce(self.event.get(ref.name), kind)
        return _EventValue(sa.bindparam(None, value, type_=_bind_type(kind, None))), None

    def param(
        self, value: object, ctype: types.ColumnType, column: sqltypes.Expression | None
    ) -> sa.BindParameter[object]:
        value = types.coerce(value, ctype)
        if ctype is T.TIMESTAMP and isinstance(value, datetime) and _naive_column(column):
            value = value.astimezone(UTC).replace(tzinfo=None)
        return sa.bindparam(None, value, type_=_bind_type(ctype, column))

    def resolve(self, value: ast.ValueExpr) -> object:
        return value.bounded(self.now) if isinstance(value, ast.Relative) else value.value

    def compare(self, node: ast.Compare) -> Clause:
        assert node.ctype is not None
        left, column = self.left(node.left, node.ctype)
        op = "=" if node.op == "!=" else node.op
        resolved = self.resolve(node.right)
        test: Clause
        if isinstance(resolved, types.Beyond):
            # Past an end of the calendar: every value is before (or after) it, none equal.
            holds = op in ("<", "<=") if resolved.later else op in (">", ">=")
            test = sa.true() if holds else sa.false()
            guarded = sa.and_(left.is_not(None), test).self_group()
            return sa.not_(guarded) if node.op == "!=" else guarded
        right = self.param(resolved, node.ctype, column)
        if op == "contains":
            test = _Contains(left, right)
        elif op == "starts with":
            test = _StartsWith(left, right)
        elif op == "=":
            test = left == right
        else:
            ordered = _CodePointOrder(left) if node.ctype is T.TEXT else left
            test = {
                "<": ordered < right,
                "<=": ordered <= right,
                ">": ordered > right,
                ">=": ordered >= right,
            }[op]
        guarded = sa.and_(left.is_not(None), test).self_group()
        return sa.not_(guarded) if node.op == "!=" else guarded

    def in_(self, node: ast.In) -> Clause:
        assert node.ctype is not None
        left, column = self.left(node.left, node.ctype)
        params = [self.param(v.value, node.ctype, column) for v in node.values]
        guarded = sa.and_(left.is_not(None), left.in_(params)).self_group()
        return sa.not_(guarded) if node.negated else guarded


def build(
    node: ast.Node, table: sa.Table, now: datetime, event: shapes.Payload | None = None
) -> Clause:
    """The boolean clause of a node already typed against ``table``'s columns."""
    return Builder(table, now, event).clause(node)
