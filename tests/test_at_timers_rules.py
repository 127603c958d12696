"""The pure rules of timers (``at_timers``): the instant a column's value means, which
timers a record's change arms, and the keys that arm an instant once."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from flowrunner import query
from flowrunner.binding import At
from flowrunner.timers import rules

TIMESTAMP, DATE = query.ColumnType.TIMESTAMP, query.ColumnType.DATE
KINDS = {"warn_at": TIMESTAMP, "due_on": DATE, "status": query.ColumnType.TEXT}
TIMERS = (At(column="warn_at", command="warn"), At(column="due_on", command="breach"))

moments = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 30), timezones=st.just(UTC)
)
offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@given(moments, offsets)
def test_a_timestamp_is_its_own_instant_whatever_its_offset(moment: datetime, tz: timezone) -> None:
    instant = rules.instant_of(moment.astimezone(tz), TIMESTAMP, None)
    assert instant == moment and instant is not None and instant.tzinfo == UTC
    assert datetime.fromisoformat(rules.iso(instant)) == moment  # the key keeps it whole


@given(st.dates(min_value=date(1971, 1, 1), max_value=date(9998, 1, 1)))
def test_a_date_is_its_first_moment_on_the_wall_clock(day: date) -> None:
    paris = ZoneInfo("Europe/Paris")
    instant = rules.instant_of(day, DATE, paris)
    assert instant is not None
    assert instant.astimezone(paris).date() == day
    assert instant.astimezone(paris).time() == time(0)
    assert rules.instant_of(day, DATE, None) == datetime.combine(day, time(0), UTC)


def test_an_empty_or_unreadable_value_means_no_instant() -> None:
    assert rules.instant_of(None, TIMESTAMP, None) is None
    assert rules.instant_of("soon", TIMESTAMP, None) is None
    assert rules.instant_of("", DATE, None) is None


def test_a_change_arms_only_the_timers_whose_column_changed_to_an_instant() -> None:
    record = {"warn_at": datetime(2026, 3, 2, 9, tzinfo=UTC), "due_on": None, "status": "open"}
    created = [a.timer.column for a in rules.to_arm(TIMERS, KINDS, record, None)]
    assert created == ["warn_at"]  # an empty due_on arms nothing
    assert list(rules.to_arm(TIMERS, KINDS, record, None, changed={"status"})) == []
    partial = {"status": "open"}  # a caller that leaves a column out says nothing of it
    assert list(rules.to_arm(TIMERS, KINDS, partial, None)) == []


@given(moments, moments)
def test_one_instant_has_one_key_and_two_instants_two(first: datetime, second: datetime) -> None:
    one, other = rules.Arming(TIMERS[0], first), rules.Arming(TIMERS[0], second)
    assert (one.start_key("7", None) == other.start_key("7", None)) is (first == second)
    assert one.start_key("7", "acme") != one.start_key("7", "globex")
    assert one.snapshot() == {"program": "at", "column": "warn_at", "instant": rules.iso(first)}
