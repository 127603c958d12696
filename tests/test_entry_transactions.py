"""Bad input never poisons the application's transaction, on PostgreSQL.

On PostgreSQL a statement that fails aborts the whole transaction ("current transaction
is aborted"): the application could neither go on nor commit what it did before. Each
entry point that takes the application's connection checks its input before it writes
and writes in a savepoint, so after a refusal — or a fault in the engine's own writes —
the application reads, writes and commits as if nothing happened, and nothing of the
refused call is kept.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from running import app, count, mount, stored
from test_runs_tenants import mount as mount_desk
from test_runs_tenants import record as desk_record

from flowrunner import (
    EventRejected,
    OperatorError,
    RecordRejected,
    RowInvalid,
    testing,
)
from flowrunner.store import engine_tables, flow_rows
from flowrunner.store import operations as ops

PO = app("purchase_orders")

FLOWS = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: a}
    - {position: 2, kind: set, title: Done, field: status, value: approved}
- name: Again
  start: updated
  steps:
    - {position: 1, kind: approval, title: Approval, approver: a}
- name: Resend
  start: manual
  steps:
    - {position: 1, kind: send, title: Send}
"""

Call = Callable[[sa.Connection], Any]
# The application's own orders, written around each refused call.
NEW_IDS = itertools.count(1000)


def order(order_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": order_id,
        "number": f"PO-{order_id}",
        "requester_id": "ann",
        "amount": 500,
        **extra,
    }


@pytest.fixture
def driver(pg_engine: sa.Engine) -> Iterator[testing.FlowDriver]:
    driver = mount(pg_engine, "purchase_orders", flows=FLOWS)
    driver.create(order(1))
    yield driver


def refused_then_go_on(
    driver: testing.FlowDriver, call: Call, error: type[Exception], match: str
) -> None:
    """In one transaction: the app writes, the call is refused, the app reads, writes
    and commits. Both of the app's writes are kept; the engine's tables are as before."""
    engine = driver.runner.engine
    before = {t.name: count(engine, t) for t in engine_tables.metadata.sorted_tables}
    first, second = next(NEW_IDS), next(NEW_IDS)
    with engine.connect() as conn, conn.begin():
        conn.execute(sa.insert(PO.purchase_order).values(order(first)))
        with pytest.raises(error, match=match):
            call(conn)
        assert conn.execute(sa.select(sa.literal(1))).scalar_one() == 1
        conn.execute(sa.insert(PO.purchase_order).values(order(second)))
    assert count(engine, PO.purchase_order, id=first) == 1
    assert count(engine, PO.purchase_order, id=second) == 1
    after = {t.name: count(engine, t) for t in engine_tables.metadata.sorted_tables}
    assert after == before


# -- refused by the checks, before anything is written ----------------------------------

NESTED: dict[str, Any] = {"order": 1}
for _ in range(40):
    NESTED = {"order": 1, "x": NESTED}

EMITS: list[tuple[Any, Any, str]] = [
    ("po.unknown", {"order": 1}, "there is no event"),
    ("po.decided", [("order", 1)], "needs a mapping"),
    ("po.decided", {"approver": "a"}, "must name its purchase_order"),
    ("po.decided", {"order": "007"}, "cannot be a purchase_order key"),
    ("po.decided", {"order": 2**40}, "which does not exist"),  # beyond INTEGER
    ("po.decided", {"order": 2**63}, "cannot be a purchase_order key: send a whole number from"),
    ("po.decided", {"order": "1\x00"}, "cannot be a purchase_order key"),
    ("po.decided", {"order": 1, "note": "a\x00b"}, "field 'note' contains the character"),
    ("po.decided", {"order": 1, "n": 2**64}, "field 'n' is a whole number beyond"),
    ("po.decided", {"order": 1, "r": float("nan")}, "field 'r' is NaN"),
    ("po.decided", {"order": 1, 7: "x"}, "has the name 7"),
    ("po.decided", {"order": 1, "s": {1}}, "field 's' is of type set"),
    ("po.decided", {"order": 1, "t": "\ud800"}, "lone surrogate"),
    ("po.decided", NESTED, "deeper than 32 levels"),
    ("po.decided", {"order": 99}, "which does not exist"),
]


@pytest.mark.parametrize(("name", "payload", "match"), EMITS)
def test_a_refused_event_leaves_the_transaction_usable(
    driver: testing.FlowDriver, name: Any, payload: Any, match: str
) -> None:
    refused_then_go_on(
        driver, lambda conn: driver.runner.emit(conn, name, payload), EventRejected, match
    )


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"number": "PO-9", "amount": 5}, "has no 'id'"),
        ({"id": None}, "has no 'id'"),
        (order(1, id="007"), "not a purchase_order key"),
        (order(1, id=True), "not a purchase_order key"),
        (order(1, id=2**64), "whole number from"),
        ([("id", 1)], "mapping of column to value"),
    ],
)
def test_a_refused_record_leaves_the_transaction_usable(
    driver: testing.FlowDriver, record: Any, match: str
) -> None:
    runner = driver.runner
    refused_then_go_on(
        driver, lambda conn: runner.record_created(conn, record), RecordRejected, match
    )
    refused_then_go_on(
        driver, lambda conn: runner.record_updated(conn, order(1), record), RecordRejected, match
    )


@pytest.mark.parametrize("wrong", ["007", 1.0, None, [1]])
def test_a_refused_deletion_leaves_the_transaction_usable(
    driver: testing.FlowDriver, wrong: Any
) -> None:
    refused_then_go_on(
        driver,
        lambda conn: driver.runner.record_deleted(conn, wrong),
        RecordRejected,
        "not a purchase_order key",
    )


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({"name": "", "start": "created"}, "a flow needs a name"),
        ({"name": "X", "start": "sometimes"}, "start"),
        ({"name": "X\x00", "start": "created"}, "NUL"),
        ({"id": "abc", "name": "X", "start": "created"}, "is not a whole number"),
        ({"id": 2**40, "name": "X", "start": "created"}, "too large a number"),
    ],
)
def test_a_refused_flow_row_leaves_the_transaction_usable(
    driver: testing.FlowDriver, row: dict[str, Any], match: str
) -> None:
    refused_then_go_on(driver, lambda conn: driver.runner.save_flow(conn, row), RowInvalid, match)


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ({"position": 9, "kind": "teleport"}, "kind"),
        ({"position": 9, "kind": "wait", "duration": "2 dayz"}, "not a duration"),
        ({"position": 9, "kind": "wait", "duration": "1 day", "title": "a\x00"}, "NUL"),
        ({"id": "abc", "position": 9, "kind": "wait", "duration": "1 day"}, "no step"),
        ({"id": 2**40, "position": 9, "kind": "wait", "duration": "1 day"}, "no step"),
        (
            {"flow_id": "abc", "position": 9, "kind": "wait", "duration": "1 day"},
            "is not a whole number",
        ),
    ],
)
def test_a_refused_step_row_leaves_the_transaction_usable(
    driver: testing.FlowDriver, row: dict[str, Any], match: str
) -> None:
    with driver.runner.engine.connect() as conn:
        flow_id = flow_rows.flows_to_start(conn, driver.runner.tables, "created")[0]["id"]
    refused_then_go_on(
        driver,
        lambda conn: driver.runner.save_step(conn, {"flow_id": flow_id, **row}),
        RowInvalid,
        match,
    )


@pytest.mark.parametrize("step_id", ["abc", 2**40, 1.5])
def test_a_refused_step_deletion_leaves_the_transaction_usable(
    driver: testing.FlowDriver, step_id: Any
) -> None:
    refused_then_go_on(
        driver, lambda conn: driver.runner.delete_step(conn, step_id), RowInvalid, "no step"
    )


# -- a fault in the engine's own writes is kept to its savepoint ----------------------


def failing(after: Callable[..., Any]) -> Callable[..., Any]:
    """``after`` as it was, then a statement PostgreSQL refuses (an engine fault)."""

    def call(conn: sa.Connection, *args: Any, **kwargs: Any) -> Any:
        after(conn, *args, **kwargs)
        conn.execute(sa.text("SELECT 1 / 0"))

    return call


def test_a_fault_after_the_engine_wrote_leaves_only_the_apps_writes(
    driver: testing.FlowDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = driver.runner
    # wake_record follows the event's insert, and a change's runs; insert_run writes a
    # new run and its due row.
    monkeypatch.setattr(ops, "wake_record", failing(ops.wake_record))
    monkeypatch.setattr(ops, "insert_run", failing(ops.insert_run))
    monkeypatch.setattr(flow_rows, "store_flow", failing(flow_rows.store_flow))
    calls: list[Call] = [
        lambda conn: runner.emit(conn, "po.decided", {"order": 1, "approver": "a"}),
        lambda conn: runner.record_created(conn, order(50)),  # a new record: runs start
        lambda conn: runner.record_updated(conn, order(1), order(1, status="x")),
        lambda conn: runner.record_deleted(conn, 1),
        lambda conn: runner.save_flow(conn, {"name": "New", "start": "manual"}),
    ]
    for call in calls:
        refused_then_go_on(driver, call, sa.exc.DataError, "division by zero")


# -- tenants ----------------------------------------------------------------------------


def test_a_tenant_binding_refuses_what_names_no_tenant(pg_engine: sa.Engine) -> None:
    desk = mount_desk(pg_engine)
    desk.create(desk_record(1, "acme"))
    runner = desk.runner
    cases: list[tuple[Call, type[Exception], str]] = [
        (
            lambda conn: runner.emit(conn, "desk.replied", {"ticket": 1}),
            EventRejected,
            "must name its tenant in field 'tenant_id'",
        ),
        (
            lambda conn: runner.emit(conn, "desk.replied", {"ticket": 1, "tenant_id": True}),
            EventRejected,
            "cannot be a tenant key",
        ),
        (
            lambda conn: runner.record_created(conn, {"id": 2, "status": "new"}),
            RecordRejected,
            "has no 'tenant_id'",
        ),
        (lambda conn: runner.record_deleted(conn, 1), RecordRejected, "name the deleted"),
    ]
    for call, error, match in cases:
        with pg_engine.connect() as conn, conn.begin():
            with pytest.raises(error, match=match):
                call(conn)
            assert conn.execute(sa.select(sa.literal(1))).scalar_one() == 1
    desk.emit("desk.replied", {"ticket": "1", "tenant_id": "acme"})
    assert stored(desk, 1, tenant="acme")["priority"] == "replied"


# -- operators' actions run in their own transaction; a refusal is a sentence -----------


def test_operators_are_refused_with_a_sentence_never_a_driver_error(
    driver: testing.FlowDriver,
) -> None:
    runner = driver.runner
    [run] = driver.runs(1)
    journal = count(runner.engine, engine_tables.journal)
    # Spaces around an id are no part of it (the one rule of foundations.ids); the rest
    # is no id at all.
    not_run_ids: list[Any] = ["abc", 2**70, True, None, 1.5, "01", "1 1"]
    for run_id in not_run_ids:
        for act in (runner.cancel, runner.retry, runner.redrive, runner.restart):
            with pytest.raises(OperatorError, match="there is no run"):
                act(run_id, operator="olga")
        with pytest.raises(OperatorError, match="there is no run"):
            runner.history(run_id)
    not_keys: list[Any] = ["007", 2**64, True]
    for record_id in not_keys:
        with pytest.raises(OperatorError, match="purchase_order"):
            runner.start("Resend", record_id, operator="olga")
        with pytest.raises(OperatorError, match="purchase_order"):
            runner.runs(record_id)
    with pytest.raises(OperatorError, match="there is no purchase_order"):
        runner.start("Resend", 2**40, operator="olga")
    assert count(runner.engine, engine_tables.journal) == journal
    as_text: Any = str(run.id)
    runner.cancel(as_text, operator="olga")  # its id as text is its id
    assert driver.runs(1)[0].status == "cancelled"
