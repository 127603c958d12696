"""Statements compiled once to the driver's SQL: values converted by their columns' types,
constants kept, many rows at once, and what they cannot take refused when compiled."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from flowrunner.foundations import sqltypes
from flowrunner.store import dialects, prepared

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
metadata = sa.MetaData()
thing = sa.Table(
    "prepared_thing",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("at", sqltypes.UTCDateTime(), nullable=True),
    sa.Column("data", dialects.json_type(), nullable=True),
    sa.Column("status", sa.Text, nullable=True),
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
)


def insert() -> sa.Insert:
    return sa.insert(thing).values(
        {name: sa.bindparam(name, type_=thing.c[name].type) for name in ("id", "at", "data")}
    )


def by_column(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """``rows`` as ``execute_many`` takes them: each name's values, one per row."""
    return {name: [row[name] for row in rows] for name in rows[0]}


def test_rows_go_in_with_their_values_converted(any_engine: sa.Engine) -> None:
    metadata.create_all(any_engine)
    paris = timezone(timedelta(hours=1))
    rows: list[dict[str, Any]] = [
        {"id": 1, "at": T0, "data": {"n": 1}},
        {"id": 2, "at": T0.astimezone(paris), "data": "done"},  # the same moment elsewhere
        {"id": 3, "at": None, "data": None},
        {"id": 4, "at": T0 + timedelta(hours=1), "data": "done"},
    ]
    with dialects.begin(any_engine) as conn:
        prepared.compiled(conn, ("test", "insert"), insert, many=True).execute_many(
            conn, by_column(rows)
        )
        found = conn.execute(sa.select(thing.c.id, thing.c.at, thing.c.data).order_by("id")).all()
    assert [tuple(row) for row in found] == [
        (1, T0, {"n": 1}),
        (2, T0, "done"),
        (3, None, None),
        (4, T0 + timedelta(hours=1), "done"),
    ]
    assert all(row.at is None or row.at.tzinfo is not None for row in found)


def test_a_statement_keeps_its_own_constants_and_counts_its_rows(any_engine: sa.Engine) -> None:
    metadata.create_all(any_engine)

    def bump() -> sa.Update:
        return (
            sa.update(thing)
            .where(thing.c.id == sa.bindparam("p_id"))
            .values(status="bumped", version=thing.c.version + 2, at=sa.bindparam("p_at"))
        )

    with dialects.begin(any_engine) as conn:
        prepared.compiled(conn, ("test", "insert"), insert, many=True).execute_many(
            conn, {"id": [1], "at": [None], "data": [None]}
        )
        update = prepared.compiled(conn, ("test", "bump"), bump)
        assert update.execute(conn, {"p_id": 1, "p_at": T0}).rowcount == 1
        assert update.execute(conn, {"p_id": 9, "p_at": T0}).rowcount == 0
        row = conn.execute(sa.select(thing.c.status, thing.c.version, thing.c.at)).one()
    assert tuple(row) == ("bumped", 2, T0)


def test_an_in_list_that_grows_with_its_values_is_refused(any_engine: sa.Engine) -> None:
    listed = sa.select(thing.c.id).where(thing.c.id.in_(sa.bindparam("ids", expanding=True)))
    with pytest.raises(ValueError, match="no IN list"):
        prepared.compile_for(listed, any_engine.dialect)


def select_by_id() -> sa.Select[Any]:
    return sa.select(thing).where(thing.c.id == sa.bindparam("p_id", type_=sa.Integer))


def test_a_typed_query_gives_what_sqlalchemy_rows_hold(any_engine: sa.Engine) -> None:
    metadata.create_all(any_engine)
    rows: list[dict[str, Any]] = [
        {"id": 1, "at": T0, "data": {"n": [1, 2], "say": "hi"}},
        {"id": 2, "at": None, "data": None},
    ]
    with dialects.begin(any_engine) as conn:
        prepared.compiled(conn, ("test", "insert"), insert, many=True).execute_many(
            conn, by_column(rows)
        )
        query = prepared.compiled(conn, ("test", "by id"), select_by_id, typed=True)
        for row in rows:
            expected = conn.execute(select_by_id(), {"p_id": row["id"]}).mappings().one()
            assert query.fetch(conn, {"p_id": row["id"]}) == [dict(expected)]
        assert query.fetch(conn, {"p_id": 9}) == []
    assert dict(expected)["version"] == 0


def test_a_statement_sent_past_sqlalchemy_is_still_seen_and_its_errors_are_sqlalchemys(
    any_engine: sa.Engine,
) -> None:
    """On SQLite compiled statements go to the driver directly: the engine's listeners
    see them all the same, and a refused write raises SQLAlchemy's error and leaves the
    transaction usable in a savepoint."""
    metadata.create_all(any_engine)
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "prepared_thing" in statement:
            seen.append(statement.split()[0])

    sa.event.listen(any_engine, "before_cursor_execute", note)
    try:
        with dialects.begin(any_engine) as conn:
            add = prepared.compiled(conn, ("test", "insert"), insert, many=True)
            add.execute_many(conn, {"id": [1], "at": [None], "data": [None]})
            with pytest.raises(sa.exc.IntegrityError), dialects.Savepoint(conn, "again"):
                add.execute_many(conn, {"id": [1], "at": [None], "data": [None]})
            found = prepared.compiled(conn, ("test", "by id"), select_by_id, typed=True)
            assert [row["id"] for row in found.fetch(conn, {"p_id": 1})] == [1]
    finally:
        sa.event.remove(any_engine, "before_cursor_execute", note)
    assert seen == ["INSERT", "INSERT", "SELECT"]


def test_a_statement_outside_a_transaction_is_in_the_one_sqlalchemy_begins(
    any_engine: sa.Engine,
) -> None:
    """A compiled statement on a connection whose transaction has not begun goes through
    SQLAlchemy, which begins one: rolled back, its write is gone."""
    metadata.create_all(any_engine)
    with dialects.connected(any_engine) as conn:
        add = prepared.compiled(conn, ("test", "insert"), insert, many=True)
        add.execute_many(conn, {"id": [5], "at": [None], "data": [None]})
        assert conn.in_transaction()
        conn.rollback()
    with any_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(thing)).scalar_one() == 0


# What the driver is sent is what SQLAlchemy would send: the same text of every JSON
# value and every moment, converted once or per row, on each database.
MOMENTS = [
    T0,
    T0.replace(microsecond=123456),
    T0.astimezone(timezone(timedelta(hours=5, minutes=30))),
    T0.astimezone(timezone(-timedelta(hours=11))).replace(microsecond=1),
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(2026, 3, 1, 9, 0),  # naive: taken as UTC
]
DATA: list[Any] = [
    {"n": 1, "say": "héllo\n", "list": [1.5, None, True, {"deep": "x"}]},
    "done",
    "",
    [],
    {},
    3,
    2.5,
    None,
]


def stored_text(conn: sa.Connection) -> list[tuple[Any, ...]]:
    """Each row's moment and JSON value as the database holds them, as text."""
    rows = conn.execute(
        sa.select(
            thing.c.id, sa.cast(thing.c.at, sa.Text), sa.cast(thing.c.data, sa.Text)
        ).order_by(thing.c.id)
    ).all()
    return [tuple(row) for row in rows]


def test_the_stored_text_is_what_sqlalchemy_stores(any_engine: sa.Engine) -> None:
    metadata.create_all(any_engine)
    rows = [
        {"id": n, "at": MOMENTS[n % len(MOMENTS)], "data": DATA[n % len(DATA)]}
        for n in range(len(MOMENTS) * len(DATA))
    ]
    with dialects.begin(any_engine) as conn:
        conn.execute(sa.insert(thing), rows)
        expected = stored_text(conn)
        if dialects.is_sqlite(conn):  # the moment as SQLite has always been given it
            assert expected[2][1] == "2026-03-01 09:00:00.000000"
            assert expected[5][1] == "2026-03-01 09:00:00.000000"
        conn.execute(sa.delete(thing))
        add = prepared.compiled(conn, ("test", "insert"), insert, many=True)
        add.execute_many(conn, by_column(rows))
        assert stored_text(conn) == expected
        conn.execute(sa.delete(thing))
        for row in rows:  # one by one, and all rows sharing one moment and one value
            prepared.compiled(conn, ("test", "insert one"), insert).execute(conn, row)
        assert stored_text(conn) == expected
        conn.execute(sa.delete(thing))
        shared = {"at": MOMENTS[2], "data": DATA[0]}
        add.execute_many(conn, {"id": [row["id"] for row in rows]}, shared=shared)
        alike = stored_text(conn)
        conn.execute(sa.delete(thing))
        conn.execute(sa.insert(thing), [{**row, **shared} for row in rows])
        assert alike == stored_text(conn)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(max_size=10) | st.integers() | st.floats() | st.booleans() | st.none(),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@given(json_values)
def test_json_text_is_json_dumps(value: Any) -> None:
    assert prepared.json_text(value) == json.dumps(value)


def test_json_text_refuses_what_json_dumps_refuses() -> None:
    itself: list[Any] = []
    itself.append(itself)
    for value, error in (
        (itself, ValueError),
        ({"x": object()}, TypeError),
        ({(1, 2): "tuple key"}, TypeError),
    ):
        with pytest.raises(error) as dumped:
            json.dumps(value)
        with pytest.raises(error) as ours:
            prepared.json_text(value)
        assert str(ours.value) == str(dumped.value)


# Moments in UTC, naive, or at any whole-minute offset, on any day SQLite's text holds.
moments = st.datetimes(
    min_value=datetime(2, 1, 1),
    max_value=datetime(9998, 12, 31),
    timezones=st.sampled_from([None, UTC])  # type: ignore[arg-type]
    | st.integers(min_value=-23 * 60, max_value=23 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    ),
)


@given(moments)
def test_a_moment_becomes_the_text_sqlalchemy_gives_sqlite(moment: datetime) -> None:
    """UTCDateTime's one step on SQLite against SQLAlchemy's own two (the moment made
    UTC, then written as SQLite's DATETIME text)."""
    dialect = sa.create_engine("sqlite://").dialect
    ours = sqltypes.UTCDateTime().dialect_impl(dialect)
    assert isinstance(ours, sqltypes.UTCDateTime)
    generic = sa.types.TypeDecorator.bind_processor(ours, dialect)
    fast = ours.bind_processor(dialect)
    assert fast is not None and generic is not None
    assert fast(moment) == generic(moment)
