"""A review desk whose runs of one flow stand everywhere a flow's dashboard counts:
answered, given up, handed over, failed, waiting, late (the dashboard's tests and
``bench/dashboard.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from running import T0, mount

from flowrunner import errors, testing
from flowrunner.engine import commands

FLOWS = """
- name: Review
  start: created
  condition: status = review
  steps:
    - {position: 1, kind: notify, title: Ask, audience: requester, message: Any news}
    - {position: 2, kind: waitFor, title: Reply, event: ticket.replied, duration: 2 days}
    - {position: 3, kind: assign, title: Hand over, assign_to: triage}
"""


def hand_over(ctx: commands.CommandContext) -> None:
    """The triage desk refuses every third ticket."""
    if int(str(ctx.record["id"])) % 3 == 0:
        raise errors.CommandRefused("triage is full")


def ticket(n: int) -> dict[str, object]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "status": "review"}


def reviewed(engine: sa.Engine, days: int, *, start: datetime = T0) -> testing.FlowDriver:
    """Three tickets a day for ``days`` days: the first answered within hours, the others
    left to give up after two days (then handed over; every third refused, failed). Then
    two tickets waiting, and two whose start no worker has taken for an hour (late)."""
    driver = mount(
        engine, "tickets", flows=FLOWS, commands={"assign_ticket": hand_over}, start=start
    )
    n = 0
    for day in range(days):
        for _ in range(3):
            n += 1
            driver.create(ticket(n))
        driver.advance(timedelta(hours=1 + day % 5))
        driver.emit("ticket.replied", {"ticket": n - 2})
        driver.advance(timedelta(hours=23 - day % 5))
    driver.advance("3 days")
    for _ in range(2):
        n += 1
        driver.create(ticket(n))
    driver.advance(timedelta(hours=2))
    for _ in range(2):
        n += 1
        driver.create(ticket(n), run=False)
    driver.advance(timedelta(hours=1), run=False)
    return driver
