"""Each change starts flows once, however often it is reported: twice in one transaction,
by the ORM hook and by the application, or from inside a savepoint. The same change in
a later transaction is a new change. On SQLite and PostgreSQL, through the real worker."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from running import app, mount, stored
from sqlalchemy import orm

from flowrunner import testing
from flowrunner.flows import starts

PO = app("purchase_orders")

FLOWS = """
- name: On closing
  start: updated
  changes: status
  condition: status = closed
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Your order closed.}
- name: Status changed
  start: updated
  changes: status
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Status changed.}
- name: Amount changed
  start: updated
  changes: amount
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Amount changed.}
"""
# What one closing of an order runs.
CLOSED_ONCE = ["On closing: done", "Status changed: done"]


class Base(orm.DeclarativeBase):
    pass


class PurchaseOrder(Base):
    __table__ = PO.purchase_order
    status: orm.Mapped[str | None]  # typing only: the columns come from the table
    amount: orm.Mapped[Decimal]


def orders(any_engine: sa.Engine, *ids: int) -> testing.FlowDriver:
    driver = mount(any_engine, "purchase_orders", flows=FLOWS)
    for n in ids:
        driver.create({"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 100})
    return driver


def flows_run(driver: testing.FlowDriver, order: int) -> list[str]:
    """The flows that ran on the order, oldest first, each with its status."""
    return [f"{r.flow_name}: {r.status}" for r in sorted(driver.runs(order), key=lambda r: r.id)]


def close(conn: sa.Connection, order: int) -> None:
    table = PO.purchase_order
    conn.execute(sa.update(table).where(table.c.id == order).values(status="closed"))


@contextlib.contextmanager
def closing(
    driver: testing.FlowDriver, order: int
) -> Iterator[tuple[sa.Connection, dict[str, Any], dict[str, Any]]]:
    """A transaction that closes the order: yields it, and the order before and after."""
    before = stored(driver, order)
    with driver.runner.engine.begin() as conn:
        close(conn, order)
        yield conn, before, {**before, "status": "closed"}


@contextlib.contextmanager
def watching(driver: testing.FlowDriver) -> Iterator[None]:
    """The runner hears of the orders' changes from the ORM's flushes meanwhile."""
    unwatch = driver.runner.watch(PurchaseOrder)
    try:
        yield
    finally:
        unwatch()


def loaded(session: orm.Session, order: int) -> PurchaseOrder:
    found = session.get(PurchaseOrder, order)
    assert found is not None
    return found


def test_the_orders_closing_reported_twice_in_one_transaction_starts_the_flow_once(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1)
    runner = driver.runner
    with closing(driver, 1) as (conn, before, after):
        first = runner.record_updated(conn, before, after)
        again = runner.record_updated(conn, before, dict(after))
    driver.run_until_idle()
    assert len(first) == 2 and again == []
    assert flows_run(driver, 1) == CLOSED_ONCE


def test_watched_and_also_reported_starts_once_whichever_comes_first(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1, 2)
    runner = driver.runner
    with watching(driver):
        # The flush reports the closing first, then the application reports it too.
        before = stored(driver, 1)
        with orm.Session(any_engine) as session, session.begin():
            loaded(session, 1).status = "closed"
            session.flush()
            runner.record_updated(session.connection(), before, {**before, "status": "closed"})
        # The application reports first; the flush at commit reports it again.
        before = stored(driver, 2)
        with orm.Session(any_engine) as session, session.begin():
            loaded(session, 2).status = "closed"
            runner.record_updated(session.connection(), before, {**before, "status": "closed"})
    driver.run_until_idle()
    assert flows_run(driver, 1) == CLOSED_ONCE
    assert flows_run(driver, 2) == CLOSED_ONCE


def test_closed_reopened_closed_again_in_three_transactions_is_three_changes(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1)
    driver.update(1, status="closed")
    driver.update(1, status="open")
    driver.update(1, status="closed")  # the same change as the first, later: a new one
    assert flows_run(driver, 1) == [
        "On closing: done",
        "Status changed: done",
        "Status changed: done",
        "On closing: done",
        "Status changed: done",
    ]


def test_a_change_reported_in_a_savepoint_and_after_it_is_one_change(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1)
    runner = driver.runner
    with closing(driver, 1) as (conn, before, after):
        with conn.begin_nested():
            runner.record_updated(conn, before, after)
        runner.record_updated(conn, before, after)
    driver.run_until_idle()
    assert flows_run(driver, 1) == CLOSED_ONCE


def test_the_same_change_of_two_orders_in_one_transaction_is_two_changes(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1, 2)
    runner = driver.runner
    with runner.engine.begin() as conn:
        for n in (1, 2):
            before = {"id": n, "status": "open"}
            close(conn, n)
            runner.record_updated(conn, before, {"id": n, "status": "closed"})
    driver.run_until_idle()
    assert flows_run(driver, 1) == CLOSED_ONCE
    assert flows_run(driver, 2) == CLOSED_ONCE


def test_an_amount_reported_as_decimal_by_the_orm_and_as_int_by_the_app_is_one_change(
    any_engine: sa.Engine,
) -> None:
    driver = orders(any_engine, 1)
    with watching(driver), orm.Session(any_engine) as session, session.begin():
        loaded(session, 1).amount = Decimal("250.00")
        session.flush()
        driver.runner.record_updated(
            session.connection(), {"id": 1, "amount": 100}, {"id": 1, "amount": 250}
        )
    driver.run_until_idle()
    assert flows_run(driver, 1) == ["Amount changed: done"]


def test_a_change_is_its_record_its_columns_before_and_after_and_its_transaction(
    sqlite_engine: sa.Engine,
) -> None:
    def key(conn: sa.Connection, before: dict[str, Any], after: dict[str, Any]) -> str:
        return starts.change_of(conn, before, after, record_id="7", tenant=None).key

    moment = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    with sqlite_engine.begin() as conn:
        closing = key(conn, {"status": "open"}, {"status": "closed"})
        assert key(conn, {"status": "open", "note": "x"}, {"status": "closed"}) == closing
        assert key(conn, {"status": "open"}, {"status": "closed", "note": "x"}) == closing
        assert key(conn, {"status": "closed"}, {"status": "open"}) != closing
        assert key(conn, {"a": Decimal("5.00")}, {"a": 6}) == key(conn, {"a": 5}, {"a": 6.0})
        in_paris = moment.astimezone(timezone(timedelta(hours=1)))
        assert key(conn, {"d": None}, {"d": moment}) == key(conn, {"d": None}, {"d": in_paris})
        assert key(conn, {"d": None}, {"d": moment.replace(tzinfo=None)}) == key(
            conn, {"d": None}, {"d": moment}
        )
        change = starts.change_of(
            conn, {"status": "open", "a": 1}, {"status": "closed", "a": 1}, record_id="7", tenant=1
        )
        assert change.columns == {"status"} and change.key.startswith("updated:")
        assert change.key != closing  # another tenant's record 7
    with sqlite_engine.begin() as conn:
        assert key(conn, {"status": "open"}, {"status": "closed"}) != closing
