"""A support desk whose runs are in every state an operator meets, for the tests of the
Operations room (the runner's queries and ``flowrunner runs``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from running import T0, mount

from flowrunner import errors, testing
from flowrunner.engine import commands

# Each ticket's status chooses its flow: open is told and done at once, listen tells the
# requester and waits for a reply, handover warns an assignee nobody is and hands the
# ticket to a desk that refuses it.
FLOWS = """
- name: Quick
  start: created
  condition: status = open
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: Seen.}
- name: Listen
  start: created
  condition: status = listen
  steps:
    - {position: 1, kind: notify, title: Ask, audience: requester, message: Any news}
    - {position: 2, kind: waitFor, title: Reply, event: ticket.replied, duration: 400 days}
- name: Hand over
  start: created
  condition: status = handover
  steps:
    - {position: 1, kind: notify, title: Warn, audience: assignee, message: Coming.}
    - {position: 2, kind: assign, title: Hand over, assign_to: triage}
"""


def refuse(ctx: commands.CommandContext) -> None:
    raise errors.CommandRefused("the desk said no")


def ticket(n: int, status: str) -> dict[str, object]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "status": status}


def desk(engine: sa.Engine, *, start: datetime = T0) -> testing.FlowDriver:
    """Five tickets a day apart, one run each (run n is ticket n's):

    1. done — Quick told ann, and the notice was delivered;
    2. waiting for a reply — its notice to ann is pending;
    3. failed — the desk refused it; its warning to the assignee is undeliverable;
    4. cancelled by olga ("duplicate") — its notice is pending;
    5. stuck — created, due at once, and an hour later no worker has taken it.

    The clock ends an hour after ticket 5 was created (``start`` + 4 days 1 hour).
    """
    driver = mount(engine, "tickets", flows=FLOWS, commands={"assign_ticket": refuse}, start=start)
    driver.create(ticket(1, "open"))
    driver.advance("1 day")
    driver.create(ticket(2, "listen"))
    driver.advance("1 day")
    driver.create(ticket(3, "handover"))
    driver.advance("1 day")
    driver.create(ticket(4, "listen"))
    driver.runner.cancel(4, operator="olga", reason="duplicate")
    driver.run_until_idle()
    driver.advance("1 day")
    driver.create(ticket(5, "listen"), run=False)
    driver.advance(timedelta(hours=1), run=False)
    [told] = driver.notices(1)
    driver.runner.mark_delivered(told.id)
    return driver
