"""How a notify step tells its audience: the notice filled in from the record, or why not.

The step's ``message`` and the rule's ``title`` are filled from the record as the run
sees it at the step (a set step just before it included). The recipient is the value of
the rule's ``to`` column; when it is empty the notice is still written, as
undeliverable, and the history says who could not be told and why — the run goes on.

History lines (``what`` codes that stay the same, each with a mapping as its detail):

- ``notice``: ``{"audience", "recipient", "message"}`` — a notice written for delivery;
- ``undeliverable``: ``{"audience", "to", "why", "message"}`` — nobody to tell: ``to``
  is the rule's column and ``why`` says what was wrong with it (``"empty"``).
"""

from __future__ import annotations

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, reading, state
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import templates

# Why nobody could be told, as a history line's ``why``: the rule's column is empty.
EMPTY = "empty"


def tell(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Write the notify step's notice (deliverable or not), log it, and finish the step."""
    audience, template = reading.notice(step, turn.cfg)
    rule = turn.cfg.notify[audience]
    record = turn.working_record()
    message = templates.render(template, record)
    recipient = _recipient(record.get(rule.to))
    problem = None if recipient is not None else f"the record's {rule.to} is empty"
    turn.effects.append(
        effects.Notify(
            step_id=step.id,
            pass_=lane.pass_,
            audience=audience,
            message=message,
            recipient=recipient,
            title=templates.render(rule.title, {**record, "message": message}),
            email=rule.email,
            problem=problem,
        )
    )
    if recipient is not None:
        detail = {"audience": audience, "recipient": recipient, "message": message}
        turn.log("notice", detail, step, lane)
    else:
        detail = {"audience": audience, "to": rule.to, "why": EMPTY, "message": message}
        turn.log("undeliverable", detail, step, lane)
    turn.finish(step, lane, "done")


def _recipient(value: object) -> str | None:
    """The recipient as text; None when the column is null or blank."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None
