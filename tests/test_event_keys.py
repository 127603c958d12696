"""An event reaches the record it was checked against: the key rule, end to end.

An event's record field is taken exactly or refused (``store.app_tables.key_of``): an
accepted one is stored under the key the record's runs hold and wakes them; a refused
one raises ``EventRejected`` with a sentence and stores nothing. For integer keys
(purchase orders, tickets) and a text key, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import enum
import uuid
from decimal import Decimal
from typing import Any

import migrated
import pytest
import sqlalchemy as sa
from running import T0, mount, stored

from flowrunner import (
    EventRejected,
    FlowBinding,
    OperatorError,
    RecordRejected,
    flow_runner,
    tables,
    testing,
)
from flowrunner.store import engine_tables
from flowrunner.store import operations as ops


class Number(enum.IntEnum):
    SEVEN = 7


# Every approver must answer, so each accepted event must be counted for the run to end.
ALL_THREE = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: "a, b, c", mode: all}
    - {position: 2, kind: set, title: Done, field: status, value: approved}
"""

# The record each set of events is about, and the ways each event names it.
ACCEPTED: dict[int, list[Any]] = {
    7: [7, "7", Number.SEVEN],
    0: [0, "0", 0],
    -3: [-3, "-3", "-3"],
    2147483647: ["2147483647", 2147483647, "2147483647"],
}

# Ways of naming order 7 that are not how a key is written: refused, never guessed.
REFUSED: list[Any] = [
    "007",
    " 7 ",
    "7 ",
    "\t7",
    "7\n",
    "+7",
    "7_0",
    "7.0",
    "0x7",
    "1e1",
    "-0",
    "",
    "٧",  # ARABIC-INDIC DIGIT SEVEN: int() reads it as 7
    "７",  # FULLWIDTH DIGIT SEVEN
    True,
    False,
    7.0,
    7.5,
    float("nan"),
    float("inf"),
    [7],
    {"id": 7},
    b"7",
    Decimal("7"),
    2**63,
    -(2**63) - 1,
    "9" * 25,
]

# Keys written as keys, of no order: refused as naming nothing, never as a driver error.
MISSING: list[Any] = [99, "99", 2**40, 2**63 - 1, -(2**63), str(2**63 - 1)]


def order(order_id: int) -> dict[str, Any]:
    return {"id": order_id, "number": f"PO-{order_id}", "requester_id": "ann", "amount": 500}


def events(engine: sa.Engine, record_id: str) -> list[ops.EventRow]:
    with engine.connect() as conn:
        return ops.events_after(conn, resource="purchase_order", record_id=record_id)


def all_events(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(engine_tables.events)).scalar_one()
        )


def test_every_refused_key_raises_a_sentence_and_stores_nothing(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=ALL_THREE)
    driver.create(order(7))
    for value in REFUSED:
        payload = {"order": value, "decision": "approved", "approver": "a"}
        with pytest.raises(EventRejected) as refused:
            driver.emit("po.decided", payload)
        message = str(refused.value)
        assert "'order'" in message and "send" in message, message
        assert "\n" not in message
    for value in MISSING:
        payload = {"order": value, "decision": "approved", "approver": "a"}
        with pytest.raises(EventRejected, match="which does not exist"):
            driver.emit("po.decided", payload)
    with pytest.raises(EventRejected, match="must name its purchase_order in field 'order'"):
        driver.emit("po.decided", {"order": None, "approver": "a"})
    assert all_events(any_engine) == 0
    assert stored(driver, 7)["status"] == "open"
    [run] = driver.runs(7)
    assert run.status == "waiting"


def test_every_accepted_key_is_delivered_and_counted(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=ALL_THREE)
    for order_id in ACCEPTED:
        driver.create(order(order_id))
    for order_id, names in ACCEPTED.items():
        for approver, value in zip(("a", "b", "c"), names, strict=True):
            assert stored(driver, order_id)["status"] == "open"
            driver.emit(
                "po.decided", {"order": value, "decision": "approved", "approver": approver}
            )
        # Only the third answer ends the wait: all three were counted for this order.
        assert stored(driver, order_id)["status"] == "approved", (order_id, names)
        kept = events(any_engine, str(order_id))
        assert len(kept) == 3
        assert {e.record_id for e in kept} == {str(order_id)}
    assert all_events(any_engine) == 3 * len(ACCEPTED)


# -- tickets: a waitFor step ---------------------------------------------------------

AWAIT_REPLY = """
- name: Await reply
  start: created
  steps:
    - {position: 1, kind: waitFor, title: Reply, event: ticket.replied}
    - {position: 2, kind: set, title: Replied, field: status, value: replied}
"""


def ticket(ticket_id: int) -> dict[str, Any]:
    return {"id": ticket_id, "title": "Printer", "requester_id": "ann"}


@pytest.mark.parametrize("value", [5, "5"])
def test_a_ticket_reply_named_either_way_wakes_its_wait(any_engine: sa.Engine, value: Any) -> None:
    driver = mount(any_engine, "tickets", flows=AWAIT_REPLY)
    driver.create(ticket(5))
    for wrong in ("05", " 5", "+5", "٥", True, 5.0, "5.0"):
        with pytest.raises(EventRejected, match=r"'ticket'.*send"):
            driver.emit("ticket.replied", {"ticket": wrong})
    assert stored(driver, 5)["status"] == "open"
    driver.emit("ticket.replied", {"ticket": value})
    assert stored(driver, 5)["status"] == "replied"


# -- a text key -------------------------------------------------------------------------


def keyed_app(resource: str, key: sa.Column[Any], event: str) -> tuple[sa.MetaData, FlowBinding]:
    """A resource of a key and a status, whose records ``event`` names by their key."""
    metadata = sa.MetaData()
    sa.Table(resource, metadata, key, sa.Column("status", sa.String(32)))
    binding = FlowBinding(
        resource=resource,
        key=key.name,
        flows_table=f"{resource}_flow",
        steps_table=f"{resource}_flow_step",
        events={event: resource},
        set_columns=["status"],
    )
    tables.for_binding(metadata, binding)
    return metadata, binding


def mount_waiting(
    engine: sa.Engine, metadata: sa.MetaData, binding: FlowBinding, event: str, status: str
) -> testing.FlowDriver:
    """The resource mounted with one flow: wait for ``event``, then set ``status``."""
    metadata.create_all(engine)
    migrated.upgrade(engine)
    runner = flow_runner(binding, engine)
    with engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Wait", "start": "created"})
        steps = [
            {"position": 1, "kind": "waitFor", "event": event},
            {"position": 2, "kind": "set", "field": "status", "value": status},
        ]
        for step in steps:
            runner.save_step(conn, {"flow_id": flow, **step})
    return testing.FlowDriver(runner, start=T0)


parcels, PARCELS = keyed_app(
    "parcel", sa.Column("code", sa.String(32), primary_key=True), "parcel.scanned"
)


def mount_parcels(engine: sa.Engine) -> testing.FlowDriver:
    return mount_waiting(engine, parcels, PARCELS, "parcel.scanned", "delivered")


def test_a_text_key_is_taken_exactly(any_engine: sa.Engine) -> None:
    driver = mount_parcels(any_engine)
    for code in ("AB-7", "007", " AB-7 "):
        driver.create({"code": code, "status": "sent"})
    for wrong in (7, True, 7.0, "AB\x00-7", ["AB-7"]):
        with pytest.raises(EventRejected, match=r"'parcel'.*send"):
            driver.emit("parcel.scanned", {"parcel": wrong})
    for missing in ("ab-7", "AB-7\n", "7"):
        with pytest.raises(EventRejected, match="which does not exist"):
            driver.emit("parcel.scanned", {"parcel": missing})
    driver.emit("parcel.scanned", {"parcel": "007"})
    assert stored(driver, "007")["status"] == "delivered"
    assert stored(driver, "AB-7")["status"] == "sent"
    driver.emit("parcel.scanned", {"parcel": " AB-7 "})  # no trimming: its own record
    assert stored(driver, " AB-7 ")["status"] == "delivered"
    assert stored(driver, "AB-7")["status"] == "sent"
    driver.emit("parcel.scanned", {"parcel": "AB-7"})
    assert stored(driver, "AB-7")["status"] == "delivered"


def test_records_and_operators_follow_the_same_rule(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=ALL_THREE)
    runner = driver.runner
    driver.create(order(7))
    with any_engine.begin() as conn:
        for wrong in ("007", True, 7.5):
            with pytest.raises(RecordRejected, match="send a whole number"):
                runner.record_created(conn, {**order(7), "id": wrong})
            with pytest.raises(RecordRejected, match="send a whole number"):
                runner.record_deleted(conn, wrong)  # type: ignore[arg-type]
        with pytest.raises(RecordRejected, match="has no 'id'"):
            runner.record_created(conn, {"number": "PO-8", "amount": 5})
        with pytest.raises(RecordRejected, match="has no 'id'"):
            runner.record_updated(conn, order(7), {"status": "open"})
        # Given as text, the key is the one its runs hold: nothing new starts.
        assert runner.record_created(conn, {**order(7), "id": "7"}) == []
    [run] = driver.runs("7")
    assert run.record_id == "7"
    with pytest.raises(OperatorError, match="send a whole number"):
        runner.runs("007")
    with pytest.raises(OperatorError, match="send a whole number"):
        runner.start("Approve", "007", operator="olga")
    with pytest.raises(OperatorError, match="there is no run 'x'"):
        runner.cancel("x", operator="olga")
    driver.delete("7")  # the order's waiting run ends, as it would for 7
    [run] = driver.runs(7)
    assert run.ended


# -- a UUID key (PostgreSQL: SQLite reflects such a column as text) ---------------------

devices, DEVICES = keyed_app("device", sa.Column("id", sa.Uuid, primary_key=True), "device.seen")


def test_a_uuid_key_is_its_text_as_str_writes_it(pg_engine: sa.Engine) -> None:
    driver = mount_waiting(pg_engine, devices, DEVICES, "device.seen", "seen")
    key = uuid.UUID("d25598f3-0a07-472f-a0e6-c6f6cf4e8536")
    driver.create({"id": key, "status": "new"})
    [run] = driver.runs(str(key))
    assert run.record_id == str(key)
    for wrong in (str(key).upper(), key.hex, f"{{{key}}}", "not-a-uuid", 7):
        with pytest.raises(EventRejected, match=r"'device'.*send its UUID as text"):
            driver.emit("device.seen", {"device": wrong})
    with pytest.raises(EventRejected, match="which does not exist"):
        driver.emit("device.seen", {"device": str(uuid.UUID(int=1))})
    assert stored(driver, key)["status"] == "new"
    driver.emit("device.seen", {"device": str(key)})
    assert stored(driver, key)["status"] == "seen"
