"""How a run's history is read into its diagram, case by case, from history lines as the
interpreter writes them (pure: no database; the scenario tests run real runs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from running import T0

from flowrunner import diagrams
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import state as state_mod


@dataclass(frozen=True)
class Line:
    """A history line with what the diagram reads of it (``LogRow`` has these and more)."""

    position: int | None
    step_id: str | None
    kind: str | None
    pass_: int | None
    what: str
    detail: object = ""
    at: datetime = T0
    due_at: datetime | None = None


def branch_then_set(goto: int | None) -> snapshot.FlowSnapshot:
    steps: list[dict[str, object]] = [
        {"id": 1, "position": 1, "kind": "branch", "title": "Check", "condition": "status = ok"},
        {"id": 2, "position": 2, "kind": "set", "title": "Mark", "field": "status"}
        | {"value": "done"},
    ]
    if goto is not None:
        steps[0]["goto"] = goto
    return snapshot.FlowSnapshot.build({"id": 1, "name": "Check"}, steps)


def ran(*positions_and_outcomes: tuple[int, str, str]) -> list[Line]:
    """History of steps run in order: (position, kind, outcome), one pass each."""
    lines = []
    for minutes, (position, kind, outcome) in enumerate(positions_and_outcomes):
        at = T0 + timedelta(minutes=minutes)
        lines.append(Line(position, str(position), kind, 1, "started", at=at))
        lines.append(Line(position, str(position), kind, 1, "done", outcome, at=at))
    return lines


def done(status: str, lines: list[Line]) -> diagrams.Diagram:
    return diagrams.flow_diagram(SNAP, run=diagrams.RunInput(1, status, None, lines))


SNAP = branch_then_set(goto=2)


def ways(drawn: diagrams.Diagram) -> list[tuple[int, int | None, str, int]]:
    return [(w.source, w.target, w.how, w.taken) for w in drawn.picture.ways]


def test_a_goto_to_the_next_position_is_drawn_as_the_branch_other_way() -> None:
    # Both ways of Check lead to position 2; the history says which one the run took.
    went_other = done("done", ran((1, "branch", "goto"), (2, "set", "done")))
    assert ways(went_other) == [
        (-1, 0, "next", 1),
        (0, 1, "next", 0),
        (0, 1, "other", 1),
        (1, None, "next", 1),
    ]
    went_on = done("done", ran((1, "branch", "held"), (2, "set", "done")))
    assert ways(went_on)[1:3] == [(0, 1, "next", 1), (0, 1, "other", 0)]


def test_a_last_branch_that_ends_the_run_takes_its_other_way_to_the_end() -> None:
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "Last"},
        [{"id": 1, "position": 1, "kind": "branch", "title": "Last", "condition": "x = 1"}],
    )
    for outcome, how in (("ended", "other"), ("held", "next")):
        run = diagrams.RunInput(1, "done", None, ran((1, "branch", outcome)))
        drawn = diagrams.flow_diagram(snap, run=run)
        assert [(w.how, w.taken) for w in drawn.picture.ways if w.target is None] == [
            ("next", 1 if how == "next" else 0),
            ("other", 1 if how == "other" else 0),
        ]


def test_a_step_an_operator_retried_shows_its_latest_attempt() -> None:
    snap = branch_then_set(goto=None)
    later = T0 + timedelta(hours=3)
    lines = [
        *ran((1, "branch", "held")),
        Line(2, "2", "set", 1, "started"),
        Line(2, "2", "set", 1, "failed", "it is broken: the value does not fit"),
        Line(2, "2", "set", 1, "retry", "an operator retried the step", at=later),
        Line(2, "2", "set", 1, "started", at=later),
        Line(2, "2", "set", 1, "done", "done", at=later),
    ]
    drawn = diagrams.flow_diagram(snap, run=diagrams.RunInput(1, "done", None, lines))
    mark = drawn.picture.columns[1].boxes[0].run
    assert mark is not None
    assert (mark.state, mark.text, mark.passes) == ("done", "Done Mon 2 Mar 12:00 UTC", 1)
    failed = diagrams.flow_diagram(snap, run=diagrams.RunInput(1, "failed", None, lines[:4]))
    mark = failed.picture.columns[1].boxes[0].run
    assert mark is not None
    assert (mark.state, mark.details) == ("failed", ("it is broken: the value does not fit",))


def test_the_flow_clock_is_the_moment_shown() -> None:
    # A late worker did it at 10:00; on the flow's own clock it happened at 09:00.
    lines = [
        Line(1, "1", "branch", 1, "started", at=T0 + timedelta(hours=1), due_at=T0),
        Line(1, "1", "branch", 1, "done", "held", at=T0 + timedelta(hours=1), due_at=T0),
    ]
    drawn = diagrams.flow_diagram(SNAP, run=diagrams.RunInput(1, "running", None, lines))
    check = drawn.picture.columns[0].boxes[0].run
    assert check is not None and check.text == "Done Mon 2 Mar 09:00 UTC"


def test_without_history_the_state_still_says_which_positions_were_entered() -> None:
    state = state_mod.RunState(position=2, passes={1: 1, 2: 1})
    state.lanes = [state_mod.LaneState(step_id=2, kind="set", pass_=1)]
    drawn = diagrams.flow_diagram(SNAP, run=diagrams.RunInput(1, "running", state, ()))
    assert [c.state for c in drawn.picture.columns] == ["done", "current"]
    mark = drawn.picture.columns[1].boxes[0].run
    assert mark is not None and mark.text == "Starting"
