"""The runner's opt-in hooks: ORM flushes start flows; the authorization check."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, app, mount
from sqlalchemy import orm

from flowrunner import BindingError, flow_runner

TICKETS = app("tickets")
PO = app("purchase_orders")


class Base(orm.DeclarativeBase):
    pass


class Ticket(Base):
    __table__ = TICKETS.ticket
    status: orm.Mapped[str | None]  # typing only: the columns come from the table


def test_orm_inserts_and_updates_start_flows_in_the_same_flush(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    unwatch = driver.runner.watch(Ticket)
    try:
        with orm.Session(any_engine) as session, session.begin():
            session.add(Ticket(id=1, title="Printer", requester_id="ann", due_at=T0))
        assert [r.flow_name for r in driver.runs(1)] == ["SLA warning"]
        with orm.Session(any_engine) as session, session.begin():
            ticket = session.get(Ticket, 1)
            assert ticket is not None
            ticket.status = "waiting"
        assert sorted(r.flow_name for r in driver.runs(1)) == ["Follow up", "SLA warning"]
        with orm.Session(any_engine) as session:  # rolled back: nothing starts
            ticket = session.get(Ticket, 1)
            assert ticket is not None
            ticket.status = "open"
            session.flush()
            session.rollback()
        with orm.Session(any_engine) as session, session.begin():
            ticket = session.get(Ticket, 1)
            assert ticket is not None
            ticket.status = "waiting"  # unchanged value: no change, nothing starts
        assert len(driver.runs(1)) == 2
    finally:
        unwatch()


def test_the_authorization_hook_is_checked_at_mount_and_on_every_attempt(
    any_engine: sa.Engine,
) -> None:
    allowed = {
        "request_approval",
        "remind_approver",
        "close_approval_requests",
        "send_purchase_order",
    }

    def authorize(principal: str, command: str) -> bool:
        return principal == "automation" and command in allowed

    PO.metadata.create_all(any_engine)
    with pytest.raises(BindingError, match="'clerk' is not allowed to run command"):
        flow_runner(
            PO.binding,
            any_engine,
            commands=PO.COMMANDS,
            run_as="clerk",
            authorize=authorize,
            check_schema=False,
        )
    flows = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""
    driver = mount(any_engine, "purchase_orders", flows=flows, authorize=authorize)
    allowed.discard("send_purchase_order")  # the grant is revoked after startup
    order: dict[str, Any] = {"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 5}
    driver.create(order)
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason is not None
    assert "not allowed to run command 'send_purchase_order'" in run.reason
