"""The type check: fits each comparison to its column's type and records the type compared.

With known columns, an unknown column, a value that cannot be the column's type, or an
operator that does not fit it is a ``QueryError`` at the position of the culprit. Without
columns, the value decides the type (``amount > 5`` compares numbers). Either way every
``Compare``/``In`` leaves with ``ctype`` set, which both the evaluator and the SQL builder use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, time

from flowrunner import errors
from flowrunner.foundations import suggest
from flowrunner.query import ast, parser, types

T = types.ColumnType


def _error(message: str, where: ast.Ref | ast.ValueExpr, text: str | None) -> errors.QueryError:
    return errors.QueryError(
        message, line=where.line, column=where.column, found=str(where), text=text
    )


def check(
    node: ast.Node,
    columns: Mapping[str, types.ColumnType] | None,
    *,
    event: bool = False,
    text: str | None = None,
) -> ast.Node:
    """``node`` with every comparison typed; raises ``QueryError`` for what does not fit."""
    return _Checker(columns, event, text).node(node)


def fit_value(
    value: ast.ValueExpr, column_type: types.ColumnType, text: str | None, subject: str
) -> ast.ValueExpr:
    """``value`` converted to ``column_type`` (``'12'`` for a number becomes 12), or an error."""
    if isinstance(value, ast.Relative):
        if column_type is T.TIMESTAMP:
            return dataclasses.replace(value, as_timestamp=True)
        if value.type is column_type:
            return value
        if column_type is T.DATE:
            raise _error(
                f"{subject} is a date, and {value} is a moment — compare it with today(), "
                "e.g. today() + 2 days",
                value,
                text,
            )
        raise _error(f"{subject} holds {column_type.noun}, not a date", value, text)
    if value.type is None or value.type is column_type:
        return value
    converted: object = None
    if value.type is T.TEXT:
        converted = types.coerce(value.value, column_type)
        if column_type is T.NUMBER and converted is not None:
            converted = parser.read_number(value.value.strip(), value, text or "")
    elif value.type is T.NUMBER and column_type is T.TEXT:
        converted = ast.render_value(value.value)
    elif value.type is T.DATE and column_type is T.TIMESTAMP:
        converted = datetime.combine(value.value, time(), UTC)
    if converted is None:
        if value.type is T.TEXT and types.outside_calendar(value.value):
            raise _error(parser.outside_calendar(value.value), value, text)
        raise _error(
            f"{subject} holds {column_type.noun}, and {value} is not {column_type.noun}",
            value,
            text,
        )
    return dataclasses.replace(value, value=converted, type=column_type)


class _Checker:
    def __init__(
        self, columns: Mapping[str, types.ColumnType] | None, event: bool, text: str | None
    ) -> None:
        self.columns = columns
        self.event = event
        self.text = text

    def node(self, node: ast.Node) -> ast.Node:
        if isinstance(node, ast.And):
            return ast.And(tuple(self.node(i) for i in node.items))
        if isinstance(node, ast.Or):
            return ast.Or(tuple(self.node(i) for i in node.items))
        if isinstance(node, ast.Not):
            return ast.Not(self.node(node.item))
        if isinstance(node, ast.IsNull):
            self.column_type(node.left)
            return node
        if isinstance(node, ast.In):
            return self.in_(node)
        return self.compare(node)

    def column_type(self, ref: ast.Ref) -> types.ColumnType | None:
        """The known type of ``ref``; None for event fields and when columns are unknown."""
        if ref.scope != "record":
            if ref.scope == "event" and self.event:
                return None
            if ref.scope == "event":
                message = "event fields can only be used in a wait's condition"
            else:
                message = f"'{ref}' is not a column — a dotted name can only be event.<field>"
            raise _error(message, ref, self.text)
        if self.columns is None:
            return None
        found = self.columns.get(ref.name)
        if found is None:
            names = sorted(self.columns)
            hint = suggest.did_you_mean(ref.name, names)
            listing = ", ".join(names) if names else "(none)"
            raise _error(
                f"unknown column '{ref.name}'{hint} The columns are: {listing}"
                if hint
                else f"unknown column '{ref.name}' — the columns are: {listing}",
                ref,
                self.text,
            )
        return found

    def compare(self, node: ast.Compare) -> ast.Compare:
        known = self.column_type(node.left)
        subject = f"'{node.left}'"
        if node.op in ast.TEXT_OPS:
            if known is not None and known is not T.TEXT:
                raise _error(
                    f"'{node.op}' looks inside text, and {subject} holds {known.noun}",
                    node.left,
                    self.text,
                )
            right = fit_value(node.right, T.TEXT, self.text, subject)
            return dataclasses.replace(node, right=right, ctype=T.TEXT)
        ctype = known if known is not None else node.right.type
        assert ctype is not None  # null was refused by the parser
        if node.op in ast.ORDER_OPS and ctype is T.BOOLEAN:
            raise _error(
                f"'{node.op}' does not order true and false — use = or !=",
                node.left if known is not None else node.right,
                self.text,
            )
        right = fit_value(node.right, ctype, self.text, subject)
        return dataclasses.replace(node, right=right, ctype=ctype)

    def in_(self, node: ast.In) -> ast.In:
        known = self.column_type(node.left)
        ctype = known if known is not None else node.values[0].type
        assert ctype is not None
        subject = f"'{node.left}'"
        values: list[ast.Literal] = []
        for value in node.values:
            if known is None and value.type is not ctype:
                raise _error(
                    f"a list holds values of one kind: {node.values[0]} is {ctype.noun}, "
                    f"{value} is not",
                    value,
                    self.text,
                )
            fitted = fit_value(value, ctype, self.text, subject)
            assert isinstance(fitted, ast.Literal)
            values.append(fitted)
        return dataclasses.replace(node, values=tuple(values), ctype=ctype)
