"""A set step's value fits its column when the step is saved, or the save is refused
with the field, a stable code and a sentence saying what to write. SQLite enforces no
lengths or ranges, yet it answers exactly as PostgreSQL does; what the save accepts, the
run writes. Each test runs on both databases (the parcels of ``typed_app``)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import typed_app
from typed_app import NEW, T0, mount

from flowrunner import errors, testing

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "flows.md"

AMBIGUOUS = (
    "01/03/2026 is ambiguous: it could be 1 March 2026 or 3 January 2026. Write a date as "
    "year-month-day: 2026-03-01 for 1 March 2026, 2026-01-03 for 3 January 2026"
)
QUOTE = (
    "text goes in quotes — write \"O'Brien\" in double quotes, or 'O\\'Brien' with a "
    "backslash before each quote inside"
)
DIGITS = "digits only, no separators, a point for decimals"

# (column, value as typed, code, what the sentence says after "… cannot be written to …: ")
REFUSED: list[tuple[str, str, str, str]] = [
    # SMALLINT NOT NULL
    ("rank", "32768", "value_out_of_range", "it holds whole numbers from -32768 to 32767"),
    ("rank", "-32769", "value_out_of_range", "it holds whole numbers from -32768 to 32767"),
    ("rank", "2.5", "value_not_whole", "it holds whole numbers — write e.g. 2 or 3"),
    ("rank", "null", "value_required", "the column always has a value — write one instead of null"),
    ("rank", "1,000", "value_invalid", f"write 1000: {DIGITS}"),
    # INTEGER
    (
        "quantity",
        "2147483648",
        "value_out_of_range",
        "it holds whole numbers from -2147483648 to 2147483647",
    ),
    ("quantity", "-7.25", "value_not_whole", "it holds whole numbers — write e.g. -8 or -7"),
    ("quantity", "lots", "value_invalid", "the field holds a number, and 'lots' is not a number"),
    ("quantity", "1 000", "value_invalid", f"write 1000: {DIGITS}"),
    # BIGINT
    (
        "barcode",
        "9223372036854775808",
        "value_out_of_range",
        "it holds whole numbers from -9223372036854775808 to 9223372036854775807",
    ),
    ("barcode", "0.5", "value_not_whole", "it holds whole numbers — write e.g. 0 or 1"),
    # NUMERIC(8, 2)
    (
        "price",
        "1.234",
        "value_too_precise",
        "it holds at most 2 digits after the point — write e.g. 1.23",
    ),
    ("price", "1000000", "value_out_of_range", "it holds numbers from -999999.99 to 999999.99"),
    ("price", "-1000000.5", "value_out_of_range", "it holds numbers from -999999.99 to 999999.99"),
    ("price", "1.000,50", "value_invalid", f"write 1000.50: {DIGITS}"),
    ("price", "1,5", "value_invalid", f"write 1.5: {DIGITS}"),
    ("price", "$12.50", "value_invalid", "write only the number, 12.50, without signs or units"),
    # VARCHAR(20) NOT NULL
    (
        "code",
        "'ABCDEFGHIJKLMNOPQRSTU'",
        "value_too_long",
        "it holds at most 20 characters, and this text has 21",
    ),
    ("code", "O'Brien", "value_invalid", QUOTE),
    ("code", "'O'Brien'", "value_invalid", QUOTE),
    (
        "code",
        "on hold",
        "value_invalid",
        "text with spaces goes in quotes — write 'on hold' with the quotes",
    ),
    ("code", "null", "value_required", "the column always has a value — write one instead of null"),
    # TEXT
    ("note", "a/b", "value_invalid", "text goes in quotes — write 'a/b' with the quotes"),
    ("note", "today()", "value_invalid", "the field holds text, not a date"),
    # BOOLEAN
    (
        "paid",
        "yes",
        "value_invalid",
        "the field holds true or false, and 'yes' is not true or false",
    ),
    ("paid", "maybe so", "value_invalid", "write true or false"),
    # DATE
    ("due_on", "01/03/2026", "value_invalid", AMBIGUOUS),
    ("due_on", "13/03/2026", "value_invalid", "write a date as year-month-day: 2026-03-13"),
    (
        "due_on",
        "2026/03/01",
        "value_invalid",
        "write a date as year-month-day with hyphens and two-digit parts: 2026-03-01",
    ),
    ("due_on", "2026-02-30", "value_invalid", "'2026-02-30' is not a date of the calendar"),
    (
        "due_on",
        "now() + 1 day",
        "value_invalid",
        "it holds a date, and now() + 1 day is a moment — write today() with days, "
        "e.g. today() + 2 days",
    ),
    (
        "due_on",
        "1 March 2026",
        "value_invalid",
        "write a date as year-month-day, e.g. 2026-03-01, or today() + 2 days",
    ),
    # TIMESTAMP, without and with a time zone
    (
        "shipped_at",
        "12:30",
        "value_invalid",
        "write a date and time as 2026-03-01T09:30 (in UTC; add e.g. +02:00 for another "
        "offset), or now() + 2 hours",
    ),
    (
        "shipped_at",
        "01/03/2026 09:30",
        "value_invalid",
        AMBIGUOUS + "; then the time after a T, e.g. 2026-03-01T09:30",
    ),
    (
        "arrived_at",
        "9999-12-31T23:59-14:00",
        "value_invalid",
        "'9999-12-31T23:59-14:00' is outside the calendar: in UTC it falls after 9999-12-31",
    ),
]

# (column, value as typed, what the run stores)
ACCEPTED: list[tuple[str, str, Any]] = [
    ("rank", "32767", 32767),
    ("rank", "-32768", -32768),
    ("quantity", "2147483647", 2147483647),
    ("quantity", "3.0", 3),
    ("quantity", "'12'", 12),
    ("barcode", "9223372036854775807", 2**63 - 1),
    ("barcode", "-9223372036854775808", -(2**63)),
    ("price", "999999.99", Decimal("999999.99")),
    ("price", "-0.01", Decimal("-0.01")),
    ("price", "12", Decimal("12")),
    ("price", "1.50", Decimal("1.5")),
    ("code", "'ABCDEFGHIJKLMNOPQRST'", "ABCDEFGHIJKLMNOPQRST"),
    ("code", '"O\'Brien"', "O'Brien"),
    ("code", "'O\\'Brien'", "O'Brien"),
    ("code", "approved", "approved"),
    ("code", "''", ""),
    ("note", "'" + "é" * 3000 + "'", "é" * 3000),
    ("note", "null", None),
    ("paid", "true", True),
    ("paid", "FALSE", False),
    ("due_on", "2026-03-01", date(2026, 3, 1)),
    ("due_on", "today() + 2 days", date(2026, 3, 4)),
    ("shipped_at", "2026-03-01T09:30+02:00", datetime(2026, 3, 1, 7, 30, tzinfo=UTC)),
    ("shipped_at", "2026-03-01", datetime(2026, 3, 1, tzinfo=UTC)),
    ("arrived_at", "now() + 2 hours", T0 + timedelta(hours=2)),
    ("arrived_at", "0001-01-01T00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
]


def save_step(driver: testing.FlowDriver, row: dict[str, Any]) -> Any:
    with driver.runner.engine.begin() as conn:
        return driver.runner.save_step(conn, row)


def refusal(driver: testing.FlowDriver, flow: Any, column: str, value: str) -> tuple[str, str, str]:
    """The one problem saving a set step writing ``value`` into ``column`` has."""
    row = {"flow_id": flow, "position": 1, "kind": "set", "field": column, "value": value}
    with pytest.raises(errors.RowInvalid) as refused:
        save_step(driver, row)
    [problem] = refused.value.errors
    return problem.field, problem.code, problem.message


def test_a_value_that_does_not_fit_its_column_is_refused_at_save(any_engine: sa.Engine) -> None:
    driver, flow = mount(any_engine)
    found = [
        (column, value, *refusal(driver, flow, column, value)) for column, value, *_ in REFUSED
    ]
    expected = [
        (column, value, "value", code, f"'{value}' cannot be written to '{column}': {sentence}")
        for column, value, code, sentence in REFUSED
    ]
    assert found == expected
    # A sentence to act on, never the grammar's words.
    for *_, message in found:
        assert "expected" not in message and "'and', 'or'" not in message
    with any_engine.connect() as conn:
        assert (
            conn.execute(
                sa.select(sa.func.count()).select_from(typed_app.parcel_flow_step)
            ).scalar()
            == 0
        )


def test_every_column_type_is_in_the_tables() -> None:
    assert {column for column, *_ in REFUSED} == set(typed_app.SET_COLUMNS)
    assert {column for column, *_ in ACCEPTED} == set(typed_app.SET_COLUMNS)


def test_a_value_that_fits_is_saved_and_written_by_the_run(any_engine: sa.Engine) -> None:
    driver, flow = mount(any_engine)
    step = None
    for number, (column, value, stored) in enumerate(ACCEPTED, start=1):
        row = {"flow_id": flow, "position": 1, "kind": "set", "field": column, "value": value}
        step = save_step(driver, row if step is None else {**row, "id": step})
        driver.create({"id": number, **NEW})
        [run] = driver.runs(number)
        assert (column, value, run.status) == (column, value, "done")
        written = driver.record(number)
        assert written is not None
        assert (column, value, _comparable(written[column])) == (
            column,
            value,
            _comparable(stored),
        )


def _comparable(value: Any) -> Any:
    """A date and time in UTC, aware: SQLite and a column without a time zone give naive UTC."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def test_the_guides_refusal_is_the_one_given(any_engine: sa.Engine) -> None:
    driver, flow = mount(any_engine)
    [shown] = [
        line.strip()
        for line in GUIDE.read_text(encoding="utf-8").splitlines()
        if "cannot be written to 'due_on'" in line
    ]
    assert refusal(driver, flow, "due_on", "01/03/2026")[2] == shown


def test_a_value_stored_around_validation_fails_the_run_and_writes_nothing(
    any_engine: sa.Engine,
) -> None:
    # SQLite would store the long code as it is; the run refuses it as PostgreSQL would.
    driver, flow = mount(any_engine)
    too_long = "'" + "X" * 21 + "'"
    with any_engine.begin() as conn:
        conn.execute(
            sa.insert(typed_app.parcel_flow_step).values(
                flow_id=flow, position=1, kind="set", title="Code", field="code", value=too_long
            )
        )
    driver.create({"id": 1, **NEW})
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason is not None
    assert re.search(
        r"cannot be written to 'code': it holds at most 20 characters, and this text has 21$",
        run.reason,
    )
    record = driver.record(1)
    assert record is not None and record["code"] == "NEW"


def test_a_date_the_run_computes_past_the_calendar_fails_the_run_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    driver, flow = mount(any_engine)
    driver.now = datetime(9950, 1, 1, tzinfo=UTC)
    row = {"flow_id": flow, "position": 1, "kind": "set", "field": "due_on"}
    save_step(driver, {**row, "title": "Far", "value": "today() + 100 years"})
    driver.create({"id": 1, **NEW})
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason == (
        "step 'Far' (set, position 1) failed: it is broken: its value cannot be written to due_on: "
        "today() + 100 years at 9950-01-01T00:00:00+00:00 falls after 9999-12-31, "
        "outside the calendar"
    )
    record = driver.record(1)
    assert record is not None and record["due_on"] is None
