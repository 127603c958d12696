"""The support desk telling its requesters through a chat that refuses every message,
for the browser test of the console's notices page (served by ``flowrunner console
--app telling_desk:runner``): its notices fail for good and wait for an operator."""

from __future__ import annotations

import sqlalchemy as sa

from fixtures.tickets import app as tickets
from flowrunner import FlowBinding, FlowRunner, NotifyRule, errors, flow_runner
from flowrunner.delivery import Deliver, Message

TELL = """
- name: Tell
  start: created
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: "Seen: https://desk.example.com/t/{id}"}
"""


def chat_refuses(message: Message) -> None:
    raise errors.CommandRefused("the chat has no user " + message.recipient)


values = {name: getattr(tickets.binding, name) for name in FlowBinding.model_fields}
values["channels"] = {"chat": Deliver(chat_refuses)}
values["notify"] = [
    NotifyRule(audience="requester", to="requester_id", title="{title}", channel="chat"),
    NotifyRule(audience="assignee", to="assignee"),
]
binding = FlowBinding(**values)


def runner(url: str | None = None) -> FlowRunner:
    """The desk's runner on ``url``."""
    engine = sa.create_engine(url or "sqlite:///desk.db")
    return flow_runner(binding, engine, commands=tickets.COMMANDS)
