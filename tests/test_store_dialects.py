"""The dialect layer: SQLite transaction control, upserts, row locks, advisory locks."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from flowrunner.store import dialects, engine_tables, migrate, prepared
from flowrunner.store import operations as ops

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def sqlite_file(engine: sa.Engine) -> str:
    database = engine.url.database
    assert database is not None
    return database


def test_prepare_engine_is_idempotent_and_sets_wal_and_busy_timeout(
    sqlite_engine: sa.Engine,
) -> None:
    with sqlite_engine.begin() as conn:  # a connection pooled before the runner mounts
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    dialects.prepare_engine(sqlite_engine)
    dialects.prepare_engine(sqlite_engine)
    assert event.contains(sqlite_engine, "begin", dialects._on_begin)
    with dialects.begin(sqlite_engine) as conn:  # one BEGIN, not two
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
    with sqlite_engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(sa.text("PRAGMA busy_timeout")).scalar() == (
            dialects.SQLITE_BUSY_TIMEOUT_MS
        )


def test_savepoints_roll_back_inside_a_sqlite_transaction(sqlite_engine: sa.Engine) -> None:
    dialects.prepare_engine(sqlite_engine)
    with sqlite_engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    with pytest.raises(RuntimeError), dialects.begin(sqlite_engine) as conn:
        conn.execute(sa.text("INSERT INTO t VALUES (1)"))
        savepoint = conn.begin_nested()
        conn.execute(sa.text("INSERT INTO t VALUES (2)"))
        savepoint.rollback()
        conn.execute(sa.text("INSERT INTO t VALUES (3)"))
        assert conn.execute(sa.text("SELECT x FROM t ORDER BY x")).scalars().all() == [1, 3]
        raise RuntimeError("the whole transaction rolls back, DDL-free writes included")
    with sqlite_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 0


def test_our_savepoints_keep_undo_and_nest_and_listeners_see_them(any_engine: sa.Engine) -> None:
    dialects.prepare_engine(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    sent: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(statement)

    event.listen(any_engine, "before_cursor_execute", note)
    try:
        with dialects.begin(any_engine) as conn:
            outer = dialects.Savepoint(conn, "around")
            conn.execute(sa.text("INSERT INTO t VALUES (1)"))
            with dialects.Savepoint(conn, "within"):
                conn.execute(sa.text("INSERT INTO t VALUES (2)"))
            with pytest.raises(ZeroDivisionError), dialects.Savepoint(conn, "within"):
                conn.execute(sa.text("INSERT INTO t VALUES (3)"))
                raise ZeroDivisionError
            outer.release()
            undone = dialects.Savepoint(conn, "undone")
            conn.execute(sa.text("INSERT INTO t VALUES (4)"))
            undone.rollback()
            conn.execute(sa.text("INSERT INTO t VALUES (5)"))
    finally:
        event.remove(any_engine, "before_cursor_execute", note)
    assert sent.count("SAVEPOINT within") == 2 and "RELEASE SAVEPOINT around" in sent
    assert "ROLLBACK TO SAVEPOINT within" in sent and "ROLLBACK TO SAVEPOINT undone" in sent
    with any_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT x FROM t ORDER BY x")).scalars().all() == [1, 2, 5]
    # A savepoint released twice is the database's error, raised as SQLAlchemy's.
    with pytest.raises(sa.exc.DBAPIError), dialects.begin(any_engine) as conn:
        twice = dialects.Savepoint(conn, "twice")
        twice.release()
        twice.release()


def test_begin_takes_the_sqlite_write_lock_up_front(sqlite_engine: sa.Engine) -> None:
    migrate.upgrade(sqlite_engine)
    other = sqlite3.connect(sqlite_file(sqlite_engine), timeout=0, isolation_level=None)
    try:
        # A deferred transaction that has only read leaves the write lock free ...
        with sqlite_engine.connect() as conn, conn.begin():
            conn.execute(sa.select(engine_tables.due)).all()
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        # ... an immediate one holds it from BEGIN, before any write.
        with dialects.begin(sqlite_engine) as conn:
            conn.execute(sa.select(engine_tables.due)).all()
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
    finally:
        other.close()


def test_a_write_lock_held_elsewhere_is_sqlalchemys_error_at_begin(
    sqlite_engine: sa.Engine,
) -> None:
    migrate.upgrade(sqlite_engine)
    with sqlite_engine.connect() as conn:  # the pooled connection waits a millisecond only
        conn.exec_driver_sql("PRAGMA busy_timeout = 1")
    other = sqlite3.connect(sqlite_file(sqlite_engine), timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sa.exc.OperationalError, match="locked"), dialects.begin(sqlite_engine):
            pass
        other.execute("ROLLBACK")
        with dialects.begin(sqlite_engine) as conn:  # and the connection goes on
            assert conn.execute(sa.select(sa.literal(1))).scalar_one() == 1
    finally:
        other.close()


def test_skip_locked_only_on_postgresql(sqlite_engine: sa.Engine) -> None:
    query = sa.select(engine_tables.due.c.run_id)
    postgres = sa.create_engine("postgresql+psycopg://nobody@nowhere/none")  # never connects
    try:
        pg_sql = str(dialects.skip_locked(postgres, query).compile(postgres))
    finally:
        postgres.dispose()
    lite_sql = str(dialects.skip_locked(sqlite_engine, query).compile(sqlite_engine))
    assert pg_sql.endswith("FOR UPDATE SKIP LOCKED")
    assert "FOR UPDATE" not in lite_sql


def test_insert_ignore_and_upsert(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine)
    table = engine_tables.due
    with dialects.begin(any_engine) as conn:
        row = {"run_id": 1, "tenant": "a", "due_at": T0, "wakes": 0}
        assert dialects.insert_ignore(conn, table, row, conflict=["run_id"]) == 1
        assert dialects.insert_ignore(conn, table, row, conflict=["run_id"]) is None
        offered = dialects.excluded(conn, table)
        later = T0.replace(hour=10)
        dialects.upsert(
            conn,
            table,
            {**row, "due_at": later},
            conflict=["run_id"],
            update={"due_at": offered.due_at},
            where=table.c.due_at > offered.due_at,  # only ever earlier: not applied
        )
        assert conn.execute(sa.select(table.c.due_at)).scalar() == T0


def test_event_writers_for_one_record_take_turns(pg_engine: sa.Engine) -> None:
    """A second writer of the same record's events waits for the first to commit."""
    migrate.upgrade(pg_engine)
    probe = sa.select(sa.func.pg_try_advisory_xact_lock(dialects.lock_id("event:po:42")))
    other_record = sa.select(sa.func.pg_try_advisory_xact_lock(dialects.lock_id("event:po:43")))
    with dialects.begin(pg_engine) as writer, pg_engine.connect() as second, second.begin():
        ops.insert_event(
            writer, tenant=None, resource="po", record_id="42", name="x", payload={}, at=T0
        )
        assert second.execute(probe).scalar() is False
        assert second.execute(other_record).scalar() is True
    with pg_engine.connect() as second, second.begin():
        assert second.execute(probe).scalar() is True


def test_lock_ids_are_stable() -> None:
    assert dialects.lock_id("event:po:42") == dialects.lock_id("event:po:42")
    assert dialects.lock_id("event:po:42") != dialects.lock_id("event:po:43")
    assert -(2**63) <= dialects.lock_id("x") < 2**63


def test_a_listener_on_one_connection_or_on_every_engine_sees_what_is_sent(
    any_engine: sa.Engine,
) -> None:
    """Statements and savepoints sent to SQLite's driver directly are told to whoever
    listens: on the connection itself, or on every engine, as well as on the engine."""
    dialects.prepare_engine(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    by_connection: list[str] = []
    by_class: list[str] = []

    def on_class(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        by_class.append(statement)

    event.listen(sa.Engine, "before_cursor_execute", on_class)
    try:
        with dialects.begin(any_engine) as conn:
            dialects.Savepoint(conn, "seen").release()
    finally:
        event.remove(sa.Engine, "before_cursor_execute", on_class)
    assert "SAVEPOINT seen" in by_class and "RELEASE SAVEPOINT seen" in by_class
    with dialects.begin(any_engine) as conn:
        event.listen(
            conn, "after_cursor_execute", lambda _c, _k, sql, *_: by_connection.append(sql)
        )
        dialects.Savepoint(conn, "mine").release()
        table = sa.table("t", sa.column("x", sa.Integer))
        insert = prepared.compiled(
            conn, ("test", "t"), lambda: sa.insert(table).values(x=sa.bindparam("x"))
        )
        insert.execute(conn, {"x": 7})
    assert by_connection[:2] == ["SAVEPOINT mine", "RELEASE SAVEPOINT mine"]
    assert by_connection[2].startswith("INSERT INTO t")
    with dialects.begin(any_engine) as conn:  # another connection: no one listens
        dialects.Savepoint(conn, "unseen").release()
    assert not any("unseen" in sql for sql in by_connection + by_class)
