"""Run state: the transition table is enforced, and states round-trip through JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from flowrunner.flows.interpreter import interpret, retry, state
from flowrunner.flows.interpreter.happened import EventIn
from flowrunner.foundations import statuses
from flowrunner.foundations.retry_policy import RetryPolicy

T = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def lane(**values: object) -> state.LaneState:
    return state.LaneState(step_id=3, kind="approval", pass_=1, **values)  # type: ignore[arg-type]


def test_every_status_has_a_row_in_the_transition_table() -> None:
    for status in statuses.RunStatus:
        assert ("run", status) in state.TRANSITIONS
    for lane_status in statuses.LaneStatus:
        assert ("lane", lane_status) in state.TRANSITIONS
    for (what, current), targets in state.TRANSITIONS.items():
        known = statuses.RunStatus if what == "run" else statuses.LaneStatus
        assert current in set(known) and targets <= set(known)
    assert len(state.TRANSITIONS) == len(statuses.RunStatus) + len(statuses.LaneStatus)


def test_the_named_sets_of_run_statuses_agree_with_the_transition_table() -> None:
    stuck = {s for s in statuses.RunStatus if not state.TRANSITIONS[("run", s)]}
    assert stuck == statuses.FINAL
    assert statuses.FINAL < statuses.ENDED
    assert set(statuses.RunStatus) == statuses.OPEN | statuses.ENDED
    assert not statuses.OPEN & statuses.ENDED
    # Only an operator's retry moves a run out of an ended status.
    for ended in statuses.ENDED - statuses.FINAL:
        assert state.TRANSITIONS[("run", ended)] <= {"running", "cancelled"}


def test_a_status_is_its_word() -> None:
    done: str = statuses.RunStatus.DONE
    assert done == "done" and f"{statuses.LaneStatus.COMMANDING}" == "commanding"
    # The plain words are accepted too (as stored), though typed code passes members.
    waiting = cast(statuses.RunStatus, "waiting")
    assert state.RunState(status=waiting).status is statuses.RunStatus.WAITING
    with pytest.raises(ValueError, match="paused"):
        state.RunState(status=cast(statuses.RunStatus, "paused"))
    with pytest.raises(ValueError, match="running"):
        lane(status="running")  # a run's status, not a lane's


@pytest.mark.parametrize(
    ("current", "target"),
    [("done", "waiting"), ("waiting", "ready"), ("waiting", "commanding"), ("failed", "done")],
)
def test_an_illegal_lane_move_is_refused(current: str, target: str) -> None:
    moving = lane(status=current)
    with pytest.raises(state.IllegalMove, match=f"from '{current}' to '{target}'"):
        moving.status = statuses.LaneStatus(target)
    assert moving.status == current


@pytest.mark.parametrize(
    ("current", "target"), [("done", "running"), ("cancelled", "failed"), ("failed", "done")]
)
def test_an_illegal_run_move_is_refused(current: str, target: str) -> None:
    run = state.RunState(status=statuses.RunStatus(current))
    with pytest.raises(state.IllegalMove):
        run.status = statuses.RunStatus(target)


def test_legal_moves_are_taken_and_staying_put_is_no_move() -> None:
    moving = lane()
    for target in ("commanding", "retrying", "commanding", "waiting", "waiting", "done"):
        moving.status = statuses.LaneStatus(target)
    assert moving.status == "done"
    run = state.RunState()
    for target in ("waiting", "running", "failed", "running", "done"):
        run.status = statuses.RunStatus(target)
    assert run.ended


def mid_run() -> state.RunState:
    """A run waiting at its second position, with lanes, an event and an unread one."""
    return state.RunState(
        status=statuses.RunStatus.WAITING,
        position=2,
        moves=3,
        passes={1: 1, 2: 2},
        lanes=[
            lane(
                status="waiting",
                started_at=T,
                waiting_since=T + timedelta(seconds=1),
                deadline=T + timedelta(days=2),
                next_remind_at=T + timedelta(days=1),
                asked=3,
                received=1,
                event={"order": 42, "decision": "approved", "by": ["ann"]},
                reminders_sent=2,
                attempts=1,
            ),
            state.LaneState(
                step_id="x", kind="until", pass_=2, status=statuses.LaneStatus.WAITING, timer=None
            ),
            state.LaneState(
                step_id="y",
                kind="wait",
                pass_=2,
                status=statuses.LaneStatus.DONE,
                started_at=T,
                finished_at=T,
            ),
        ],
        last_event_id=9,
        last_goto=3,
        clock=T + timedelta(hours=3),
        entered_at=T,
        unread=[EventIn(id=9, name="po.decided", payload={"order": 42}, at=T)],
        error={"code": "x", "message": "y"},
    )


def test_a_state_mid_run_round_trips_through_json() -> None:
    run = mid_run()
    data = run.to_dict()
    assert type(data["status"]) is str and type(data["lanes"][0]["status"]) is str
    stored = json.loads(json.dumps(data))
    assert stored["status"] == "waiting" and stored["lanes"][1]["status"] == "waiting"
    assert state.RunState.from_dict(stored) == run
    assert stored["passes"] == {"1": 1, "2": 2}
    assert stored["lanes"][0]["pass"] == 1


def test_copy_is_what_the_round_trip_gives_and_independent() -> None:
    run = mid_run()
    twin = run.copy()
    assert twin == state.RunState.from_dict(run.to_dict()) == run
    twin.lanes[0].received = 5
    twin.lanes[0].answerers.append("bob")
    assert twin.lanes[0].event is not None
    twin.lanes[0].event["decision"] = "rejected"
    twin.passes[1] = 2
    twin.unread[0].payload["order"] = 7  # type: ignore[index]
    assert twin.error is not None
    twin.error["code"] = "z"
    twin.status = statuses.RunStatus.RUNNING
    assert run == mid_run()


def test_retry_decisions_back_off_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=8, base=timedelta(seconds=10), cap=timedelta(minutes=2))
    waits = [retry.decide(policy, n, T).retry_at for n in range(1, 8)]
    assert [w - T for w in waits if w is not None] == [
        timedelta(seconds=s) for s in (10, 20, 40, 80, 120, 120, 120)
    ]
    assert retry.decide(policy, 8, T).gives_up


def test_a_huge_attempt_count_does_not_overflow_the_backoff() -> None:
    policy = RetryPolicy(max_attempts=10**9)
    assert retry.backoff(policy, 10_000) == policy.cap


def test_advance_fails_a_run_whose_stored_state_is_corrupt_instead_of_raising() -> None:
    from test_interpreter_driver import Sim

    sim = Sim([{"position": 1, "kind": "wait", "duration": "1 day"}])
    sim.run()
    assert sim.state is not None
    data = sim.state.to_dict()
    data["lanes"][0]["timer"] = "2026-03-02T09:00:00"  # lost its time zone
    corrupt = state.RunState.from_dict(data)
    step = interpret.advance(sim.snap, corrupt, sim.happened(), sim.now, sim.cfg)
    assert step.state.status == "failed"
    assert step.state.reason is not None
    assert step.state.reason.startswith("step 'wait' (wait, position 1) failed: TypeError")
    assert step.wake is None


def test_the_engine_exports_what_its_all_names() -> None:
    import flowrunner.flows.interpreter as engine

    for name in engine.__all__:
        assert hasattr(engine, name), name
    assert len(set(engine.__all__)) == len(engine.__all__)


def test_the_engine_is_pure_no_sql_clock_threads_or_io() -> None:
    import ast
    import pathlib

    import flowrunner.flows.interpreter as engine

    forbidden = {"sqlalchemy", "threading", "time", "random", "os", "socket", "subprocess"}
    forbidden_from = {"flowrunner.store", "flowrunner.engine.worker", "flowrunner.runner"}
    for path in pathlib.Path(engine.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
                assert not names & forbidden, f"{path.name} imports {names & forbidden}"
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in forbidden, f"{path.name}: {node.module}"
                modules = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
                assert not any(m.startswith(tuple(forbidden_from)) for m in modules), path.name
            elif isinstance(node, ast.Attribute) and node.attr in ("now", "utcnow", "today"):
                # The clock comes in as `now`; reading it here would break replays.
                assert not (
                    isinstance(node.value, ast.Name) and node.value.id in ("datetime", "date")
                )


def test_restart_forgets_everything_but_the_step_and_pass() -> None:
    failed = lane(status="failed", attempts=5, received=2, event={"a": 1}, finished_at=T)
    failed.restart()
    assert failed == lane()
    with pytest.raises(state.IllegalMove):
        lane(status="done").restart()


def test_a_fresh_lane_is_the_one_its_constructor_makes_with_lists_of_its_own() -> None:
    made = state.LaneState(step_id="s1", kind="approval", pass_=2)
    fresh = state.LaneState.fresh("s1", "approval", 2)
    assert fresh == made and vars(fresh) == vars(made)
    fresh.answerers.append("ann")
    other = state.LaneState.fresh("s2", "wait", 1)
    assert other.answerers == [] and other.asked_names == []
    fresh.status = statuses.LaneStatus.COMMANDING  # moves are still checked
    with pytest.raises(state.IllegalMove):
        fresh.status = statuses.LaneStatus.READY
