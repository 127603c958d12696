"""The pure interpreter: a run's state and what happened in, the new state and effects out.

``start`` enters a fresh run at its first position; ``advance`` moves a run on from
what happened since (the record as it is now, events, command answers, a cancel —
given, or recorded in the state by an operator — and the time); ``retry_failed`` is
an operator's retry. No SQL, no clock, no I/O: the worker feeds these and applies the
effects and the new state in one transaction, and for the same inputs they always
give the same outputs (a replay after a crash repeats exactly). ``advance`` never
raises: a step that cannot run fails the run with a sentence naming it.

The flow's own clock: a run does not live on the worker's time. Each position starts
when the one before it logically finished (the first when the run was created), and
``advance`` catches up in time order — unread events (by when they were recorded) and
the lanes' timers — leaving positions and entering the next at their logical moments,
until the next moment would be after ``now``. A late worker thus delays what a run
does, but shifts no later timer and loses no event. The record is as the driver gives
it at ``now``: a change a waiting step had not seen is taken at ``now``
(``Turn.sees_record``). A reminder goes out once the run has caught up, stamped with
the moment it was due (``RunCommand.at``).

Driving protocol: when a lane needs an application command the step carries a
``RunCommand`` and the lane waits in ``commanding``; the driver runs the command in
the same transaction and calls ``advance`` again at once with its ``CommandResult``.
The catch-up pauses at the command's logical moment and goes on from there in that
next call: the events not yet read wait in the state (``RunState.unread``), so the
driver need not pass them again (see ``Happened`` for what it passes).
A kind's cancel command (``RunCommand.cancel``) is driven the same way; its answer is
taken as a history line even when the run ended in the advance that asked for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from flowrunner import errors
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import cancelling, faults, happened, lanes, reading
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import effects as effects_mod
from flowrunner.flows.interpreter import state as state_mod
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import sanitize, statuses

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
    *,
    started_at: datetime | None = None,
    event_floor: int | None = None,
) -> Step:
    """A fresh run entering its flow's first position, and catching up to ``now``.

    ``started_at`` is the moment the run was created (the change that started it
    committed): the first position's logical start, from which its timers count.
    ``event_floor`` is the id of the latest event about the record recorded before
    the run was created: only events with higher ids count (one emitted after the
    record's creation in the same transaction does). By default the run starts at
    ``now`` and every event the driver knows (``seen.latest_event_id``) is from before.

    A worker that first reaches the run a day after it was created passes
    ``started_at`` and ``event_floor`` from the run row, and the run does what it
    would have done on time: a reply recorded meanwhile ends its first wait at once.
    """
    floor = seen.latest_event_id if event_floor is None else event_floor
    fresh = state_mod.RunState(clock=started_at or now, last_event_id=floor)
    return advance(snap, fresh, seen, now, cfg)


def advance(
    snap: snapshot.FlowSnapshot,
    run: state_mod.RunState,
    seen: happened.Happened,
    now: datetime,
    cfg: config_mod.InterpreterConfig,
) -> Step:
    """Move the run on from what happened, catching up to ``now`` on the flow's clock.

    ``now`` is the driver's time: the run does everything that falls due up to it, in
    time order, and no more. The given state is never changed.
    """
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
            turn.log("ended", {"status": turn.run.status.value, "reason": turn.run.reason})
    return _finish(turn)


def retry_failed(
    snap: snapshot.FlowSnapshot,
    run: state_mod.RunState,
    now: datetime,
    cfg: config_mod.InterpreterConfig,
) -> Step:
    """An operator's retry: the failed lanes start again with their attempts reset, a
    refused one's commands under a new key (``LaneState.restart``).

    The run is then due at once; the next ``advance`` starts the lanes again. Raises
    ``OperatorError`` when the run has not failed, or failed outside any step.
    """
    if run.status != statuses.RunStatus.FAILED:
        raise errors.OperatorError(f"only a failed run can be retried; this one is {run.status}")
    seen = happened.Happened(record=None, latest_event_id=run.last_event_id)
    turn = Turn(snap, run, seen, now, cfg)
    # A failed run's clock stopped when it failed: its steps start again at the retry.
    turn.now = turn.until
    failed = [(s, lane) for s, lane in turn.pairs() if lane.status == statuses.LaneStatus.FAILED]
    if not failed:
        raise errors.OperatorError(
            f"the run failed outside any step ({run.reason}); start the flow again instead"
        )
    for step, lane in failed:
        lane.restart()
        turn.log("retry", {"by": "operator"}, step, lane)
    # A fault path taken beside the step that failed the run is not taken: the steps
    # run again, and each fails or goes on anew.
    turn.run.fault_to = None
    turn.run.status = statuses.RunStatus.RUNNING
    turn.run.error = None
    turn.run.reason = None
    turn.run.clock = turn.now
    turn.effects.append(effects_mod.Wake(turn.until))
    return Step(turn.run, tuple(turn.effects))


def _advance(turn: Turn) -> None:
    run = turn.run
    cancelling.take_answers(turn)  # also once the run has ended: they are history lines
    if run.status in statuses.FINAL:
        return
    if turn.seen.cancel is not None:
        # An operator's cancel and a deletion stop the run where it is, at the driver's
        # time: nothing that fell due meanwhile is done any more.
        turn.now = turn.until
        turn.end_run(statuses.RunStatus.CANCELLED, f"cancelled by an operator: {turn.seen.cancel}")
        return
    if run.cancel_requested:
        turn.end_run(statuses.RunStatus.CANCELLED, run.cancel_requested)
        return
    if run.status != statuses.RunStatus.FAILED:
        if turn.record is None:
            turn.now = turn.until
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
        move = functools.partial(lanes.on_result, turn, result=result)
        for step, lane in turn.pairs():
            _guarded(turn, step, lane, move, even_if_failed=True)
    if run.status == statuses.RunStatus.FAILED:
        return  # events stay unread until an operator retries (or cancels) the run
    if turn.cfg.calendar is not None:
        # Business times follow the calendar as it is now (a holiday added meanwhile).
        for step, lane in turn.pairs():
            _guarded(turn, step, lane, functools.partial(lanes.replan, turn))
    turn.take_events()
    _catch_up(turn)


def _catch_up(turn: Turn) -> None:
    """Go through the unread events and the lanes' timers in time order, up to ``until``.

    At one moment the timers come first (a wait that ends then lets the next step see
    that moment's events), then the events in the order they were recorded, each read
    once by the lanes active then. The catch-up stops while a command or reminder
    awaits its answer: the next advance, with the answer, goes on from that moment.
    """
    run = turn.run
    while True:
        _settle(turn)
        if not turn.live or turn.busy:
            return
        due = _next_due(turn)
        if run.unread:
            at = turn.when_read(run.unread[0])
            if due is None or at < due:
                turn.now = at
                _read(turn, run.unread.pop(0))
                continue
        if due is not None and due <= turn.until:
            turn.now = due
        elif turn.now < turn.until:
            turn.now = turn.until  # caught up: what is due now (reminders) is done here
        else:
            return


def _read(turn: Turn, event: happened.EventIn) -> None:
    move = functools.partial(lanes.on_event, turn, event=event)
    for step, lane in turn.pairs():
        _guarded(turn, step, lane, move)


def _next_due(turn: Turn) -> datetime | None:
    """The lanes' next timer after the clock (reminders wait until the run caught up)."""
    times: list[datetime] = []
    for lane in turn.run.lanes:
        if lane.status == statuses.LaneStatus.WAITING:
            times += [t for t in (lane.timer, lane.deadline) if t is not None]
            if lane.escalate_at is not None and not lane.escalated:
                times.append(lane.escalate_at)
        elif lane.status == statuses.LaneStatus.RETRYING and lane.retry_at is not None:
            times.append(lane.retry_at)
    later = [t for t in times if t > turn.now]
    return min(later) if later else None


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
    """Tick every lane; whenever all are done, go on to the next position, and repeat.

    A step that took its fault path (``faults``) leaves the position at once, before any
    other step there moves again: the run goes on at its ``on_failure``.
    """
    tick = functools.partial(lanes.tick, turn)
    while turn.live:
        if turn.run.fault_to is not None:
            position = turn.run.position
            target = faults.leave(turn)
            turn.run.last_goto = position
            _enter(turn, target)
            continue
        for step, lane in turn.pairs():
            if lane.active:
                _guarded(turn, step, lane, tick)
        if not (turn.live and turn.joined):
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
            turn.end_run(statuses.RunStatus.DONE, reading.ended_at(step))
            return
    following = turn.known.next_position(position)
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
    run.entered_at = turn.now
    run.passes[position] = run.passes.get(position, 0) + 1
    run.lanes = [
        state_mod.LaneState.fresh(s.id, s.kind, run.passes[position])
        for s in turn.snap.steps_at(position)
    ]


def _finish(turn: Turn) -> Step:
    run = turn.run
    if run.status in statuses.FINAL:
        run.unread = []
    if turn.live:
        reissue = functools.partial(lanes.reissue, turn)
        for step, lane in turn.pairs():
            _guarded(turn, step, lane, reissue)
    if turn.live:
        run.status = statuses.RunStatus.RUNNING if _driven(run) else statuses.RunStatus.WAITING
    run.clock = turn.now
    turn.effects.append(effects_mod.Wake(_wake(turn)))
    return Step(run, tuple(turn.effects))


def _driven(run: state_mod.RunState) -> bool:
    """Whether the driver moves the run on at once: a lane is ready to start, or awaits
    a command's or a reminder's answer."""
    for lane in run.lanes:  # noqa: SIM110 (as in Turn.busy)
        if lane.status in _DRIVEN or lane.reminding is not None:
            return True
    return False


_DRIVEN = (statuses.LaneStatus.READY, statuses.LaneStatus.COMMANDING)


def _wake(turn: Turn) -> datetime | None:
    """When the run is next due: now while commands are out, else its earliest timer."""
    if not turn.live:
        return None
    if turn.run.status == statuses.RunStatus.RUNNING:
        return turn.until
    times: list[datetime] = []
    for lane in turn.run.lanes:
        if lane.status == statuses.LaneStatus.WAITING:
            times += [t for t in (lane.timer, lane.deadline, lane.next_remind_at) if t is not None]
            if lane.escalate_at is not None and not lane.escalated:
                times.append(lane.escalate_at)
        elif lane.status == statuses.LaneStatus.RETRYING and lane.retry_at is not None:
            times.append(lane.retry_at)
    return min(times) if times else None
