"""Where an open run stands: the steps it waits at, and for what, as typed values.

``where`` reads a run's stored state and its snapshot (no SQL, no clock) and gives one
``Waiting`` for each step at the run's current position that is not done yet: a
timer, an event with the answers counted so far, a command's answer or its next
attempt. ``runner.runs()`` fills ``RunRow.waiting`` with it, so a program never reads
the raw state to learn what a run waits for.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from datetime import datetime

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import reading, state
from flowrunner.foundations import shapes, statuses
from flowrunner.foundations.shapes import StepKind


class Awaits(enum.StrEnum):
    """What a step waits for."""

    TIME = "time"
    """A moment: a wait's end, or an until step's date (``until``; None while it is empty)."""
    EVENT = "event"
    """An event about the record (``event``), or its kind's answers (``received`` of
    ``needed``); ``until`` is when the wait gives up, if it does."""
    COMMAND = "command"
    """The answer of the application's command, run in this very step."""
    RETRY = "retry"
    """The next attempt of a command that failed (``until`` says when)."""
    START = "start"
    """Nothing yet: the step starts with the run's next advance."""
    SUBFLOW = "subflow"
    """A child run to end: the flow a subflow step runs (``subflow``) as run ``child``;
    ``until`` is when the wait gives up, if it does."""


@dataclass(frozen=True)
class Waiting:
    """One step a run waits at: which (position, id, title, kind) and for what."""

    position: int
    step_id: str | None
    title: str | None
    kind: StepKind
    awaits: Awaits
    status: statuses.LaneStatus
    event: str | None = None
    """The event it waits for (a waitFor step's, or its kind's ``wait_for``)."""
    until: datetime | None = None
    """When the wait ends: a timer, a give-up, or a command's next attempt."""
    field: str | None = None
    """An until step's date column."""
    asked: int | None = None
    """How many its command asked (an application kind that waits)."""
    needed: int | None = None
    """How many answers end the wait (its mode over ``asked``)."""
    received: int | None = None
    """The answers counted so far."""
    asked_names: tuple[str, ...] = ()
    """Whom the command asked, when it said (``{"asked": ["ann", "bob"]}``)."""
    answered: tuple[str, ...] = ()
    """Whose answers count so far, in order (with the kind's ``by``; of those asked)."""
    next_reminder_at: datetime | None = None
    """When the next reminder goes out, if the step reminds."""
    escalate_to: str | None = None
    """The audience the step tells once it has waited its ``escalate``, if it escalates."""
    escalate_at: datetime | None = None
    """When it tells them (or told them: see ``escalated``)."""
    escalated: bool = False
    """Whether it told them already."""
    subflow: str | None = None
    """The flow a subflow step runs."""
    child: int | None = None
    """The child run a subflow step waits for."""


def where(
    snap: snapshot.FlowSnapshot,
    run_state: shapes.Payload | state.RunState,
    cfg: config_mod.InterpreterConfig,
) -> tuple[Waiting, ...]:
    """The steps an open run waits at (empty for a run that ended or failed).

    >>> from flowrunner.flows.interpreter.config import InterpreterConfig
    >>> snap = snapshot.FlowSnapshot.build(
    ...     {"id": 1, "name": "Hold", "start": "manual"},
    ...     [{"id": 5, "position": 1, "kind": "wait", "title": "A day", "duration": "1 day"}],
    ... )
    >>> lane = {"step_id": 5, "kind": "wait", "pass": 1, "status": "waiting",
    ...         "timer": "2026-03-03T09:00:00+00:00"}
    >>> [w] = where(snap, {"status": "waiting", "position": 1, "lanes": [lane]},
    ...             InterpreterConfig())
    >>> (w.title, w.awaits.value, w.until.isoformat())
    ('A day', 'time', '2026-03-03T09:00:00+00:00')
    """
    if not run_state:
        return ()
    run = (
        run_state if isinstance(run_state, state.RunState) else state.RunState.from_dict(run_state)
    )
    if run.status not in statuses.OPEN or run.position is None:
        return ()
    steps = snap.steps_at(run.position)
    return tuple(
        _waiting(step, lane, cfg)
        for step, lane in zip(steps, run.lanes, strict=False)
        if lane.active
    )


def _waiting(
    step: snapshot.StepSpec, lane: state.LaneState, cfg: config_mod.InterpreterConfig
) -> Waiting:
    kind = cfg.kinds.get(step.kind)
    event = _event(step, cfg)
    base = Waiting(
        position=step.position,
        step_id=None if step.id is None else str(step.id),
        title=step.title,
        kind=step.kind,
        awaits=Awaits.START,
        status=lane.status,
    )
    status = lane.status
    if status == statuses.LaneStatus.COMMANDING:
        return dataclasses.replace(base, awaits=Awaits.COMMAND)
    if status == statuses.LaneStatus.RETRYING:
        return dataclasses.replace(base, awaits=Awaits.RETRY, until=lane.retry_at)
    if status != statuses.LaneStatus.WAITING:
        return base
    if lane.escalate_at is not None:
        base = dataclasses.replace(
            base,
            escalate_to=reading.text(step, "escalate_to"),
            escalate_at=lane.escalate_at,
            escalated=lane.escalated,
        )
    if step.kind in ("wait", "until"):
        field = reading.text(step, "field") if step.kind == "until" else None
        return dataclasses.replace(base, awaits=Awaits.TIME, until=lane.timer, field=field)
    if step.kind == "waitFor":
        return dataclasses.replace(base, awaits=Awaits.EVENT, event=event, until=lane.deadline)
    if step.kind == "subflow":
        flow = reading.text(step, "value")
        return dataclasses.replace(
            base, awaits=Awaits.SUBFLOW, subflow=flow, child=lane.child, until=lane.deadline
        )
    counts: shapes.JsonDict = {}
    if kind is not None:
        counts = {
            "asked": lane.asked,
            "needed": _needed(step, lane),
            "received": lane.received,
            "asked_names": tuple(lane.asked_names),
            "answered": tuple(
                who for who in lane.answerers if not lane.asked_names or who in lane.asked_names
            ),
        }
    return dataclasses.replace(
        base,
        awaits=Awaits.EVENT,
        event=event,
        until=lane.deadline,
        next_reminder_at=lane.next_remind_at,
        **counts,
    )


def _event(step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig) -> str | None:
    if step.kind == "waitFor":
        return reading.text(step, "event")
    kind = cfg.kinds.get(step.kind)
    return None if kind is None else kind.wait_for


def _needed(step: snapshot.StepSpec, lane: state.LaneState) -> int | None:
    try:
        return reading.mode(step).needed(lane.asked)
    except reading.Broken:
        return None
