"""Scenario tests of the flow's own clock: a run keeps its own time, whatever the worker does.

Each step starts when the one before it logically finished (the first when the run was
created); timers, give-ups and reminders count from there; every event recorded since
counts. A worker that comes late does what fell due, in the order it fell due.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from test_interpreter_driver import T0, Sim, failing, ok

from flowrunner.flows.interpreter import effects, interpret, state
from flowrunner.flows.interpreter.happened import EventIn, Happened


def monday(hour: int, minute: int = 0) -> datetime:
    return T0.replace(hour=hour, minute=minute)


def tuesday(hour: int, minute: int = 0) -> datetime:
    return monday(hour, minute) + timedelta(days=1)


def wednesday(hour: int, minute: int = 0) -> datetime:
    return monday(hour, minute) + timedelta(days=2)


def thursday(hour: int, minute: int = 0) -> datetime:
    return monday(hour, minute) + timedelta(days=3)


def wait(position: int, duration: str = "1 day") -> dict[str, Any]:
    return {"position": position, "kind": "wait", "title": f"Wait {position}", "duration": duration}


def reply(position: int, duration: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "position": position,
        "kind": "waitFor",
        "title": "Reply",
        "event": "po.shipped",
    }
    if duration:
        row["duration"] = duration
    return row


def tell(position: int) -> dict[str, Any]:
    return {"position": position, "kind": "notify", "audience": "requester", "message": "next"}


def approval(position: int, **extra: Any) -> dict[str, Any]:
    return {
        "position": position,
        "kind": "approval",
        "title": "Approval",
        "approver": "ann",
    } | extra


def when(sim: Sim, what: str, position: int | None = None) -> list[datetime | None]:
    """The flow's times of the history lines saying ``what`` (at ``position``)."""
    return [log.at for log in sim.logs(what) if position is None or log.position == position]


# -- the run's start -------------------------------------------------------------------


def test_the_reply_arrived_before_any_worker_ran_the_wait_ends_at_once() -> None:
    sim = Sim([reply(1, "3 days"), tell(2)]).create()
    sim.at(monday(10)).emit("po.shipped", order=42)
    sim.at(monday(15)).run()  # the first worker comes six hours after the run was created
    assert sim.status == "done"
    assert when(sim, "started", 1) == [monday(9)]
    assert when(sim, "arrived") == [monday(10)]
    assert when(sim, "notice") == [monday(10)]


def test_an_event_from_before_the_run_began_does_not_count() -> None:
    sim = Sim([reply(1), tell(2)])
    sim.emit("po.shipped", order=42)  # recorded before the record's run was created
    sim.create()
    sim.at(monday(15)).run()
    assert sim.status == "waiting"
    assert sim.of(effects.Notify) == []


def test_an_event_emitted_with_the_records_creation_counts() -> None:
    # Same transaction, after the record was created: the same moment, a higher id.
    sim = Sim([reply(1), tell(2)]).create()
    sim.emit("po.shipped", order=42)
    sim.at(monday(15)).run()
    assert sim.status == "done"
    assert when(sim, "arrived") == [monday(9)]


def test_the_first_timer_counts_from_the_runs_creation_not_from_the_worker() -> None:
    sim = Sim([wait(1, "2 hours"), tell(2)]).create()
    sim.at(monday(10)).run()
    assert sim.wake == monday(11)
    sim.at(monday(12)).run()
    assert when(sim, "done", 1) == [monday(11)]


# -- timers on the flow's clock ----------------------------------------------------------


def test_the_worker_was_down_for_a_day_the_second_wait_still_ends_at_nine_wednesday() -> None:
    sim = Sim([wait(1), wait(2), tell(3)]).create()
    sim.run()
    sim.at(monday(12)).run()
    sim.at(tuesday(15)).run()  # no worker from Monday noon to Tuesday 15:00
    assert when(sim, "done", 1) == [tuesday(9)]
    assert when(sim, "started", 2) == [tuesday(9)]
    assert sim.wake == wednesday(9)
    sim.to_wake().run()
    assert sim.status == "done"
    assert when(sim, "done", 2) == [wednesday(9)]


def test_a_worker_down_over_several_timers_does_each_at_its_time() -> None:
    sim = Sim([wait(1, "1 hour"), tell(2), wait(3, "2 hours"), tell(4)]).create()
    sim.at(monday(18)).run()
    assert sim.status == "done"
    assert when(sim, "notice") == [monday(10), monday(12)]
    assert when(sim, "ended") == [monday(12)]


def test_the_reply_came_while_the_worker_was_down_after_the_first_wait_the_wait_for_ends() -> None:
    sim = Sim([wait(1), reply(2), tell(3)]).create()
    sim.run()
    sim.at(tuesday(11)).emit("po.shipped", order=42)
    sim.at(tuesday(15)).run()
    assert sim.status == "done"
    assert when(sim, "started", 2) == [tuesday(9)]
    assert when(sim, "arrived") == [tuesday(11)]
    assert when(sim, "notice") == [tuesday(11)]


def test_the_reply_came_during_the_first_wait_the_wait_for_after_it_still_waits() -> None:
    sim = Sim([wait(1), reply(2), tell(3)]).create()
    sim.run()
    sim.at(monday(18)).emit("po.shipped", order=42)
    sim.at(tuesday(15)).run()
    assert sim.status == "waiting"
    assert sim.state is not None and sim.state.position == 2
    assert sim.of(effects.Notify) == []


def test_a_give_up_counts_from_the_steps_logical_start() -> None:
    sim = Sim([wait(1), reply(2, "2 days"), tell(3)]).create()
    sim.run()
    sim.at(wednesday(15)).run()  # the waitFor started Tuesday 09:00, not now
    assert sim.wake == thursday(9)
    sim.at(thursday(10)).emit("po.shipped", order=42)  # an hour after it gave up
    sim.at(thursday(16)).run()
    assert [log.what for log in sim.logs() if log.what in ("arrived", "timed_out")] == ["timed_out"]
    assert when(sim, "timed_out") == [thursday(9)]


def test_a_reply_at_the_moment_the_wait_ends_counts_for_the_step_after_it() -> None:
    sim = Sim([wait(1), reply(2), tell(3)]).create()
    sim.run()
    sim.at(tuesday(9)).emit("po.shipped", order=42)
    sim.at(tuesday(15)).run()
    assert sim.status == "done"


def test_a_reply_at_the_give_up_moment_comes_too_late() -> None:
    sim = Sim([reply(1, "1 day"), tell(2)]).create()
    sim.run()
    sim.at(tuesday(9)).emit("po.shipped", order=42)
    sim.run()
    assert when(sim, "timed_out") == [tuesday(9)]
    assert sim.logs("arrived") == []


# -- each event once ---------------------------------------------------------------------


def test_an_event_that_completed_one_step_is_not_counted_again_by_the_next() -> None:
    sim = Sim([reply(1), reply(2), tell(3)]).create()
    sim.at(monday(10)).emit("po.shipped", order=42)
    sim.at(monday(15)).run()
    assert sim.state is not None and sim.state.position == 2
    assert sim.status == "waiting"
    sim.at(monday(16)).emit("po.shipped", order=42)
    sim.run()
    assert sim.status == "done"


def test_two_events_recorded_together_end_two_steps_in_turn() -> None:
    sim = Sim([reply(1), reply(2), tell(3)]).create()
    sim.at(monday(10))
    sim.emit("po.shipped", order=42)
    sim.emit("po.shipped", order=42)
    sim.at(monday(15)).run()
    assert sim.status == "done"
    assert when(sim, "arrived") == [monday(10), monday(10)]


def test_parallel_steps_join_at_the_latest_finish() -> None:
    sim = Sim([wait(1, "1 hour"), reply(1), wait(2, "1 hour"), tell(3)]).create()
    sim.at(monday(12)).emit("po.shipped", order=42)
    sim.at(monday(20)).run()
    assert sim.status == "done"
    assert when(sim, "started", 2) == [monday(12)]
    assert when(sim, "done", 2) == [monday(13)]


def test_an_event_recorded_later_than_the_workers_clock_is_read_at_the_workers_time() -> None:
    sim = Sim([reply(1), tell(2)]).create()
    sim.run()
    ahead = EventIn(id=1, name="po.shipped", payload={"order": 42}, at=monday(11))
    assert sim.state is not None
    step = interpret.advance(
        sim.snap, sim.state, Happened(record=sim.record, events=(ahead,)), monday(10), sim.cfg
    )
    arrived = [e for e in step.effects if isinstance(e, effects.Log) and e.what == "arrived"]
    assert [log.at for log in arrived] == [monday(10)]
    assert step.state.clock == monday(10)


def test_passing_the_same_events_again_counts_them_once() -> None:
    sim = Sim([approval(1, mode="all")], handlers={"request_approval": ok({"asked": 3})})
    sim.create().run()
    assert sim.state is not None
    one = EventIn(id=1, name="po.decided", payload={"order": 42}, at=monday(10))
    seen = Happened(record=sim.record, events=(one,))
    first = interpret.advance(sim.snap, sim.state, seen, monday(11), sim.cfg)
    again = interpret.advance(sim.snap, first.state, seen, monday(12), sim.cfg)
    assert again.state.lanes[0].received == 1


# -- commands in the middle of a catch-up ----------------------------------------------


def test_a_command_due_during_an_outage_runs_at_its_moment_and_the_catch_up_goes_on() -> None:
    sim = Sim([wait(1), {"position": 2, "kind": "send"}, reply(3), tell(4)]).create()
    sim.run()
    sim.at(tuesday(11)).emit("po.shipped", order=42)
    sim.at(tuesday(15)).run()
    assert sim.status == "done"
    assert when(sim, "command") == [tuesday(9)]
    assert when(sim, "started", 3) == [tuesday(9)]
    assert when(sim, "arrived") == [tuesday(11)]


def test_a_failed_command_is_retried_on_the_workers_time_and_the_flow_goes_on_from_there() -> None:
    # A failure is the outside world's: the backoff counts from when the attempt really
    # ran, so a worker back after an outage does not burn through its attempts at once.
    calls = {"n": 0}

    def fails_once(command: effects.RunCommand) -> Any:
        calls["n"] += 1
        return failing()(command) if calls["n"] == 1 else ok()(command)

    sim = Sim(
        [wait(1), {"position": 2, "kind": "send"}, wait(3, "1 hour"), tell(4)],
        handlers={"send_purchase_order": fails_once},
    ).create()
    sim.run()
    sim.at(tuesday(15)).run()
    assert [c.attempt for c in sim.commands] == [1]
    retried = tuesday(15) + timedelta(seconds=10)
    assert sim.wake == retried
    sim.at(retried).run()
    sim.at(tuesday(17)).run()
    assert sim.status == "done"
    assert [c.attempt for c in sim.commands] == [1, 2]
    assert when(sim, "command") == [tuesday(9), retried]
    assert when(sim, "started", 3) == [retried]
    assert when(sim, "notice") == [retried + timedelta(hours=1)]


def test_an_app_kind_answered_late_keeps_its_deadline_from_its_logical_start() -> None:
    sim = Sim([wait(1), approval(2, duration="2 days"), tell(3)]).create()
    sim.run()
    sim.at(tuesday(15)).run()  # the command runs now, for a step that started at 09:00
    assert sim.lane().deadline == thursday(9)
    assert sim.wake == thursday(9)


def test_an_app_kind_whose_command_was_retried_keeps_its_deadline() -> None:
    calls = {"n": 0}

    def fails_twice(command: effects.RunCommand) -> Any:
        calls["n"] += 1
        return failing()(command) if calls["n"] <= 2 else ok()(command)

    sim = Sim([approval(1, duration="1 hour")], handlers={"request_approval": fails_twice}).create()
    sim.at(monday(9, 30)).run()  # fails; again 10 s later, and 20 s after that
    sim.later(seconds=10).run()
    sim.later(seconds=20).run()
    assert calls["n"] == 3
    assert sim.lane().deadline == monday(10)
    assert sim.wake == monday(10)


def test_an_answer_recorded_while_the_command_was_retried_counts() -> None:
    sim = Sim([approval(1), tell(2)], handlers={"request_approval": failing()}).create()
    sim.run()
    sim.handlers["request_approval"] = ok()
    sim.at(monday(9, 0)).emit(order=42, decision="approved")
    sim.later(minutes=5).run()
    assert sim.status == "done"


# -- the record watched ----------------------------------------------------------------


def approved_by_hand(position: int, **extra: Any) -> dict[str, Any]:
    """An approval that also ends when the order is approved (another flow sets it)."""
    return approval(position, condition="status = approved", **extra)


def test_approved_at_ten_by_another_flow_the_hour_after_it_ends_at_eleven() -> None:
    sim = Sim([approved_by_hand(1), wait(2, "1 hour"), tell(3)]).create()
    sim.run()  # Monday 09:00: it waits for the approval
    assert sim.record is not None
    sim.record["status"] = "approved"  # another flow's set step, at 10:00; it wakes the run
    sim.at(monday(10)).run()
    assert when(sim, "condition") == [monday(10)]
    assert when(sim, "started", 2) == [monday(10)]
    assert sim.wake == monday(11)
    sim.to_wake().run()
    assert when(sim, "notice") == [monday(11)]


def test_a_record_change_seen_after_an_outage_is_taken_when_it_was_seen() -> None:
    # Nobody knows when during the outage the order was approved: it was seen at noon.
    sim = Sim([approved_by_hand(1, duration="1 day"), wait(2, "1 hour"), tell(3)]).create()
    sim.run()
    assert sim.record is not None
    sim.record["status"] = "approved"
    sim.at(monday(12)).run()
    assert when(sim, "condition") == [monday(12)]
    assert sim.wake == monday(13)


def test_a_give_up_due_before_the_change_was_seen_comes_first() -> None:
    sim = Sim([approved_by_hand(1, duration="2 hours"), tell(2)]).create()
    sim.run()
    assert sim.record is not None
    sim.record["status"] = "approved"
    sim.at(monday(12)).run()  # the wait gave up at 11:00; the approval was seen at noon
    assert when(sim, "timed_out") == [monday(11)]
    assert sim.logs("condition") == []


def test_a_wait_that_starts_in_a_catch_up_reads_the_record_at_its_start() -> None:
    sim = Sim([wait(1, "1 hour"), approved_by_hand(2), tell(3)]).create()
    sim.run()
    assert sim.record is not None
    sim.record["status"] = "approved"
    sim.at(monday(12)).run()
    assert when(sim, "condition") == [monday(10)]
    assert when(sim, "notice") == [monday(10)]


def test_an_until_date_moved_into_the_past_ends_the_wait_when_it_was_seen() -> None:
    until = {"position": 1, "kind": "until", "title": "Due", "field": "due_at"}
    sim = Sim([until, wait(2, "1 hour"), tell(3)], record={"id": 42, "due_at": wednesday(9)})
    sim.create().run()
    assert sim.record is not None
    sim.record["due_at"] = monday(8)  # moved before the wait began, at 10:00
    sim.at(monday(10)).run()
    assert when(sim, "done", 1) == [monday(10)]
    assert sim.wake == monday(11)


def test_an_until_date_moved_later_during_an_outage_still_waits() -> None:
    until = {"position": 1, "kind": "until", "title": "Due", "field": "due_at"}
    sim = Sim([until, tell(2)], record={"id": 42, "due_at": tuesday(9)})
    sim.create().run()
    assert sim.record is not None
    sim.record["due_at"] = thursday(9)  # postponed while no worker ran
    sim.at(wednesday(12)).run()
    assert sim.status == "waiting"
    assert sim.wake == thursday(9)


# -- reminders -------------------------------------------------------------------------


def test_after_an_outage_only_the_latest_missed_reminder_is_sent() -> None:
    sim = Sim([approval(1, remind="1 day")]).create()
    sim.run()
    sim.at(thursday(15)).run()
    assert sim.reminders() == [3]
    assert sim.wake == monday(9) + timedelta(days=4)


def test_a_reminder_sent_after_an_outage_says_when_it_was_planned() -> None:
    sim = Sim([approval(1, remind="1 day")]).create()
    sim.run()
    sim.at(tuesday(12)).run()  # the workers were down from 09:00 to noon
    [command] = [c for c in sim.commands if c.reminder is not None]
    assert command.at == tuesday(9)
    assert when(sim, "reminder") == when(sim, "reminded") == [tuesday(9)]
    assert sim.state is not None and sim.state.clock == tuesday(12)


def test_a_reminder_sent_on_time_says_so() -> None:
    sim = Sim([approval(1, remind="1 day")]).create()
    sim.run()
    sim.to_wake().run()
    [command] = [c for c in sim.commands if c.reminder is not None]
    assert command.at == tuesday(9) == sim.now


def test_no_reminder_after_an_outage_in_which_the_answer_came() -> None:
    sim = Sim([approval(1, remind="1 day"), tell(2)]).create()
    sim.run()
    sim.at(wednesday(11)).emit(order=42, decision="approved")  # reminders 1 and 2 were due
    sim.at(thursday(15)).run()
    assert sim.status == "done"
    assert sim.reminders() == []


def test_reminders_count_from_the_steps_logical_start() -> None:
    sim = Sim([wait(1), approval(2, remind="1 day")]).create()
    sim.run()
    sim.at(tuesday(15)).run()  # the step started Tuesday 09:00; its command runs now
    assert sim.wake == wednesday(9)
    sim.to_wake().run()
    assert sim.reminders() == [1]
    assert when(sim, "reminder") == [wednesday(9)]


# -- the flow's time elsewhere ----------------------------------------------------------


def test_a_set_step_after_an_outage_writes_the_flows_time() -> None:
    sim = Sim(
        [wait(1), {"position": 2, "kind": "set", "field": "due_at", "value": "now()"}]
    ).create()
    sim.run()
    sim.at(tuesday(15)).run()
    [write] = sim.of(effects.SetField)
    assert write.value == tuesday(9)


def test_the_history_carries_the_flows_time() -> None:
    sim = Sim([wait(1, "2 hours"), tell(2)]).create()
    sim.at(monday(16)).run()
    assert sim.history() == [
        (monday(9), "started", 1, 1),
        (monday(9), "waiting", 1, 1),
        (monday(11), "done", 1, 1),
        (monday(11), "started", 2, 2),
        (monday(11), "notice", 2, 2),
        (monday(11), "done", 2, 2),
        (monday(11), "ended", 2, None),
    ]


def test_an_operators_retry_starts_the_failed_step_again_at_the_retry() -> None:
    answers = {"refuse": True}

    def until_fixed(command: effects.RunCommand) -> Any:
        return failing("no", refused=True)(command) if answers["refuse"] else ok()(command)

    sim = Sim(
        [{"position": 1, "kind": "send"}, wait(2, "1 hour")],
        handlers={"send_purchase_order": until_fixed},
    ).create()
    sim.run()
    assert sim.status == "failed"
    answers["refuse"] = False
    assert sim.state is not None
    step = interpret.retry_failed(sim.snap, sim.state, tuesday(9), sim.cfg)
    sim.state = step.state
    sim.at(tuesday(12)).run()
    assert when(sim, "started", 2) == [tuesday(9)]
    assert when(sim, "done", 2) == [tuesday(10)]


# -- the state across advances ----------------------------------------------------------


def test_a_state_paused_at_a_command_keeps_its_unread_events_through_json() -> None:
    sim = Sim([wait(1), {"position": 2, "kind": "send"}, reply(3), tell(4)]).create()
    sim.run()
    sim.at(tuesday(11)).emit("po.shipped", order=42)
    assert sim.state is not None
    paused = interpret.advance(sim.snap, sim.state, sim.happened(), tuesday(15), sim.cfg)
    assert paused.commands and paused.state.clock == tuesday(9)
    assert [e.id for e in paused.state.unread] == [1]
    stored = state.RunState.from_dict(json.loads(json.dumps(paused.state.to_dict())))
    assert stored == paused.state
    [command] = paused.commands
    answer = ok()(command)
    # The follow-up passes no events: the unread one is in the state.
    done = interpret.advance(
        sim.snap, stored, Happened(record=sim.record, results=(answer,)), tuesday(15), sim.cfg
    )
    assert done.state.status == "done"
    assert done.state.unread == [] and done.state.clock == tuesday(11)  # when it ended


def test_a_state_saved_before_the_clock_existed_goes_on_from_its_lanes_time() -> None:
    old = {
        "status": "waiting",
        "position": 1,
        "moves": 1,
        "passes": {"1": 1},
        "lanes": [
            {
                "step_id": 1,
                "kind": "wait",
                "pass": 1,
                "status": "waiting",
                "started_at": monday(9).isoformat(),
                "waiting_since": monday(9).isoformat(),
                "timer": tuesday(9).isoformat(),
                "since_event_id": 0,
            }
        ],
        "last_event_id": 0,
        "error": None,
        "reason": None,
        "last_goto": None,
    }
    run = state.RunState.from_dict(old)
    assert run.clock is None and run.unread == [] and run.lanes[0].finished_at is None
    sim = Sim([wait(1), wait(2), tell(3)])
    step = interpret.advance(sim.snap, run, sim.at(tuesday(15)).happened(), sim.now, sim.cfg)
    assert step.wake == wednesday(9)
    assert step.state.clock == tuesday(15) and step.state.entered_at == tuesday(9)
