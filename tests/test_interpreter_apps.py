"""Scenario tests of application kinds: commands, waits by mode, conditions, give-up,
reminders, retries with backoff, refusals and an operator's retry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import test_interpreter_driver
from test_interpreter_driver import T0, Sim, config, failing, ok
from test_modes import QUORUMS

from flowrunner import errors
from flowrunner.flows.interpreter import effects, interpret
from flowrunner.flows.interpreter.happened import CommandResult
from flowrunner.foundations.retry_policy import RetryPolicy


def approval(position: int = 1, **extra: Any) -> dict[str, Any]:
    return test_interpreter_driver.approval(position, title="Manager approval", **extra)


def then_notify(position: int = 2) -> dict[str, Any]:
    return {"position": position, "kind": "notify", "audience": "buyer", "message": "next"}


def outcomes(sim: Sim) -> list[str]:
    return [log.what for log in sim.logs() if log.what in ("done", "condition", "timed_out")]


def test_a_kind_without_wait_for_is_done_when_its_command_succeeds() -> None:
    sim = Sim([{"position": 1, "kind": "send", "title": "Send PO"}, then_notify()])
    sim.run()
    [command] = sim.commands
    assert command == effects.RunCommand(
        key="step-1/pass-1",
        step_id=1,
        pass_=1,
        kind="send",
        command="send_purchase_order",
        inputs={},
        attempt=1,
        reminder=None,
    )
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


def test_the_command_gets_the_steps_input_columns_then_waits_for_one_event() -> None:
    sim = Sim([approval(), then_notify()])
    sim.run()
    [command] = sim.commands
    assert (command.command, command.inputs) == ("request_approval", {"approver": "ann"})
    assert sim.status == "waiting" and sim.wake is None
    sim.later(hours=2)
    sim.emit(order=42, decision="approved")
    sim.run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


@pytest.mark.parametrize(("mode", "asked", "needed"), QUORUMS)
def test_the_wait_ends_after_as_many_events_as_its_mode_needs(
    mode: str, asked: int, needed: int
) -> None:
    sim = Sim([approval(mode=mode)], handlers={"request_approval": ok({"asked": asked})})
    sim.run()
    for count in range(1, needed + 1):
        assert sim.status == "waiting", f"ended after {count - 1} of {needed}"
        sim.later(minutes=5)
        sim.emit(order=42, decision="approved")
        sim.run()
    assert sim.status == "done"
    assert outcomes(sim) == ["done"]
    assert sim.lane().outcome == "complete" and sim.lane().received == needed


def test_mode_all_when_the_command_asked_nobody_goes_on_at_once() -> None:
    sim = Sim([approval(mode="all")], handlers={"request_approval": ok({"asked": 0})})
    sim.run()
    assert sim.status == "done"


def test_the_condition_ends_the_wait_early_on_one_rejection() -> None:
    sim = Sim(
        [approval(mode="all", condition="event.decision = rejected"), then_notify()],
        handlers={"request_approval": ok({"asked": 3})},
    )
    sim.run()
    sim.emit(order=42, decision="approved")
    sim.run()
    assert sim.status == "waiting"
    sim.emit(order=42, decision="rejected")
    sim.run()
    assert sim.status == "done"
    assert outcomes(sim) == ["condition", "done"]  # the wait, then the notify
    assert sim.state is not None
    assert sim.logs("condition")[0].title == "Manager approval"


def test_a_condition_is_not_read_before_any_event_came() -> None:
    sim = Sim([approval(condition="event.decision != approved")])
    sim.run()
    assert sim.status == "waiting"  # no event yet: `!=` over nothing must not end it
    sim.emit(order=42, decision="approved")
    sim.run()
    assert sim.status == "done"
    assert sim.lane().outcome == "complete"


def test_the_wait_gives_up_after_its_duration_and_goes_on() -> None:
    sim = Sim(
        [approval(mode="all", duration="2 days"), then_notify()],
        handlers={"request_approval": ok({"asked": 2})},
    )
    sim.run()
    assert sim.wake == T0 + timedelta(days=2)
    sim.later(days=1)
    sim.emit(order=42, decision="approved")
    sim.run()
    sim.to_wake().run()
    assert sim.status == "done"
    assert outcomes(sim) == ["timed_out", "done"]
    assert sim.state is not None


def test_events_that_come_while_the_command_is_retried_count() -> None:
    calls = {"n": 0}

    def fails_once(command: effects.RunCommand) -> Any:
        calls["n"] += 1
        return failing()(command) if calls["n"] == 1 else ok()(command)

    sim = Sim([approval()], handlers={"request_approval": fails_once})
    sim.run()
    assert sim.lane().status == "retrying"
    sim.emit(order=42, decision="approved")
    sim.run()
    assert sim.lane().status == "retrying"
    assert sim.lane().received == 1
    sim.to_wake().run()
    assert sim.status == "done"


# -- reminders -----------------------------------------------------------------------


def test_reminders_are_sent_once_each_while_the_step_waits() -> None:
    sim = Sim([approval(remind="1 day", duration="10 days")])
    sim.run()
    assert sim.wake == T0 + timedelta(days=1)
    for _ in range(5):
        sim.to_wake().run()
        sim.later(hours=3).run()  # extra advances between reminders send nothing
    assert sim.reminders() == [1, 2, 3, 4, 5]
    [first] = [c for c in sim.commands if c.reminder == 1]
    assert (first.command, first.key, first.inputs) == (
        "remind_approver",
        "step-1/pass-1/remind-1",
        {"approver": "ann"},
    )
    sim.emit(order=42, decision="approved")
    sim.run()
    sim.later(days=3).run()
    assert sim.status == "done"
    assert sim.reminders() == [1, 2, 3, 4, 5]


def test_after_a_clock_jump_only_the_latest_reminder_is_sent() -> None:
    sim = Sim([approval(remind="1 day")])
    sim.run()
    sim.later(days=4, hours=12).run()
    assert sim.reminders() == [4]
    assert sim.wake == T0 + timedelta(days=5)
    sim.to_wake().run()
    assert sim.reminders() == [4, 5]


def test_a_reminder_due_with_the_give_up_is_not_sent() -> None:
    sim = Sim([approval(remind="1 day", duration="1 day")])
    sim.run()
    sim.later(days=1).run()
    assert sim.reminders() == []
    assert sim.status == "done"


def test_monthly_reminders_follow_the_calendar() -> None:
    sim = Sim([approval(remind="1 month")])
    sim.run()
    sim.later(days=365).run()
    assert sim.reminders() == [12]
    assert sim.wake == T0.replace(year=2027, month=4)


def test_a_failed_reminder_is_logged_and_not_retried() -> None:
    sim = Sim([approval(remind="1 day")], handlers={"remind_approver": failing("mail down")})
    sim.run()
    sim.to_wake().run()
    assert sim.reminders() == [1]
    assert sim.sentences("reminder_failed") == [
        "Could not remind those who have not answered (1st reminder): mail down"
    ]
    assert sim.status == "waiting"
    assert sim.wake == T0 + timedelta(days=2)
    sim.to_wake().run()
    assert sim.reminders() == [1, 2]


# -- failures ------------------------------------------------------------------------


def test_a_failing_command_is_retried_with_backoff_under_the_same_key() -> None:
    calls = {"n": 0}

    def twice_then_ok(command: effects.RunCommand) -> Any:
        calls["n"] += 1
        return failing()(command) if calls["n"] <= 2 else ok()(command)

    sim = Sim([{"position": 1, "kind": "send"}], handlers={"send_purchase_order": twice_then_ok})
    sim.run()
    assert sim.lane().status == "retrying"
    assert sim.wake == T0 + timedelta(seconds=10)
    sim.later(seconds=9).run()
    assert len(sim.commands) == 1
    sim.to_wake().run()
    assert sim.wake == sim.now + timedelta(seconds=20)
    sim.to_wake().run()
    assert sim.status == "done"
    assert [(c.key, c.attempt) for c in sim.commands] == [
        ("step-1/pass-1", 1),
        ("step-1/pass-1", 2),
        ("step-1/pass-1", 3),
    ]
    assert len(sim.logs("retry")) == 2


def test_a_command_failing_every_attempt_fails_the_run_with_an_envelope() -> None:
    sim = Sim([approval()], handlers={"request_approval": failing("password=hunter2 rejected")})
    sim.run()
    while sim.status != "failed":
        sim.to_wake().run()
    assert len(sim.commands) == 3  # max_attempts in the test config
    assert sim.reason == (
        "step 'Manager approval' (approval, position 1) failed: "
        "the command failed 3 times: password=[redacted] rejected"
    )
    assert sim.state is not None and sim.state.error is not None
    assert sim.state.error["code"] == "command.failed"
    assert "hunter2" not in str(sim.state.error)
    assert sim.wake is None


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(max_attempts=6, base=timedelta(seconds=10), cap=timedelta(minutes=1))
    sim = Sim(
        [{"position": 1, "kind": "send"}],
        cfg=config(retry=policy),
        handlers={"send_purchase_order": failing()},
    )
    sim.run()
    gaps = []
    while sim.status != "failed":
        before = sim.now
        sim.to_wake().run()
        gaps.append(sim.now - before)
    assert gaps == [timedelta(seconds=s) for s in (10, 20, 40, 60, 60)]
    assert len(sim.commands) == 6


def test_a_refusal_fails_the_step_at_once() -> None:
    sim = Sim([approval()], handlers={"request_approval": failing("not allowed", refused=True)})
    sim.run()
    assert sim.status == "failed"
    assert len(sim.commands) == 1
    assert sim.reason == (
        "step 'Manager approval' (approval, position 1) failed: the command refused: not allowed"
    )
    assert sim.state is not None and sim.state.error is not None
    assert sim.state.error["code"] == "command.refused"


def test_a_failing_lane_fails_the_run_while_others_wait() -> None:
    sim = Sim(
        [{"position": 1, "kind": "wait", "duration": "1 day"}, approval()],
        handlers={"request_approval": failing("no", refused=True)},
    )
    sim.run()
    assert sim.status == "failed"
    assert [lane.status for lane in sim.state.lanes] == ["waiting", "failed"]  # type: ignore[union-attr]
    sim.later(days=2).run()
    assert sim.status == "failed"


def test_an_operator_retry_runs_the_failed_step_again() -> None:
    answers = {"refuse": True}

    def until_fixed(command: effects.RunCommand) -> Any:
        return failing("no", refused=True)(command) if answers["refuse"] else ok()(command)

    sim = Sim(
        [{"position": 1, "kind": "send"}, then_notify()],
        handlers={"send_purchase_order": until_fixed},
    )
    sim.run()
    assert sim.status == "failed"
    answers["refuse"] = False
    assert sim.state is not None
    step = interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)
    assert step.state.status == "running" and step.state.error is None
    assert step.wake == sim.now
    sim.state = step.state
    sim.run()
    assert sim.status == "done"
    assert [c.attempt for c in sim.commands] == [1, 1]


def test_an_operator_retry_of_a_run_that_did_not_fail_is_refused() -> None:
    sim = Sim([approval()])
    sim.run()
    assert sim.state is not None
    with pytest.raises(errors.OperatorError, match="only a failed run can be retried"):
        interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)


def test_an_operator_may_cancel_a_failed_run() -> None:
    sim = Sim([approval()], handlers={"request_approval": failing("no", refused=True)})
    sim.run()
    sim.run(cancel="gave up")
    assert sim.status == "cancelled"


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"mode": "most"}, "its mode cannot be read: 'most' is not a mode"),
        ({"mode": "1_0"}, "its mode cannot be read: '1_0' is not a mode"),
        ({"remind": "0 days"}, "its remind must be longer than zero"),
        ({"condition": "((("}, "its condition cannot be read"),
    ],
)
def test_a_broken_waiting_column_fails_before_the_command_runs(
    extra: dict[str, Any], problem: str
) -> None:
    sim = Sim([approval(**extra)])
    sim.run()
    assert sim.status == "failed"
    assert problem in (sim.reason or "")
    assert sim.commands == []


def test_waiting_columns_on_a_kind_that_does_not_wait_fail_the_run() -> None:
    sim = Sim([{"position": 1, "kind": "send", "mode": "all"}])
    sim.run()
    assert sim.status == "failed"
    assert "its mode is set, but the send kind does not wait" in (sim.reason or "")


def test_the_condition_is_read_again_when_the_record_changes() -> None:
    sim = Sim(
        [approval(mode="all", condition="event.decision = rejected or status = cancelled")],
        handlers={"request_approval": ok({"asked": 3})},
    )
    sim.run()
    sim.emit(order=42, decision="approved")
    sim.run()
    assert sim.status == "waiting"
    assert sim.record is not None
    sim.record["status"] = "cancelled"
    sim.run()
    assert sim.status == "done"
    assert sim.lane().outcome == "condition"


def test_a_run_that_failed_outside_any_step_cannot_be_retried() -> None:
    sim = Sim(
        [{"position": 1, "kind": "branch", "condition": "status = closed", "goto": 1}],
        cfg=config(max_moves=5),
    )
    sim.run()
    assert sim.status == "failed"
    assert sim.state is not None
    with pytest.raises(errors.OperatorError, match="failed outside any step"):
        interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)


def test_stale_and_unknown_answers_are_ignored() -> None:
    sim = Sim([approval()])
    sim.run()
    before = sim.state
    assert before is not None
    stale = CommandResult(key="step-1/pass-1", ok=False, error={"message": "late"})
    step = interpret.advance(
        sim.snap, before, sim.happened(results=(stale,)), sim.later(hours=1).now, sim.cfg
    )
    assert step.state.status == "waiting"
    assert step.state.lanes == before.lanes


def test_reminders_number_from_one_per_pass() -> None:
    sim = Sim(
        [
            approval(remind="1 day", duration="2 days"),
            {"position": 2, "kind": "branch", "condition": "status = closed", "goto": 1},
        ]
    )
    sim.run()
    for _ in range(4):
        sim.to_wake().run()
    assert [(c.key, c.reminder) for c in sim.commands if c.reminder] == [
        ("step-1/pass-1/remind-1", 1),
        ("step-1/pass-2/remind-1", 1),
    ]


def test_a_run_saved_and_restored_between_passes_does_exactly_the_same() -> None:
    import json

    from flowrunner.flows.interpreter import state

    rows = [
        approval(mode="2", remind="1 day", duration="5 days", condition="event.decision = no"),
        {"position": 2, "kind": "wait", "duration": "1 day"},
        {"position": 2, "kind": "set", "field": "status", "value": "sent"},
        then_notify(3),
    ]

    def play(restore: bool) -> list[effects.Effect]:
        sim = Sim(rows, handlers={"request_approval": ok({"asked": 3})})
        script: list[tuple[str, Any]] = [
            ("clock", 30),
            ("event", "yes"),
            ("clock", 2000),
            ("event", "yes"),
            ("wake", 0),
        ]
        sim.run()
        for action, value in script:
            if restore and sim.state is not None:
                sim.state = state.RunState.from_dict(json.loads(json.dumps(sim.state.to_dict())))
            if action == "clock":
                sim.later(minutes=int(value))
            elif action == "event":
                sim.emit(order=42, decision=value)
            else:
                sim.to_wake()
            sim.run()
        assert sim.status == "done"
        return sim.effects

    assert play(restore=True) == play(restore=False)


def test_answers_that_come_with_a_failure_are_still_taken() -> None:
    # Two lanes command in the same advance; the first refuses and fails the run, the
    # second's command ran and its reminder later must not be lost or sent twice.
    sim = Sim(
        [{"position": 1, "kind": "send"}, approval(1, remind="1 day")],
        handlers={"send_purchase_order": failing("no", refused=True)},
    )
    sim.run()
    assert sim.status == "failed"
    assert [lane.status for lane in sim.state.lanes] == ["failed", "waiting"]  # type: ignore[union-attr]
    assert sim.reason is not None and "(send, position 1)" in sim.reason


def test_events_that_come_while_the_run_is_failed_wait_for_the_operator() -> None:
    refuse = {"on": True}

    def send(command: effects.RunCommand) -> Any:
        return failing("no", refused=True)(command) if refuse["on"] else ok()(command)

    sim = Sim(
        [{"position": 1, "kind": "send"}, approval(1, mode="2")],
        handlers={"send_purchase_order": send},
    )
    sim.run()
    assert sim.status == "failed"
    sim.emit(order=42, decision="approved")
    sim.emit(order=42, decision="approved")
    sim.later(hours=1).run()
    assert sim.state is not None and sim.state.last_event_id == 0
    refuse["on"] = False
    step = interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)
    sim.state = step.state
    sim.run()
    assert sim.status == "done"
    assert sim.lane(1).received == 2
