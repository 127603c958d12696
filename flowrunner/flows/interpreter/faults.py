"""Fault paths: where a run goes on when a step's command fails for good.

A step that runs a command may name ``on_failure``, a position of its flow. When its
command is refused, or fails on its last attempt (its retries used up; an attempt that
timed out counts as a failed one), the step fails but the run does not: ``take`` keeps
the fault, and the run leaves the position at once (``leave``, as the interpreter
settles) — the other steps there stop, a waiting one's cancel command runs — to go on
at that position. Without ``on_failure`` the step fails the run, as it always did.

What the command said is the run's ``failure``: a notify step's message reads it as
``{failure}``, a branch's condition as ``failure`` (``failure is not null``). It stays
until a later step's command answers (``clear``), so it says what the last step that ran
a command failed with.

History lines: the step's ``failed`` line carries, besides its ``code`` and ``message``,
``failure`` (what the command said), ``attempts`` and ``on_failure`` (the position the
run goes on at); each step it stops has a ``done`` line with the outcome ``stopped`` and
``why``.
"""

from __future__ import annotations

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import reading, state
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import sanitize, shapes, statuses


def take(
    turn: Turn,
    step: snapshot.StepSpec,
    lane: state.LaneState,
    code: str,
    message: str,
    said: str,
    cause: shapes.Payload | None = None,
) -> None:
    """The step's command failed for good, saying ``said``: take its fault path, or fail
    the run (``Turn.fail_lane``) when it names none or the run has failed already."""
    target = reading.on_failure(step, turn.snap)
    if target is None or not turn.live:
        turn.fail_lane(step, lane, code, message, cause)
        return
    lane.status = statuses.LaneStatus.FAILED
    lane.pending = None
    lane.finished_at = turn.now
    run = turn.run
    run.failure = sanitize.sanitize_text(said)
    if run.fault_to is None:  # two steps failing at once: the first one's way
        run.fault_to = target
    detail = {
        "code": code,
        "message": message,
        "failure": said,
        "attempts": lane.attempts,
        "on_failure": target,
    }
    turn.log("failed", detail, step, lane)


def leave(turn: Turn) -> int:
    """Stop the steps still at the position a fault is leaving; where the run goes on."""
    run = turn.run
    target = run.fault_to
    assert target is not None
    run.fault_to = None
    failed = [step for step, lane in turn.pairs() if lane.status == statuses.LaneStatus.FAILED]
    why = " and ".join(step.title or f"the {step.kind} step" for step in failed) + " failed"
    for step, lane in turn.pairs():
        if lane.status == statuses.LaneStatus.READY:
            lane.status = statuses.LaneStatus.DONE  # never started: nothing to say
            lane.outcome = state.STOPPED
            lane.finished_at = turn.now
        elif lane.active:
            turn.finish(step, lane, state.STOPPED, detail={"why": why}, why=why)
    return target


def clear(turn: Turn) -> None:
    """A step's command answered: the failure before it is no longer the latest — unless
    a step at this position just failed and the run is leaving by its fault path."""
    if turn.run.fault_to is None:
        turn.run.failure = None
