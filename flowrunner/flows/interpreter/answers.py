"""Who answered a waiting step: with the kind's ``by``, modes count people, not events.

``Kind(by="approver")`` names the event field saying who answered. Each answerer is
counted once however often they answer ("all" means everyone asked, once each); an
event without the field is no one's answer and is not counted (its line in the
history says so), though the step's condition still reads it like any event. When the
command answers whom it asked (``{"asked": ["ann", "bob"]}`` rather than a number),
only their answers count. Without ``by``, modes count events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import happened, reading, state
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import shapes, statuses

# An answerer's name is kept in the run state and the history: long ones are cut.
NAME_MAX = 200


def read_asked(lane: state.LaneState, answer: shapes.Payload, by: str | None) -> None:
    """Take the command's ``asked``: a number, or the list of whom it asked."""
    if "asked" not in answer:
        return
    asked = answer["asked"]
    if isinstance(asked, list | tuple):
        names = [n for n in (_name(v) for v in asked) if n is not None]
        lane.asked_names = list(dict.fromkeys(names))
        lane.asked = len(lane.asked_names)
    else:
        try:
            lane.asked = max(0, int(asked))
        except (TypeError, ValueError, OverflowError):
            lane.asked = 1
    if by is not None:
        _recount(lane)


def take(
    turn: Turn,
    step: snapshot.StepSpec,
    lane: state.LaneState,
    by: str,
    event: happened.EventIn,
) -> None:
    """Count one answer by who gave it, and say so in the run's history."""
    who = _name(event.payload.get(by))
    if who is None:
        detail = {"event": event.name, "event_id": event.id, "by": by, "counted": False}
        turn.log("arrived", detail, step, lane)
        return
    again = who in lane.answerers
    if not again:
        lane.answerers.append(who)
        _recount(lane)
    said = {"who": who, "answer": _answer(step, turn, event)}
    if lane.asked_names and who not in lane.asked_names:
        turn.log("answered", {**said, "counted": False, "asked": False}, step, lane)
        return
    detail = {**said, "again": again, "counted": True, **progress(step, lane)}
    turn.log("answered", detail, step, lane)


def progress(step: snapshot.StepSpec, lane: state.LaneState) -> shapes.JsonDict:
    """How far the wait is: answers counted, how many it needs (``None`` while the
    command has not said how many it asked), and who was asked but has not answered."""
    waiting = lane.status == statuses.LaneStatus.WAITING
    needed = reading.mode(step).needed(lane.asked) if waiting else None
    return {"received": lane.received, "needed": needed, "waiting_for": missing(lane)}


def missing(lane: state.LaneState) -> list[str]:
    """Who was asked (by name) and has not answered yet."""
    return [n for n in lane.asked_names if n not in lane.answerers]


def _answer(step: snapshot.StepSpec, turn: Turn, event: happened.EventIn) -> shapes.JsonDict:
    """The answer's fields the step's condition reads (``event.decision``): the flow's own
    words for what was answered (``approved``), kept short.

    A step without a condition keeps the answer's decision all the same — a field whose
    value is a word like ``approved`` or ``rejected`` — so its history says what each
    answerer decided (``ann approved``), not only that they answered.
    """
    if reading.text(step, "condition") is None:
        decided = sorted(
            name
            for name, value in event.payload.items()
            if isinstance(value, str) and _DECIDED.fullmatch(value.strip())
        )
        return {decided[0]: str(event.payload[decided[0]]).strip()} if decided else {}
    fields = reading.condition(step, turn.cfg, event=True).event_fields
    return {
        name: _name(event.payload.get(name))
        for name in sorted(fields)
        if _name(event.payload.get(name)) is not None
    }


# A decision as an answer says it: one word in the past tense (approved, rejected).
_DECIDED = re.compile(r"[A-Za-z]{2,30}ed")


def _recount(lane: state.LaneState) -> None:
    if lane.asked_names:
        lane.received = sum(1 for who in lane.answerers if who in lane.asked_names)
    else:
        lane.received = len(lane.answerers)


def _name(value: object) -> str | None:
    if value is None or isinstance(value, Mapping | list | tuple):
        return None
    text = str(value).strip()
    return text[:NAME_MAX] or None
