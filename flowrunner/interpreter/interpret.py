"""The pure interpreter: a run's state and what happened in, the new state and effects out.

``start`` enters a fresh run at its first position; ``advance`` moves a run on from
what happened since (the record as it is now, events, command answers, a cancel —
given, or recorded in the state by an operator — and the time); ``retry_failed`` is
an operator's retry. No SQL, no clock, no I/O: the worker feeds these and applies the
effects and the new state in one transaction, and for the same inputs they always
give the same outputs (a replay after a crash repeats exactly). ``advance`` never
raises: a step that cannot run fails the run with a sentence naming it.

Driving protocol: when a lane needs an application command the step carries a
``RunCommand`` and the lane waits in ``commanding``; the driver runs the command in
the same transaction and calls ``advance`` again at once with its ``CommandResult``.
A kind's cancel command (``RunCommand.cancel``) is driven the same way; its answer is
taken as a history line even when the run ended in the advance that asked for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flowrunner import errors, sanitize, snapshot, statuses
from flowrunner.interpreter import cancelling, happened, lanes, reading
from flowrunner.interpreter import config as config_mod
from flowrunner.interpreter import effects as effects_mod
from flowrunner.interpreter import state as state_mod
from flowrunner.interpreter.turn import Turn

_Move = Callable[[snapshot.StepSpec, state_mod.LaneState], None]


@dataclass(frozen=True)
class Step:
    """The outcome of one advance: the new state and the effects, ending with one ``Wake``."""

    state: state_mod.RunState
    effects: tuple[effects_mod.Effect, ...]

    @property
    def wake(self) -> datetime | None:
        last = self.effects[-1]
        assert isinstance(last, effects_mod.Wake)
        return last.at

    @property
    def commands(self) -> tuple[effects_mod.RunCommand, ...]:
        return tuple(e for e in self.effects if isinstance(e, effects_mod.RunCommand))


def start(
    snap: snapshot.FlowSnapshot,
    seen: happened.Happened,
    now: datetime,
    cfg: config_mod.InterpreterConfig,
) -> Step:
    """A fresh run entering its flow's first position (events so far do not count)."""
    return advance(snap, state_mod.RunState(), seen, now, cfg)


def advance(
    snap: snapshot.FlowSnapshot,
    run: state_mod.RunState,
    seen: happened.Happened,
    now: datetime,
    cfg: config_mod.InterpreterConfig,
) -> Step:
    """Move the run on from what happened; the given state is never changed."""
    turn = Turn(snap, run, seen, now, cfg)
    try:
        _advance(turn)
        if run.status not in statuses.FINAL:
            cancelling.sweep(turn)
    except Exception as error:
        # A bug (an IllegalMove included) or a stored state nobody foresaw: fail this run
        # loudly, with a sentence, rather than crash the worker on it again and again.
        turn = Turn(snap, run, seen, now, cfg)
        if turn.run.status not in statuses.ENDED:
            reason = f"the engine could not advance the run: {type(error).__name__}: {error}"
            turn.run.status = statuses.RunStatus.FAILED
            turn.run.reason = sanitize.sanitize_text(reason)
            turn.run.error = sanitize.error_envelope("engine.error", reason)
            turn.log("ended", turn.run.reason)
    return _finish(turn)


def retry_failed(
    snap: snapshot.FlowSnapshot,
    run: state_mod.RunState,
    now: datetime,
    cfg: config_mod.InterpreterConfig,
) -> Step:
    """An operator's retry: the failed lanes start again with their attempts reset.

    The run is then due at once; the next ``advance`` starts the lanes again. Raises
    ``OperatorError`` when the run has not failed, or failed outside any step.
    """
    if run.status != statuses.RunStatus.FAILED:
        raise errors.OperatorError(f"only a failed run can be retried; this one is {run.status}")
    seen = happened.Happened(record=None, latest_event_id=run.last_event_id)
    turn = Turn(snap, run, seen, now, cfg)
    failed = [(s, lane) for s, lane in turn.pairs() if lane.status == statuses.LaneStatus.FAILED]
    if not failed:
        raise errors.OperatorError(
            f"the run failed outside any step ({run.reason}); start the flow again instead"
        )
    for step, lane in failed:
        lane.restart()
        turn.log("retry", "an operator retried the step", step, lane)
    turn.run.status = statuses.RunStatus.RUNNING
    turn.run.error = None
    turn.run.reason = None
    turn.effects.append(effects_mod.Wake(now))
    return Step(turn.run, tuple(turn.effects))


def _advance(turn: Turn) -> None:
    run = turn.run
    cancelling.take_answers(turn)  # also once the run has ended: they are history lines
    if run.status in statuses.FINAL:
        return
    if turn.seen.cancel is not None:
        turn.end_run(statuses.RunStatus.CANCELLED, f"cancelled by an operator: {turn.seen.cancel}")
        return
    if run.cancel_requested:
        turn.end_run(statuses.RunStatus.CANCELLED, run.cancel_requested)
        return
    if run.status != statuses.RunStatus.FAILED:
        if turn.record is None:
            turn.end_run(
                statuses.RunStatus.CANCELLED, "the record was deleted while the run waited"
            )
            return
        if run.position is None:
            first = turn.snap.positions[0] if turn.snap.positions else None
            if first is None:
                turn.end_run(statuses.RunStatus.DONE, "the flow has no steps")
                return
            _enter(turn, first)
    # Answers are facts (the commands ran and their writes commit with this advance):
    # every lane takes its answer, even once another lane has failed the run.
    for result in turn.seen.results:
        for step, lane in list(turn.pairs()):
            move = functools.partial(lanes.on_result, turn, result=result)
            _guarded(turn, step, lane, move, even_if_failed=True)
    if run.status == statuses.RunStatus.FAILED:
        return  # events stay unread until an operator retries (or cancels) the run
    turn.consumed = True
    for event in turn.events:
        for step, lane in list(turn.pairs()):
            _guarded(turn, step, lane, functools.partial(lanes.on_event, turn, event=event))
    _settle(turn)


def _guarded(
    turn: Turn,
    step: snapshot.StepSpec,
    lane: state_mod.LaneState,
    move: _Move,
    *,
    even_if_failed: bool = False,
) -> None:
    """Run one lane move; a step that cannot run fails its lane and the run."""
    if not (turn.live or (even_if_failed and turn.run.status == statuses.RunStatus.FAILED)):
        return
    try:
        move(step, lane)
    except reading.Broken as broken:
        turn.fail_lane(step, lane, "step.broken", f"it is broken: {broken.message}")
    except state_mod.IllegalMove:
        raise
    except (errors.FlowrunnerError, ValueError, TypeError, ArithmeticError) as error:
        # Evaluating a condition over an odd record value, or date arithmetic overflowing.
        turn.fail_lane(step, lane, "step.error", f"{type(error).__name__}: {error}")


def _settle(turn: Turn) -> None:
    """Tick every lane; whenever all are done, go on to the next position, and repeat."""
    while turn.live:
        for step, lane in list(turn.pairs()):
            if lane.active:
                _guarded(turn, step, lane, functools.partial(lanes.tick, turn))
        if not turn.live or any(lane.active for lane in turn.run.lanes):
            return
        _leave(turn)


def _leave(turn: Turn) -> None:
    """Every lane at this position is done (the join): go where the steps say."""
    position = turn.run.position
    assert position is not None
    for step, lane in turn.pairs():
        if lane.outcome == "goto":
            target = reading.goto(step, turn.snap)
            assert target is not None  # checked when the branch ran
            turn.run.last_goto = position
            _enter(turn, target)
            return
        if lane.outcome == "ended":
            turn.end_run(
                statuses.RunStatus.DONE, f"branch '{step.title or step.kind}' did not hold"
            )
            return
    following = turn.snap.next_position(position)
    if following is None:
        turn.end_run(statuses.RunStatus.DONE, "the flow ended after its last step")
    else:
        _enter(turn, following)


def _enter(turn: Turn, position: int) -> None:
    run = turn.run
    run.moves += 1
    if run.moves > turn.cfg.max_moves:
        where = f"; a goto at position {run.last_goto} may loop forever" if run.last_goto else ""
        turn.fail_run(
            "run.loop", f"the run went through more than {turn.cfg.max_moves} steps{where}"
        )
        return
    run.position = position
    run.passes[position] = run.passes.get(position, 0) + 1
    run.lanes = [
        state_mod.LaneState(step_id=s.id, kind=s.kind, pass_=run.passes[position])
        for s in turn.snap.steps_at(position)
    ]


def _finish(turn: Turn) -> Step:
    run = turn.run
    if turn.consumed or run.status in statuses.FINAL:
        run.last_event_id = max(run.last_event_id, turn.horizon)
    if turn.live:
        for step, lane in list(turn.pairs()):
            _guarded(turn, step, lane, functools.partial(lanes.reissue, turn))
    if turn.live:
        busy = any(
            lane.status in (statuses.LaneStatus.READY, statuses.LaneStatus.COMMANDING)
            or lane.reminding is not None
            for lane in run.lanes
        )
        run.status = statuses.RunStatus.RUNNING if busy else statuses.RunStatus.WAITING
    turn.effects.append(effects_mod.Wake(_wake(turn)))
    return Step(run, tuple(turn.effects))


def _wake(turn: Turn) -> datetime | None:
    """When the run is next due: now while commands are out, else its earliest timer."""
    if not turn.live:
        return None
    if turn.run.status == statuses.RunStatus.RUNNING:
        return turn.now
    times: list[datetime] = []
    for lane in turn.run.lanes:
        if lane.status == statuses.LaneStatus.WAITING:
            times += [t for t in (lane.timer, lane.deadline, lane.next_remind_at) if t is not None]
        elif lane.status == statuses.LaneStatus.RETRYING and lane.retry_at is not None:
            times.append(lane.retry_at)
    return min(times) if times else None
