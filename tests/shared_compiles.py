"""One cache of compiled statements for every engine a test process makes.

SQLAlchemy keeps the statements it has compiled (their SQL, their parameters' order) in
a cache of each engine's own, keyed by the engine's dialect. An application makes one
engine and compiles each statement once. The tests make a new engine for nearly every
test (a SQLite file, a PostgreSQL schema of its own), so every test compiled every
statement it sent again: an eighth of the test processes' time.

Here every engine the test process makes is given one shared cache, in which a dialect
stands for every other of the same class and the same settings (the same SQLite
library, the same PostgreSQL server): what they compile a statement into is the same
SQL with the same parameters. What one engine's schema is (each PostgreSQL test's search
path) is no part of the SQL. Every statement still runs for real on its own database.

Worker processes a test starts compile their own, as an application's do.
"""

from __future__ import annotations

import threading
import types
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy.util import LRUCache

# What a dialect's own settings are: the values it holds, and the kind of each helper
# object it holds (its identifier quoting, its type compiler: one of its own each); a
# function it was given (a JSON serializer) by identity. Its default schema (each
# PostgreSQL test's search path) never reaches a compiled statement's text.
_PLAIN = (str, int, float, bool, bytes, type(None), tuple, frozenset)
_NOT_SETTINGS = frozenset({"default_schema_name"})


def settings(dialect: sa.Dialect) -> tuple[object, ...]:
    """What makes two dialects compile a statement alike: their class and settings."""
    held: list[tuple[object, ...]] = []
    for name, value in sorted(vars(dialect).items()):
        if name in _NOT_SETTINGS:
            continue
        if isinstance(value, _PLAIN):
            held.append((name, value))
        elif isinstance(value, types.FunctionType | types.BuiltinFunctionType | types.MethodType):
            held.append((name, "function", id(value)))
        else:
            held.append((name, type(value)))
    return (type(dialect), tuple(held))


class Compiles(LRUCache[Any, Any]):
    """SQLAlchemy's compiled cache, its keys' dialect replaced by the first dialect of the
    same settings that the cache met (``settings``)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._standing: weakref.WeakKeyDictionary[sa.Dialect, sa.Dialect] = (
            weakref.WeakKeyDictionary()
        )
        self._first: dict[tuple[object, ...], sa.Dialect] = {}
        self._meeting = threading.Lock()

    def _shared(self, key: Any) -> Any:
        # SQLAlchemy's key: (dialect, the statement's cache key, column keys, ...).
        if not (isinstance(key, tuple) and key and isinstance(key[0], sa.Dialect)):
            return key
        dialect = key[0]
        standing = self._standing.get(dialect)
        if standing is None:
            with self._meeting:
                standing = self._first.setdefault(settings(dialect), dialect)
                self._standing[dialect] = standing
        return (standing, *key[1:])

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(self._shared(key), default)

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._shared(key), value)

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._shared(key))


# Large enough for every distinct statement the suite sends in one process.
COMPILES = Compiles(20_000)


def _share(conn: sa.Connection) -> None:
    """Each connection of every engine compiles into ``COMPILES``."""
    if conn.get_execution_options().get("compiled_cache") is not COMPILES:
        conn.execution_options(compiled_cache=COMPILES)
    engine = conn.engine
    if engine.get_execution_options().get("compiled_cache") is not COMPILES:
        engine.update_execution_options(compiled_cache=COMPILES)


def install() -> None:
    """From now on, every engine this process makes shares ``COMPILES``."""
    if not sa.event.contains(sa.engine.Engine, "engine_connect", _share):
        sa.event.listen(sa.engine.Engine, "engine_connect", _share)
