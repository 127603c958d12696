"""What the interpreter remembers between advances changes nothing it gives.

An advance looks up what it read of a snapshot before (``known``: each step's kind, the
position after each) and the history details it sanitized before (``turn``). These
tests pin that a run driven with everything remembered gives exactly what a run gives
that has each advance read a fresh copy of its snapshot and config and sanitize every
detail anew; that an edited flow or another config is read afresh; and that what is
remembered of a snapshot goes with it.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import weakref
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_interpreter_driver import Sim, config
from test_interpreter_listening import LISTENING
from test_interpreter_properties import any_rows, flows, moves
from test_interpreter_stateful import app_flows

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects, happened, interpret, known, state, turn
from flowrunner.flows.interpreter.happened import CommandResult


class ColdSim(Sim):
    """A Sim whose every advance reads a fresh copy of its snapshot and config, with no
    sanitized detail remembered: nothing carried over from an earlier advance."""

    def _call(self, run: state.RunState | None, seen: happened.Happened) -> interpret.Step:
        warm_snap, warm_cfg = self.snap, self.cfg
        self.snap = snapshot.FlowSnapshot.from_dict(warm_snap.to_dict())
        self.cfg = dataclasses.replace(warm_cfg)
        turn._SAFE.clear()
        try:
            return super()._call(run, seen)
        finally:
            self.snap, self.cfg = warm_snap, warm_cfg


def answers(seed: int) -> Any:
    """Command answers that depend only on the command: successes saying whom or how
    many they asked, failures and refusals."""

    def answer(command: effects.RunCommand) -> CommandResult:
        luck = random.Random(f"{seed}/{command.key}/{command.attempt}")
        roll = luck.random()
        if roll < 0.05:
            error = {"code": "no", "message": "refused: card 4111 1111 1111 1111"}
            return CommandResult(key=command.key, ok=False, error=error, refused=True)
        if roll < 0.3:
            error = {"code": "down", "message": "provider down, token=abc123"}
            return CommandResult(key=command.key, ok=False, error=error)
        if roll < 0.6:
            return CommandResult(key=command.key, ok=True, answer={"asked": luck.randint(0, 3)})
        names = luck.sample(["ann", "bob", "cat"], luck.randint(0, 3))
        return CommandResult(key=command.key, ok=True, answer={"asked": names})

    return answer


def drive(sim: Sim, script: list[tuple[str, Any]], luck: random.Random) -> str:
    """The run driven through the script: every effect and state, as text to compare
    (``repr`` tells ``True`` from ``1``, which ``==`` does not)."""
    said: list[str] = []

    def step() -> None:
        before = len(sim.effects)
        sim.run()
        said.append(repr(sim.effects[before:]))
        assert sim.state is not None
        said.append(json.dumps(sim.state.to_dict()))

    step()
    for action, value in script:
        if action == "clock":
            sim.later(minutes=value)
        elif action == "event":
            sim.emit(value, order=42, decision="rejected", approver=luck.choice(["ann", "bob"]))
        elif action == "status" and sim.record is not None:
            sim.record["status"] = value
        elif action == "wake" and sim.wake is not None:
            sim.to_wake()
        step()
    return "\n".join(said)


@given(
    st.one_of(flows(), app_flows(), any_rows()),
    moves,
    st.integers(0, 2**16),
    st.sampled_from(["plain", "listening"]),
)
def test_a_run_with_everything_remembered_gives_what_a_cold_run_gives(
    rows: list[dict[str, Any]], script: list[tuple[str, Any]], seed: int, kinds: str
) -> None:
    cfg = config(max_moves=30)
    if kinds == "listening":
        cfg = config(max_moves=30, kinds={**cfg.kinds, "approval": LISTENING})
    outputs = []
    for made in (Sim, ColdSim):
        sim = made(rows, record={"id": 42, "status": "open", "due_at": None}, cfg=cfg)
        sim.handlers = dict.fromkeys(
            ("request_approval", "remind_approver", "ask_quietly", "send_purchase_order"),
            answers(seed),
        )
        outputs.append(drive(sim, script, random.Random(seed)))
    assert outputs[0] == outputs[1]


# -- a flow edited, another config -------------------------------------------------------


def send_flow(kind: str) -> snapshot.FlowSnapshot:
    return snapshot.FlowSnapshot.build(
        {"id": 1, "name": "po", "start": "created"},
        [
            {"id": 1, "position": 1, "kind": kind, "title": "Send"},
            {"id": 2, "position": 3, "kind": "set", "field": "status", "value": "'sent'"},
        ],
    )


def first_advance(
    snap: snapshot.FlowSnapshot, cfg: Any, record: dict[str, Any] | None = None
) -> interpret.Step:
    seen = happened.Happened(record=record or {"id": 42, "status": "open"})
    return interpret.start(snap, seen, Sim([]).now, cfg)


def test_an_edited_flow_is_read_afresh_not_from_what_its_old_snapshot_said() -> None:
    cfg = config()
    old = send_flow("send")
    assert first_advance(old, cfg).state.status == "running"  # its command is out
    edited = send_flow("nonesuch")
    step = first_advance(edited, cfg)
    assert step.state.status == "failed"
    assert (
        step.state.reason is not None and "the binding has no kind 'nonesuch'" in step.state.reason
    )
    # And the old snapshot, still in use by its runs, still reads as it did.
    assert first_advance(old, cfg).state.status == "running"


def test_a_snapshot_under_another_config_is_read_afresh() -> None:
    snap = send_flow("send")
    assert first_advance(snap, config()).state.status == "running"
    without = config(kinds={"approval": config().kinds["approval"]})
    step = first_advance(snap, without)
    assert step.state.status == "failed"
    assert step.state.reason is not None and "the binding has no kind 'send'" in step.state.reason


def test_the_next_position_skips_gaps_as_the_snapshot_says() -> None:
    snap = send_flow("send")
    cfg = config()
    read = known.of(snap, cfg)
    assert [read.next_position(p) for p in (0, 1, 2, 3, 4)] == [
        snap.next_position(p) for p in (0, 1, 2, 3, 4)
    ]
    assert known.of(snap, cfg) is read


def test_a_broken_step_stays_broken_when_asked_again() -> None:
    snap = send_flow("nonesuch")
    read = known.of(snap, config())
    messages = []
    for _ in range(2):
        try:
            read.kind(snap.steps[0])
        except Exception as error:
            messages.append(str(error))
    assert len(messages) == 2 and messages[0] == messages[1]
    assert "the binding has no kind 'nonesuch'" in messages[0]


def test_what_is_known_of_a_snapshot_goes_with_it() -> None:
    snap = send_flow("send")
    first_advance(snap, config())
    key = id(snap)
    assert key in known._HELD
    gone = weakref.ref(snap)
    del snap
    gc.collect()
    assert gone() is None
    assert key not in known._HELD


# -- remembered details ------------------------------------------------------------------


def sanitized(detail: dict[str, Any]) -> dict[str, Any]:
    done = turn._sanitized(detail)
    assert isinstance(done, dict)
    return done


def test_a_remembered_detail_keeps_its_values_types() -> None:
    assert sanitized({"held": True}) == {"held": True}
    one = sanitized({"held": 1})
    assert one == {"held": 1} and type(one["held"]) is int
    again = sanitized({"held": True})
    assert type(again["held"]) is bool


def test_a_remembered_detail_is_still_masked_and_each_line_gets_its_own() -> None:
    detail = {"error": "token=abc123 failed", "attempt": 2}
    first = sanitized(detail)
    second = sanitized(dict(detail))
    assert first == second == {"error": "token=[redacted] failed", "attempt": 2}
    first["error"] = "changed"
    assert sanitized(detail)["error"] == "token=[redacted] failed"


def test_a_long_text_is_not_remembered() -> None:
    long = {"message": "x" * (turn._SAFE_LENGTH + 1)}
    sanitized(long)
    assert not any(item == (("message", long["message"]),) for item, _ in turn._SAFE)


# -- effects made without their checked constructors ---------------------------------------


def test_a_line_made_directly_is_the_line_its_constructor_makes() -> None:
    values = (2, 7, "Send", "send", 1, "done", {"outcome": "done"}, Sim([]).now)
    made = effects.Log.made(*values)
    built = effects.Log(*values)
    assert made == built and repr(made) == repr(built)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(effects.Log)]


def test_a_command_made_directly_is_the_command_its_constructor_makes() -> None:
    values = ("step-7/pass-1", 7, 1, "remind", "remind_po", {"to": "ann"}, 1, 2, False, Sim([]).now)
    made = effects.RunCommand.made(*values)
    built = effects.RunCommand(*values)
    assert made == built and repr(made) == repr(built)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(effects.RunCommand)]
