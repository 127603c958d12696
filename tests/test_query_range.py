"""The calendar's ends: out-of-range moments are refused with a QueryError where they are
text, and decided (never an overflow) where a condition computes them at evaluation."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import errors, query
from flowrunner.foundations import durations, sqltypes

COLUMNS = {"at": "timestamp", "due": "date", "amount": "number"}
LATE = datetime(9990, 6, 1, 12, tzinfo=UTC)
EARLY = datetime(50, 6, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        (
            "at = 9999-12-31T23:59-14:00",
            6,
            "'9999-12-31T23:59-14:00' is outside the calendar: in UTC it falls after 9999-12-31",
        ),
        (
            "at < 0001-01-01T00:00+01:00",
            6,
            "'0001-01-01T00:00+01:00' is outside the calendar: in UTC it falls before 0001-01-01",
        ),
        (
            "at > '9999-12-31T20:00:00-05:00'",
            6,
            "'9999-12-31T20:00:00-05:00' is outside the calendar: in UTC it falls after 9999-12-31",
        ),
        (
            "due > '9999-12-31T20:00:00-05:00'",
            7,
            "'9999-12-31T20:00:00-05:00' is outside the calendar: in UTC it falls after 9999-12-31",
        ),
        (
            "at < now() + 10000 years",
            14,
            "'10000 years' is longer than a duration can be (100 years)",
        ),
        (
            "at < now() - P99999999Y",
            14,
            "'P99999999Y' is longer than a duration can be (100 years)",
        ),
        ("at < now() + 9999999999 years", 14, "'9999999999' is too large for a duration"),
        ("due = 0000-01-01", 7, "'0000-01-01' is not a date of the calendar"),
    ],
)
def test_out_of_range_text_is_a_query_error_at_its_place(
    text: str, column: int, message: str
) -> None:
    for columns in (COLUMNS, None):
        if columns is None and "'" in text:
            continue  # without columns, quoted text is text
        with pytest.raises(errors.QueryError) as caught:
            query.parse(text, columns)
        assert (caught.value.line, caught.value.column, caught.value.message) == (
            1,
            column,
            message,
        )


def test_the_calendars_own_ends_are_fine() -> None:
    last = query.parse("at <= 9999-12-31T23:59:59.999999Z and at >= 0001-01-01T00:00Z")
    assert last.matches({"at": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)})
    assert last.matches({"at": datetime(1, 1, 1, tzinfo=UTC)})
    assert query.parse("at = 9999-12-31T23:59-00:00") == query.parse("at = 9999-12-31T23:59Z")


def test_a_duration_added_past_the_calendar_is_a_duration_error() -> None:
    with pytest.raises(errors.DurationError, match="falls outside the calendar"):
        durations.parse_duration("2 days").add_to(datetime(9999, 12, 31, tzinfo=UTC))
    with pytest.raises(errors.DurationError, match="falls outside the calendar"):
        durations.parse_duration("-1 month", allow_sign=True).add_to(datetime(1, 1, 15, tzinfo=UTC))
    with pytest.raises(errors.DurationError, match="longer than a duration can be"):
        durations.parse_duration("99999999 years")


@pytest.mark.parametrize("text", ["٣ days", "P٣D", "1٣ hours", "PT١H"])
def test_durations_take_ascii_digits_only(text: str) -> None:
    with pytest.raises(errors.DurationError):
        durations.parse_duration(text)


def test_numbers_in_text_take_ascii_digits_only() -> None:
    assert query.coerce("٣", query.ColumnType.NUMBER) is None
    with pytest.raises(errors.QueryError, match="is not a number"):
        query.parse("amount = '٣'", COLUMNS)


def test_a_value_resolved_past_the_calendar_is_a_query_error() -> None:
    """A set step's value has to be a real date: it cannot be decided like a comparison."""
    value = query.parse_value("now() + 100 years", "timestamp")
    with pytest.raises(errors.QueryError) as caught:
        value.resolve(LATE)
    assert caught.value.message == (
        "now() + 100 years at 9990-06-01T12:00:00+00:00 falls after 9999-12-31, "
        "outside the calendar"
    )
    with pytest.raises(errors.QueryError, match="falls before 0001-01-01"):
        query.parse_value("today() - 100 years", "date").resolve(EARLY)


# A comparison against a moment past an end of the calendar is decided as if dates went
# on: every stored date is before now() + 100 years in 9990, none equals it.
DECIDED = [
    ("at < now() + 100 years", LATE, True),
    ("at <= now() + 100 years", LATE, True),
    ("at > now() + 100 years", LATE, False),
    ("at >= now() + 100 years", LATE, False),
    ("at = now() + 100 years", LATE, False),
    ("at != now() + 100 years", LATE, True),
    ("not at < now() + 100 years", LATE, False),
    ("due < today() + 100 years", LATE, True),
    ("due >= today() + 100 years", LATE, False),
    ("at > now() - 100 years", EARLY, True),
    ("at < now() - 100 years", EARLY, False),
    ("due >= today() - 100 years", EARLY, True),
    ("due = today() - 100 years", EARLY, False),
    ("at < now() + 1 day", datetime(9999, 12, 31, 12, tzinfo=UTC), True),
]


@pytest.mark.parametrize(("text", "now", "expected"), DECIDED)
def test_comparisons_past_the_calendar_are_decided(
    text: str, now: datetime, expected: bool
) -> None:
    condition = query.parse(text, COLUMNS)
    record = {"at": datetime(2025, 1, 1, tzinfo=UTC), "due": date(2025, 1, 1)}
    assert condition.matches(record, now) is expected
    assert condition.evaluator(now)(record) is expected
    # A null is still false for a comparison, true for !=.
    assert condition.matches({}, now) is (text.startswith(("not", "at !=")))


def _table() -> sa.Table:
    return sa.Table(
        "range_records",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("at", sqltypes.UTCDateTime()),
        sa.Column("naive_at", sa.DateTime()),
        sa.Column("due", sa.Date()),
    )


RECORDS: list[dict[str, Any]] = [
    {"id": 1, "at": datetime(1, 1, 1, tzinfo=UTC), "naive_at": None, "due": date(1, 1, 1)},
    {
        "id": 2,
        "at": datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        "naive_at": datetime(9999, 12, 31, 23, 59, 59),
        "due": date(9999, 12, 31),
    },
    {
        "id": 3,
        "at": datetime(2025, 6, 1, tzinfo=UTC),
        "naive_at": datetime(2025, 6, 1),
        "due": date(2025, 6, 1),
    },
    {"id": 4, "at": None, "naive_at": None, "due": None},
]


@pytest.mark.parametrize("engine_name", ["sqlite_engine", "pg_engine"])
def test_python_and_sql_agree_past_the_calendar(
    engine_name: str, request: pytest.FixtureRequest
) -> None:
    engine: sa.Engine = request.getfixturevalue(engine_name)
    table = _table()
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), RECORDS)
    nows = [LATE, EARLY, datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-14)))]
    texts = [text for text, _, _ in DECIDED] + [
        "naive_at < now() + 100 years or naive_at > now() - 100 years",
        "naive_at != now() + 50 years",
        "at = now() and due = today()",
        "due > today() + 1 day",
    ]
    for text in texts:
        condition = query.parse(text, table)
        for now in nows:
            expected = [r["id"] for r in RECORDS if condition.matches(r, now)]
            statement = sa.select(table.c.id).where(condition.to_sql(table, now)).order_by("id")
            with engine.connect() as conn:
                got = list(conn.execute(statement).scalars())
            assert got == expected, (text, now, engine.dialect.name)


def test_record_values_outside_the_calendar_read_as_no_value() -> None:
    far = datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5)))
    assert query.coerce(far, query.ColumnType.TIMESTAMP) is None
    assert query.coerce("9999-12-31T23:00-05:00", query.ColumnType.DATE) is None
    condition = query.parse("at < now() or at is null", COLUMNS)
    assert condition.matches({"at": far}, LATE) is False  # not null, yet no moment
    assert query.parse("at != now()", COLUMNS).matches({"at": far}, LATE) is True
