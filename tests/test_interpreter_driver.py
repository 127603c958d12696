"""A pure, in-memory driver for the interpreter, used by the engine's tests.

``Sim`` plays the worker's part without a database: it feeds ``advance`` the record,
new events and command answers, applies ``SetField`` to its record, answers
``RunCommand`` effects through test-supplied handlers, and moves the clock only when
told. ``create()`` marks when the run was created (its logical start and event floor)
when the first advance comes later. On every advance it also checks the two promises
the worker relies on: the state round-trips through JSON, and advancing again from the
saved state (a crash and a replay) gives exactly the same state and effects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from flowrunner import query
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, interpret, state
from flowrunner.flows.interpreter.config import InterpreterConfig, KindConfig, NotifyConfig
from flowrunner.flows.interpreter.happened import CommandResult, EventIn, Happened
from flowrunner.foundations.retry_policy import RetryPolicy
from flowrunner.history import flows

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

KINDS = {
    "approval": KindConfig(
        name="approval",
        command="request_approval",
        inputs=("approver",),
        wait_for="po.decided",
        remind="remind_approver",
    ),
    "send": KindConfig(name="send", command="send_purchase_order"),
    "quiet": KindConfig(name="quiet", command="ask_quietly", wait_for="po.decided"),
}


def columns() -> dict[str, Any]:
    T = query.ColumnType
    return {
        "id": T.NUMBER,
        "status": T.TEXT,
        "priority": T.TEXT,
        "amount": T.NUMBER,
        "approved": T.BOOLEAN,
        "due_at": T.TIMESTAMP,
        "due_on": T.DATE,
        "approver": T.TEXT,
        "requester_id": T.TEXT,
        "buyer_id": T.TEXT,
    }


def config(**overrides: Any) -> InterpreterConfig:
    values: dict[str, Any] = {
        "columns": columns(),
        "kinds": KINDS,
        "events": {"po.decided": "order", "po.shipped": "order"},
        "notify": {
            "requester": NotifyConfig("requester", to="requester_id", title="PO {id}: {message}"),
            "buyer": NotifyConfig("buyer", to="buyer_id", email=True),
        },
        "set_columns": frozenset({"status", "priority", "amount", "approved", "due_at", "due_on"}),
        "retry": RetryPolicy(max_attempts=3, base=timedelta(seconds=10), cap=timedelta(minutes=1)),
    }
    values.update(overrides)
    return InterpreterConfig(**values)


def build(steps: Sequence[Mapping[str, Any]]) -> snapshot.FlowSnapshot:
    rows = [{"id": i + 1, "flow_id": 1, **row} for i, row in enumerate(steps)]
    return snapshot.FlowSnapshot.build({"id": 1, "name": "po", "start": "created"}, rows)


def approval(position: int = 1, *, title: str = "Approval", **extra: Any) -> dict[str, Any]:
    """An approval step (of the purchasing kinds) asking ann, with ``extra`` columns."""
    return {"position": position, "kind": "approval", "title": title, "approver": "ann", **extra}


def ok(answer: Mapping[str, Any] | None = None) -> Callable[[effects.RunCommand], CommandResult]:
    return lambda c: CommandResult(key=c.key, ok=True, answer=answer)


def failing(message: str = "provider down", refused: bool = False) -> Any:
    error = {"code": "command.error", "message": message, "retryable": not refused}
    return lambda c: CommandResult(key=c.key, ok=False, error=error, refused=refused)


class Sim:
    """Drives one run of a flow over one record, with a clock that moves when told."""

    def __init__(
        self,
        steps: Sequence[Mapping[str, Any]],
        *,
        record: Mapping[str, Any] | None = None,
        cfg: InterpreterConfig | None = None,
        now: datetime = T0,
        handlers: Mapping[str, Callable[[effects.RunCommand], CommandResult]] | None = None,
        check_replay: bool = True,
    ) -> None:
        self.snap = build(steps)
        self.cfg = cfg or config()
        self.record: dict[str, Any] | None = dict(
            record or {"id": 42, "status": "open", "amount": 100, "requester_id": "ann"}
        )
        self.now = now
        self.handlers = dict(handlers or {})
        self.check_replay = check_replay
        self.events: list[EventIn] = []
        self.state: state.RunState | None = None
        self.effects: list[effects.Effect] = []
        self.commands: list[effects.RunCommand] = []
        self.wake: datetime | None = None
        self.advances = 0
        self.created_at: datetime | None = None
        self.event_floor: int | None = None

    # -- what the world does ---------------------------------------------------------

    def create(self) -> Sim:
        """The run is created now (events so far are from before it); a worker may come later."""
        self.created_at = self.now
        self.event_floor = len(self.events)
        return self

    def emit(self, name: str = "po.decided", **payload: Any) -> EventIn:
        event = EventIn(id=len(self.events) + 1, name=name, payload=payload, at=self.now)
        self.events.append(event)
        return event

    def at(self, moment: datetime) -> Sim:
        assert moment >= self.now, "the clock only moves forward"
        self.now = moment
        return self

    def later(self, **delta: float) -> Sim:
        return self.at(self.now + timedelta(**delta))

    def to_wake(self) -> Sim:
        assert self.wake is not None, "the run has nothing to wake for"
        return self.at(max(self.now, self.wake))

    # -- the driver ------------------------------------------------------------------

    def run(self, cancel: str | None = None) -> interpret.Step:
        """One worker pass: advance, then run commands and advance with their answers."""
        results: tuple[CommandResult, ...] = ()
        while True:
            step = self._advance(results, cancel)
            cancel = None
            for effect in step.effects:
                if isinstance(effect, effects.SetField) and self.record is not None:
                    self.record[effect.field] = effect.value
            if not step.commands:
                return step
            results = tuple(self._answer(command) for command in step.commands)

    def _answer(self, command: effects.RunCommand) -> CommandResult:
        self.commands.append(command)
        handler = self.handlers.get(command.command, ok())
        return handler(command)

    def happened(
        self, results: tuple[CommandResult, ...] = (), cancel: str | None = None
    ) -> Happened:
        seen = self.state.last_event_id if self.state is not None else 0
        return Happened(
            record=None if self.record is None else dict(self.record),
            events=tuple(e for e in self.events if e.id > seen),
            latest_event_id=len(self.events),
            results=results,
            cancel=cancel,
        )

    def _advance(self, results: tuple[CommandResult, ...], cancel: str | None) -> interpret.Step:
        seen = self.happened(results, cancel)
        saved = None if self.state is None else self.state.to_dict()
        step = self._call(self.state, seen)
        if self.check_replay:
            # A crash after the advance: the same inputs from the saved state again.
            again = self._call(None if saved is None else state.RunState.from_dict(saved), seen)
            assert again == step, "an advance replayed from its saved state differs"
            assert self.state is None or self.state.to_dict() == saved, "advance changed its input"
        stored = json.loads(json.dumps(step.state.to_dict()))
        assert state.RunState.from_dict(stored) == step.state
        assert isinstance(step.effects[-1], effects.Wake)
        assert sum(isinstance(e, effects.Wake) for e in step.effects) == 1
        self.state = step.state
        self.effects += step.effects
        self.wake = step.wake
        self.advances += 1
        return step

    def _call(self, run: state.RunState | None, seen: Happened) -> interpret.Step:
        if run is None:
            return interpret.start(
                self.snap,
                seen,
                self.now,
                self.cfg,
                started_at=self.created_at,
                event_floor=self.event_floor,
            )
        return interpret.advance(self.snap, run, seen, self.now, self.cfg)

    # -- what tests look at ----------------------------------------------------------

    @property
    def status(self) -> str:
        assert self.state is not None
        return self.state.status

    @property
    def reason(self) -> str | None:
        assert self.state is not None
        return self.state.reason

    def logs(self, what: str | None = None) -> list[effects.Log]:
        return [e for e in self.effects if isinstance(e, effects.Log) and what in (None, e.what)]

    def sentences(self, what: str | None = None) -> list[str]:
        """The history lines (of one code) as the sentences a business user reads."""
        return [flows.sentence(log, self.snap, self.cfg.timezone) for log in self.logs(what)]

    def history(self) -> list[tuple[datetime | None, str, int | None, Any]]:
        """The history as (flow time, what, position, step id) lines."""
        return [(log.at, log.what, log.position, log.step_id) for log in self.logs()]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.effects if isinstance(e, kind)]

    def lane(self, index: int = 0) -> state.LaneState:
        assert self.state is not None
        return self.state.lanes[index]

    def reminders(self) -> list[int]:
        return [c.reminder for c in self.commands if c.reminder is not None]


def test_a_flow_without_steps_is_done_at_once() -> None:
    sim = Sim([])
    sim.run()
    assert sim.status == "done"
    assert sim.reason == "the flow has no steps"
    assert sim.wake is None


def test_an_ended_run_stays_ended_and_asks_for_nothing() -> None:
    sim = Sim([{"position": 1, "kind": "notify", "audience": "requester", "message": "hi"}])
    sim.run()
    assert sim.status == "done"
    before = len(sim.effects)
    sim.emit()
    sim.later(days=3).run()
    assert sim.status == "done"
    assert sim.effects[before:] == [effects.Wake(None)]


def test_a_crash_mid_protocol_reissues_the_same_command() -> None:
    # The worker saved the state while a command was out (it never should, but if it
    # does the run is due at once and asks again with the same key and attempt).
    sim = Sim([{"position": 1, "kind": "send"}])
    first = sim._advance((), None)
    assert first.wake == sim.now
    again = sim._advance((), None)
    assert first.commands == again.commands
    assert sim.lane().status == "commanding"
