"""Every difference between SQLite and PostgreSQL that the store relies on, in one place.

- transactions: SQLite takes its write lock up front (``BEGIN IMMEDIATE``) with a
  busy timeout and WAL; PostgreSQL uses ordinary READ COMMITTED transactions;
- row claims: PostgreSQL ``FOR UPDATE SKIP LOCKED``; SQLite has no row locks (and
  SQLAlchemy silently drops the clause), so there the immediate transaction serializes;
- inserts that may collide: ``INSERT … ON CONFLICT`` through each dialect's construct;
- JSON: JSONB on PostgreSQL, JSON on SQLite (timestamps: ``flowrunner.sqltypes.UTCDateTime``);
- time limits: PostgreSQL's ``statement_timeout`` and ``lock_timeout``, local to a
  transaction; SQLite has only its busy timeout.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

# How long a SQLite writer waits for another's lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 15_000
# The execution option that asks for BEGIN IMMEDIATE on SQLite.
_IMMEDIATE = "flowrunner_begin_immediate"


def json_type() -> sa.types.TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL; Python ``None`` is SQL NULL."""
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def is_sqlite(bind: sa.Engine | sa.Connection) -> bool:
    return bind.dialect.name == "sqlite"


_PREPARED = "flowrunner_sqlite_prepared"


def _prepare_sqlite(dbapi_connection: sqlite3.Connection) -> None:
    # Take transaction control from the sqlite3 driver (which would otherwise begin
    # only before DML) so that BEGIN, and BEGIN IMMEDIATE, are ours to emit.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        # WAL lets readers go on while one writer writes; in-memory databases refuse it.
        cursor.execute("PRAGMA journal_mode = WAL")
    finally:
        cursor.close()


def _on_connect(dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        _prepare_sqlite(dbapi_connection)
        record.info[_PREPARED] = True


def _on_begin(conn: sa.Connection) -> None:
    pooled = conn.connection
    raw = pooled.dbapi_connection
    if isinstance(raw, sqlite3.Connection) and not pooled.info.get(_PREPARED):
        # A connection pooled before prepare_engine ran.
        _prepare_sqlite(raw)
        pooled.info[_PREPARED] = True
    immediate = conn.get_execution_options().get(_IMMEDIATE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def prepare_engine(engine: sa.Engine) -> sa.Engine:
    """Install the SQLite transaction handling on ``engine`` (once; a no-op elsewhere).

    The runner calls this when it is mounted. On SQLite it makes every transaction
    a real one (SQLAlchemy emits BEGIN) and lets ``begin()`` ask for BEGIN IMMEDIATE.
    """
    if engine.dialect.name != "sqlite":
        return engine
    if not event.contains(engine, "connect", _on_connect):
        event.listen(engine, "connect", _on_connect)
    if not event.contains(engine, "begin", _on_begin):
        event.listen(engine, "begin", _on_begin)
    return engine


@contextmanager
def begin(engine: sa.Engine, *, immediate: bool = True) -> Iterator[sa.Connection]:
    """A transaction that, on SQLite, holds the write lock from its first statement.

    Taking the lock up front means two SQLite writers queue (up to the busy timeout)
    instead of failing when a read turns into a write; on PostgreSQL this is an
    ordinary transaction and row locks do the work.
    """
    prepare_engine(engine)
    with engine.connect() as conn:
        if immediate and is_sqlite(conn):
            conn = conn.execution_options(**{_IMMEDIATE: True})
        with conn.begin():
            yield conn


def insert_statement(conn: sa.Connection, table: sa.Table) -> Any:
    """The dialect's INSERT, which knows ON CONFLICT."""
    return _insert(conn, table)


def _insert(conn: sa.Connection, table: sa.Table) -> Any:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite_dialect.insert(table)
    raise NotImplementedError(f"flowrunner supports SQLite and PostgreSQL, not {conn.dialect.name}")


def insert_ignore(
    conn: sa.Connection,
    table: sa.Table,
    values: Mapping[str, Any],
    *,
    conflict: Sequence[str],
    returning: sa.Column[Any] | None = None,
) -> Any:
    """Insert a row unless one with the same ``conflict`` columns exists.

    Returns the ``returning`` column's value (default: the first conflict column)
    when inserted, None when not. RETURNING tells, where a driver's row count for
    INSERT may be -1.
    """
    column = table.c[conflict[0]] if returning is None else returning
    stmt = _insert(conn, table).values(**values).on_conflict_do_nothing(index_elements=conflict)
    return conn.execute(stmt.returning(column)).scalar_one_or_none()


def upsert(
    conn: sa.Connection,
    table: sa.Table,
    values: Mapping[str, Any],
    *,
    conflict: Sequence[str],
    update: Mapping[str, Any],
    where: sa.ColumnElement[bool] | None = None,
    returning: sa.ColumnElement[Any] | None = None,
) -> int:
    """Insert a row, or update the existing one with ``update`` (only where ``where`` holds).

    In ``update`` and ``where``, ``excluded(table).c.x`` names the value that was offered.
    ``returning`` is evaluated for the row written (a wake-up, ``store.wakeups.wake``).
    Returns the row count.
    """
    stmt = _insert(conn, table).values(**values)
    stmt = stmt.on_conflict_do_update(index_elements=conflict, set_=dict(update), where=where)
    if returning is not None:
        stmt = stmt.returning(returning)
    return int(conn.execute(stmt).rowcount)


def excluded(conn: sa.Connection, table: sa.Table) -> Any:
    """The ``excluded`` pseudo-table of an upsert on ``table`` (the offered row)."""
    return _insert(conn, table).excluded


def skip_locked(bind: sa.Connection | sa.Engine, select: sa.Select[Any]) -> sa.Select[Any]:
    """Lock the selected rows, skipping ones other transactions hold (PostgreSQL only)."""
    if bind.dialect.name == "postgresql":
        return select.with_for_update(skip_locked=True)
    return select


def lock_for_transaction(conn: sa.Connection, key: str) -> None:
    """Hold a lock named ``key`` until the transaction ends (PostgreSQL advisory lock).

    SQLite needs none: a writing transaction already holds the whole database.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(lock_id(key))))


def lock_id(key: str) -> int:
    """The 64-bit advisory lock number of ``key`` (stable across processes and versions)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def epoch_start() -> datetime:
    """A moment before any lease: what a released lease expires at."""
    return datetime(1970, 1, 1, tzinfo=UTC)


@contextmanager
def statement_time_limited(conn: sa.Connection, limit: timedelta | None) -> Iterator[None]:
    """Inside the block, PostgreSQL cancels any statement on ``conn`` running past ``limit``.

    ``statement_timeout`` is set local to the transaction and put back when the block
    ends normally; a block left by an exception must roll back to a savepoint taken
    before it, which puts it back too. SQLite cannot cut a statement this way: there the
    block changes nothing.
    """
    if limit is None or conn.dialect.name != "postgresql":
        yield
        return
    setting = sa.func.current_setting("statement_timeout")
    before = conn.execute(sa.select(setting)).scalar_one()
    _set_local(conn, "statement_timeout", limit)
    yield
    conn.execute(sa.select(sa.func.set_config("statement_timeout", before, True)))


def limit_lock_wait(conn: sa.Connection, limit: timedelta) -> None:
    """For the rest of the transaction, a statement waits at most ``limit`` for a row lock.

    PostgreSQL's ``lock_timeout``; on SQLite the busy timeout applies (its writers queue
    for the whole database).
    """
    if conn.dialect.name == "postgresql":
        _set_local(conn, "lock_timeout", limit)


def _set_local(conn: sa.Connection, name: str, limit: timedelta) -> None:
    milliseconds = max(1, math.ceil(limit.total_seconds() * 1000))
    conn.execute(sa.select(sa.func.set_config(name, str(milliseconds), True)))


def integer_range(conn: sa.Connection, type_: sa.types.TypeEngine[Any]) -> tuple[int, int]:
    """The whole numbers a column of the integer ``type_`` holds on ``conn``'s database.

    SQLite keeps every integer in 64 bits. PostgreSQL's SMALLINT, INTEGER and BIGINT hold
    16, 32 and 64, and comparing one with a number beyond them is an error there (which
    aborts the transaction), not a row that is missing.
    """
    bits = 64
    if not is_sqlite(conn):
        if isinstance(type_, sa.SmallInteger):
            bits = 16
        elif not isinstance(type_, sa.BigInteger):
            bits = 32
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def database_clock(bind: sa.Connection | sa.Engine) -> sa.ColumnElement[datetime] | None:
    """The database's own clock where it judges leases, or None where the caller's does.

    PostgreSQL: ``clock_timestamp()``, one clock for every worker on every host, so a
    worker whose clock is wrong cannot take a lease that is still running. SQLite serves
    one host, whose process clock the caller passes.
    """
    if bind.dialect.name == "postgresql":
        return postgres_clock()
    return None


def postgres_clock() -> sa.ColumnElement[datetime]:
    """PostgreSQL's clock as leases read it (``database_clock`` on a PostgreSQL bind)."""
    return sa.func.clock_timestamp(type_=sa.DateTime(timezone=True))


# The SQLSTATE of a write refused because the server is read-only: after a failover,
# connections still open to the old primary, now a standby, meet it on every write.
_READ_ONLY_SQL_TRANSACTION = "25006"


def _read_only_is_a_disconnect(context: sa.engine.ExceptionContext) -> None:
    if getattr(context.original_exception, "sqlstate", None) == _READ_ONLY_SQL_TRANSACTION:
        context.is_disconnect = True


def reconnect_when_read_only(engine: sa.Engine) -> sa.Engine:
    """Have ``engine`` drop its connections when PostgreSQL refuses a write as read-only.

    Such a connection reached a standby (a failover moved the primary): like a cut one,
    it is invalidated, with the rest of the pool, so the next try connects anew.
    """
    if engine.dialect.name == "postgresql" and not event.contains(
        engine, "handle_error", _read_only_is_a_disconnect
    ):
        event.listen(engine, "handle_error", _read_only_is_a_disconnect)
    return engine
