"""A record's run drawn over its flow: what is done and when, where it waits, what is ahead.

The run's own snapshot gives the columns (``model.build``); this reads the run's state
(the current position and its lanes: what each waits for) and its history (each pass of
each step: when it started and how it finished) into a ``StepRun`` per box, a state per
column, and how often the run went along each way. Pure: no SQL, no clock.

History codes read here (the interpreter's ``Log`` lines): ``started`` begins a pass; a
line whose detail names an ``outcome`` (``done``, ``timed_out``, a ``waitFor``'s
``arrived``, an app kind's ``condition``, ``stopped`` beside a fault) ends it, and
``failed`` fails it — one naming ``on_failure`` took the step's fault path, which the run
went along; an operator's ``retry`` starts it again. What a waiting step waits for is the
interpreter's own reading of the state (``interpreter.standing``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from typing import Protocol

from flowrunner.diagrams import model
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import state as state_mod
from flowrunner.flows.interpreter import waits
from flowrunner.foundations import shapes, statuses
from flowrunner.foundations.shapes import StepKind
from flowrunner.history import words

_Lane = statuses.LaneStatus


class HistoryLine(Protocol):
    """A line of a run's history, as ``LogRow`` holds it (only what is read here)."""

    @property
    def position(self) -> int | None: ...
    @property
    def step_id(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...
    @property
    def pass_(self) -> int | None: ...
    @property
    def what(self) -> str: ...
    @property
    def detail(self) -> object: ...
    @property
    def at(self) -> datetime: ...
    @property
    def due_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class RunInput:
    """What a run diagram reads of a run: its row's status, state, times and history."""

    id: int
    status: str
    state: state_mod.RunState | None
    history: Sequence[HistoryLine] = ()
    reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass
class _Pass:
    started: datetime | None = None
    outcome: str | None = None
    finished: datetime | None = None
    failed: str | None = None
    fault_to: object = None  # the position its fault path went on at
    why: str | None = None  # why it stopped


def when(moment: datetime | None, tz: tzinfo | None = None) -> str:
    """A moment as a diagram writes it, on the wall clock ``tz`` (the runner's), its zone
    named, as the console writes every moment: ``Mon 2 Mar 09:00 UTC``."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(tz or UTC)
    return f"{words.when(local, tz or UTC)} {local.tzname() or 'UTC'}"


def overlay(
    picture: model.Picture,
    snap: snapshot.FlowSnapshot,
    run: RunInput,
    config: config_mod.InterpreterConfig,
) -> model.Picture:
    """``picture`` (of the run's own snapshot) with the run drawn over it."""
    passes, visits = _read_history(run.history)
    tz = config.timezone
    waiting_at = {w.step_id: w for w in (waits.where(snap, run.state, config) if run.state else ())}
    positions = [c.position for c in picture.columns]
    if not visits and run.state is not None:
        # History pruned or not given: the state still says which positions were entered.
        visits = [(p, 1) for p in positions if run.state.passes.get(p)]
    # Where the run stands: its state says; a run without one, the last position entered.
    current = run.state.position if run.state is not None else None
    if run.state is None and visits:
        current = visits[-1][0]
    visited = {p for p, _ in visits}
    ended = statuses.RunStatus(run.status) in statuses.ENDED
    here = positions.index(current) if current in positions else None
    columns = []
    for column in picture.columns:
        col_state = _column_state(column.index, column.position, here, visited, run.status)
        boxes = []
        for box in column.boxes:
            step = next(s for s in snap.steps_at(column.position) if s.id == box.step_id)
            lane = None
            if column.index == here and run.state is not None:
                lane = next((ln for ln in run.state.lanes if ln.step_id == step.id), None)
            mine = passes.get(str(step.id), {})
            waiting = waiting_at.get(None if step.id is None else str(step.id))
            found = _step_run(step, lane, mine, col_state, ended, waiting, tz)
            link = box.link
            if link is not None:
                child = lane.child if lane is not None and lane.child else _child(run, step)
                link = replace(link, run=child)
            boxes.append(replace(box, run=found, link=link))
        count = sum(1 for p, _ in visits if p == column.position)
        columns.append(replace(column, boxes=tuple(boxes), state=col_state, visits=count))
    ways = _taken(picture, snap, run, visits, passes)
    hidden = _hidden_titles(picture, snap)
    summary = model.RunSummary(
        id=run.id,
        status=str(run.status),
        sentence=_sentence(run, current, hidden),
        started_at=run.started_at,
        ended_at=run.ended_at,
        zone=tz,
    )
    return replace(picture, columns=tuple(columns), ways=ways, run=summary)


def _child(run: RunInput, step: snapshot.StepSpec) -> int | None:
    """The child run the latest pass of a subflow step started, as its history says."""
    found = None
    for line in run.history:
        if line.what == "subflow" and line.step_id == str(step.id):
            detail = line.detail
            if isinstance(detail, Mapping) and isinstance(detail.get("run"), int):
                found = int(detail["run"])
    return found


def _read_history(
    history: Sequence[HistoryLine],
) -> tuple[dict[str, dict[int, _Pass]], list[tuple[int, int]]]:
    """Each step's passes (by step id as text, then pass), and the positions entered in order."""
    passes: dict[str, dict[int, _Pass]] = {}
    visits: list[tuple[int, int]] = []
    for line in history:
        if line.step_id is None or line.pass_ is None:
            continue
        moment = line.due_at or line.at
        one = passes.setdefault(str(line.step_id), {}).setdefault(line.pass_, _Pass())
        if line.what == "started" or _operator_retry(line.what, line.detail):
            one.started, one.outcome, one.finished, one.failed = moment, None, None, None
            one.fault_to, one.why = None, None
            if line.what == "started" and line.position is not None:
                visit = (line.position, line.pass_)
                if visit not in visits:
                    visits.append(visit)
        elif line.what == "failed":
            one.failed, one.finished = _failure(line.detail), moment
            if isinstance(line.detail, Mapping):
                one.fault_to = line.detail.get("on_failure")
        else:
            outcome = _outcome(line.kind, line.what, line.detail)
            if outcome is not None:
                one.outcome, one.finished = outcome, moment
                if isinstance(line.detail, Mapping) and line.detail.get("why"):
                    one.why = model.clean(str(line.detail["why"]))
    return passes, visits


def _outcome(kind: StepKind | None, what: str, detail: object) -> str | None:
    """The outcome a history line finishes a pass with (as ``LaneState.outcome``), if any."""
    if isinstance(detail, Mapping):
        found = detail.get("outcome")
        return None if found is None else str(found)
    # A line written before details were structured: the outcome was its code, or its text.
    if what == "done":
        return str(detail or "done")
    if what == "timed_out":
        return "timed_out"
    if what == "arrived" and kind == "waitFor":
        return "arrived"
    if what == "condition" and kind not in (None, "branch") and not detail:
        return "condition"  # an app kind's wait ended early by its condition
    return None


def _operator_retry(what: str, detail: object) -> bool:
    """Whether the line is an operator's retry, which starts the failed pass again."""
    if what != "retry":
        return False
    if isinstance(detail, Mapping):
        return detail.get("by") == "operator"
    return str(detail).startswith("an operator retried")


def _failure(detail: object) -> str:
    """Why a step failed, from its ``failed`` line."""
    if isinstance(detail, Mapping):
        detail = detail.get("message") or detail.get("code") or ""
    return model.clean(str(detail or ""))


def _column_state(
    index: int, position: int, here: int | None, visited: set[int], status: str
) -> model.ColumnState:
    ended = statuses.RunStatus(status) in statuses.ENDED
    if here is None:
        if status == statuses.RunStatus.DONE:
            return "done" if position in visited else "skipped"
        return "not_reached" if ended else "ahead"
    if index == here:
        return "done" if status == statuses.RunStatus.DONE else "current"
    if index < here or (status == statuses.RunStatus.DONE and position in visited):
        return "done" if position in visited else "skipped"
    if status == statuses.RunStatus.DONE:
        return "skipped"
    return "not_reached" if ended else "ahead"


def _how(step: snapshot.StepSpec, outcome: str) -> str:
    """How a step finished, in a few words (empty for a plain done)."""
    if step.kind == "branch":
        goto = step.get("goto")
        return {
            "held": "its condition held: on to the next step",
            "goto": f"its condition did not hold: to position {goto}",
            "ended": "its condition did not hold: the run ended",
        }.get(outcome, "")
    return {
        "complete": "answered",
        "arrived": "the event arrived",
        "condition": "its condition held",
        "subflow_done": "its subflow ended",
    }.get(outcome, "")


def _finished(
    step: snapshot.StepSpec,
    outcome: str,
    at: datetime | None,
    passes: int,
    why: str | None = None,
    tz: tzinfo | None = None,
) -> model.StepRun:
    how = _how(step, outcome)
    if outcome == "timed_out":
        return model.StepRun("timed_out", f"Timed out {when(at, tz)}".rstrip(), (), at, passes)
    if outcome == "stopped":  # another step at its position took its fault path
        return model.StepRun(
            "stopped", f"Stopped {when(at, tz)}".rstrip(), (why,) if why else (), at, passes
        )
    details = (how,) if how else ()
    return model.StepRun("done", f"Done {when(at, tz)}".rstrip(), details, at, passes)


def _step_run(
    step: snapshot.StepSpec,
    lane: state_mod.LaneState | None,
    mine: dict[int, _Pass],
    col_state: model.ColumnState,
    ended: bool,
    waiting: waits.Waiting | None,
    tz: tzinfo | None = None,
) -> model.StepRun:
    count = len(mine)
    latest = mine[max(mine)] if mine else None
    if lane is not None:
        count = max(count, lane.pass_)
        if lane.status == _Lane.DONE:
            said = latest.why if latest is not None else None
            return _finished(step, lane.outcome or "done", lane.finished_at, count, said, tz)
        if lane.status == _Lane.FAILED:
            why: tuple[str, ...] = (latest.failed,) if latest is not None and latest.failed else ()
            text = f"Failed {when(lane.finished_at, tz)}".rstrip()
            return model.StepRun("failed", text, why, lane.finished_at, count)
        if ended or waiting is None:
            why = ("the run ended while it waited",)
            return model.StepRun("stopped", "Stopped", why, None, count)
        return _live(waiting, lane, count, tz)
    if col_state in ("ahead", "not_reached"):
        word = "Ahead" if col_state == "ahead" else "Not reached"
        before: tuple[str, ...] = ()
        if latest is not None and latest.finished is not None:
            # An earlier pass of a flow that went back: when that pass ended.
            before = (f"pass {max(mine)} ended {when(latest.finished, tz)}",)
        return model.StepRun(col_state, word, before, None, count)
    if col_state == "skipped":
        return model.StepRun("skipped", "Skipped", (), None, count)
    if latest is not None and latest.failed is not None:
        text = f"Failed {when(latest.finished, tz)}".rstrip()
        details: tuple[str, ...] = (latest.failed,)
        if latest.fault_to is not None:
            details += (f"went on at position {latest.fault_to}",)
        return model.StepRun("failed", text, details, latest.finished, count)
    if latest is not None and latest.outcome is not None:
        return _finished(step, latest.outcome, latest.finished, count, latest.why, tz)
    return model.StepRun("done", "Done", (), None, count)


_Awaits = waits.Awaits


def _live(
    waiting: waits.Waiting, lane: state_mod.LaneState, count: int, tz: tzinfo | None = None
) -> model.StepRun:
    """A step the run is at: what it waits for (as ``standing`` reads it), or is doing."""
    since = lane.waiting_since or lane.started_at
    if waiting.awaits == _Awaits.START:
        return model.StepRun("working", "Starting", (), since, count)
    if waiting.awaits == _Awaits.COMMAND:
        attempt = (f"attempt {lane.attempts}",)
        return model.StepRun("working", "Running its command", attempt, since, count)
    if waiting.awaits == _Awaits.RETRY:
        again = (f"attempt {lane.attempts} failed", f"again {when(waiting.until, tz)}")
        return model.StepRun("retrying", "Retrying its command", again, waiting.until, count)
    text, details = waits_for(waiting, tz)
    return model.StepRun("waiting", text, details, since, count)


def waits_for(waiting: waits.Waiting, tz: tzinfo | None = None) -> tuple[str, tuple[str, ...]]:
    """What a waiting step waits for: a headline and its details.

    ``("Waiting for po.decided", ("1 answer of 2 asked, 2 needed", "gives up ..."))``
    """
    if waiting.awaits == _Awaits.SUBFLOW:
        child = f" (run {waiting.child})" if waiting.child is not None else ""
        until = (f"gives up {when(waiting.until, tz)}",) if waiting.until is not None else ()
        return model.clean(f"Waiting for subflow {waiting.subflow}{child}"), until
    if waiting.awaits == _Awaits.TIME:
        escalation = tuple(model.clean(d) for d in _escalation(waiting, tz))
        if waiting.until is None:
            return f"Waiting while its {waiting.field or 'date'} is empty", escalation
        return f"Waiting until {when(waiting.until, tz)}", escalation
    details: list[str] = []
    if waiting.received is not None and waiting.asked is not None:
        answers = "answer" if waiting.received == 1 else "answers"
        counted = f"{waiting.received} {answers} of {waiting.asked} asked"
        needed = f", {waiting.needed} needed" if waiting.needed is not None else ""
        details.append(counted + needed)
    missing = [n for n in waiting.asked_names if n not in waiting.answered]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        details.append(f"not yet: {', '.join(missing[:3])}{more}")
    if waiting.until is not None:
        details.append(f"gives up {when(waiting.until, tz)}")
    if waiting.next_reminder_at is not None:
        details.append(f"next reminder {when(waiting.next_reminder_at, tz)}")
    details += _escalation(waiting, tz)
    headline = f"Waiting for {words.event_words(waiting.event) if waiting.event else 'an answer'}"
    return model.clean(headline), tuple(model.clean(d) for d in details)


def _escalation(waiting: waits.Waiting, tz: tzinfo | None = None) -> list[str]:
    """``tells manager Wed 4 Mar 09:00 UTC``, or ``told manager``, for a step that escalates."""
    if waiting.escalate_to is None:
        return []
    if waiting.escalated or waiting.escalate_at is None:
        return [f"told {waiting.escalate_to}"]
    return [f"tells {waiting.escalate_to} {when(waiting.escalate_at, tz)}"]


def _taken(
    picture: model.Picture,
    snap: snapshot.FlowSnapshot,
    run: RunInput,
    visits: list[tuple[int, int]],
    passes: dict[str, dict[int, _Pass]],
) -> tuple[model.Way, ...]:
    """The ways with how often the run went along each: its path through the branches."""
    index = {c.position: c.index for c in picture.columns}
    counts: dict[int, int] = {}

    def went(source: int, target: int | None, outcome: str | None) -> None:
        choices = [
            i for i, w in enumerate(picture.ways) if (w.source, w.target) == (source, target)
        ]
        if outcome is not None:
            how = {"goto": "other", "ended": "other", "fault": "fault"}.get(outcome, "next")
            choices = [i for i in choices if picture.ways[i].how == how] or choices
        if choices:
            counts[choices[0]] = counts.get(choices[0], 0) + 1

    def branch_outcome(position: int, pass_: int) -> str | None:
        """How the run left the position: by a branch's way, or by a fault path."""
        for step in snap.steps_at(position):
            found = passes.get(str(step.id), {}).get(pass_)
            if found is not None and found.fault_to is not None:
                return "fault"
        for step in snap.steps_at(position):
            if step.kind == "branch":
                found = passes.get(str(step.id), {}).get(pass_)
                if found is not None and found.outcome is not None:
                    return found.outcome
                if run.state is not None and run.state.position == position:
                    lane = next((ln for ln in run.state.lanes if ln.step_id == step.id), None)
                    return None if lane is None else lane.outcome
        return None

    if visits:
        went(-1, index.get(visits[0][0]), None)
    for (a, k), (b, _) in itertools.pairwise(visits):
        if a in index and b in index:
            went(index[a], index[b], branch_outcome(a, k))
    if visits and run.status == statuses.RunStatus.DONE and visits[-1][0] in index:
        last, k = visits[-1]
        went(index[last], None, branch_outcome(last, k))
    return tuple(replace(w, taken=counts.get(i, 0)) for i, w in enumerate(picture.ways))


def _hidden_titles(picture: model.Picture, snap: snapshot.FlowSnapshot) -> set[str]:
    drawn = {(b.position, str(b.step_id)) for c in picture.columns for b in c.boxes}
    return {s.title for s in snap.steps if s.title and (s.position, str(s.id)) not in drawn}


def _sentence(run: RunInput, position: int | None, hidden: set[str]) -> str:
    """The run in one sentence; a reason naming a step the reader cannot read is left out."""
    reason = model.clean(run.reason or "")
    if any(f"'{title}'" in reason for title in hidden):
        reason = ""
    status = statuses.RunStatus(run.status)
    at = f" at position {position}" if position is not None else ""
    if status == statuses.RunStatus.DONE:
        head = f"Run {run.id} is done"
    elif status == statuses.RunStatus.FAILED:
        head = f"Run {run.id} failed{at}"
    elif status == statuses.RunStatus.CANCELLED:
        head = f"Run {run.id} was cancelled{at}"
    else:
        head = f"Run {run.id} is {status}{at}"
    return f"{head}: {reason}" if reason else head


def run_input(
    run_id: int,
    status: str,
    state: shapes.Payload | None,
    history: Sequence[HistoryLine],
    *,
    reason: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
) -> RunInput:
    """A ``RunInput`` from a run row's stored values (its state as ``RunState.to_dict``)."""
    current = state_mod.RunState.from_dict(state) if state else None
    return RunInput(run_id, status, current, history, reason, started_at, ended_at)
