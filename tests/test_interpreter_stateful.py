"""A hypothesis state machine over runs of flows with application kinds.

Random interleavings of events, clock moves, record changes, command successes,
failures and refusals, operator retries and crashes (the last worker pass is thrown
away and done again from the saved state) keep the engine's promises: a run ends or
waits on something real; each reminder and each notice (an escalation's included) goes
out at most once; a wait ends exactly when its mode, its condition or its duration
says, counting the events read from its logical start on (an event at exactly that
moment may have been read before the step began, so it is allowed either way); and a
command failing for good fails the run only at a step that names no fault path.
"""

from __future__ import annotations

import copy
import functools
import random
from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from test_interpreter_driver import Sim, config
from test_interpreter_properties import builtin_step, waits_on_something_real

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, interpret, reading, state
from flowrunner.flows.interpreter.happened import CommandResult


@functools.cache  # made once for each position (see builtin_step)
def app_step(position: int) -> st.SearchStrategy[dict[str, Any]]:
    approval = st.fixed_dictionaries(
        {"kind": st.just("approval"), "approver": st.sampled_from(["ann", "bob"])},
        optional={
            "mode": st.sampled_from(["any", "all", "2", "50%"]),
            "condition": st.just("event.decision = rejected"),
            "duration": st.sampled_from(["1 day", "3 days"]),
            "remind": st.sampled_from(["6 hours", "1 day"]),
            "escalate": st.sampled_from(["12 hours", "2 days"]),
        },
    ).map(lambda row: {**row, "escalate_to": "buyer"} if "escalate" in row else row)
    quiet = st.fixed_dictionaries(
        {"kind": st.just("quiet")}, optional={"mode": st.sampled_from(["all", "60%"])}
    )
    send = st.just({"kind": "send"})
    return st.one_of(approval, quiet, send).map(lambda row: {"position": position, **row})


@st.composite
def app_flows(draw: st.DrawFn) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    count = draw(st.integers(1, 4))
    for position in range(1, count + 1):
        for _ in range(draw(st.integers(1, 2))):
            maker = app_step if draw(st.booleans()) else builtin_step
            row = draw(maker(position))
            if row["kind"] in APP_KINDS and draw(st.booleans()):
                row["on_failure"] = draw(st.integers(1, count))  # its fault path
            rows.append(row)
    return rows


APP_KINDS = ("approval", "quiet", "send")


def rejected(event_payload: Any) -> bool:
    return bool(event_payload.get("decision") == "rejected")


class EngineMachine(RuleBasedStateMachine):
    sim: Sim

    @initialize(
        rows=app_flows(),
        seed=st.integers(0, 2**16),
        fail_rate=st.sampled_from([0.0, 0.3, 0.8]),
        refuse_rate=st.sampled_from([0.0, 0.05]),
    )
    def setup(
        self, rows: list[dict[str, Any]], seed: int, fail_rate: float, refuse_rate: float
    ) -> None:
        self.seed, self.fail_rate, self.refuse_rate = seed, fail_rate, refuse_rate
        self.sim = Sim(
            rows,
            record={"id": 42, "status": "open", "due_at": None},
            cfg=config(max_moves=60),
            handlers={},
        )
        self.sim.handlers = {
            name: self.answer
            for name in (
                "request_approval",
                "remind_approver",
                "ask_quietly",
                "send_purchase_order",
            )
        }
        self.saved: dict[str, Any] | None = None
        self.after: dict[str, Any] | None = None
        # Events the run took late (while it was failed) are read at the retry.
        self.read_at: dict[int, datetime] = {}
        self.pass_()

    def answer(self, command: effects.RunCommand) -> CommandResult:
        # Answers depend only on the command, so a replay after a crash gets the same ones.
        luck = random.Random(f"{self.seed}/{command.key}/{command.attempt}")
        roll = luck.random()
        if roll < self.refuse_rate:
            error = {"code": "no", "message": "refused"}
            return CommandResult(key=command.key, ok=False, error=error, refused=True)
        if roll < self.refuse_rate + self.fail_rate:
            error = {"code": "down", "message": "provider down"}
            return CommandResult(key=command.key, ok=False, error=error)
        return CommandResult(key=command.key, ok=True, answer={"asked": luck.randint(0, 4)})

    # -- the worker pass, with a memory for crashes ------------------------------------

    def _picture(self) -> dict[str, Any]:
        sim = self.sim
        return {
            "state": None if sim.state is None else sim.state.to_dict(),
            "record": copy.deepcopy(sim.record),
            "effects": list(sim.effects),
            "commands": list(sim.commands),
            "wake": sim.wake,
            "events": list(sim.events),
            "now": sim.now,
        }

    def _restore(self, picture: dict[str, Any]) -> None:
        sim = self.sim
        sim.state = None if picture["state"] is None else state.RunState.from_dict(picture["state"])
        sim.record = copy.deepcopy(picture["record"])
        sim.effects = list(picture["effects"])
        sim.commands = list(picture["commands"])
        sim.wake = picture["wake"]

    def pass_(self) -> None:
        self.saved = self._picture()
        waiting = self._waiting_app_lanes()
        self.sim.run()
        self.after = self._picture()
        self._check_finished_waits(waiting)

    # -- rules ---------------------------------------------------------------------------

    @rule(minutes=st.integers(0, 3 * 24 * 60))
    def clock(self, minutes: int) -> None:
        self.sim.later(minutes=minutes)
        self.pass_()

    @precondition(lambda self: self.sim.wake is not None)
    @rule()
    def wake(self) -> None:
        self.sim.to_wake()
        self.pass_()

    @rule(decision=st.sampled_from(["approved", "rejected"]), other=st.booleans())
    def event(self, decision: str, other: bool) -> None:
        self.sim.emit("po.shipped" if other else "po.decided", order=42, decision=decision)
        self.pass_()

    @rule(status=st.sampled_from(["open", "closed", "high"]))
    def record_changes(self, status: str) -> None:
        assert self.sim.record is not None
        self.sim.record["status"] = status
        self.pass_()

    @precondition(lambda self: self.saved is not None)
    @rule()
    def crash(self) -> None:
        """The worker died after its last pass: do the pass again from what was saved."""
        assert self.saved is not None and self.after is not None
        expected = self.after
        self._restore(self.saved)
        assert self.sim.now == expected["now"]
        self.sim.run()
        again = self._picture()
        for part in ("state", "record", "effects", "commands", "wake"):
            assert again[part] == expected[part], f"the replayed pass differs in {part}"

    @precondition(lambda self: self.sim.state is not None and self.sim.state.status == "failed")
    @rule()
    def operator_retry(self) -> None:
        sim = self.sim
        assert sim.state is not None
        if not any(lane.status == "failed" for lane in sim.state.lanes):
            return
        step = interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)
        unread = {e.id for e in sim.state.unread}
        for event in sim.events:
            if event.id > sim.state.last_event_id or event.id in unread:
                self.read_at.setdefault(event.id, max(event.at, sim.now))
        sim.state = step.state
        sim.effects += step.effects
        self.pass_()

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def ends_or_waits_on_something_real(self) -> None:
        waits_on_something_real(self.sim)

    @invariant()
    def each_reminder_and_notice_at_most_once(self) -> None:
        reminders = [c.key for c in self.sim.commands if c.reminder is not None]
        assert len(reminders) == len(set(reminders))
        notices = [(n.step_id, n.pass_) for n in self.sim.of(effects.Notify)]
        assert len(notices) == len(set(notices))

    @invariant()
    def a_command_fails_the_run_only_without_a_fault_path(self) -> None:
        run = self.sim.state
        if run is None or run.error is None:
            return
        if run.error["code"] in ("command.refused", "command.failed"):
            details = run.error.get("details") or {}
            [step] = [s for s in self.sim.snap.steps if s.id == details.get("step_id")]
            assert step.get("on_failure") is None, "a step with a fault path failed the run"

    @invariant()
    def waiting_lanes_wait_exactly_as_long_as_they_should(self) -> None:
        for step, lane in self._waiting_app_lanes():
            surely, maybe = self._counted(lane)
            assert len(surely) <= lane.received <= len(maybe)
            assert len(surely) < reading.mode(step).needed(lane.asked)
            if reading.text(step, "condition") is not None:
                assert not any(rejected(e.payload) for e in surely)
            assert lane.deadline is None or lane.deadline > self.sim.now

    # -- helpers -------------------------------------------------------------------------

    def _waiting_app_lanes(self) -> list[tuple[snapshot.StepSpec, state.LaneState]]:
        run = self.sim.state
        if run is None or run.position is None or run.status not in ("waiting", "running"):
            return []
        pairs = zip(self.sim.snap.steps_at(run.position), run.lanes, strict=True)
        return [
            (step, lane)
            for step, lane in pairs
            if lane.status == "waiting" and step.kind in ("approval", "quiet")
        ]

    def _counted(self, lane: state.LaneState) -> tuple[list[Any], list[Any]]:
        """The events the lane surely counted, and those it may have counted.

        A lane counts the events read while it waited: from its logical start (one read
        at exactly that moment may have been read just before it began) until it gave
        up (the give-up comes first at its moment)."""
        assert lane.started_at is not None
        surely, maybe = [], []
        for e in self.sim.events:
            read = self.read_at.get(e.id, e.at)
            if e.name != "po.decided" or (lane.deadline is not None and read >= lane.deadline):
                continue
            if read > lane.started_at:
                surely.append(e)
            if read >= lane.started_at:
                maybe.append(e)
        return surely, maybe

    def _check_finished_waits(
        self, before: list[tuple[snapshot.StepSpec, state.LaneState]]
    ) -> None:
        """Each wait that ended in this pass ended for the reason its columns give."""
        ended = {
            (log.step_id, log.pass_): log.what
            for log in self.sim.logs()
            if log.what in ("done", "condition", "timed_out")
            and log.kind in ("approval", "quiet")
            # A step beside one that took its fault path stopped, whatever it counted.
            and not (isinstance(log.detail, dict) and log.detail.get("outcome") == "stopped")
        }
        for step, lane in before:
            what = ended.get((step.id, lane.pass_))
            if what is None:
                continue
            surely, maybe = self._counted(lane)
            need = reading.mode(step).needed(lane.asked)
            has_condition = reading.text(step, "condition") is not None
            if what == "condition":
                assert has_condition and any(rejected(e.payload) for e in maybe)
            elif what == "done":
                assert len(maybe) >= need
            else:
                assert lane.deadline is not None and lane.deadline <= self.sim.now
                assert len(surely) < need
                assert not (has_condition and any(rejected(e.payload) for e in surely))


TestEngineMachine = EngineMachine.TestCase
