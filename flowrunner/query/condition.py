"""``Condition``: a parsed, checked condition, evaluated in Python or compiled to SQL."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import sqlalchemy as sa

from flowrunner.foundations import shapes
from flowrunner.query import ast, check, evaluate, sql, types

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _CompiledPerInstance(Generic[_P, _R]):
    """A method that each instance replaces, on first access, with a function made for it.

    ``make(instance)`` returns a plain function taking the method's arguments (without
    ``self``); it is stored in the instance's ``__dict__``, where later reads find it
    before this (non-data) descriptor. A call then costs one Python call, where a method
    that calls the compiled function costs two — half the speed on a tight loop.
    Read on the class, the attribute is the method as written, docstring and all.
    """

    def __init__(
        self,
        method: Callable[Concatenate[Condition, _P], _R],
        make: Callable[[Condition], Callable[..., Any]],
    ) -> None:
        self.method = method
        self.make = make
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(
        self, instance: None, owner: type[Condition]
    ) -> Callable[Concatenate[Condition, _P], _R]: ...

    @overload
    def __get__(self, instance: Condition, owner: type[Condition]) -> Callable[_P, _R]: ...

    def __get__(
        self, instance: Condition | None, owner: type[Condition]
    ) -> Callable[Concatenate[Condition, _P], _R] | Callable[_P, _R]:
        if instance is None:
            return self.method
        function = self.make(instance)
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(function, attribute, getattr(self.method, attribute))
        vars(instance)[self.name] = function
        return function


def _compiled_per_instance(
    make: Callable[[Condition], Callable[..., Any]],
) -> Callable[[Callable[Concatenate[Condition, _P], _R]], _CompiledPerInstance[_P, _R]]:
    """Decorate a method whose fast version, with the same parameters, is ``make(instance)``."""

    def decorate(
        method: Callable[Concatenate[Condition, _P], _R],
    ) -> _CompiledPerInstance[_P, _R]:
        return _CompiledPerInstance(method, make)

    return decorate


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
        return self._names("record")

    @functools.cached_property
    def event_fields(self) -> frozenset[str]:
        """The fields of the event the condition reads (``event.decision`` → ``decision``)."""
        return self._names("event")

    def _names(self, scope: str) -> frozenset[str]:
        return frozenset(
            n.left.name
            for n in ast.walk(self.node)
            if isinstance(n, ast.Compare | ast.In | ast.IsNull) and n.left.scope == scope
        )

    @functools.cached_property
    def _compiled(self) -> evaluate.Compiled:
        return evaluate.Compiled(self.node)

    def evaluator(
        self, now: datetime | None = None, event: shapes.Payload | None = None
    ) -> Callable[[shapes.Row], bool]:
        """A function of one record, for testing many records at the same ``now``.

        >>> from datetime import UTC, datetime
        >>> from flowrunner import query
        >>> overdue = query.parse("due_at < now()").evaluator(datetime(2026, 3, 2, tzinfo=UTC))
        >>> rows = [{"id": 1, "due_at": datetime(2026, 3, 1, tzinfo=UTC)}, {"id": 2}]
        >>> [row["id"] for row in rows if overdue(row)]
        [1]
        """
        compiled = self._compiled
        if not compiled.relatives and event is None:
            return compiled.function
        resolved = compiled.resolve(now) if compiled.relatives else ()
        return functools.partial(compiled.function, event=event or evaluate.EMPTY, n=resolved)

    # `condition.matches` is the compiled function itself, as fast as a hand-written lambda.
    @_compiled_per_instance(lambda condition: condition._compiled.matches)
    def matches(
        self,
        record: shapes.Row,
        now: datetime | None = None,
        event: shapes.Payload | None = None,
    ) -> bool:
        """Whether ``record`` (column → value) satisfies the condition at ``now`` (UTC).

        ``now`` (default: the time now) is what ``now()`` and ``today()`` mean;
        ``event`` is what ``event.<field>`` reads.

        >>> from datetime import UTC, datetime
        >>> from flowrunner import query
        >>> late = query.parse("due_at < now() and event.decision = approved", event=True)
        >>> now, yes = datetime(2026, 3, 2, tzinfo=UTC), {"decision": "approved"}
        >>> late.matches({"due_at": datetime(2026, 3, 1, tzinfo=UTC)}, now, event=yes)
        True
        >>> late.matches({"due_at": None}, now, event=yes)
        False
        """
        return self._compiled.matches(record, now, event)

    def __getstate__(self) -> dict[str, object]:
        # What was compiled from the node (``_compiled``, ``matches``) is made again on use.
        return {
            "node": self.node,
            "text": self.text,
            "types": self.types,
            "event": self.event,
        }

    def to_sql(
        self,
        table: sa.Table,
        now: datetime | None = None,
        event: shapes.Payload | None = None,
    ) -> sa.ColumnElement[bool]:
        """A boolean clause over ``table`` that holds for exactly the rows ``matches`` accepts.

        The condition is checked against the table's columns first (``QueryError``).
        """
        typed = check.check(self.node, types.column_types(table), event=self.event, text=self.text)
        return sql.build(typed, table, now or datetime.now(UTC), event)
