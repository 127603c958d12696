"""One action on many runs: each run in its own transaction, done or refused with the
reason, the others going on; a dry run says the same and keeps nothing. On SQLite and
PostgreSQL, on the desk whose runs are in every state (``room.desk``)."""

from __future__ import annotations

import pytest
import room
import sqlalchemy as sa

from flowrunner import OperatorError, testing
from flowrunner.engine import actions
from flowrunner.engine.actions import Action, Outcome


@pytest.fixture
def desk(any_engine: sa.Engine) -> testing.FlowDriver:
    return room.desk(any_engine)


def statuses(driver: testing.FlowDriver) -> dict[int, str]:
    return {run.id: str(run.status) for run in driver.runner.list_runs()}


def said(outcomes: list[Outcome]) -> list[tuple[int, bool, str | None, str]]:
    return [(o.run_id, o.done, o.code, o.sentence) for o in outcomes]


def test_cancelling_many_runs_cancels_those_it_can_and_says_why_not_for_the_rest(
    desk: testing.FlowDriver,
) -> None:
    outcomes = desk.runner.act(
        "cancel", [2, 1, "3", 99, 4, 2], operator="bob", reason="the desk closed"
    )
    assert said(outcomes) == [
        (2, True, None, "run 2 cancelled"),
        (1, False, "run_ended", "run 1 has already ended (done)"),
        (3, True, None, "run 3 cancelled"),
        (99, False, "run_unknown", "there is no run 99"),
        (4, False, "run_ended", "run 4 has already ended (cancelled)"),
    ]
    assert statuses(desk) == {
        5: "running",
        4: "cancelled",
        3: "cancelled",
        2: "cancelled",
        1: "done",
    }
    desk.run_until_idle()
    cancelled = desk.runner.history(2)[-1]
    assert cancelled.sentence == "Run cancelled by bob: the desk closed"
    assert [(e.operator, e.run_id) for e in desk.runner.journal()] == [
        ("bob", 3),
        ("bob", 2),
        ("olga", 4),
    ]


def test_a_dry_run_says_what_would_be_done_and_keeps_nothing(desk: testing.FlowDriver) -> None:
    before = statuses(desk)
    for action in Action:
        tried = desk.runner.act(action, [1, 2, 3, 4, 5], operator="bob", dry_run=True)
        assert statuses(desk) == before
        assert len(desk.runner.journal()) == 1  # olga's cancel, nothing more
        assert all(o.dry_run and o.restarted_as is None for o in tried)
        assert [o.done for o in tried] == {
            Action.CANCEL: [False, True, True, False, True],
            Action.RETRY: [False, False, True, False, False],
            Action.REDRIVE: [False, True, False, False, True],
            Action.RESTART: [False, False, True, False, False],
        }[action], action
    [would] = desk.runner.act("restart", [3], operator="bob", dry_run=True)
    assert would.sentence == "run 3 would be restarted as a new run"
    assert actions.summary(desk.runner.act("cancel", [1, 2, 3], operator="bob", dry_run=True)) == (
        "2 would be done, 1 refused"
    )


def test_a_dry_run_foretells_the_real_outcomes(desk: testing.FlowDriver) -> None:
    for action in ("retry", "restart", "redrive", "cancel"):
        runs = [1, 2, 3, 4, 5, 99]
        foretold = desk.runner.act(action, runs, operator="bob", dry_run=True)
        done = desk.runner.act(action, runs, operator="bob")
        assert [(o.done, o.code) for o in foretold] == [(o.done, o.code) for o in done], action


def test_retry_restart_and_redrive_each_refuse_what_they_do_not_apply_to(
    desk: testing.FlowDriver,
) -> None:
    runner = desk.runner
    assert said(runner.act("retry", [3, 2], operator="bob", reason="desk is back")) == [
        (3, True, None, "run 3 retried: its failed step runs again"),
        (2, False, "run_not_failed", "run 2 has not failed (waiting)"),
    ]
    desk.run_until_idle()  # the desk refuses again
    assert "bob retried the run: desk is back" in [line.sentence for line in runner.history(3)]
    assert runner.get_run(3).status == "failed"
    [restarted] = runner.act("restart", [3], operator="bob")
    assert restarted.done and restarted.restarted_as == 6
    assert restarted.sentence == "run 3 restarted as run 6"
    assert said(runner.act("restart", [3, 1], operator="bob")) == [
        (3, False, "run_restarted", "run 3 was already restarted as run 6"),
        (1, False, "run_not_failed", "run 1 has not failed (done); only a failed run is restarted"),
    ]
    assert said(runner.act("retry", [3], operator="bob")) == [
        (3, False, "run_restarted", "run 3 was restarted as run 6; that run goes on"),
    ]
    assert said(runner.act("redrive", [5, 4], operator="olga", reason="stuck")) == [
        (5, True, None, "run 5 redriven: due now, its lease freed"),
        (4, False, "run_ended", "run 4 has ended (cancelled)"),
    ]
    assert runner.journal(action="redrive").rows[0].detail == {"reason": "stuck"}
    assert runner.list_runs(status="stuck").rows == ()


def test_a_restart_refused_for_a_deleted_flow_says_so(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    flow = runner.get_run(3).flow_id
    with runner.engine.begin() as conn:
        runner.delete_flow(conn, int(flow))
    [refused] = runner.act("restart", [3], operator="bob")
    assert (refused.done, refused.code, refused.sentence) == (
        False,
        "flow_deleted",
        "run 3 cannot be restarted: its flow 'Hand over' was deleted",
    )


def test_what_no_run_can_take_is_refused_before_anything_is_done(
    desk: testing.FlowDriver,
) -> None:
    runner = desk.runner
    with pytest.raises(OperatorError) as unknown:
        runner.act("cancle", [2], operator="bob")
    assert unknown.value.code == "action_unknown"
    assert str(unknown.value) == (
        "there is no action 'cancle' — did you mean 'cancel'? "
        "(actions: cancel, retry, redrive, restart)"
    )
    with pytest.raises(OperatorError, match="name the operator") as nobody:
        runner.act("cancel", [2], operator="  ")
    assert nobody.value.code == "operator_missing"
    with pytest.raises(OperatorError, match="there is no run 'two'") as malformed:
        runner.act("cancel", [2, "two"], operator="bob")
    assert (malformed.value.status_code, malformed.value.code) == (422, "id_invalid")
    assert statuses(desk)[2] == "waiting"
    assert runner.act("CANCEL", [], operator="bob") == []
