"""How each kind of step runs as a lane: begin, answers, events and the passing of time.

Every function takes the advance's ``Turn`` and one (step, lane) pair and moves the
lane along the transition table. Readers in ``reading`` raise ``Broken`` for a step
that cannot run; the interpreter turns that into a failed run.
"""

from __future__ import annotations

from datetime import date, datetime

from flowrunner import calendars, query
from flowrunner.flows import rows, snapshot
from flowrunner.flows.interpreter import (
    answers,
    effects,
    faults,
    happened,
    reading,
    retry,
    state,
    subflows,
    telling,
    watching,
)
from flowrunner.flows.interpreter.turn import Turn
from flowrunner.foundations import durations, shapes, statuses
from flowrunner.query import ast as query_ast

BUILTIN = frozenset({"set", "wait", "until", "branch", "waitFor", "notify", "subflow"})


def begin(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Start a ready lane: do what is done at once, or start waiting or commanding."""
    lane.started_at = turn.now
    turn.log("started", "", step, lane)
    if step.kind == "set":
        name, value = reading.set_value(step, turn.cfg, turn.now)
        turn.effects.append(effects.SetField(step_id=step.id, field=name, value=value))
        turn.working_record()[name] = value
        turn.log("set", {"field": name, "value": _plain(value)}, step, lane)
        turn.finish(step, lane, "done")
    elif step.kind == "notify":
        telling.tell(turn, step, lane)
    elif step.kind == "branch":
        _branch(turn, step, lane)
    elif step.kind == "wait":
        length = reading.duration(step)
        if length is None:
            raise reading.Broken(step, "its duration is empty")
        lane.timer = reading.later(step, turn.cfg, length, turn.now)
        _start_waiting(turn, step, lane, _wait_detail(step, lane))
    elif step.kind == "until":
        lane.timer = reading.until_target(step, turn.working_record(), turn.cfg)
        _start_waiting(turn, step, lane, _until_detail(step, lane.timer))
    elif step.kind == "waitFor":
        name = reading.event_name(step, turn.cfg)
        length = reading.duration(step)
        if length is not None:
            lane.deadline = reading.later(step, turn.cfg, length, turn.now)
        _start_waiting(turn, step, lane, {"event": name, "until": _iso(lane.deadline)})
    elif step.kind == subflows.KIND:
        subflows.begin(turn, step, lane)
    else:
        kind = turn.known.kind(step)
        if kind.wait_for is not None:
            # Read every waiting column now, so a broken one fails before anything runs.
            reading.mode(step)
            reading.duration(step)
            _remind_every(step)
            reading.escalation(step, turn.cfg)
            if reading.text(step, "condition") is not None:
                reading.condition(step, turn.cfg, event=True)
        reading.on_failure(step, turn.snap)
        lane.attempts = 1
        _command(turn, step, lane)


def tick(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Look at a lane again: start it if ready, or see whether its time has come."""
    if lane.status == statuses.LaneStatus.READY:
        begin(turn, step, lane)
    elif lane.status == statuses.LaneStatus.RETRYING:
        if lane.retry_at is not None and lane.retry_at <= turn.now:
            lane.attempts += 1
            lane.retry_at = None
            _command(turn, step, lane)
    elif lane.status == statuses.LaneStatus.WAITING:
        if step.kind == "wait":
            if lane.timer is not None and lane.timer <= turn.now:
                turn.finish(step, lane, "done", detail=_wait_detail(step, lane))
        elif step.kind == "until":
            _until(turn, step, lane)
        elif step.kind == "waitFor":
            if lane.deadline is not None and lane.deadline <= turn.now:
                detail = {"event": reading.event_name(step, turn.cfg), **_gave_up(step)}
                turn.finish(step, lane, "timed_out", "timed_out", detail)
        elif step.kind == subflows.KIND:
            subflows.tick(turn, step, lane)
        else:
            _app_wait(turn, step, lane)
        # Still waiting once its own end had its turn: tell whom it escalates to, if due.
        if (
            lane.status == statuses.LaneStatus.WAITING
            and lane.escalate_at is not None
            and not lane.escalated
            and lane.escalate_at <= turn.now
        ):
            telling.escalate(turn, step, lane)


def on_result(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, result: happened.CommandResult
) -> None:
    """Take the answer to this lane's command or reminder (answers to nothing are stale)."""
    if step.kind == subflows.KIND:
        subflows.on_result(turn, step, lane, result)
        return
    if lane.status == statuses.LaneStatus.COMMANDING and result.key == lane.pending:
        lane.pending = None
        if result.ok:
            _answered(turn, step, lane, result)
        elif result.refused:
            lane.outcome = state.REFUSED
            said = _said(result)
            message = f"the command refused: {said}"
            faults.take(turn, step, lane, "command.refused", message, said, result.error)
        else:
            # The backoff spares the outside service: it counts from when the attempt
            # really ran (a late worker's retries keep their spacing), not the flow's time.
            decision = retry.decide(turn.cfg.retry_for(step.kind), lane.attempts, turn.until)
            if decision.retry_at is None:
                said = _said(result)
                count = "once" if lane.attempts == 1 else f"{lane.attempts} times"
                message = f"the command failed {count}: {said}"
                faults.take(turn, step, lane, "command.failed", message, said, result.error)
            else:
                lane.retry_at = decision.retry_at
                lane.status = statuses.LaneStatus.RETRYING
                detail = {
                    "attempt": lane.attempts,
                    "error": _said(result),
                    "again_at": _iso(decision.retry_at),
                }
                turn.log("retry", detail, step, lane)
    elif lane.reminding is not None and result.key == _remind_key(step, lane, lane.reminding):
        number, lane.reminding = lane.reminding, None
        planned = _reminder_due(turn, step, lane, number)
        if result.ok:
            turn.log("reminded", _reminder_detail(lane, number), step, lane, at=planned)
        else:
            # A reminder is a nudge: a failed one is recorded, never retried.
            detail = {**_reminder_detail(lane, number), "error": _said(result)}
            turn.log("reminder_failed", detail, step, lane, at=planned)


def on_event(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, event: happened.EventIn
) -> None:
    """An event about the record is read at ``turn.now``: count it where this lane waits
    for it (events are read in time order, each once, by the lanes active then)."""
    if not lane.active:
        return
    if lane.deadline is not None and turn.now >= lane.deadline:
        return  # the wait gave up at that moment
    if step.kind == "waitFor":
        waiting = lane.status == statuses.LaneStatus.WAITING
        if waiting and event.name == reading.event_name(step, turn.cfg):
            lane.received += 1
            lane.event = dict(event.payload)
            turn.finish(step, lane, "arrived", "arrived", {"event": event.name})
        return
    if step.kind in BUILTIN:
        return
    kind = turn.known.kind(step)
    if kind.wait_for is None or event.name != kind.wait_for:
        return
    # Events count from the step's start, also while its command is still retried.
    lane.event = dict(event.payload)
    if kind.by is None:
        lane.received += 1
        detail = {"event": event.name, "event_id": event.id, **answers.progress(step, lane)}
        turn.log("arrived", detail, step, lane)
    else:
        answers.take(turn, step, lane, kind.by, event)
    held_by = _check_condition(turn, step, lane, lane.event)
    if lane.status == statuses.LaneStatus.WAITING:
        # Who answered, so the history can say "bob rejected it" of an answer's condition.
        who = event.payload.get(kind.by) if kind.by is not None else None
        _app_done(turn, step, lane, held_by, who if isinstance(who, str) and who else None)


# -- the kinds' details ------------------------------------------------------------------


def _branch(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    if len(turn.snap.steps_at(step.position)) > 1:
        raise reading.Broken(step, "a branch must stand alone at its position")
    condition = reading.condition(step, turn.cfg, failure=True)
    target = reading.goto(step, turn.snap)
    said = {"condition": str(reading.text(step, "condition"))}
    # The latest failure reads as ``failure``, unless the record has a column of that name.
    record = {rows.FAILURE: turn.run.failure, **turn.working_record()}
    if condition.matches(record, turn.now):
        turn.log("condition", {**said, "held": True}, step, lane)
        turn.finish(step, lane, "held")
    elif target is not None:
        turn.log("condition", {**said, "held": False, "goto": target}, step, lane)
        turn.finish(step, lane, "goto")
    else:
        turn.log("condition", {**said, "held": False, "goto": None}, step, lane)
        turn.finish(step, lane, "ended")


def _start_waiting(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, detail: shapes.JsonDict
) -> None:
    lane.waiting_since = turn.now
    lane.status = statuses.LaneStatus.WAITING
    escalation = reading.escalation(step, turn.cfg)
    if escalation is not None:
        # Counted from the step's logical start, as its give-up and reminders are.
        lane.escalate_at = reading.later(step, turn.cfg, escalation[0], lane.started_at or turn.now)
    turn.log("waiting", detail, step, lane)
    tick(turn, step, lane)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _plain(value: object) -> shapes.Plain:
    """A value a set step wrote, as a history line keeps it (JSON: times as ISO text)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _wait_detail(step: snapshot.StepSpec, lane: state.LaneState) -> shapes.JsonDict:
    return {"until": _iso(lane.timer), "duration": reading.text(step, "duration")}


def _until_detail(step: snapshot.StepSpec, target: datetime | None) -> shapes.JsonDict:
    """An until step's target, with the column and offset it was read from."""
    return {
        "until": _iso(target),
        "field": reading.text(step, "field"),
        "offset": reading.text(step, "duration"),
    }


def _gave_up(step: snapshot.StepSpec) -> shapes.JsonDict:
    return {"duration": reading.text(step, "duration")}


def _until(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    # Follows the record: the target is read again from the record as it is now. A date
    # the record moved is the new target from when the run sees the change (``Turn.
    # sees_record``): until then the wait neither ends at the old date nor the new one.
    target = reading.until_target(step, turn.working_record(), turn.cfg)
    if target != lane.timer:
        if not turn.sees_record(lane):
            return
        lane.timer = target
        turn.log("waiting", _until_detail(step, target), step, lane)
    if target is not None and target <= turn.now:
        turn.finish(step, lane, "done", detail=_until_detail(step, target))


def _command(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    kind = turn.known.kind(step)
    lane.pending = turn.key(step, lane)
    lane.status = statuses.LaneStatus.COMMANDING
    said: shapes.JsonDict = {"command": kind.command, "attempt": lane.attempts}
    if kind.wait_for is not None:
        said["asks"] = True  # it asks for answers: its history reads "Asked for ..."
    turn.log("command", said, step, lane)
    turn.command(step, lane, kind)


def _answered(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, result: happened.CommandResult
) -> None:
    kind = turn.known.kind(step)
    faults.clear(turn)
    answers.read_asked(lane, result.answer or {}, kind.by)
    if kind.wait_for is None:
        turn.finish(step, lane, "done")
        return
    # The give-up and the reminders count from the step's logical start, not from when
    # the answer came (a late or retried command shifts neither).
    start = lane.started_at or turn.now
    length = reading.duration(step)
    if length is not None:
        lane.deadline = reading.later(step, turn.cfg, length, start)
    every = _remind_every(step)
    if every is not None:
        lane.next_remind_at = reading.later(step, turn.cfg, every, start)
    detail = {
        "event": kind.wait_for,
        "asked": lane.asked,
        "names": list(lane.asked_names),
        "needed": reading.mode(step).needed(lane.asked),
        "until": _iso(lane.deadline),
    }
    _start_waiting(turn, step, lane, detail)


def _app_wait(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    # The record may have changed since the latest event: look at the condition again,
    # from the moment the run sees the change (``Turn.sees_record``).
    held_by = _check_condition(turn, step, lane) if turn.sees_record(lane) else []
    _app_done(turn, step, lane, held_by)
    if lane.status != statuses.LaneStatus.WAITING:
        return
    if lane.deadline is not None and lane.deadline <= turn.now:
        detail = {**_gave_up(step), **answers.progress(step, lane)}
        turn.finish(step, lane, "timed_out", "timed_out", detail)
        return
    # Reminders go out only once the run has caught up with the driver's time: after an
    # outage only the latest one due is sent, and none once the wait has ended.
    if (
        turn.caught_up
        and lane.next_remind_at is not None
        and lane.next_remind_at <= turn.now
        and lane.reminding is None
    ):
        _remind(turn, step, lane)


def _check_condition(
    turn: Turn,
    step: snapshot.StepSpec,
    lane: state.LaneState,
    event: shapes.JsonDict | None = None,
) -> list[str]:
    """See whether the step's condition holds now; the parts of it that do, if it does.

    The record is watched on every advance; event fields are read as each answer
    arrives (``watching`` says how a condition reading both is read between them).
    """
    if lane.held or reading.text(step, "condition") is None:
        return []
    condition = reading.condition(step, turn.cfg, event=True)
    record = turn.working_record()
    if not watching.holds(condition, record, turn.now, event):
        return []
    lane.held = True
    if not isinstance(condition.node, query_ast.Or):
        return [str(condition)]
    # "event.decision = rejected or status = withdrawn": say which of them held.
    return [
        str(item)
        for item in condition.node.items
        if watching.holds(
            query.Condition(item, columns=condition.types, event=True), record, turn.now, event
        )
    ]


def _app_done(
    turn: Turn,
    step: snapshot.StepSpec,
    lane: state.LaneState,
    held_by: list[str],
    who: str | None = None,
) -> None:
    if lane.held:
        said = {"condition": reading.text(step, "condition"), "held_by": held_by}
        if who is not None:
            said["who"] = who
        turn.finish(step, lane, "condition", "condition", said)
    elif lane.received >= reading.mode(step).needed(lane.asked):
        turn.finish(step, lane, "complete", detail=answers.progress(step, lane))


def _remind_every(step: snapshot.StepSpec) -> reading.Length | None:
    every = reading.duration(step, "remind")
    if every is not None and reading.is_zero_or_less(every):
        raise reading.Broken(step, "its remind must be longer than zero")
    return every


def _remind_at(
    step: snapshot.StepSpec, lane: state.LaneState, every: reading.Length, k: int, turn: Turn
) -> datetime:
    return reading.later(step, turn.cfg, every, lane.started_at or turn.now, times=k)


def _latest_reminder(
    step: snapshot.StepSpec, lane: state.LaneState, every: reading.Length, turn: Turn
) -> int:
    """The number of the latest reminder due by now (at least the next one unsent)."""
    first = lane.reminders_sent + 1
    if isinstance(every, durations.Duration):
        base = lane.started_at or turn.now
        guess = int((turn.now - base).total_seconds() // max(1.0, every.approx_seconds()))
        k = max(first, guess)
        while k > first and _remind_at(step, lane, every, k, turn) > turn.now:
            k -= 1
    else:
        # Business time has no fixed length: leap ahead doubling, then halve back.
        k, leap = first, 1
        while _remind_at(step, lane, every, k + leap, turn) <= turn.now:
            k, leap = k + leap, leap * 2
        while leap > 1:
            leap //= 2
            if _remind_at(step, lane, every, k + leap, turn) <= turn.now:
                k += leap
    while _remind_at(step, lane, every, k + 1, turn) <= turn.now:
        k += 1
    return k


def replan(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Count a waiting lane's business times again on the run's calendar as it is now
    (a holiday added or taken away since moves them); time as it passes stays as set.

    Each is counted from where it was first counted: the step's logical start (a wait's,
    a give-up's, an escalation's and the reminders'). A wait whose end moved says so in
    a new waiting line.
    """
    if lane.status != statuses.LaneStatus.WAITING:
        return
    start = lane.started_at or turn.now
    length = reading.duration(step) if step.kind != "until" else None
    if isinstance(length, calendars.BusinessDuration):
        moved = reading.later(step, turn.cfg, length, start)
        if step.kind == "wait":
            if moved != lane.timer:
                lane.timer = moved
                turn.log("waiting", _wait_detail(step, lane), step, lane)
        elif lane.deadline is not None:
            lane.deadline = moved
    every = _remind_every(step) if step.kind not in BUILTIN else None
    if isinstance(every, calendars.BusinessDuration) and lane.next_remind_at is not None:
        lane.next_remind_at = _remind_at(step, lane, every, lane.reminders_sent + 1, turn)
    escalation = reading.escalation(step, turn.cfg)
    if (
        escalation is not None
        and isinstance(escalation[0], calendars.BusinessDuration)
        and lane.escalate_at is not None
    ):
        lane.escalate_at = reading.later(step, turn.cfg, escalation[0], start)


def _remind(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Send the latest reminder that is due.

    Reminder k is due at k intervals after the step's logical start. After a clock
    jump over several intervals only the latest is sent: a burst of stale nudges helps
    nobody, and each number is still sent at most once.
    """
    every = _remind_every(step)
    kind = turn.known.kind(step)
    if every is None:
        return
    k = _latest_reminder(step, lane, every, turn)
    lane.reminders_sent = k
    lane.reminding = k
    lane.next_remind_at = _remind_at(step, lane, every, k + 1, turn)
    # Sent now, once the run caught up; stamped (and the command's now) when it was due.
    planned = _remind_at(step, lane, every, k, turn)
    turn.log("reminder", _reminder_detail(lane, k), step, lane, at=planned)
    turn.command(step, lane, kind, reminder=k, at=planned)


def _reminder_due(
    turn: Turn, step: snapshot.StepSpec, lane: state.LaneState, number: int
) -> datetime:
    """When reminder ``number`` was due (its lines and its command stand for that moment)."""
    every = _remind_every(step)
    return turn.now if every is None else _remind_at(step, lane, every, number, turn)


def _reminder_detail(lane: state.LaneState, number: int) -> shapes.JsonDict:
    """Which reminder, and whom it nudges: those asked who have not answered yet."""
    return {"reminder": number, "to": answers.missing(lane)}


def _remind_key(step: snapshot.StepSpec, lane: state.LaneState, number: int) -> str:
    return f"{Turn.key(step, lane)}/remind-{number}"


def _said(result: happened.CommandResult) -> str:
    error = result.error or {}
    return str(error.get("message") or error.get("code") or "no reason given")


def reissue(turn: Turn, step: snapshot.StepSpec, lane: state.LaneState) -> None:
    """Ask again for a command whose answer never came (a state saved mid-protocol)."""
    if step.kind == subflows.KIND:
        subflows.reissue(turn, step, lane)
        return
    if (
        lane.status == statuses.LaneStatus.COMMANDING
        and lane.pending
        and lane.pending not in turn.emitted
    ):
        turn.command(step, lane, turn.known.kind(step))
    if lane.reminding is not None and _remind_key(step, lane, lane.reminding) not in turn.emitted:
        planned = _reminder_due(turn, step, lane, lane.reminding)
        turn.command(step, lane, turn.known.kind(step), reminder=lane.reminding, at=planned)
