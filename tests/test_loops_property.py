"""Property: the loop rule refuses exactly the flows whose runs can come back to a
position without any step having started to wait.

The oracle is the pure interpreter itself. For a random flow (positions with lanes of
built-in and application kinds, branches jumping forward, back or to themselves), every
way its branches can decide is played: each branch reads a column of its own, set to
hold or not. Each run is driven to its end — whenever it pauses, its timer comes and
so do the events it waits for; every command answers at once — so it goes on until it
ends or its loop bound fails it. Its history then says whether it ever came back to a
position with no ``waiting`` line since it was last there. The rule (``validate``, the
same one saves and the load check use) must refuse the flow exactly when some run did,
and the positions that run went round must lie within a loop the refusal names.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_interpreter_driver import T0, Sim, config, ok

from flowrunner import query
from flowrunner.binding import FlowBinding, Kind, NotifyRule
from flowrunner.flows import validation
from flowrunner.flows.interpreter.config import NotifyConfig
from flowrunner.foundations import statuses

BRANCHES = 4
SWITCHES = tuple(f"b{i}" for i in range(BRANCHES))

BINDING = FlowBinding(
    resource="item",
    flows_table="item_flow",
    steps_table="item_flow_step",
    events={"po.decided": "order", "po.shipped": "order"},
    kinds={
        "approval": Kind(command="request_approval", input=["approver"], wait_for="po.decided"),
        "send": Kind(command="send_purchase_order"),
    },
    set_columns=["status"],
    notify=[NotifyRule(audience="requester", to="requester_id")],
)
COLUMNS = {
    "id": query.ColumnType.NUMBER,
    "status": query.ColumnType.TEXT,
    "due_at": query.ColumnType.TIMESTAMP,
    "requester_id": query.ColumnType.TEXT,
    **{switch: query.ColumnType.TEXT for switch in SWITCHES},
}
CFG = config(
    columns=COLUMNS,
    set_columns=frozenset({"status"}),
    notify={"requester": NotifyConfig("requester", to="requester_id")},
    max_moves=60,
)

# Steps that pause the run (nothing comes, no time passes) and steps that do not.
WAITING = [
    {"kind": "wait", "duration": "1 hour"},
    {"kind": "until", "field": "due_at"},  # due tomorrow
    {"kind": "waitFor", "event": "po.shipped"},
    {"kind": "approval", "approver": "ann"},  # asked one, no answer comes
]
BUSY = [
    {"kind": "set", "field": "status", "value": "busy"},
    {"kind": "notify", "audience": "requester", "message": "hello"},
    {"kind": "send"},
]


@st.composite
def flows(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A flow valid in every other way: up to six positions, lanes, up to four branches."""
    positions = sorted(draw(st.sets(st.integers(0, 30), min_size=1, max_size=6)))
    rows: list[dict[str, Any]] = []
    branches = 0
    for position in positions:
        if branches < BRANCHES and draw(st.booleans()):
            row: dict[str, Any] = {
                "position": position,
                "kind": "branch",
                "condition": f"b{branches} = yes",
                "title": f"Branch {branches}",
            }
            if draw(st.integers(0, 3)):  # most branches jump somewhere; some end the run
                row["goto"] = draw(st.sampled_from(positions))
            rows.append(row)
            branches += 1
            continue
        lanes = draw(st.lists(st.sampled_from(WAITING + BUSY), min_size=1, max_size=3))
        rows += [{"position": position, **lane} for lane in lanes]
    return rows


def plays(rows: list[dict[str, Any]]) -> list[Sim]:
    """One run for each way the flow's branches can decide, each driven until it ends.

    Whenever a run pauses, what it waits for comes: its timer (the clock moves to its
    wake time) and the events its steps wait for. A run that goes round with pauses
    thus goes on until its loop bound fails it; so does one that goes round without.
    """
    switches = sorted({r["condition"].split()[0] for r in rows if r["kind"] == "branch"})
    runs = []
    for holds in itertools.product(("yes", "no"), repeat=len(switches)):
        record = {
            "id": 42,
            "status": "open",
            "due_at": T0 + timedelta(days=1),
            "requester_id": "ann",
            **dict(zip(switches, holds, strict=True)),
        }
        sim = Sim(rows, record=record, cfg=CFG, handlers={"request_approval": ok()})
        sim.check_replay = False
        for _ in range(4 * CFG.max_moves):
            sim.run()
            if sim.status in statuses.ENDED:
                break
            sim.emit("po.shipped", order=42)
            sim.emit("po.decided", order=42)
            if sim.wake is not None:
                sim.to_wake()
        assert sim.status in statuses.ENDED, "the driven run neither ended nor hit its bound"
        assert sim.state is not None
        code = (sim.state.error or {}).get("code")
        assert sim.status == statuses.RunStatus.DONE or code == "run.loop", sim.reason
        runs.append(sim)
    return runs


def round_without_waiting(sim: Sim) -> set[int] | None:
    """The positions of the first time the run came back to a position without any of
    its steps having started to wait since it was last there; None if it never did.

    Read from the run's own history: a step's ``started`` line enters its position (one
    entry per position and pass), a ``waiting`` line is a step that began to wait.
    """
    entered: set[tuple[int | None, int | None]] = set()
    since_wait: list[int] = []
    for line in sim.logs():
        if line.what == "waiting":
            since_wait = []
        elif line.what == "started" and (line.position, line.pass_) not in entered:
            entered.add((line.position, line.pass_))
            assert line.position is not None
            if line.position in since_wait:
                return set(since_wait[since_wait.index(line.position) :])
            since_wait.append(line.position)
    return None


SKIP_THE_WAIT = [  # 1 → 3 → 1 when neither branch holds, past the wait at 2
    {"position": 1, "kind": "branch", "condition": "b0 = yes", "goto": 3},
    {"position": 2, "kind": "wait", "duration": "1 hour"},
    {"position": 3, "kind": "branch", "condition": "b1 = yes", "goto": 1},
]
SELF_AFTER_A_WAIT = [
    {"position": 0, "kind": "wait", "duration": "1 hour"},
    {"position": 1, "kind": "branch", "condition": "b0 = yes", "goto": 1},
]


@settings(max_examples=200, deadline=None)
@given(flows())
@example(SKIP_THE_WAIT)
@example(SELF_AFTER_A_WAIT)
def test_the_rule_refuses_exactly_the_flows_that_can_go_round_without_pausing(
    rows: list[dict[str, Any]],
) -> None:
    flow = {"name": "Random", "start": "created"}
    found = validation.errors_for_flow(BINDING, flow, rows, COLUMNS)
    codes = {e.code for _, errs in found for e in errs}
    assert codes <= {"loop_without_wait"}, found  # the flows are sound in every other way
    rounds = [r for r in map(round_without_waiting, plays(rows)) if r is not None]
    assert bool(codes) == bool(rounds), (rows, found)
    named = [set(loop.positions) for loop in validation.flow_loops(BINDING, rows)]
    for went_round in rounds:
        assert any(went_round <= loop for loop in named), (rows, went_round, named)
