"""Property: a run's history does not depend on when the worker comes.

For random flows of waits and waitFors (with parallel lanes, set steps, branches that
loop back, and application kinds whose commands answer), random
events about the record and random worker schedules — late, down for days, on time —
the run's history (each line's flow time, what, position, step and pass, and the
commands, notices and writes) and its final state are exactly those of a perfectly
punctual worker, one that advances at every due time and right after every event. The
pure interpreter is driven directly; there is no database.

A command that fails is the one thing that happens on the worker's own time: its
retry's backoff counts from when the attempt really ran (so a late worker does not
burn through its attempts at once), which ``test_interpreter_clock`` shows apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_interpreter_driver import T0, build, config

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, interpret, state
from flowrunner.flows.interpreter.config import InterpreterConfig
from flowrunner.flows.interpreter.happened import CommandResult, EventIn, Happened

EVENTS = ["po.shipped", "po.decided"]
END = T0 + timedelta(days=30)


def lane_step(position: int) -> st.SearchStrategy[dict[str, Any]]:
    wait = st.fixed_dictionaries(
        {
            "kind": st.just("wait"),
            "duration": st.sampled_from(["30 minutes", "1 hour", "90 minutes", "1 day"]),
        }
    )
    wait_for = st.fixed_dictionaries(
        {"kind": st.just("waitFor"), "event": st.sampled_from(EVENTS)},
        optional={"duration": st.sampled_from(["1 hour", "2 hours", "2 days"])},
    )
    notify = st.just({"kind": "notify", "audience": "requester", "message": "moved on"})
    write = st.fixed_dictionaries(
        {
            "kind": st.just("set"),
            "field": st.sampled_from(["status", "due_at"]),
            "value": st.just("now()"),
        }
    ).map(lambda row: {**row, "value": "closed"} if row["field"] == "status" else row)
    # Application kinds: a command alone, or a command then a wait for po.decided.
    send = st.just({"kind": "send"})
    quiet = st.fixed_dictionaries(
        {"kind": st.just("quiet")}, optional={"duration": st.sampled_from(["1 hour", "1 day"])}
    )
    return st.one_of(wait, wait, wait_for, wait_for, notify, write, send, quiet).map(
        lambda row: {"position": position, **row}
    )


@st.composite
def flows(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 4))
    rows: list[dict[str, Any]] = []
    for position in range(1, count + 1):
        if position > 1 and draw(st.integers(0, 5)) == 0:
            rows.append(
                {
                    "position": position,
                    "kind": "branch",
                    "condition": "status = closed",
                    "goto": draw(st.integers(1, position - 1)),
                }
            )
        else:
            rows += draw(st.lists(lane_step(position), min_size=1, max_size=2))
    return rows


@st.composite
def arrivals(draw: st.DrawFn) -> tuple[list[EventIn], int]:
    """Events about the record (some from before the run) and the run's event floor."""
    before = draw(st.integers(0, 2))
    events = [
        EventIn(id=i + 1, name=draw(st.sampled_from(EVENTS)), payload={"order": 42}, at=T0)
        for i in range(before)
    ]
    at = T0
    for _ in range(draw(st.integers(0, 8))):
        at += timedelta(minutes=draw(st.sampled_from([0, 0, 30, 60, 90, 17, 24 * 60, 3 * 24 * 60])))
        name = draw(st.sampled_from(EVENTS))
        events.append(EventIn(id=len(events) + 1, name=name, payload={"order": 42}, at=at))
    return events, before


schedules = st.lists(
    st.one_of(
        st.integers(0, 120),  # on time, or nearly
        st.integers(0, 5 * 24 * 60),  # down for hours or days
        st.sampled_from([30, 60, 90, 24 * 60]),  # exactly on a timer's step
    ),
    max_size=12,
).map(lambda gaps: [T0 + timedelta(minutes=sum(gaps[: i + 1])) for i in range(len(gaps))])


@dataclass
class Outcome:
    history: list[tuple[Any, ...]]
    state: state.RunState


class Worker:
    """Plays the worker: advances at the given moments, feeding the events recorded by then."""

    def __init__(
        self, snap: snapshot.FlowSnapshot, cfg: InterpreterConfig, events: list[EventIn], floor: int
    ) -> None:
        self.snap, self.cfg, self.events, self.floor = snap, cfg, events, floor
        self.record: dict[str, Any] = {"id": 42, "status": "open", "due_at": None}
        self.state: state.RunState | None = None
        self.wake: datetime | None = None
        self.history: list[tuple[Any, ...]] = []

    def advance(self, now: datetime) -> None:
        """One worker pass: advance, then answer commands and advance again, as the worker
        does (each round passes the first round's events again: they are ignored)."""
        taken = self.state.last_event_id if self.state is not None else self.floor
        events = tuple(e for e in self.events if e.id > taken and e.at <= now)
        seen = Happened(record=dict(self.record), events=events, latest_event_id=self.floor)
        if self.state is None:
            step = interpret.start(
                self.snap, seen, now, self.cfg, started_at=T0, event_floor=self.floor
            )
        else:
            step = interpret.advance(self.snap, self.state, seen, now, self.cfg)
        self.take(step)
        while step.commands:
            results = tuple(answer(command) for command in step.commands)
            seen = Happened(record=dict(self.record), events=events, results=results)
            step = interpret.advance(self.snap, step.state, seen, now, self.cfg)
            self.take(step)

    def take(self, step: interpret.Step) -> None:
        for effect in step.effects:
            if isinstance(effect, effects.Log):
                line = (effect.at, effect.what, effect.position, effect.step_id, effect.pass_)
                self.history.append((*line, effect.detail))
            elif isinstance(effect, effects.Notify):
                self.history.append(("notify", effect.step_id, effect.pass_))
            elif isinstance(effect, effects.RunCommand):
                self.history.append(("command", effect.key, effect.attempt))
            elif isinstance(effect, effects.SetField):
                self.record[effect.field] = effect.value
                self.history.append(("set", effect.field, effect.value))
        self.state, self.wake = step.state, step.wake

    def outcome(self) -> Outcome:
        assert self.state is not None
        # Which events the driver happened to hand over after the run ended (or failed:
        # they wait unread for a retry) is its own bookkeeping, not the run's.
        if self.state.ended:
            self.state.last_event_id = 0
            self.state.unread = []
        return Outcome(self.history, self.state)


def answer(command: effects.RunCommand) -> CommandResult:
    """Every command answers, having asked one."""
    return CommandResult(key=command.key, ok=True, answer={"asked": 1})


def punctual(worker: Worker) -> Outcome:
    """Advance at the run's creation, at every due time and right after every event."""
    now = T0
    worker.advance(now)
    while worker.state is not None and not worker.state.ended:
        upcoming = [e.at for e in worker.events if e.at > now]
        if worker.wake is not None and worker.wake > now:
            upcoming.append(worker.wake)
        if not upcoming or min(upcoming) > END:
            break
        now = min(upcoming)
        worker.advance(now)
    worker.advance(END)
    return worker.outcome()


def scheduled(worker: Worker, times: list[datetime]) -> Outcome:
    for now in [*times, END]:
        worker.advance(now)
    return worker.outcome()


@given(flows(), arrivals(), schedules)
def test_the_history_is_that_of_a_punctual_worker_whatever_the_schedule(
    rows: list[dict[str, Any]], events_and_floor: tuple[list[EventIn], int], times: list[datetime]
) -> None:
    events, floor = events_and_floor
    snap = build(rows)
    cfg = config(max_moves=40)
    expected = punctual(Worker(snap, cfg, events, floor))
    got = scheduled(Worker(snap, cfg, events, floor), times)
    assert got.history == expected.history
    assert got.state == expected.state


@given(flows(), arrivals(), schedules, schedules)
def test_two_late_workers_agree_with_each_other(
    rows: list[dict[str, Any]],
    events_and_floor: tuple[list[EventIn], int],
    first: list[datetime],
    second: list[datetime],
) -> None:
    events, floor = events_and_floor
    snap = build(rows)
    cfg = config(max_moves=40)
    one = scheduled(Worker(snap, cfg, events, floor), first)
    other = scheduled(Worker(snap, cfg, events, floor), second)
    assert one.history == other.history
    assert one.state == other.state
