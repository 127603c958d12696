"""The approval's condition `status = withdrawn` ends the wait as soon as the order is withdrawn.

Through the real worker on SQLite and PostgreSQL, along each path by which the record
changes: the application's ``record_updated``, the ORM hook (``runner.watch``), and
another run's set step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from running import T0, app, mount, stored, whats
from sqlalchemy import orm

from flowrunner import testing

PO = app("purchase_orders")

WITHDRAWABLE = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: "ann, bob", mode: all,
       condition: status = withdrawn}
    - {position: 2, kind: set, title: Next, field: priority, value: high}
- name: Withdraw
  start: manual
  steps:
    - {position: 1, kind: set, title: Withdraw the order, field: status, value: withdrawn}
"""

# An order waits until it is approved (by hand, in another flow), then an hour more.
APPROVED_THEN_AN_HOUR = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: ann, condition: status = approved}
    - {position: 2, kind: wait, title: An hour, duration: 1 hour}
    - {position: 3, kind: notify, title: Tell, audience: requester, message: Approved.}
- name: Approve by hand
  start: manual
  steps:
    - {position: 1, kind: set, title: Approve the order, field: status, value: approved}
"""


class Base(orm.DeclarativeBase):
    pass


class Order(Base):
    __table__ = PO.purchase_order
    status: orm.Mapped[str | None]  # typing only: the columns come from the table


def order(order_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": order_id,
        "number": f"PO-{order_id}",
        "requester_id": "ann",
        "amount": 25000,
        **extra,
    }


def approval_run(driver: testing.FlowDriver, order_id: int) -> Any:
    return next(r for r in driver.runs(order_id) if r.flow_name == "Approve")


def waiting_for_approval(engine: sa.Engine) -> testing.FlowDriver:
    """Order 1 created, its approval waiting on ann and bob."""
    driver = mount(engine, "purchase_orders", flows=WITHDRAWABLE)
    driver.create(order(1))
    assert approval_run(driver, 1).status == "waiting"
    return driver


def withdrawn_requests(engine: sa.Engine) -> list[tuple[str, bool]]:
    table = PO.approval_request
    query = sa.select(table.c.approver, table.c.withdrawn_at.is_not(None)).order_by(table.c.id)
    with engine.connect() as conn:
        return [(who, bool(done)) for who, done in conn.execute(query)]


def ended_by_its_condition(driver: testing.FlowDriver, engine: sa.Engine) -> None:
    run = approval_run(driver, 1)
    assert run.status == "done"
    lines = whats(driver, run.id)
    assert "Approval: condition" in lines and "Next: set" in lines
    assert "Approval: cancel" in lines and "Approval: cancel_done" in lines
    assert withdrawn_requests(engine) == [("ann", True), ("bob", True)]


def test_status_withdrawn_ends_the_wait_as_soon_as_record_updated_says_so(
    any_engine: sa.Engine,
) -> None:
    driver = waiting_for_approval(any_engine)
    driver.update(1, status="on hold")
    assert approval_run(driver, 1).status == "waiting"
    driver.update(1, status="withdrawn")  # no event, no clock move: the change alone
    ended_by_its_condition(driver, any_engine)


def test_status_withdrawn_ends_the_wait_as_soon_as_an_orm_flush_says_so(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=WITHDRAWABLE)
    unwatch = driver.runner.watch(Order)
    try:
        with orm.Session(any_engine) as session, session.begin():
            session.add(Order(**order(1)))
        driver.run_until_idle()
        assert approval_run(driver, 1).status == "waiting"
        with orm.Session(any_engine) as session, session.begin():
            found = session.get(Order, 1)
            assert found is not None
            found.status = "withdrawn"
        driver.run_until_idle()
    finally:
        unwatch()
    ended_by_its_condition(driver, any_engine)


def test_status_withdrawn_ends_the_wait_as_soon_as_another_runs_set_step_writes_it(
    any_engine: sa.Engine,
) -> None:
    driver = waiting_for_approval(any_engine)
    driver.runner.start("Withdraw", 1, operator="olga")
    driver.run_until_idle()
    assert stored(driver, 1)["status"] == "withdrawn"
    ended_by_its_condition(driver, any_engine)


def test_an_order_withdrawn_before_the_wait_starts_ends_it_at_once(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=WITHDRAWABLE)
    driver.create(order(1, status="withdrawn"))
    ended_by_its_condition(driver, any_engine)


def test_the_sample_flow_ends_both_approvals_when_the_order_is_withdrawn(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    driver.advance("1 day")
    driver.update(1, status="withdrawn")
    [run] = driver.runs(1)
    assert run.status == "done"
    lines = whats(driver, run.id)
    assert lines.count("Manager approval: condition") == 1
    assert lines.count("Finance approval: condition") == 1
    assert "Rejected?: condition" in lines  # withdrawn, not rejected: no rejection notice
    assert driver.notices() == []
    assert all(done for _, done in withdrawn_requests(any_engine))


def approved_at_ten(driver: testing.FlowDriver, by_hand: bool) -> None:
    """Order 1 waits for its approval from 09:00; at 10:00 it is approved."""
    driver.create(order(1))
    driver.advance("1 hour")
    if by_hand:
        driver.runner.start("Approve by hand", 1, operator="olga")
        driver.run_until_idle()
    else:
        driver.update(1, status="approved")


def told_at_eleven(driver: testing.FlowDriver) -> None:
    run = approval_run(driver, 1)
    [held] = [h for h in driver.history(run.id) if h.what == "condition"]
    assert held.due_at == T0 + timedelta(hours=1) and not held.late  # 10:00, not 09:00
    driver.advance("59 minutes")
    assert driver.notices() == []  # an hour after the approval, not after the wait began
    driver.advance("1 minute")
    [notice] = driver.notices()
    assert notice.at == T0 + timedelta(hours=2)


def test_an_order_approved_at_ten_by_another_flows_set_is_told_at_eleven(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=APPROVED_THEN_AN_HOUR)
    approved_at_ten(driver, by_hand=True)
    told_at_eleven(driver)


def test_an_order_approved_at_ten_by_record_updated_is_told_at_eleven(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=APPROVED_THEN_AN_HOUR)
    approved_at_ten(driver, by_hand=False)
    told_at_eleven(driver)
