"""``Condition``: a parsed, checked condition, evaluated in Python or compiled to SQL."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from flowrunner.query import ast, check, evaluate, sql, types


class Condition:
    """A condition such as ``status = open and amount > 100``.

    Two conditions are equal when their ASTs are; ``str()`` is the canonical text, and
    ``parse(str(c)) == c``.

    >>> from flowrunner import query
    >>> c = query.parse("status = open and amount > 100")
    >>> c.matches({"status": "open", "amount": 250})
    True
    >>> str(c)
    "status = 'open' and amount > 100"
    """

    def __init__(
        self,
        node: ast.Node,
        *,
        text: str | None = None,
        columns: Mapping[str, types.ColumnType] | None = None,
        event: bool = False,
    ) -> None:
        self.node = node
        self.text = text if text is not None else str(node)
        self.types = dict(columns) if columns is not None else None
        self.event = event

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Condition) and self.node == other.node

    def __hash__(self) -> int:
        return hash(self.node)

    def __str__(self) -> str:
        return str(self.node)

    def __repr__(self) -> str:
        return f"Condition({str(self)!r})"

    @functools.cached_property
    def columns(self) -> frozenset[str]:
        """The record columns the condition reads."""
        return frozenset(
            n.left.name
            for n in ast.walk(self.node)
            if isinstance(n, ast.Compare | ast.In | ast.IsNull) and n.left.scope == "record"
        )

    @functools.cached_property
    def event_fields(self) -> frozenset[str]:
        """The fields of the event the condition reads (``event.decision`` → ``decision``)."""
        return frozenset(
            n.left.name
            for n in ast.walk(self.node)
            if isinstance(n, ast.Compare | ast.In | ast.IsNull) and n.left.scope == "event"
        )

    @functools.cached_property
    def _compiled(self) -> evaluate.Compiled:
        return evaluate.Compiled(self.node)

    def evaluator(
        self, now: datetime | None = None, event: Mapping[str, Any] | None = None
    ) -> Callable[[Mapping[str, Any]], bool]:
        """A function of one record, for testing many records at the same ``now``."""
        compiled = self._compiled
        if not compiled.relatives and event is None:
            return compiled.function
        resolved = compiled.resolve(now or datetime.now(UTC)) if compiled.relatives else ()
        return functools.partial(compiled.function, e=event or evaluate._EMPTY, n=resolved)

    def matches(
        self,
        record: Mapping[str, Any],
        now: datetime | None = None,
        event: Mapping[str, Any] | None = None,
    ) -> bool:
        """Whether ``record`` (column → value) satisfies the condition at ``now`` (UTC)."""
        compiled = self._compiled
        if compiled.relatives:
            resolved = compiled.resolve(now or datetime.now(UTC))
            return compiled.function(record, event or evaluate._EMPTY, resolved)
        return compiled.function(record, event or evaluate._EMPTY)

    def to_sql(
        self,
        table: sa.Table,
        now: datetime | None = None,
        event: Mapping[str, Any] | None = None,
    ) -> sa.ColumnElement[bool]:
        """A boolean clause over ``table`` that holds for exactly the rows ``matches`` accepts.

        The condition is checked against the table's columns first (``QueryError``).
        """
        typed = check.check(self.node, types.column_types(table), event=self.event, text=self.text)
        return sql.build(typed, table, now or datetime.now(UTC), event)
