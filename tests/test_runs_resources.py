"""Several runners share one database: a support desk's tickets and a purchasing
department's orders, each runner with its own worker. Each advances, shows and steers
only its own resource's runs. On SQLite (one file) and PostgreSQL, through the driver."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from running import ACKNOWLEDGE, APPROVE_AND_SEND, T0, mount, stored

from flowrunner import errors, testing


def desk_and_purchasing(engine: sa.Engine) -> tuple[testing.FlowDriver, testing.FlowDriver]:
    """Both runners on one database, each record 1 of its own table, neither advanced yet."""
    tickets = mount(engine, "tickets", flows=ACKNOWLEDGE)
    orders = mount(engine, "purchase_orders", flows=APPROVE_AND_SEND)
    tickets.create({"id": 1, "title": "Printer", "requester_id": "ann"}, run=False)
    orders.create({"id": 1, "number": "PO-1", "requester_id": "bob", "amount": 900}, run=False)
    return tickets, orders


def test_each_runners_worker_advances_only_its_own_resources_runs(
    any_engine: sa.Engine,
) -> None:
    tickets, orders = desk_and_purchasing(any_engine)
    orders.run_until_idle()
    [order_run] = orders.runs(1)
    [ticket_run] = tickets.runs(1)
    assert order_run.status == "waiting" and order_run.resource == "purchase_order"
    # Untouched: the order runner's worker neither advanced nor failed the ticket's run.
    assert ticket_run.status == "running" and ticket_run.state == {}
    assert tickets.history(ticket_run.id) == []

    tickets.run_until_idle()
    assert tickets.runs(1)[0].status == "waiting"
    # Each driver waits for its own next due time only.
    assert tickets.next_due() == T0 + timedelta(days=1)
    assert orders.next_due() is None

    tickets.emit("ticket.replied", {"ticket": 1})
    assert [r.status for r in tickets.runs(1)] == ["done"]
    assert [r.status for r in orders.runs(1)] == ["waiting"]
    orders.emit("po.decided", {"order": 1, "decision": "approved", "approver": "boss"})
    assert [r.status for r in orders.runs(1)] == ["done"]
    assert stored(tickets, 1)["assignee"] == "triage"
    assert stored(orders, 1)["status"] == "sent"


def test_runs_history_and_notices_are_the_runners_own(any_engine: sa.Engine) -> None:
    tickets, orders = desk_and_purchasing(any_engine)
    tickets.run_until_idle()
    orders.run_until_idle()
    tickets.emit("ticket.replied", {"ticket": 1})
    orders.emit("po.decided", {"order": 1, "decision": "approved", "approver": "boss"})
    [ticket_run] = tickets.runs(1)
    [order_run] = orders.runs(1)
    assert [r.flow_name for r in tickets.runs(1)] == ["Acknowledge"]
    assert [r.flow_name for r in orders.runs(1)] == ["Approve and send"]
    # Another resource's run is no run of this runner's.
    with pytest.raises(errors.OperatorError, match=f"there is no run {ticket_run.id}"):
        orders.history(ticket_run.id)
    with pytest.raises(errors.OperatorError, match=f"there is no run {order_run.id}"):
        tickets.history(order_run.id)
    assert [n.message for n in tickets.runner.notices()] == ["Replied."]
    assert [n.message for n in orders.runner.notices()] == ["Approved."]
    assert [n.message for n in tickets.notices()] == ["Replied."]
    assert orders.notices(ticket_run.id) == []
    [told] = tickets.runner.notices()
    assert not orders.runner.mark_delivered(told.id)
    assert tickets.runner.mark_delivered(told.id)


def test_operators_steer_only_their_runners_runs(any_engine: sa.Engine) -> None:
    tickets, orders = desk_and_purchasing(any_engine)
    orders.run_until_idle()
    tickets.run_until_idle()
    [ticket_run] = tickets.runs(1)
    runner = orders.runner
    refused = f"there is no run {ticket_run.id}"
    with pytest.raises(errors.OperatorError, match=refused):
        runner.cancel(ticket_run.id, operator="olga")
    with pytest.raises(errors.OperatorError, match=refused):
        runner.retry(ticket_run.id, operator="olga")
    with pytest.raises(errors.OperatorError, match=refused):
        runner.redrive(ticket_run.id, operator="olga")
    with pytest.raises(errors.OperatorError, match=refused):
        runner.restart(ticket_run.id, operator="olga")
    assert tickets.runs(1)[0].status == "waiting"
    # An event about the ticket wakes the ticket's run, not the order 1 that shares its id.
    tickets.emit("ticket.replied", {"ticket": 1})
    assert [r.status for r in orders.runs(1)] == ["waiting"]
