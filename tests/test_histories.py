"""Whole histories of the sample apps' scenarios, as a business user reads them.

Each scenario runs the real engine on SQLite and PostgreSQL and prints every run's
history — its flow time, position, step, the code programs read and the sentence — then
compares it with ``tests/histories/<scenario>.txt`` exactly. After a deliberate change
to the sentences or the sample flows, write the files again and review the diff::

    FLOWRUNNER_WRITE_HISTORIES=1 python -m pytest tests/test_histories.py -k sqlite
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from running import T0, decide, mount

from flowrunner import testing
from flowrunner.history import flows, runs

HISTORIES = Path(__file__).with_name("histories")
WRITE = os.environ.get("FLOWRUNNER_WRITE_HISTORIES") == "1"


def text(driver: testing.FlowDriver, records: dict[Any, str]) -> str:
    """Every run of the records, newest first as ``runs()`` gives them, line by line."""
    out: list[str] = []
    zone = driver.runner.config.timezone
    for record_id, label in records.items():
        for run in driver.runs(record_id):
            out.append(f"## {label} — run {run.id}, {run.flow_name}: {run.status}")
            for line in driver.history(run.id):
                moment = flows.when(line.due_at or line.at, zone)
                position = "" if line.position is None else str(line.position)
                title = line.title or ("" if line.step_id is None else line.kind or "")
                out.append(
                    f"{moment:<16} {position:>3}  {title:<34} {line.what:<15} {line.sentence}"
                )
            for waiting in run.waiting:
                out.append(f"   {flows.waiting_sentence(waiting, zone)}")
            if run.reason:
                out.append(f"   Why it ended: {runs.reason(run.reason)}")
            out.append("")
    return "\n".join(out)


# -- the scenarios --------------------------------------------------------------------------


def order(order_id: int, amount: int = 25000, **extra: Any) -> dict[str, Any]:
    return {
        "id": order_id,
        "number": f"PO-{1000 + order_id}",
        "requester_id": "ann",
        "amount": amount,
        **extra,
    }


def purchase_orders(engine: sa.Engine) -> str:
    """Approved and sent; rejected; withdrawn; nobody answered; small; refused and
    restarted; a priority raised; one still waiting for finance."""
    driver = mount(engine, "purchase_orders")
    for n in (1, 2, 3, 4):
        driver.create(order(n))
    driver.create(order(5, amount=500))
    driver.create(order(6, amount=800, priority="hold"))
    driver.advance("1 day")
    for approver in ("manager@example.com", "cfo@example.com", "controller@example.com"):
        decide(driver, 1, approver)
    decide(driver, 2, "manager@example.com")
    decide(driver, 2, "controller@example.com", "rejected")
    driver.advance("2 hours")
    driver.update(3, status="withdrawn")
    [refused] = driver.runs(6)
    driver.update(6, priority="normal")
    driver.runner.restart(refused.id, operator="olga", reason="released by purchasing")
    driver.run_until_idle()
    driver.create(order(7))
    driver.update(7, priority="high")
    decide(driver, 7, "manager@example.com")
    decide(driver, 7, "cfo@example.com")
    driver.advance("1 week")  # order 4 was never answered; order 7's waits give up too
    driver.create(order(8), run=False)
    driver.advance("1 day 3 hours")
    decide(driver, 8, "cfo@example.com")
    labels = {n: f"PO-{1000 + n}" for n in range(1, 9)}
    return text(driver, labels)


def ticket(ticket_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": ticket_id,
        "title": f"Ticket {ticket_id}",
        "requester_id": "ann",
        "assignee": "bob",
        "due_at": T0 + timedelta(hours=8),
        **extra,
    }


def tickets(engine: sa.Engine) -> str:
    """The SLA warning (resolved in time, late), the follow-up loop (answered after one
    nudge, one cancelled by an operator, one answered in time), a manual reassignment."""
    driver = mount(engine, "tickets")
    driver.create(ticket(1))
    driver.create(ticket(2))
    driver.advance("5 hours")
    driver.update(1, status="resolved")
    driver.advance("4 hours")  # ticket 2 is late: priority raised
    driver.update(2, status="waiting")
    driver.advance("4 days")  # no reply in three days: nudged, two more days
    driver.emit("ticket.replied", {"ticket": 2})
    driver.update(2, status="open")
    driver.advance("2 days")
    driver.create(ticket(3, due_at=None, status="waiting"), run=False)
    driver.update(3, status="answered")
    driver.update(3, status="waiting")
    [follow_up] = driver.runs(3)
    driver.runner.cancel(follow_up.id, operator="olga", reason="merged into ticket 2")
    driver.run_until_idle()
    driver.runner.start("Reassign to triage", 1, operator="olga")
    driver.run_until_idle()
    driver.create(ticket(4, due_at=None))
    driver.update(4, status="waiting")
    driver.advance("1 day")
    driver.emit("ticket.replied", {"ticket": 4}, run=False)  # the reply, and the ticket
    driver.update(4, status="open")  # reopened by the desk, before any worker looks
    labels = {n: f"Ticket {n}" for n in (1, 2, 3, 4)}
    return text(driver, labels)


SCENARIOS: dict[str, Callable[[sa.Engine], str]] = {
    "purchase_orders": purchase_orders,
    "tickets": tickets,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_whole_history_reads_as_written(any_engine: sa.Engine, name: str) -> None:
    got = SCENARIOS[name](any_engine) + "\n"
    path = HISTORIES / f"{name}.txt"
    if WRITE:
        HISTORIES.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert got == expected, (
        f"{path.name} differs; if the change is meant, write the histories again "
        "(FLOWRUNNER_WRITE_HISTORIES=1, see this module's docstring) and review the diff"
    )
