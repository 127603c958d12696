"""The SQL builder on real SQLite and PostgreSQL: bound parameters, null rules, text rules."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import errors, query
from flowrunner.foundations import sqltypes

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _table(name: str = "po") -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(50)),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("qty", sa.Integer),
        sa.Column("ratio", sa.Float),
        sa.Column("flag", sa.Boolean),
        sa.Column("due", sa.Date),
        sa.Column("at", sqltypes.UTCDateTime()),
        sa.Column("naive_at", sa.DateTime()),
    )


ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "status": "open",
        "amount": Decimal("100.00"),
        "qty": 3,
        "ratio": 0.1,
        "flag": True,
        "due": date(2025, 6, 1),
        "at": NOW - timedelta(days=1),
        "naive_at": datetime(2025, 6, 1, 10),
    },
    {
        "id": 2,
        "status": "Open",
        "amount": Decimal("1500.50"),
        "qty": None,
        "ratio": 2.5,
        "flag": False,
        "due": date(2025, 6, 4),
        "at": NOW + timedelta(days=3),
        "naive_at": datetime(2025, 6, 1, 13),
    },
    {
        "id": 3,
        "status": None,
        "amount": None,
        "qty": 0,
        "ratio": None,
        "flag": None,
        "due": None,
        "at": None,
        "naive_at": None,
    },
    {
        "id": 4,
        "status": "opened 50%_off",
        "amount": Decimal("-5.25"),
        "qty": 10,
        "ratio": -1.0,
        "flag": True,
        "due": date(2024, 12, 31),
        "at": datetime(2025, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))),
        "naive_at": datetime(2025, 6, 1, 12),
    },
]

CASES = [
    ("status = open", [1]),
    ("status != open", [2, 3, 4]),
    ("not status = open", [2, 3, 4]),
    ("status in (open, Open)", [1, 2]),
    ("status not in (open)", [2, 3, 4]),
    ("status is null", [3]),
    ("status is not null", [1, 2, 4]),
    ("status contains 'pen'", [1, 2, 4]),
    ("status contains 'PEN'", []),
    ("status contains '%'", [4]),
    ("status contains '_'", [4]),
    ("status starts with 'open'", [1, 4]),
    ("status starts with ''", [1, 2, 4]),
    ("status < open", [2]),
    ("status >= open", [1, 4]),
    ("amount > 100", [2]),
    ("amount >= 100", [1, 2]),
    ("amount = 100.0", [1]),
    ("amount < 0", [4]),
    ("not amount < 0", [1, 2, 3]),
    ("qty = 0 or qty is null", [2, 3]),
    ("qty < 5", [1, 3]),
    ("qty > 1.5", [1, 4]),
    ("qty = 3.0", [1]),
    ("ratio = 0.1", [1]),
    ("ratio > 0.1", [2]),
    ("ratio <= 0.1", [1, 4]),
    ("flag = true", [1, 4]),
    ("flag != true", [2, 3]),
    ("flag in (false)", [2]),
    ("due = today()", [1]),
    ("due < today() + 2 days", [1, 4]),
    ("due >= today() - 1 month", [1, 2]),
    ("at < now()", [1]),
    ("at <= now()", [1, 4]),
    ("at > now() + 2 days", [2]),
    ("at >= today()", [2, 4]),
    ("at = 2025-06-01T12:00:00Z", [4]),
    ("at = '2025-06-01T14:00:00+02:00'", [4]),
    ("naive_at < now()", [1]),
    ("naive_at = 2025-06-01T12:00Z", [4]),
    ("naive_at >= 2025-06-01T14:00+01:00", [2]),
    ("not (status = open or amount > 1000) and status is not null", [4]),
]


@pytest.mark.parametrize(("text", "ids"), CASES)
def test_cases_on_both_databases(any_engine: sa.Engine, text: str, ids: list[int]) -> None:
    table = _table()
    table.metadata.create_all(any_engine)
    with any_engine.begin() as conn:
        conn.execute(table.insert(), ROWS)
    condition = query.parse(text, table)
    assert [r["id"] for r in ROWS if condition.matches(r, now=NOW)] == ids
    with any_engine.connect() as conn:
        got = conn.execute(
            sa.select(table.c.id).where(condition.to_sql(table, now=NOW)).order_by(table.c.id)
        ).scalars()
        assert list(got) == ids


INJECTIONS = [
    "'; drop table po; --",
    "x' or '1'='1",
    '"); DELETE FROM po; --',
    "\\'; drop table po; --",
    "Robert'); DROP TABLE po;--",
]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_literals_are_bound_parameters(any_engine: sa.Engine, payload: str) -> None:
    table = _table()
    table.metadata.create_all(any_engine)
    with any_engine.begin() as conn:
        conn.execute(table.insert(), ROWS)
    text = (
        f"status = {query.Literal(payload, query.ColumnType.TEXT)} or status in ('a', "
        f"{query.Literal(payload, query.ColumnType.TEXT)}) or status contains "
        f"{query.Literal(payload, query.ColumnType.TEXT)}"
    )
    condition = query.parse(text, table)
    statement = sa.select(table.c.id).where(condition.to_sql(table, now=NOW))
    compiled = statement.compile(dialect=any_engine.dialect)
    assert payload not in str(compiled)
    assert list(compiled.params.values()).count(payload) == 3
    with any_engine.begin() as conn:
        assert list(conn.execute(statement).scalars()) == []
        assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 4


def test_event_values_are_bound_parameters() -> None:
    table = _table()
    condition = query.parse("event.decision = rejected and status = open", table, event=True)
    payload = "x'); drop table po; --"
    compiled = (
        sa.select(table.c.id)
        .where(condition.to_sql(table, now=NOW, event={"decision": payload}))
        .compile()
    )
    assert payload not in str(compiled)
    assert payload in compiled.params.values()


def test_to_sql_checks_the_table_columns() -> None:
    table = _table()
    with pytest.raises(errors.QueryError, match="unknown column 'stauts'"):
        query.parse("stauts = open").to_sql(table)
    with pytest.raises(errors.QueryError, match="'amount' holds a number"):
        query.parse("amount = abc").to_sql(table)


def test_text_order_is_code_point_order(any_engine: sa.Engine) -> None:
    table = _table("words")
    table.metadata.create_all(any_engine)
    words = ["a", "B", "b", "é", "Z", "_", "ä", "日", "a b", "ab"]
    with any_engine.begin() as conn:
        conn.execute(table.insert(), [{"id": i, "status": w} for i, w in enumerate(words)])
    for pivot in words:
        condition = query.parse(f"status < {query.Literal(pivot, query.ColumnType.TEXT)}", table)
        expected = sorted(i for i, w in enumerate(words) if w < pivot)
        with any_engine.connect() as conn:
            got = conn.execute(sa.select(table.c.id).where(condition.to_sql(table))).scalars()
            assert sorted(got) == expected, pivot
