"""Property tests: random valid flows of built-in kinds (and sends with fault paths, waits
that escalate) under random clock moves, events and record changes always end or wait on
something real, join every lane or leave it by a fault path, and tell each notice at most
once per step and pass."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from test_interpreter_driver import T0, Sim, config

from flowrunner import binding
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import effects
from flowrunner.flows.interpreter.happened import CommandResult
from flowrunner.foundations import statuses

WORDS = ["open", "closed", "high", "low"]


# A waiting step may escalate: tell an audience once it has waited this long.
ESCALATES = {
    "escalate": st.sampled_from(["30 minutes", "1 day"]),
    "escalate_to": st.sampled_from(["requester", "buyer"]),
}


# Made once for each position: a strategy made anew for each draw is checked anew by
# hypothesis, which took most of the time the flows took to draw.
@functools.cache
def builtin_step(position: int, outside: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    wait_for = escalating(
        st.fixed_dictionaries(
            {"kind": st.just("waitFor"), "event": st.just("po.shipped")},
            optional={"duration": st.sampled_from(["1 hour", "3 days"])},
        )
    )
    return st.one_of(
        st.fixed_dictionaries(
            {
                "kind": st.just("set"),
                "field": st.sampled_from(["status", "priority"]),
                "value": st.sampled_from(WORDS),
            }
        ),
        st.fixed_dictionaries(
            {
                "kind": st.just("wait"),
                "duration": st.sampled_from(["30 minutes", "2 hours", "1 day"]),
            }
        ),
        escalating(
            st.fixed_dictionaries(
                {"kind": st.just("until"), "field": st.just("due_at")},
                optional={"duration": st.sampled_from(["-1 day", "2 hours", "-30 minutes"])},
            )
        ),
        *([wait_for] if outside else []),
        st.fixed_dictionaries(
            {
                "kind": st.just("notify"),
                "audience": st.sampled_from(["requester", "buyer"]),
                "message": st.sampled_from(["hello", "PO moved on"]),
            }
        ),
    ).map(lambda row: {"position": position, **row})


def escalating(rows: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Each row as it is, or escalating (both columns go together)."""
    either: st.SearchStrategy[dict[str, str]] = st.one_of(
        st.just({}), st.fixed_dictionaries(ESCALATES)
    )
    return st.tuples(rows, either).map(lambda pair: {**pair[0], **pair[1]})


def refusing_odd_passes(command: effects.RunCommand) -> CommandResult:
    """The supplier refuses a send on its odd passes: a flow going back sends again."""
    if command.pass_ % 2:
        error = {"code": "no", "message": "on hold"}
        return CommandResult(key=command.key, ok=False, error=error, refused=True)
    return CommandResult(key=command.key, ok=True)


HANDLERS = {"send_purchase_order": refusing_odd_passes}


@st.composite
def flows(draw: st.DrawFn, outside: bool = True) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 5))
    rows: list[dict[str, Any]] = []
    for position in range(1, count + 1):
        if position > 1 and draw(st.booleans()) and draw(st.booleans()):
            branch: dict[str, Any] = {
                "position": position,
                "kind": "branch",
                "condition": f"{draw(st.sampled_from(['status', 'priority']))} = "
                f"{draw(st.sampled_from(WORDS))}",
            }
            if draw(st.booleans()):
                branch["goto"] = draw(st.integers(1, count))
            rows.append(branch)
        else:
            rows += draw(st.lists(builtin_step(position, outside), min_size=1, max_size=3))
            if draw(st.integers(0, 4)) == 0:
                # A send beside them that takes its fault path when refused.
                target = draw(st.integers(1, count))
                rows.append({"position": position, "kind": "send", "on_failure": target})
    return rows


moves = st.lists(
    st.one_of(
        st.tuples(st.just("clock"), st.integers(0, 3 * 24 * 60)),
        st.tuples(st.just("event"), st.sampled_from(["po.shipped", "po.decided"])),
        st.tuples(st.just("due"), st.one_of(st.none(), st.integers(-2 * 24 * 60, 5 * 24 * 60))),
        st.tuples(st.just("status"), st.sampled_from(WORDS)),
        st.tuples(st.just("wake"), st.none()),
    ),
    max_size=25,
)


def waits_on_something_real(sim: Sim) -> None:
    """A waiting run has a wake time in the future, or a lane waiting for the world."""
    run = sim.state
    assert run is not None
    assert run.status != "running", "commands were all answered"
    assert run.error is None or run.error["code"] != "engine.error", run.reason
    if run.status != "waiting":
        assert sim.wake is None
        return
    assert any(lane.active for lane in run.lanes)
    if sim.wake is not None:
        assert sim.wake > sim.now, "something due now was left undone"
        return
    steps = dict(zip(range(len(run.lanes)), sim.snap.steps_at(run.position or 0), strict=True))
    outside = [
        i
        for i, lane in enumerate(run.lanes)
        if lane.status == "waiting"
        and (
            (steps[i].kind == "waitFor" and lane.deadline is None)
            or (steps[i].kind == "until" and lane.timer is None)
            or (steps[i].kind not in ("waitFor", "until", "wait") and lane.deadline is None)
        )
    ]
    assert outside, "a waiting run with no wake time must wait for an event or a record change"


def joins_and_notices_hold(sim: Sim) -> None:
    """A position is left only when each of its lanes finished; a notice goes out once."""
    told = [(n.step_id, n.pass_) for n in sim.of(effects.Notify)]
    assert len(told) == len(set(told))
    by_position = {p: {s.id for s in sim.snap.steps_at(p)} for p in sim.snap.positions}
    current: tuple[int | None, int | None] | None = None
    finished: set[Any] = set()
    for log in sim.logs():
        if log.what == "started" and (log.position, log.pass_) != current:
            if current is not None and current[0] is not None:
                assert finished == by_position[current[0]], "left a position before its join"
            current, finished = (log.position, log.pass_), set()
        elif log.what in ("done", "arrived", "timed_out") and log.step_id is not None:
            finished.add(log.step_id)
        elif log.what == "failed" and isinstance(log.detail, dict) and "on_failure" in log.detail:
            finished.add(log.step_id)  # it took its fault path: the others stopped ("done")
        elif log.what == "condition" and log.kind != "branch":
            finished.add(log.step_id)  # an app kind's wait ended by its condition


def play(sim: Sim, script: list[tuple[str, Any]]) -> None:
    sim.run()
    waits_on_something_real(sim)
    for action, value in script:
        if sim.state is not None and sim.state.status not in ("waiting", "running"):
            break
        if action == "clock":
            sim.later(minutes=value)
        elif action == "event":
            sim.emit(value, order=42)
        elif action == "due" and sim.record is not None:
            sim.record["due_at"] = None if value is None else T0 + timedelta(minutes=value)
        elif action == "status" and sim.record is not None:
            sim.record["status"] = value
        elif action == "wake" and sim.wake is not None:
            sim.to_wake()
        sim.run()
        waits_on_something_real(sim)
    joins_and_notices_hold(sim)


@given(flows(), moves)
def test_random_flows_end_or_wait_on_something_real(
    rows: list[dict[str, Any]], script: list[tuple[str, Any]]
) -> None:
    record = {"id": 42, "status": "open", "due_at": None}
    sim = Sim(rows, record=record, cfg=config(max_moves=60), handlers=HANDLERS)
    play(sim, script)


@given(flows(outside=False))
def test_driven_by_its_wake_times_alone_a_run_without_outside_waits_ends(
    rows: list[dict[str, Any]],
) -> None:
    # Without waitFor steps and with a due date set, nothing waits on the world:
    # following Wake alone must end the run.
    record = {"id": 42, "status": "open", "due_at": T0}
    sim = Sim(rows, record=record, cfg=config(max_moves=60), handlers=HANDLERS)
    sim.run()
    for _ in range(200):
        if sim.status != "waiting":
            break
        waits_on_something_real(sim)
        sim.to_wake().run()
    assert sim.status in ("done", "failed")
    if sim.status == "failed":
        assert sim.state is not None and sim.state.error is not None
        assert sim.state.error["code"] == "run.loop"
    joins_and_notices_hold(sim)


junk = st.one_of(
    st.none(), st.text(max_size=12), st.integers(-5, 5), st.booleans(), st.floats(allow_nan=True)
)


@st.composite
def any_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    kinds = ["set", "wait", "until", "branch", "waitFor", "notify", "approval", "send", "odd"]
    # Every column a step's kind may read (not its row, place, kind or title), and an input.
    fixed = ("id", "flow_id", "position", "kind", "title")
    columns = [*(c for c in binding.STEP_COLUMNS if c not in fixed), "approver"]
    rows = []
    for _ in range(draw(st.integers(0, 4))):
        row: dict[str, Any] = {
            "position": draw(st.integers(1, 4)),
            "kind": draw(st.sampled_from(kinds)),
        }
        for column in draw(st.lists(st.sampled_from(columns), max_size=4, unique=True)):
            row[column] = draw(junk)
        rows.append(row)
    return rows


@given(any_rows(), st.lists(st.integers(0, 4 * 24 * 60), max_size=5), junk)
def test_advance_never_raises_for_any_snapshot(
    rows: list[dict[str, Any]], clock: list[int], due: Any
) -> None:
    built = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "x", "start": "manual"}, [{"id": i, **r} for i, r in enumerate(rows)]
    )
    assert built.steps is not None
    sim = Sim(rows, record={"id": 1, "due_at": due, "status": due}, check_replay=True)
    sim.run()
    for minutes in clock:
        sim.emit("po.decided", order=1, decision="approved")
        sim.later(minutes=minutes).run()
    assert sim.state is not None
    assert sim.state.status in set(statuses.RunStatus)
    if sim.state.error is not None:
        assert sim.state.error["code"] != "engine.error", sim.state.reason
