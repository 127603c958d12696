"""Statements the worker sends on every step, built once and executed with parameters.

Building a SQLAlchemy statement (and its cache key) costs far more than executing a
prepared one — about 200 µs against 20 µs here — and a step sends a dozen. Each entry
is keyed by what makes it differ (the dialect, which optional clauses it has).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
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
