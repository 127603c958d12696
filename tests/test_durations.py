"""Durations: the words and ISO forms people write, calendar months, DST and errors."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import errors
from flowrunner.foundations.durations import Duration, parse_duration

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30 minutes", Duration(seconds=1800)),
        ("1 hour", Duration(seconds=3600)),
        ("2 days", Duration(days=2)),
        ("1 week", Duration(days=7)),
        ("1 month", Duration(months=1)),
        ("1 year", Duration(months=12)),
        ("1 day 4 hours", Duration(days=1, seconds=4 * 3600)),
        ("1 day, 2 hours and 3 minutes", Duration(days=1, seconds=7380)),
        ("2h30m", Duration(seconds=9000)),
        ("1.5 hours", Duration(seconds=5400)),
        ("  45 secs ", Duration(seconds=45)),
        ("3 Weeks", Duration(days=21)),
        ("P2D", Duration(days=2)),
        ("PT30M", Duration(seconds=1800)),
        ("P1M2DT3H", Duration(months=1, days=2, seconds=3 * 3600)),
        ("p1w", Duration(days=7)),
        ("P1Y", Duration(months=12)),
    ],
)
def test_reads_what_people_write(text: str, expected: Duration) -> None:
    assert parse_duration(text) == expected


def test_a_sign_only_where_allowed() -> None:
    assert parse_duration("-2 days", allow_sign=True) == Duration(days=-2)
    assert parse_duration("+ 4 hours", allow_sign=True) == Duration(seconds=4 * 3600)
    assert parse_duration("-P1D", allow_sign=True).is_negative
    with pytest.raises(errors.DurationError, match="cannot have a sign here"):
        parse_duration("-2 days")


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("2 dayz", 3, "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"),
        ("", 1, "a duration is empty — write e.g. '2 days' or '30 minutes'"),
        ("   ", 1, "a duration is empty — write e.g. '2 days' or '30 minutes'"),
        ("30", 3, "'30' needs a unit — write e.g. '30 minutes' or '30 days'"),
        ("abc", 1, "'abc' is not a duration — write e.g. '2 days' or '30 minutes'"),
        ("2 days x", 8, "'2 days x' is not a duration — write e.g. '2 days' or '30 minutes'"),
        ("1.5 days", 1, "'1.5 days' must be a whole number of days — write '36 hours'"),
        ("0.5 day", 1, "'0.5 day' must be a whole number of days — write '12 hours'"),
        ("2 days 1.5w", 8, "'1.5w' must be a whole number of weeks — write '252 hours'"),
        (
            "0.3 days",
            1,
            "'0.3 days' must be a whole number of days — write e.g. '2 days' or '30 minutes'",
        ),
        (
            "1.5 mo",
            1,
            "'1.5 mo' must be a whole number of months — write e.g. '2 days' or '30 minutes'",
        ),
        (
            "2.5 yrs",
            1,
            "'2.5 yrs' must be a whole number of years — write e.g. '2 days' or '30 minutes'",
        ),
        ("P", 1, "'P' is not an ISO 8601 duration — write e.g. 'P2D' or 'PT30M'"),
        ("PT", 1, "'PT' is not an ISO 8601 duration — write e.g. 'P2D' or 'PT30M'"),
        ("-", 1, "'-' cannot have a sign here — write e.g. '2 days'"),
        ("200 years", 1, "'200 years' is longer than a duration can be (100 years)"),
    ],
)
def test_errors_say_what_to_write(text: str, column: int, message: str) -> None:
    with pytest.raises(errors.DurationError) as caught:
        parse_duration(text)
    assert caught.value.message == message
    assert (caught.value.line, caught.value.column) == (1, column)
    assert isinstance(caught.value, errors.QueryError)
    assert isinstance(caught.value, ValueError)


def test_month_ends_are_calendar_months() -> None:
    month = parse_duration("1 month")
    assert month.add_to(datetime(2026, 1, 31, 12, tzinfo=UTC)) == datetime(
        2026, 2, 28, 12, tzinfo=UTC
    )
    assert month.add_to(datetime(2028, 1, 31, tzinfo=UTC)) == datetime(2028, 2, 29, tzinfo=UTC)
    assert parse_duration("1 year").add_to(datetime(2028, 2, 29, tzinfo=UTC)) == datetime(
        2029, 2, 28, tzinfo=UTC
    )
    assert month.subtract_from(datetime(2026, 3, 31, tzinfo=UTC)) == datetime(
        2026, 2, 28, tzinfo=UTC
    )


def test_a_day_across_dst_keeps_the_local_time() -> None:
    # 2026-03-08 is the spring-forward day in New York: the day has 23 hours.
    before = datetime(2026, 3, 7, 9, 0, tzinfo=NEW_YORK)
    assert parse_duration("1 day").add_to(before) == datetime(2026, 3, 8, 9, 0, tzinfo=NEW_YORK)
    elapsed = parse_duration("1 day").add_to(before).astimezone(UTC) - before.astimezone(UTC)
    assert elapsed.total_seconds() == 23 * 3600
    # Hours are elapsed time, so 24 hours lands an hour later on the wall clock.
    assert parse_duration("24 hours").add_to(before) == datetime(2026, 3, 8, 10, tzinfo=NEW_YORK)


def test_a_utc_moment_moved_by_days_on_a_named_wall_clock() -> None:
    # 2026-10-25 03:00 Berlin falls back to 02:00: the day has 25 hours.
    start = datetime(2026, 10, 24, 7, 0, tzinfo=UTC)  # 09:00 in Berlin (summer time)
    later = parse_duration("1 day").add_to(start, BERLIN)
    assert later.tzinfo is UTC
    assert later.astimezone(BERLIN).hour == 9
    assert (later - start).total_seconds() == 25 * 3600


def test_naive_moments_are_utc() -> None:
    assert parse_duration("2 hours").add_to(datetime(2026, 1, 1)) == datetime(
        2026, 1, 1, 2, tzinfo=UTC
    )


def test_a_wall_time_in_the_dst_gap_is_settled() -> None:
    before = datetime(2026, 3, 7, 2, 30, tzinfo=NEW_YORK)  # 02:30 does not exist on 03-08
    after = parse_duration("1 day").add_to(before)
    assert after.astimezone(UTC) == datetime(2026, 3, 8, 7, 30, tzinfo=UTC)


durations_st = st.builds(
    Duration,
    months=st.integers(0, 240),
    days=st.integers(0, 5000),
    seconds=st.integers(0, 86_400 * 40),
)


@given(durations_st, st.booleans())
def test_canonical_text_and_iso_round_trip(duration: Duration, negative: bool) -> None:
    if negative:
        duration = -duration
    assert parse_duration(str(duration), allow_sign=True) == duration
    assert parse_duration(duration.isoformat(), allow_sign=True) == duration


@given(st.text(max_size=60))
def test_any_text_reads_or_raises_a_duration_error(text: str) -> None:
    try:
        result = parse_duration(text, allow_sign=True)
    except errors.DurationError as error:
        assert error.line == 1 and error.column >= 1
        assert "\n" not in error.message
    else:
        assert isinstance(result, Duration)


@given(durations_st, st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)))
def test_adding_then_moving_back_never_fails(duration: Duration, moment: datetime) -> None:
    later = duration.add_to(moment.replace(tzinfo=UTC), NEW_YORK)
    assert later >= moment.replace(tzinfo=UTC)
