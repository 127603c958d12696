"""PostgreSQL connections that outlive a test's engine, for the next test's.

Each PostgreSQL test has an engine of its own, on a schema of its own. A new connection
is a new server process, whose caches of the catalog start cold: reading the first few
tables costs it tens of milliseconds of the server's time (reflecting an application's
three tables: about 40 ms cold, 2 ms warm). So a test engine's connections are not
closed when the engine is disposed of: they are wiped (``DISCARD ALL``: settings,
prepared statements, LISTEN, advisory locks, temporary tables) and kept, and the next
test's engine takes one, pointed at its own schema. A connection in any doubt (broken,
closed, an error while wiping it) is closed for real.

Only the fixtures' engines take part (``tests/conftest.py``); engines a test makes from a
URL, and every process a test starts, open connections of their own as an application's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.conninfo import make_conninfo

# At most this many kept: more than the connections one test's engine holds at once.
KEPT_AT_MOST = 8

_kept: dict[str, list[psycopg.Connection[Any]]] = {}
# psycopg prepares a statement it has run five times, and forgets what it prepared when it
# sees DISCARD ALL succeed -- but only the first time it sees that text: the next time the
# same text is one it already counted, and it would keep names the server no longer has
# ("prepared statement _pg3_0 does not exist"). So each wipe's text is its own.
_wipes = itertools.count()


class _Kept(psycopg.Connection[Any]):
    """A connection that, closed by its engine, goes back to the kept ones if it can."""

    server: str = ""

    def close(self) -> None:
        if not _keep(self):
            super().close()


def connector(url: sa.URL, schema: str, options: str) -> Callable[[], psycopg.Connection[Any]]:
    """An engine's ``creator``: a kept connection of the same server set to ``schema``,
    or a new one opened with ``options`` (its search path and settings)."""
    server = url.set(query={}).render_as_string(hide_password=False)
    given: dict[str, Any] = {
        "host": url.host,
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "dbname": url.database,
    }
    conninfo = make_conninfo("", **{k: v for k, v in given.items() if v is not None})

    def connect() -> psycopg.Connection[Any]:
        kept = _kept.get(server, [])
        while kept:
            conn = kept.pop()
            try:
                conn.execute(
                    "SELECT set_config('search_path', %s, false),"
                    " set_config('synchronous_commit', 'off', false)",
                    (schema,),
                )
                conn.commit()
            except psycopg.Error:
                psycopg.Connection.close(conn)
                continue
            return conn
        made = _Kept.connect(conninfo, options=options)
        made.server = server
        return made

    return connect


def close_all() -> None:
    """Close every kept connection (at the end of the test process)."""
    for kept in _kept.values():
        for conn in kept:
            psycopg.Connection.close(conn)
        kept.clear()


def _keep(conn: _Kept) -> bool:
    kept = _kept.setdefault(conn.server, [])
    if conn.closed or conn.broken or len(kept) >= KEPT_AT_MOST:
        return False
    try:
        conn.rollback()
        conn.autocommit = True
        conn.execute(f"DISCARD ALL /* wipe {next(_wipes)} */".encode())
        conn.autocommit = False
    except psycopg.Error:
        return False
    kept.append(conn)
    return True
