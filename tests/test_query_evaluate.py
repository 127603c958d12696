"""The compiled Python evaluator: the null rules, coercions, and that literals stay data."""

from __future__ import annotations

import enum
import inspect
import pickle
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import query
from flowrunner.foundations import sqltypes

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

# Each operator on a null value and on a missing value: false, except != and not in.
NULL_RULES = [
    ("x = a", False),
    ("x != a", True),
    ("x < a", False),
    ("x <= a", False),
    ("x > a", False),
    ("x >= a", False),
    ("x in (a, b)", False),
    ("x not in (a, b)", True),
    ("x contains a", False),
    ("x starts with a", False),
    ("x is null", True),
    ("x is not null", False),
    ("not x = a", True),
    ("not x != a", False),
    ("not x < a", True),
    ("not (x = a or x != a)", False),
    ("x = a or x != a", True),
]


@pytest.mark.parametrize(("text", "expected"), NULL_RULES)
@pytest.mark.parametrize("record", [{}, {"x": None}])
def test_null_rules(text: str, expected: bool, record: dict[str, Any]) -> None:
    assert query.parse(text).matches(record) is expected
    assert query.parse(text, {"x": "text"}).matches(record) is expected


def test_mismatched_values_behave_like_null() -> None:
    assert query.parse("x > 5").matches({"x": "lots"}) is False
    assert query.parse("x != 5").matches({"x": "lots"}) is True
    assert query.parse("x = open").matches({"x": 5}) is False


class Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("text", "record", "expected"),
    [
        ("n = 0.1", {"n": 0.1}, True),
        ("n = 0.3", {"n": 0.1 + 0.2}, False),
        ("n = 1", {"n": Decimal("1.000")}, True),
        ("n = 1", {"n": True}, False),
        ("n > 1", {"n": Decimal("NaN")}, False),
        ("n in (1, 2.5)", {"n": 2.5}, True),
        ("n = 12", {"n": "12"}, True),
        ("b = true", {"b": 1}, True),
        ("b = false", {"b": 0}, True),
        ("b != true", {"b": 2}, True),
        ("c = red", {"c": Colour.RED}, True),
        (
            "t = 2025-06-01T12:00Z",
            {"t": datetime(2025, 6, 1, 14, tzinfo=timezone(timedelta(hours=2)))},
            True,
        ),
        ("t = 2025-06-01T12:00Z", {"t": datetime(2025, 6, 1, 12)}, True),
        ("t = 2025-06-01T12:00Z", {"t": "2025-06-01T12:00:00+00:00"}, True),
        ("t < now()", {"t": datetime(2025, 6, 1, 11, 59)}, True),
        ("t >= today()", {"t": datetime(2025, 6, 1, 0, 0, tzinfo=UTC)}, True),
        ("d = today()", {"d": date(2025, 6, 1)}, True),
        ("d = today()", {"d": "2025-06-01"}, True),
        ("d < today() - 1 month", {"d": date(2025, 4, 30)}, True),
        ("s contains ''", {"s": ""}, True),
        ("s starts with 'É'", {"s": "École"}, True),
        ("s starts with 'é'", {"s": "École"}, False),
        ("s < b", {"s": "B"}, True),
    ],
)
def test_coercions(text: str, record: dict[str, Any], expected: bool) -> None:
    assert query.parse(text).matches(record, now=NOW) is expected


def test_evaluator_binds_now_and_event() -> None:
    condition = query.parse("t < now() - 1 hour and event.decision = yes", event=True)
    check = condition.evaluator(now=NOW, event={"decision": "yes"})
    assert check({"t": NOW - timedelta(hours=2)}) is True
    assert check({"t": NOW}) is False
    assert condition.evaluator(now=NOW)({"t": NOW - timedelta(hours=2)}) is False


def test_evaluator_without_relatives_is_the_compiled_function() -> None:
    condition = query.parse("status = open and amount > 100")
    check = condition.evaluator()
    assert check({"status": "open", "amount": 101}) is True
    assert check({"status": "open", "amount": 100}) is False
    assert check({"status": "open", "amount": 100.5}) is True


def test_matches_is_the_compiled_function_with_the_methods_face() -> None:
    condition = query.parse("status = open and amount > 100")
    check = condition.matches
    assert not inspect.ismethod(check)
    assert condition.matches is check
    assert check({"status": "open", "amount": 101}) is True
    assert check({"status": "open", "amount": 100}, NOW, {}) is False
    assert check.__doc__ == query.Condition.matches.__doc__
    assert check.__qualname__ == "Condition.matches"
    assert list(inspect.signature(check).parameters) == ["record", "now", "event"]
    assert query.Condition.matches(condition, {"status": "open", "amount": 101}) is True


@pytest.mark.parametrize(
    ("record", "now", "event", "expected"),
    [
        ({"t": NOW - timedelta(hours=2)}, NOW, {"decision": "yes"}, True),
        ({"t": NOW - timedelta(hours=2)}, NOW, None, False),
        ({"t": NOW - timedelta(hours=2)}, NOW - timedelta(hours=2), {"decision": "yes"}, False),
        ({"t": NOW}, None, {"decision": "yes"}, True),
        ({"t": None}, NOW, {"decision": "yes"}, False),
    ],
)
def test_matches_reads_now_and_event(
    record: dict[str, Any], now: datetime | None, event: dict[str, Any] | None, expected: bool
) -> None:
    condition = query.parse("t < now() - 1 hour and event.decision = yes", event=True)
    assert condition.matches(record, now, event) is expected
    assert condition.matches(record=record, event=event, now=now) is expected
    assert query.Condition.matches(condition, record, now, event) is expected
    assert condition.evaluator(now, event)(record) is expected


def test_a_used_condition_pickles_and_compiles_again() -> None:
    condition = query.parse("t < now() and status = open")
    assert condition.matches({"t": NOW, "status": "open"}) is True
    again = pickle.loads(pickle.dumps(condition))
    assert again == condition
    assert again.text == condition.text
    assert again.matches({"t": NOW, "status": "open"}) is True
    assert again.matches({"t": NOW, "status": "shut"}) is False


def test_literals_are_data_not_code() -> None:
    payload = "__import__('os').system('echo pwned') or ''"
    condition = query.parse(f"x = {query.Literal(payload, query.ColumnType.TEXT)}")
    assert condition.matches({"x": payload}) is True
    function = condition.evaluator()
    assert payload in function.__code__.co_consts
    assert function.__globals__["__builtins__"] == {}
    assert payload in condition.matches.__code__.co_consts
    assert condition.matches.__globals__["__builtins__"] == {}


def test_utc_datetime_round_trips(any_engine: sa.Engine) -> None:
    table = sa.Table(
        "moments",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("at", sqltypes.UTCDateTime()),
    )
    table.metadata.create_all(any_engine)
    values = [
        datetime(2025, 6, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))),
        datetime(2025, 6, 1, 12, 30),
        None,
    ]
    with any_engine.begin() as conn:
        conn.execute(table.insert(), [{"id": i, "at": v} for i, v in enumerate(values)])
        got = conn.execute(sa.select(table.c.at).order_by(table.c.id)).scalars().all()
    assert got == [datetime(2025, 6, 1, 12, 30, tzinfo=UTC)] * 2 + [None]
    assert all(v is None or v.tzinfo is UTC for v in got)
