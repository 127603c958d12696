"""Row saves refuse what they cannot store with ``RowInvalid`` and the field: ids, positions
and gotos that are not whole numbers as people type them (those that are, as text from a
web form, are converted), and conditions and values outside the calendar. On SQLite and
PostgreSQL; and a tenant binding's records name their tenant."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import desk
import migrated
import pytest
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from flowrunner import errors, tables, testing
from flowrunner.flows import edits, rows
from flowrunner.runner import flow_runner

BINDING = po.binding


@pytest.fixture
def engine(po_engine: sa.Engine) -> sa.Engine:
    return po_engine


def _flow(engine: sa.Engine, po_tables: tables.AppTables) -> int:
    with engine.begin() as conn:
        flow_id = edits.save_flow(conn, BINDING, po_tables, {"name": "Big", "start": "created"})
        edits.save_step(
            conn,
            BINDING,
            po_tables,
            {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "1 day"},
        )
    return int(flow_id)


def _refused(engine: sa.Engine, save: Any) -> list[tuple[str, str, str]]:
    # The connection closes without a commit: nothing stays.
    with engine.connect() as conn, pytest.raises(errors.RowInvalid) as caught:
        save(conn)
    return [(e.field, e.code, e.message) for e in caught.value.errors]


def test_ids_typed_as_text_are_the_numbers(engine: sa.Engine, po_tables: tables.AppTables) -> None:
    flow_id = _flow(engine, po_tables)
    with engine.begin() as conn:
        step_id = edits.save_step(
            conn,
            BINDING,
            po_tables,
            {
                "flow_id": str(flow_id),
                "position": " 2 ",
                "kind": "branch",
                "condition": "amount > 5",
                "goto": "1",
            },
        )
        edits.save_step(
            conn,
            BINDING,
            po_tables,
            {
                "id": str(step_id),
                "flow_id": f"{flow_id}",
                "position": "2",
                "kind": "branch",
                "condition": "amount > 6",
                "goto": "1",
            },
        )
        edits.update_step(conn, BINDING, po_tables, str(step_id), {"title": "Still big?"})
        edits.save_flow(
            conn, BINDING, po_tables, {"id": str(flow_id), "name": "Big", "start": "created"}
        )
        edits.update_flow(conn, BINDING, po_tables, str(flow_id), {"name": "Bigger"})
    with engine.connect() as conn:
        step = conn.execute(sa.select(po.po_flow_step).where(po.po_flow_step.c.id == step_id))
        row = step.mappings().one()
        flows = conn.execute(sa.select(po.po_flow.c.name)).scalars().all()
    assert (row["flow_id"], row["position"], row["goto"], row["title"]) == (
        flow_id,
        2,
        1,
        "Still big?",
    )
    assert flows == ["Bigger"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("flow_id", "٣", "'٣' is not a whole number"),
        ("flow_id", "1.0", "'1.0' is not a whole number"),
        ("flow_id", True, "True is not a whole number"),
        ("flow_id", [1], "[1] is not a whole number"),
        ("id", "+1", "'+1' is not a whole number"),
        ("id", "01", "'01' is not a whole number"),
        ("id", "1_0", "'1_0' is not a whole number"),
        ("id", 2.5, "2.5 is not a whole number"),
        ("id", "9" * 40, f"'{'9' * 36}... is too large a number"),
        ("id", Decimal("1E+999999999"), "Decimal('1E+999999999') is too large a number"),
    ],
)
def test_a_step_id_that_is_no_whole_number_is_refused_with_its_field(
    engine: sa.Engine, po_tables: tables.AppTables, field: str, value: Any, message: str
) -> None:
    flow_id = _flow(engine, po_tables)
    row = {"flow_id": flow_id, "position": 2, "kind": "send", field: value}
    found = _refused(engine, lambda conn: edits.save_step(conn, BINDING, po_tables, row))
    assert found == [(field, "type_invalid", message)]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("position", "٣", "'٣' is not a whole number"),
        ("position", "+3", "'+3' is not a whole number"),
        ("position", 2**31, "2147483648 is too large a number"),
        ("goto", "１", "'１' is not a whole number"),
        ("goto", float("nan"), "nan is not a whole number"),
    ],
)
def test_positions_and_gotos_follow_the_same_rule(
    engine: sa.Engine, po_tables: tables.AppTables, field: str, value: Any, message: str
) -> None:
    flow_id = _flow(engine, po_tables)
    row = {"flow_id": flow_id, "position": 2, "kind": "branch", "condition": "amount > 1"}
    row[field] = value
    found = _refused(engine, lambda conn: edits.save_step(conn, BINDING, po_tables, row))
    assert (field, "type_invalid", message) in found


def test_updates_and_deletes_refuse_a_bad_id(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    _flow(engine, po_tables)
    bad = [("id", "type_invalid", "'x1' is not a whole number")]
    assert _refused(engine, lambda c: edits.update_flow(c, BINDING, po_tables, "x1", {})) == bad
    assert _refused(engine, lambda c: edits.update_step(c, BINDING, po_tables, "x1", {})) == bad
    assert _refused(engine, lambda c: edits.delete_step(c, BINDING, po_tables, "x1")) == bad
    assert _refused(engine, lambda c: edits.delete_flow(c, BINDING, po_tables, "x1")) == bad
    flow = {"id": "٣", "name": "Other", "start": "manual"}
    assert _refused(engine, lambda c: edits.save_flow(c, BINDING, po_tables, flow)) == [
        ("id", "type_invalid", "'٣' is not a whole number")
    ]


def test_the_one_rule_for_a_whole_number() -> None:
    assert [rows.whole(v) for v in ("0", "7", "-7", " 12 ", 12, 12.0, Decimal("12"), "")] == [
        0,
        7,
        -7,
        12,
        12,
        12,
        12,
        None,
    ]
    for bad in ("٣", "+1", "-0", "007", "1_000", "1e3", "0x10", "١٢", "3.", True, b"3"):
        with pytest.raises(ValueError, match="is not a whole number"):
            rows.whole(bad)


@pytest.mark.parametrize(
    ("row", "field", "code", "message"),
    [
        (
            {"kind": "set", "field": "status", "value": "9999-12-31T23:59-14:00"},
            "value",
            "value_invalid",
            "'9999-12-31T23:59-14:00' cannot be written to 'status': '9999-12-31T23:59-14:00' "
            "is outside the calendar: in UTC it falls after 9999-12-31",
        ),
        (
            {"kind": "branch", "condition": "needed_by < today() + 10000 years"},
            "condition",
            "condition_invalid",
            "the condition cannot be read: line 1, column 23: '10000 years' is longer than a "
            "duration can be (100 years)",
        ),
        (
            {"kind": "branch", "condition": "created_at > 0001-01-01T00:00+01:00"},
            "condition",
            "condition_invalid",
            "the condition cannot be read: line 1, column 14: '0001-01-01T00:00+01:00' is "
            "outside the calendar: in UTC it falls before 0001-01-01",
        ),
        (
            {"kind": "wait", "duration": "99999999 years"},
            "duration",
            "duration_invalid",
            "'99999999 years' is longer than a duration can be (100 years)",
        ),
    ],
)
def test_out_of_calendar_conditions_values_and_durations_are_refused(
    engine: sa.Engine,
    po_tables: tables.AppTables,
    row: dict[str, Any],
    field: str,
    code: str,
    message: str,
) -> None:
    flow_id = _flow(engine, po_tables)
    step = {"flow_id": flow_id, "position": 2, **row}
    found = _refused(engine, lambda conn: edits.save_step(conn, BINDING, po_tables, step))
    assert found == [(field, code, message)]
    flow = {"name": "Later", "start": "created", "condition": "needed_by = 9999-12-31T23:00-01:00"}
    assert _refused(engine, lambda conn: edits.save_flow(conn, BINDING, po_tables, flow)) == [
        (
            "condition",
            "condition_invalid",
            "the condition cannot be read: line 1, column 13: '9999-12-31T23:00-01:00' is "
            "outside the calendar: in UTC it falls after 9999-12-31",
        )
    ]


# -- a tenant binding: records name their tenant -----------------------------------------


def test_a_record_without_its_tenant_is_refused(any_engine: sa.Engine) -> None:
    runner = desk.runner(any_engine)
    driver = testing.FlowDriver(runner)
    for record in ({"id": 1, "status": "new"}, {"id": 2, "tenant_id": " ", "status": "new"}):
        with pytest.raises(errors.FlowrunnerError, match="the record has no 'tenant_id'"):
            driver.create(record)
    with pytest.raises(errors.OperatorError, match="name the tenant"):
        runner.start_existing("status = new")
    assert driver.create({"id": 3, "tenant_id": "acme", "status": "new"}) == []


def test_a_backfill_past_the_calendar(any_engine: sa.Engine) -> None:
    """``start_existing --where``: a literal out of range is refused, a moment is decided."""
    po.metadata.create_all(any_engine)
    migrated.upgrade(any_engine)
    runner = flow_runner(po.binding, any_engine, commands=po.COMMANDS)
    runner.clock = lambda: datetime(9950, 1, 1, tzinfo=UTC)
    with any_engine.begin() as conn:
        runner.save_flow(conn, {"name": "Old orders", "start": "created"})
        conn.execute(
            sa.insert(po.purchase_order),
            [
                {"number": "PO-1", "requester_id": "ann", "amount": 5, "needed_by": None},
                {
                    "number": "PO-2",
                    "requester_id": "bob",
                    "amount": 5,
                    "needed_by": date(9999, 12, 31),
                },
            ],
        )
    with pytest.raises(errors.QueryError, match="is outside the calendar"):
        runner.start_existing("created_at < 9999-12-31T23:59-14:00")
    assert runner.start_existing("needed_by < today() + 100 years") == 1
    assert runner.start_existing("needed_by > today() + 100 years") == 0
