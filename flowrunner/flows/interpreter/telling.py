"""How a notify step tells its audience: the notice filled in from the record, or why not.

The step's ``message`` and the rule's ``title`` are filled from the record as the run
sees it at the step (a set step just before it included). The recipient is the value of
the rule's ``to`` column; when it is empty the notice is still written, as
undeliverable, and the history says who could not be told and why — the run goes on.

History lines (``what`` codes that stay the same, each with a mapping as its detail):

- ``notice``: ``{"audience", "recipient", "message"}`` — a notice written for delivery;
- ``undeliverable``: ``{"audience", "to", "why", "message"}`` — nobody to tell: ``to``
  is the rule's column and ``why`` says what was wrong with it (``"empty"``);
- ``escalated``: ``{"audience", "after", "recipient", "message"}``, and ``to`` and
  ``why`` when nobody could be told — a waiting step that waited ``after`` (its
  ``escalate``) told its ``escalate_to``, once, and waits on.

A message may also name ``{failure}``: what the last step that ran a command failed
with, when the run took its fault path (``faults``); empty otherwise.
"""

from __future__ import annotations

from flowrunner.flows import rows, snapshot
from flowrunner.flows.interpreter import answers, effects, reading, state
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import shapes, templates
from flowrunner.history import words

# Why nobody could be told, as a history line's ``why``: the rule's column is empty.
EMPTY = "empty"


def tell(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Write the notify step's notice (deliverable or not), log it, and finish the step."""
    audience, template = reading.notice(step, turn.cfg)
    record = turn.working_record()
    # The latest failure reads as ``{failure}``, unless the record has a column of that name.
    message = templates.render(template, {rows.FAILURE: turn.run.failure, **record})
    recipient = _notice(turn, step, lane, audience, message)
    rule = turn.cfg.notify[audience]
    if recipient is not None:
        detail = {"audience": audience, "recipient": recipient, "message": message}
        turn.log("notice", detail, step, lane)
    else:
        detail = {"audience": audience, "to": rule.to, "why": EMPTY, "message": message}
        turn.log("undeliverable", detail, step, lane)
    turn.finish(step, lane, "done")


def escalate(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """A waiting step has waited its ``escalate``: tell its ``escalate_to`` once, as a
    notify step tells, and let it wait on (reminders and give-up are its own)."""
    found = reading.escalation(step, turn.cfg)
    assert found is not None  # only a step that escalates has the moment to
    _, audience, after = found
    lane.escalated = True
    message = _still_waiting(turn, step, lane, after)
    recipient = _notice(turn, step, lane, audience, message)
    detail: shapes.JsonDict = {
        "audience": audience,
        "after": after,
        "recipient": recipient,
        "message": message,
    }
    if recipient is None:
        detail.update(to=turn.cfg.notify[audience].to, why=EMPTY)
    turn.log("escalated", detail, step, lane)


def _notice(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, audience: str, message: str
) -> str | None:
    """Write the notice of ``message`` to ``audience`` (deliverable or not); its recipient."""
    rule = turn.cfg.notify[audience]
    record = turn.working_record()
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
    return recipient


def _still_waiting(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, after: str) -> str:
    """``Manager approval has waited 2 days and still waits for mia@example.com.``"""
    said = f"{step.title or f'The {step.kind} step'} has waited {after} and still waits"
    if step.kind == "waitFor":
        return f"{said} for {words.event_words(reading.text(step, 'event'))}."
    if step.kind == "until":
        return f"{said} until {reading.text(step, 'field')}."
    missing = answers.missing(lane)
    if missing:
        names = missing if len(missing) == 1 else [", ".join(missing[:-1]), missing[-1]]
        return f"{said} for {' and '.join(names)}."
    return f"{said} for {turn.known.kind(step).wait_for or 'an answer'}."


def _recipient(value: object) -> str | None:
    """The recipient as text; None when the column is null or blank."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None
