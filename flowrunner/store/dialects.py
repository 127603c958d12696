"""Every difference between SQLite and PostgreSQL that the store relies on, in one place.

- transactions: SQLite takes its write lock up front (``BEGIN IMMEDIATE``) with a
  busy timeout and WAL; PostgreSQL uses ordinary READ COMMITTED transactions;
- row claims: PostgreSQL ``FOR UPDATE SKIP LOCKED``; SQLite has no row locks (and
  SQLAlchemy silently drops the clause), so there the immediate transaction serializes;
- inserts that may collide: ``INSERT … ON CONFLICT`` through each dialect's construct;
- JSON: JSONB on PostgreSQL, JSON on SQLite (timestamps: ``foundations.sqltypes.UTCDateTime``);
- time limits: PostgreSQL's ``statement_timeout`` and ``lock_timeout``, local to a
  transaction; SQLite has only its busy timeout.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from flowrunner.foundations import shapes, sqltypes

# How long a SQLite writer waits for another's lock before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 15_000
# The execution option that asks for BEGIN IMMEDIATE on SQLite.
_IMMEDIATE = "flowrunner_begin_immediate"

# What a statement is sent with, as its driver takes it: one row's values, by position
# or by name, or (``many``) a list of such rows. The driver judges them (SQLite's stubs
# type each of these cases apart), so they are left to it.
DriverParams: TypeAlias = Any
# A row as a driver gives it back: its values by position, of whatever column types.
DriverRow: TypeAlias = Sequence[Any]
# An INSERT that knows ON CONFLICT: each dialect has its own.
Upsertable: TypeAlias = postgresql.Insert | sqlite_dialect.Insert


def json_type() -> sqltypes.SqlType:
    """JSON on SQLite, JSONB on PostgreSQL; Python ``None`` is SQL NULL."""
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def is_sqlite(bind: sa.Engine | sa.Connection) -> bool:
    return bind.dialect.name == "sqlite"


_PREPARED = "flowrunner_sqlite_prepared"


def _prepare_sqlite(dbapi_connection: sqlite3.Connection | DBAPIConnection) -> None:
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
    # Listened to on SQLite engines only: the driver is sqlite3, or aiosqlite under an
    # AsyncEngine (SQLAlchemy's adapter of it has sqlite3's isolation_level and cursor).
    _prepare_sqlite(dbapi_connection)
    record.info[_PREPARED] = True


def _on_begin(conn: sa.Connection) -> None:
    pooled = conn.connection
    raw = pooled.dbapi_connection
    if raw is not None and not pooled.info.get(_PREPARED):
        # A connection pooled before prepare_engine ran.
        _prepare_sqlite(raw)
        pooled.info[_PREPARED] = True
    immediate = conn.get_execution_options().get(_IMMEDIATE, False)
    _control(conn, "BEGIN IMMEDIATE" if immediate else "BEGIN")


def prepare_engine(engine: sa.Engine) -> sa.Engine:
    """Install the SQLite transaction handling on ``engine`` (once).

    The runner calls this when it is mounted. On SQLite it makes every transaction
    a real one (SQLAlchemy emits BEGIN) and lets ``begin()`` ask for BEGIN IMMEDIATE.
    An AsyncEngine's ``sync_engine`` on aiosqlite takes it too
    (``flowrunner.engine.async_engines.prepare``): without it a savepoint that opens a
    transaction commits when released.
    Elsewhere it counts the statements each connection sends (``write_mark``).
    """
    if engine.dialect.name != "sqlite":
        if not event.contains(engine, "before_cursor_execute", _count_sent):
            event.listen(engine, "before_cursor_execute", _count_sent)
        return engine
    if not event.contains(engine, "connect", _on_connect):
        event.listen(engine, "connect", _on_connect)
    if not event.contains(engine, "begin", _on_begin):
        event.listen(engine, "begin", _on_begin)
    return engine


# Where a connection counts the statements it sent (on databases other than SQLite).
_SENT = "flowrunner_statements_sent"


def _count_sent(conn: sa.Connection, *_: object) -> None:
    info = conn.info
    info[_SENT] = info.get(_SENT, 0) + 1


def write_mark(conn: sa.Connection) -> int | None:
    """A number that moves whenever ``conn`` may have written since it was last taken.

    SQLite counts the rows its connection changed (``total_changes``: inserted, updated
    or deleted, by triggers too); elsewhere the statements the connection sent are
    counted (``prepare_engine``), reads too. None when neither is known: assume a write.
    """
    raw = conn.connection.dbapi_connection
    if isinstance(raw, sqlite3.Connection):
        return raw.total_changes
    if event.contains(conn.engine, "before_cursor_execute", _count_sent):
        return int(conn.info.get(_SENT, 0))
    return None


def wrote_since(conn: sa.Connection, mark: int | None) -> bool:
    """Whether ``conn`` may have written since ``write_mark`` gave ``mark``."""
    return mark is None or write_mark(conn) != mark


@contextmanager
def begin(engine: sa.Engine, *, immediate: bool = True) -> Iterator[sa.Connection]:
    """A transaction that, on SQLite, holds the write lock from its first statement.

    Taking the lock up front means two SQLite writers queue (up to the busy timeout)
    instead of failing when a read turns into a write; on PostgreSQL this is an
    ordinary transaction and row locks do the work.
    """
    with connected(engine, immediate=immediate) as conn, conn.begin():
        yield conn


@contextmanager
def connected(engine: sa.Engine, *, immediate: bool = True) -> Iterator[sa.Connection]:
    """A connection for several transactions in turn (``with conn.begin(): ...`` each),
    which on SQLite hold the write lock from their first statements, as ``begin``'s do."""
    prepare_engine(engine)
    with engine.connect() as conn:
        if immediate and is_sqlite(conn):
            conn = conn.execution_options(**{_IMMEDIATE: True})
        yield conn


class Checkpoints:
    """A transaction on ``conn`` that may be committed part way and go on: each
    ``checkpoint`` commits what was done so far and begins the next transaction on the
    same connection (on SQLite, holding the write lock from its first statement again,
    as the connection asks). ``within`` begins the first one and commits the last,
    or rolls back what followed the last checkpoint when the block raises.

    ``savepoint`` marks where a part of the work begins, to be undone alone: a savepoint,
    or — while the transaction holds nothing yet, just begun or just checkpointed — the
    transaction's own start, which costs no statement (undone, the transaction rolls
    back and the next begins)."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.count = 0
        self.fresh = True  # nothing sent in this transaction since it began

    def checkpoint(self) -> None:
        self.conn.commit()
        self.count += 1
        self.conn.begin()
        self.fresh = True

    def savepoint(self, name: str) -> Savepoint | TransactionStart:
        """Where the work that follows begins; see the class."""
        if self.fresh:
            self.fresh = False
            return TransactionStart(self)
        return Savepoint(self.conn, name)

    def restart(self) -> None:
        """Undo the transaction and begin the next (what follows is not fresh work)."""
        self.conn.rollback()
        self.conn.begin()

    @classmethod
    @contextmanager
    def within(cls, conn: sa.Connection) -> Iterator[Checkpoints]:
        conn.begin()
        try:
            yield cls(conn)
        except BaseException:
            if conn.in_transaction():
                conn.rollback()
            raise
        conn.commit()


class TransactionStart:
    """A ``Checkpoints`` transaction's start standing for a savepoint (the work since is
    all the transaction holds): ``release`` sends nothing, ``rollback`` rolls the
    transaction back and begins the next."""

    def __init__(self, unit: Checkpoints) -> None:
        self.unit = unit

    def release(self) -> None:
        pass

    def rollback(self) -> None:
        self.unit.restart()


@contextmanager
def rolled_back(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction that always rolls back, however it ends (a try of a flow).

    Its statements see its own writes; no other connection ever does. On SQLite it holds
    the write lock from its first statement, as ``begin`` does, so its writes never wait
    on a read turned write. On PostgreSQL a sequence is not transactional: an insert in
    it would still move one (a try inserts nothing).
    """
    prepare_engine(engine)
    with engine.connect() as conn:
        if is_sqlite(conn):
            conn = conn.execution_options(**{_IMMEDIATE: True})
        transaction = conn.begin()
        try:
            yield conn
        finally:
            transaction.rollback()


class Savepoint:
    """A savepoint in ``conn``'s transaction, taken as it is made; sent as plain SQL.

    What ``Connection.begin_nested`` does, without building and compiling a statement
    each time (the worker takes one per run and one per command, a start one per
    record). ``name`` must differ from the savepoints it is nested in. Leave it with
    ``release`` (keep what was done since) or ``rollback`` (undo it); as a context
    manager, an exception rolls back and anything else releases.
    """

    def __init__(self, conn: sa.Connection, name: str) -> None:
        if not name.isidentifier() or not name.isascii():
            raise ValueError(f"a savepoint is named by a plain identifier, not {name!r}")
        self.conn = conn
        self.name = name
        _control(conn, f"SAVEPOINT {name}")

    def release(self) -> None:
        _control(self.conn, f"RELEASE SAVEPOINT {self.name}")

    def rollback(self) -> None:
        _control(self.conn, f"ROLLBACK TO SAVEPOINT {self.name}")
        _control(self.conn, f"RELEASE SAVEPOINT {self.name}")

    def __enter__(self) -> Savepoint:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.release()
        elif issubclass(kind, Exception) and not self.conn.invalidated:
            self.rollback()
        # Anything else (a crash, a lost connection) ends the whole transaction anyway.


def _control(conn: sa.Connection, sql: str) -> None:
    """Send a statement without parameters or rows (a savepoint's) on ``conn``.

    SQLite runs it in the process in well under a microsecond, a fifth of what
    ``exec_driver_sql`` spends around it; there it goes to the driver directly
    (``_sqlite_send``). Elsewhere the round trip is the cost, and ``exec_driver_sql``
    sends it.
    """
    raw = conn.connection.dbapi_connection
    if not isinstance(raw, sqlite3.Connection):
        conn.exec_driver_sql(sql)
        return
    _sqlite_send(conn, raw, sql, None, many=False)


def driver_execute(
    conn: sa.Connection, sql: str, params: DriverParams, *, many: bool = False
) -> tuple[list[DriverRow], int] | None:
    """Send ``sql`` with its driver-ready ``params`` (``many``: a list of them) on SQLite.

    What ``exec_driver_sql`` does there (``_sqlite_send``) in a tenth of its time: the
    rows (all of them, as the driver gives them) and the row count. None where it does
    not apply, and the caller sends it with ``exec_driver_sql``: another driver (a round
    trip costs far more than SQLAlchemy around it), or a connection whose transaction
    has not begun (SQLAlchemy begins it).
    """
    raw = conn.connection.dbapi_connection
    if not isinstance(raw, sqlite3.Connection) or not conn.in_transaction():
        return None
    return _sqlite_send(conn, raw, sql, params, many=many)


def _sqlite_send(
    conn: sa.Connection, raw: sqlite3.Connection, sql: str, params: DriverParams, *, many: bool
) -> tuple[list[DriverRow], int]:
    """Send ``sql`` (``params``: None for none) to SQLite's driver as SQLAlchemy would.

    The connection's ``before_cursor_execute`` and ``after_cursor_execute`` listeners are
    called as SQLAlchemy calls them (without an execution context, which they may be
    given as None); when it has none, as on the worker's path, the statement goes
    straight to the driver. The driver's errors are raised as SQLAlchemy's.
    """
    try:
        if not _listened(conn):
            if params is None:
                sent = raw.execute(sql)
            elif many:
                sent = raw.executemany(sql, params)
            else:
                sent = raw.execute(sql, params)
            return (sent.fetchall() if sent.description is not None else []), sent.rowcount
        return _sqlite_send_told(conn, raw, sql, () if params is None else params, many)
    except sqlite3.Error as error:
        raise sa.exc.DBAPIError.instance(
            sql, params, error, sqlite3.Error, dialect=conn.dialect
        ) from error


def _listened(conn: sa.Connection) -> bool:
    """Whether anyone listens to ``conn``'s statements (on it, its engine or all engines).

    A listener on the connection itself marks it (``_has_events``, which SQLAlchemy reads
    at each of its own event points); else its engine's listeners are all there are, and
    asking the engine is a third of the cost of asking the connection, which joins both.
    """
    dispatch = conn.dispatch if conn._has_events else conn.engine.dispatch
    return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)


def _sqlite_send_told(
    conn: sa.Connection, raw: sqlite3.Connection, sql: str, params: DriverParams, many: bool
) -> tuple[list[DriverRow], int]:
    """``_sqlite_send`` with the connection's listeners told before and after."""
    cursor = raw.cursor()
    try:
        for listener in conn.dispatch.before_cursor_execute:
            sql, params = listener(conn, cursor, sql, params, None, many)
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
        rows = cursor.fetchall() if cursor.description is not None else []
        for listener in conn.dispatch.after_cursor_execute:
            listener(conn, cursor, sql, params, None, many)
        return rows, cursor.rowcount
    finally:
        cursor.close()


def insert_statement(conn: sa.Connection, table: sa.Table) -> Upsertable:
    """The dialect's INSERT, which knows ON CONFLICT."""
    return _insert(conn, table)


def _insert(conn: sa.Connection, table: sa.Table) -> Upsertable:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite_dialect.insert(table)
    raise NotImplementedError(f"flowrunner supports SQLite and PostgreSQL, not {conn.dialect.name}")


def insert_ignore(
    conn: sa.Connection,
    table: sa.Table,
    values: shapes.Row,
    *,
    conflict: Sequence[str],
    returning: sqltypes.TableColumn | None = None,
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
    values: shapes.Row,
    *,
    conflict: Sequence[str],
    update: shapes.Row,
    where: sa.ColumnElement[bool] | None = None,
    returning: sqltypes.Expression | None = None,
) -> int:
    """Insert a row, or update the existing one with ``update`` (only where ``where`` holds).

    In ``update`` and ``where``, ``excluded(table).c.x`` names the value that was offered.
    ``returning`` is evaluated for the row written (a wake-up, ``store.wakeups.wake``).
    Returns the row count.
    """
    stmt = _insert(conn, table).values(**values)
    stmt = stmt.on_conflict_do_update(index_elements=conflict, set_=dict(update), where=where)
    sent: sa.Executable = stmt if returning is None else stmt.returning(returning)
    return int(conn.execute(sent).rowcount)


def excluded(conn: sa.Connection, table: sa.Table) -> sa.ColumnCollection[str, sqltypes.Expression]:
    """The ``excluded`` pseudo-table of an upsert on ``table`` (the offered row)."""
    return _insert(conn, table).excluded


def rows_digest(
    bind: sa.Connection | sa.Engine,
    columns: Sequence[sqltypes.Expression],
    where: sa.ColumnElement[bool],
    order_by: Sequence[sqltypes.Expression],
) -> sa.ScalarSelect[str | None]:
    """One value that differs whenever the rows ``where`` finds differ in any of ``columns``.

    Each row becomes the quoted literals of its values (``quote``/``quote_nullable``: a
    NULL, a number and a text never read alike), the rows are joined in ``order_by``'s
    order; SQLite, in the process, gives that text itself, PostgreSQL its SHA-256. NULL
    when no row is found. Two reads of the same rows give the same value; any change to
    them (an insert, an update, a delete) gives another.
    """
    if bind.dialect.name == "postgresql":
        row = _joined([sa.func.quote_nullable(sa.cast(c, sa.Text)) for c in columns])
        rows = sa.func.string_agg(
            row, postgresql.aggregate_order_by(sa.literal_column("E'\\n'"), *order_by)
        )
        digest = sa.func.encode(sa.func.sha256(sa.func.convert_to(rows, "UTF8")), "hex")
        return sa.select(digest).where(where).scalar_subquery()
    found = (
        sa.select(_joined([sa.func.quote(c) for c in columns]).label("row"))
        .where(where)
        .order_by(*order_by)
        .subquery()
    )
    return sa.select(
        sa.func.group_concat(found.c.row, sa.literal_column("char(10)"))
    ).scalar_subquery()


def _joined(texts: Sequence[sqltypes.Expression]) -> sqltypes.Expression:
    joined = texts[0]
    for text in texts[1:]:
        joined = joined.op("||")(sa.literal_column("','")).op("||")(text)
    return joined


def skip_locked(
    bind: sa.Connection | sa.Engine, select: sqltypes.Query, *, of: sa.Table | None = None
) -> sqltypes.Query:
    """Lock the selected rows (of table ``of`` only, in a join), skipping ones other
    transactions hold (PostgreSQL only)."""
    if bind.dialect.name == "postgresql":
        return select.with_for_update(skip_locked=True, of=of)
    return select


def lock_for_transaction(conn: sa.Connection, key: str) -> None:
    """Hold a lock named ``key`` until the transaction ends (PostgreSQL advisory lock).

    SQLite needs none: a writing transaction already holds the whole database.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(lock_id(key))))


def writing_transaction(conn: sa.Connection) -> sa.ColumnElement[int]:
    """The id of ``conn``'s transaction, as a number, on PostgreSQL (``pg_current_xact_id``,
    64 bits, never wrapping); 0 on SQLite, where one writer at a time makes ids commit
    order already. What an event keeps for the feed's order (``events.feed``)."""
    if conn.dialect.name == "postgresql":
        as_text = sa.cast(sa.func.pg_current_xact_id(), sa.Text)
        return sa.cast(as_text, sa.BigInteger)
    return sa.literal(0, sa.BigInteger)


def settled_before(conn: sa.Connection) -> sa.ColumnElement[int] | None:
    """On PostgreSQL, the oldest transaction still in flight as the statement sees the
    database (its snapshot's ``xmin``): every transaction below it has committed or
    rolled back, and no new one can take an id below it, so what they wrote is final.
    None on SQLite, where what a reader sees committed is all there will be before it."""
    if conn.dialect.name != "postgresql":
        return None
    xmin = sa.func.pg_snapshot_xmin(sa.func.pg_current_snapshot())
    return sa.cast(sa.cast(xmin, sa.Text), sa.BigInteger)


def lock_id(key: str) -> int:
    """The 64-bit advisory lock number of ``key`` (stable across processes and versions)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def epoch_start() -> datetime:
    """A moment before any lease: what a released lease expires at."""
    return datetime(1970, 1, 1, tzinfo=UTC)


def statement_time_limited(
    conn: sa.Connection, limit: timedelta | None
) -> AbstractContextManager[None]:
    """Inside the block, PostgreSQL cancels any statement on ``conn`` running past ``limit``.

    ``statement_timeout`` is set local to the transaction and put back when the block
    ends normally; a block left by an exception must roll back to a savepoint taken
    before it, which puts it back too. SQLite cannot cut a statement this way: there the
    block changes nothing (and, taken around every command, costs nothing to enter).
    """
    if limit is None or conn.dialect.name != "postgresql":
        return _UNLIMITED
    return _time_limited(conn, limit)


_UNLIMITED = nullcontext()


@contextmanager
def _time_limited(conn: sa.Connection, limit: timedelta) -> Iterator[None]:
    setting = sa.func.current_setting("statement_timeout")
    before = conn.execute(sa.select(setting)).scalar_one()
    _set_local(conn, "statement_timeout", limit)
    yield
    conn.execute(sa.select(sa.func.set_config("statement_timeout", before, True)))


@contextmanager
def waiting_at_most(conn: sa.Connection, limit: timedelta) -> Iterator[None]:
    """Inside the block, a statement on ``conn`` waits at most ``limit`` for a lock and,
    on PostgreSQL, runs at most ``limit``: for a check that must answer soon (a metrics
    scrape, a readiness probe). Set on the driver's connection before any transaction
    begins (so that SQLite's ``BEGIN IMMEDIATE`` waits no longer either): SQLite's busy
    timeout is put back when the block ends; PostgreSQL's settings are local to the
    transaction, which ends with the block's connection or its own rollback."""
    milliseconds = max(1, math.ceil(limit.total_seconds() * 1000))
    sqlite = is_sqlite(conn)
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        if sqlite:
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")
        else:
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true), "
                "set_config('statement_timeout', %s, true)",
                (str(milliseconds), str(milliseconds)),
            )
    finally:
        cursor.close()
    try:
        yield
    finally:
        if sqlite:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            finally:
                cursor.close()


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


def integer_range(conn: sa.Connection, type_: sqltypes.SqlType) -> tuple[int, int]:
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


# SQLSTATEs that mean the connection is done for, though the driver may not say so: a
# write refused because the server is read-only (after a failover, connections still
# open to the old primary, now a standby, meet it on every write), and the server ending
# the connection (pg_terminate_backend, a shutdown, a crash). psycopg marks the latter
# broken, except where it met the connection inside pipeline mode (executemany): there it
# raises "cannot exit pipeline mode while busy", the server's error as its context.
_DISCONNECTS = frozenset({"25006", "57P01", "57P02", "57P03"})


def _mark_disconnects(context: sa.engine.ExceptionContext) -> None:
    """An error whose chain holds one of ``_DISCONNECTS`` is a disconnect: SQLAlchemy
    closes the connection (and the pool's others) instead of rolling it back."""
    seen: BaseException | None = context.original_exception
    for _ in range(4):  # the error, and what it was raised while handling
        if seen is None:
            return
        if getattr(seen, "sqlstate", None) in _DISCONNECTS:
            context.is_disconnect = True
            return
        seen = seen.__context__


def reconnect_when_read_only(engine: sa.Engine) -> sa.Engine:
    """Have ``engine`` drop its connections when PostgreSQL refuses a write as read-only,
    or ended the connection in a way psycopg did not mark.

    Such a connection reached a standby (a failover moved the primary): like a cut one,
    it is invalidated, with the rest of the pool, so the next try connects anew.
    """
    if engine.dialect.name == "postgresql" and not event.contains(
        engine, "handle_error", _mark_disconnects
    ):
        event.listen(engine, "handle_error", _mark_disconnects)
    return engine


def likely(conn: sa.Connection, condition: sa.ColumnElement[bool]) -> sa.ColumnElement[bool]:
    """``condition``, marked as true of most rows where the planner would guess otherwise.

    SQLite, without statistics, takes any equality on an indexed column to narrow the
    rows a lot, and would read a resource's every run through its index and sort them to
    show the newest fifty; told the condition is likely, it reads the runs newest first
    and stops at fifty. PostgreSQL's planner has statistics: the condition as it is.
    """
    if not is_sqlite(conn):
        return condition
    return sa.func.likelihood(condition, sa.literal_column("0.9375"))
