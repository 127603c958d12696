"""Any value a set step may be given: validation either refuses it at save, with the code
its column's facts call for, or accepts it — and then a real run writes it, on SQLite and
on PostgreSQL, without error, and the record holds exactly the value meant.

Values are drawn per column of ``typed_app``'s parcels, edges included: whole numbers
around each integer size, decimals around NUMERIC(8,2)'s precision and scale, any text
(quoted either way) around VARCHAR(20)'s length, dates and times across the calendar
with offsets, ``today()``/``now()`` with a duration, and null on columns with and
without NOT NULL.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from typed_app import NEW, T0, mount

from flowrunner import errors, query, testing

SMALLINT = (-(2**15), 2**15 - 1)
INTEGER = (-(2**31), 2**31 - 1)
BIGINT = (-(2**63), 2**63 - 1)
WHOLE = {"rank": SMALLINT, "quantity": INTEGER, "barcode": BIGINT}
NOT_NULL = {"rank", "code"}
PRICE_LIMIT = Decimal("999999.99")
CODE_LENGTH = 20
# Words the language reads as something other than text.
KEYWORDS = {"and", "or", "not", "in", "is", "contains", "starts", "with"}
KEYWORDS |= {"true", "false", "null", "now", "today"}


@dataclass(frozen=True)
class Case:
    """A value as typed into a set step, and what must come of it."""

    column: str
    text: str
    stored: Any = None  # what the run writes, when accepted
    refused: str | None = None  # the code, when refused


def whole_numbers(column: str) -> st.SearchStrategy[Case]:
    low, high = WHOLE[column]
    numbers = st.one_of(
        st.integers(low - 3, low + 3),
        st.integers(high - 3, high + 3),
        st.integers(-1000, 1000),
        st.integers(-(2**70), 2**70),
    )

    def plain(n: int) -> Case:
        return (
            Case(column, str(n), n)
            if low <= n <= high
            else Case(column, str(n), None, "value_out_of_range")
        )

    @st.composite
    def fraction(draw: st.DrawFn) -> Case:
        n = draw(st.integers(-(10**6), 10**6))
        digits = draw(st.from_regex(r"[0-9]{1,3}", fullmatch=True))
        text = f"{n}.{digits}" if n >= 0 else f"-{-n}.{digits}"
        if set(digits) == {"0"}:
            return (
                Case(column, text, n)
                if low <= n <= high
                else Case(column, text, None, "value_out_of_range")
            )
        return Case(column, text, None, "value_not_whole")

    return st.one_of(numbers.map(plain), fraction())


@st.composite
def prices(draw: st.DrawFn) -> Case:
    places = draw(st.integers(0, 4))
    # Small amounts, and amounts around the largest the column holds.
    size = draw(st.sampled_from([Decimal(100), Decimal(10**6), Decimal(10**7)]))
    amount = draw(
        st.decimals(
            min_value=-size,
            max_value=size,
            places=places,
            allow_nan=False,
            allow_infinity=False,
        )
    )
    text = format(amount, "f")
    exponent = amount.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > 2:
        return Case("price", text, None, "value_too_precise")
    if abs(amount) > PRICE_LIMIT:
        return Case("price", text, None, "value_out_of_range")
    return Case("price", text, amount)


def quoted(text: str, mark: str) -> str:
    """``text`` as a text value of the language, in single or double quotes."""
    if mark == "'":
        return str(query.Literal(text, query.ColumnType.TEXT))
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def texts(draw: st.DrawFn, column: str) -> Case:
    limit = CODE_LENGTH if column == "code" else None
    if draw(st.booleans()):
        value = draw(st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,24}", fullmatch=True))
        if value.lower() in KEYWORDS:
            value += "x"
        typed = value
    else:
        size = draw(st.integers(0, 30))  # as often past the code's 20 characters as not
        value = draw(
            st.text(
                st.characters(exclude_characters="\x00", exclude_categories=["Cs"]),
                min_size=size,
                max_size=size,
            )
        )
        if draw(st.integers(0, 9)) == 0 and len(value) < (limit or 30):
            # A lone surrogate, which no database stores: refused as it is typed.
            at = draw(st.integers(0, len(value)))
            value = value[:at] + chr(draw(st.integers(0xD800, 0xDFFF))) + value[at:]
            return Case(column, quoted(value, draw(st.sampled_from("'\""))), None, "value_invalid")
        typed = quoted(value, draw(st.sampled_from("'\"")))
    if limit is not None and len(value) > limit:
        return Case(column, typed, None, "value_too_long")
    return Case(column, typed, value)


booleans = st.one_of(
    st.sampled_from([("true", True), ("false", False), ("True", True), ("FALSE", False)]).map(
        lambda pair: Case("paid", pair[0], pair[1])
    ),
    st.sampled_from(["yes", "no", "1", "0"]).map(
        lambda text: Case("paid", text, None, "value_invalid")
    ),
)


def _days(n: int) -> str:
    return "today()" if n == 0 else f"today() {'+' if n > 0 else '-'} {abs(n)} days"


dates = st.one_of(
    st.dates().map(lambda d: Case("due_on", d.isoformat(), d)),
    st.integers(-3000, 3000).map(lambda n: Case("due_on", _days(n), T0.date() + timedelta(days=n))),
    st.dates(min_value=date(1000, 1, 13), max_value=date(9999, 12, 31)).map(
        lambda d: Case("due_on", d.strftime("%d/%m/%Y"), None, "value_invalid")
    ),
)

# UTC, and every offset from -14:00 to +14:00 by quarter hours.
offsets = st.sampled_from(
    [UTC, *(timezone(timedelta(minutes=m)) for m in range(-14 * 60, 14 * 60 + 1, 15))]
)


def moments(column: str) -> st.SearchStrategy[Case]:
    def exact(moment: datetime) -> Case:
        meant = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        return Case(column, moment.isoformat(), meant)

    return st.one_of(
        # Without an offset (UTC), and with one.
        st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(exact),
        st.datetimes(
            min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets
        ).map(exact),
        st.integers(-5000, 5000).map(
            lambda n: Case(
                column,
                f"now() + {n} hours" if n >= 0 else f"now() - {-n} hours",
                T0 + timedelta(hours=n),
            )
        ),
    )


def nulls(column: str) -> Case:
    return Case(column, "null", None, "value_required" if column in NOT_NULL else None)


cases = st.one_of(
    *(whole_numbers(column) for column in WHOLE),
    prices(),
    texts("code"),
    texts("note"),
    booleans,
    dates,
    moments("shipped_at"),
    moments("arrived_at"),
    st.sampled_from(sorted(["rank", "quantity", "price", "code", "note", "paid", "due_on"])).map(
        nulls
    ),
)


@dataclass
class Desk:
    driver: testing.FlowDriver
    flow: Any
    step: Any
    ids: Iterator[int]


@pytest.fixture
def desk(any_engine: sa.Engine) -> Desk:
    """The parcels desk with its one flow of one set step, which each example rewrites."""
    driver, flow = mount(any_engine)
    with any_engine.begin() as conn:
        step = driver.runner.save_step(
            conn, {"flow_id": flow, "position": 1, "kind": "set", "field": "note", "value": "x"}
        )
    return Desk(driver, flow, step, itertools.count(1))


def _utc(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


@settings(
    max_examples=max(20, settings().max_examples // 2),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases)
def test_a_value_validation_accepts_is_written_by_the_run_as_meant(desk: Desk, case: Case) -> None:
    note(f"{case.column} <- {case.text!r}")
    runner = desk.driver.runner
    row = {"id": desk.step, "flow_id": desk.flow, "position": 1, "kind": "set"}
    try:
        with runner.engine.begin() as conn:
            runner.save_step(conn, {**row, "field": case.column, "value": case.text})
    except errors.RowInvalid as refused:
        event(f"refused: {case.refused}")
        assert [(p.field, p.code) for p in refused.errors] == [("value", case.refused)]
        return
    event(f"written: {case.column}")
    assert case.refused is None, f"accepted what {case.refused} refuses"
    parcel = next(desk.ids)
    desk.driver.create({"id": parcel, **NEW})
    [run] = desk.driver.runs(parcel)
    assert run.status == "done", run.reason
    record = desk.driver.record(parcel)
    assert record is not None
    assert _utc(record[case.column]) == case.stored
    assert type(_utc(record[case.column])) is type(case.stored) or case.stored is None
