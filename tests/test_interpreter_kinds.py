"""Scenario tests of the built-in kinds: set, wait, until, branch, waitFor, notify."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from test_interpreter_driver import T0, Sim, config

from flowrunner.flows.interpreter import effects


def notify(position: int, message: str = "done", **extra: object) -> dict[str, object]:
    return {"position": position, "kind": "notify", "audience": "requester", "message": message}


# -- set -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "text", "expected"),
    [
        ("status", "approved", "approved"),
        ("status", "'on hold'", "on hold"),
        ("amount", "250", 250),
        ("approved", "true", True),
        ("due_at", "now()", T0),
    ],
)
def test_set_writes_the_value_resolved_for_the_column(
    field: str, text: str, expected: object
) -> None:
    sim = Sim([{"position": 1, "kind": "set", "field": field, "value": text}])
    sim.run()
    [write] = sim.of(effects.SetField)
    assert (write.field, write.value) == (field, expected)
    assert sim.record is not None and sim.record[field] == expected
    assert sim.status == "done"
    assert sim.reason == "the flow ended after its last step"


def test_set_a_timestamp_from_now_plus_a_duration() -> None:
    sim = Sim([{"position": 1, "kind": "set", "field": "due_at", "value": "now() + 2 days"}])
    sim.run()
    [write] = sim.of(effects.SetField)
    assert write.value == T0 + timedelta(days=2)


def test_a_later_step_sees_what_a_set_step_wrote_in_the_same_advance() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "set", "field": "status", "value": "approved"},
            {
                "position": 2,
                "kind": "branch",
                "title": "Approved?",
                "condition": "status = approved",
            },
            notify(3),
        ]
    )
    sim.run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


def test_set_a_value_that_does_not_fit_the_column_fails_the_run_naming_the_step() -> None:
    sim = Sim(
        [{"position": 1, "kind": "set", "title": "Price", "field": "amount", "value": "lots"}]
    )
    sim.run()
    assert sim.status == "failed"
    assert sim.reason is not None
    assert sim.reason.startswith("step 'Price' (set, position 1) failed: it is broken:")
    assert sim.state is not None and sim.state.error is not None
    assert sim.state.error["code"] == "step.broken"
    assert sim.of(effects.SetField) == []


def test_set_a_column_the_binding_does_not_let_flows_write_fails_the_run() -> None:
    sim = Sim([{"position": 1, "kind": "set", "field": "approver", "value": "ann"}])
    sim.run()
    assert sim.status == "failed"
    assert "'approver' is not one of the columns a set step may write" in (sim.reason or "")


# -- wait ----------------------------------------------------------------------------


def test_wait_wakes_after_its_duration_and_not_before() -> None:
    sim = Sim([{"position": 1, "kind": "wait", "duration": "2 hours"}, notify(2)])
    sim.run()
    assert sim.status == "waiting"
    assert sim.wake == T0 + timedelta(hours=2)
    sim.later(hours=1, minutes=59).run()
    assert sim.status == "waiting"
    assert sim.of(effects.Notify) == []
    sim.to_wake().run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


def test_wait_of_a_day_across_daylight_saving_keeps_the_local_time() -> None:
    paris = ZoneInfo("Europe/Paris")
    start = datetime(2026, 3, 28, 9, 0, tzinfo=paris)  # clocks go forward on the 29th
    sim = Sim(
        [{"position": 1, "kind": "wait", "duration": "1 day"}],
        cfg=config(timezone=paris),
        now=start.astimezone(UTC),
    )
    sim.run()
    assert sim.wake is not None
    assert sim.wake.astimezone(paris) == datetime(2026, 3, 29, 9, 0, tzinfo=paris)
    assert sim.wake - sim.now == timedelta(hours=23)


def test_wait_of_24_hours_across_daylight_saving_is_elapsed_time() -> None:
    paris = ZoneInfo("Europe/Paris")
    sim = Sim(
        [{"position": 1, "kind": "wait", "duration": "24 hours"}],
        cfg=config(timezone=paris),
        now=datetime(2026, 3, 28, 8, 0, tzinfo=UTC),
    )
    sim.run()
    assert sim.wake == datetime(2026, 3, 29, 8, 0, tzinfo=UTC)


# -- until ---------------------------------------------------------------------------


def test_until_follows_the_record_date_and_waits_while_it_is_null() -> None:
    sim = Sim(
        [{"position": 1, "kind": "until", "field": "due_at", "duration": "-2 days"}, notify(2)],
        record={"id": 1, "due_at": None},
    )
    sim.run()
    assert sim.status == "waiting"
    assert sim.wake is None  # nothing to wake for: it waits for the record to change
    assert sim.lane().status == "waiting" and sim.lane().timer is None

    assert sim.record is not None
    sim.record["due_at"] = T0 + timedelta(days=10)
    sim.later(hours=1).run()
    assert sim.wake == T0 + timedelta(days=8)

    sim.record["due_at"] = (T0 + timedelta(days=5)).isoformat()  # stored as text: still a date
    sim.later(hours=1).run()
    assert sim.wake == T0 + timedelta(days=3)

    sim.record["due_at"] = None
    sim.later(hours=1).run()
    assert sim.wake is None

    sim.record["due_at"] = T0 + timedelta(days=4)
    sim.at(T0 + timedelta(days=2)).run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


def test_until_a_date_already_past_goes_on_at_once() -> None:
    sim = Sim(
        [{"position": 1, "kind": "until", "field": "due_at"}],
        record={"id": 1, "due_at": T0 - timedelta(minutes=1)},
    )
    sim.run()
    assert sim.status == "done"


def test_until_a_date_column_means_midnight_on_the_binding_clock() -> None:
    paris = ZoneInfo("Europe/Paris")
    sim = Sim(
        [{"position": 1, "kind": "until", "field": "due_on"}],
        record={"id": 1, "due_on": date(2026, 3, 10)},
        cfg=config(timezone=paris),
    )
    sim.run()
    assert sim.wake == datetime(2026, 3, 10, 0, 0, tzinfo=paris)


def test_until_on_a_text_column_fails_the_run() -> None:
    sim = Sim([{"position": 1, "kind": "until", "field": "status"}])
    sim.run()
    assert sim.status == "failed"
    assert "'status' is not a date or timestamp column" in (sim.reason or "")


# -- branch --------------------------------------------------------------------------


def test_branch_that_holds_goes_on() -> None:
    sim = Sim([{"position": 1, "kind": "branch", "condition": "amount > 50"}, notify(2)])
    sim.run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


def test_branch_that_does_not_hold_and_has_no_goto_ends_the_run() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "branch", "title": "Big order", "condition": "amount > 500"},
            notify(2),
        ]
    )
    sim.run()
    assert sim.status == "done"
    assert sim.reason == "amount is at most 500, so the run ended at Big order"
    assert sim.of(effects.Notify) == []


def test_branch_goto_backwards_repeats_steps_with_a_new_pass() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "wait", "duration": "1 day"},
            notify(2, "still open"),
            {"position": 3, "kind": "branch", "condition": "status = closed", "goto": 1},
            notify(4, "closed"),
        ]
    )
    sim.run()
    sim.to_wake().run()  # day 1: reminded, status still open, back to position 1
    assert sim.state is not None and sim.state.position == 1
    assert sim.state.passes == {1: 2, 2: 1, 3: 1}
    assert sim.record is not None
    sim.record["status"] = "closed"
    sim.to_wake().run()
    assert sim.status == "done"
    notices = sim.of(effects.Notify)
    assert [(n.message, n.pass_) for n in notices] == [
        ("still open", 1),
        ("still open", 2),
        ("closed", 1),
    ]
    assert sim.sentences("condition")[0] == "Status is not closed: went on at position 1"


@pytest.mark.parametrize("bound", [25, 1000])
def test_a_goto_that_loops_forever_fails_the_run_at_the_bound(bound: int) -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "set", "field": "priority", "value": "high"},
            {"position": 3, "kind": "branch", "condition": "status = closed", "goto": 1},
        ],
        cfg=config(max_moves=bound),
        check_replay=bound < 100,
    )
    sim.run()
    assert sim.status == "failed"
    assert sim.reason == (
        f"the run went through more than {bound} steps; a goto at position 3 may loop forever"
    )
    assert sim.state is not None and sim.state.error is not None
    assert sim.state.error["code"] == "run.loop"


def test_a_goto_to_a_missing_position_fails_the_run_naming_the_step() -> None:
    sim = Sim(
        [{"position": 1, "kind": "branch", "title": "Loop", "condition": "status = x", "goto": 9}]
    )
    sim.run()
    assert sim.status == "failed"
    assert sim.reason == (
        "step 'Loop' (branch, position 1) failed: it is broken: "
        "its goto names position 9, which the flow does not have"
    )


def test_a_branch_sharing_its_position_fails_the_run() -> None:
    sim = Sim([{"position": 1, "kind": "branch", "condition": "status = open"}, notify(1)])
    sim.run()
    assert sim.status == "failed"
    assert "a branch must stand alone at its position" in (sim.reason or "")


# -- waitFor -------------------------------------------------------------------------


def wait_for(position: int, duration: str | None = None) -> dict[str, object]:
    row: dict[str, object] = {"position": position, "kind": "waitFor", "event": "po.shipped"}
    if duration:
        row["duration"] = duration
    return row


def test_wait_for_an_event_that_arrives() -> None:
    sim = Sim([wait_for(1, "2 days"), notify(2)])
    sim.run()
    assert sim.wake == T0 + timedelta(days=2)
    sim.later(hours=3)
    sim.emit("po.decided", order=42)  # another event: not the one awaited
    sim.run()
    assert sim.status == "waiting"
    sim.emit("po.shipped", order=42)
    sim.run()
    assert sim.status == "done"
    assert sim.lane().outcome == "arrived" or sim.logs("arrived")
    assert [log.what for log in sim.logs() if log.what in ("arrived", "timed_out")] == ["arrived"]


def test_wait_for_gives_up_after_its_duration_and_goes_on() -> None:
    sim = Sim([wait_for(1, "2 days"), notify(2)])
    sim.run()
    sim.later(days=3)
    sim.emit("po.shipped", order=42)  # arrives after the wait gave up
    sim.run()
    assert sim.status == "done"
    assert [log.what for log in sim.logs() if log.what in ("arrived", "timed_out")] == ["timed_out"]
    assert len(sim.of(effects.Notify)) == 1


def test_wait_for_ignores_events_from_before_it_began() -> None:
    sim = Sim([{"position": 1, "kind": "wait", "duration": "1 hour"}, wait_for(2)])
    sim.emit("po.shipped", order=42)  # before the run started
    sim.run()
    sim.later(minutes=30)
    sim.emit("po.shipped", order=42)  # while the first step waits
    sim.later(minutes=30).run()  # the waitFor starts in this advance, with that event fed
    assert sim.status == "waiting"
    assert sim.state is not None and sim.state.position == 2
    assert sim.wake is None
    sim.emit("po.shipped", order=42)
    sim.run()
    assert sim.status == "done"


# -- notify --------------------------------------------------------------------------


def test_notify_tells_the_audience_once_per_pass() -> None:
    sim = Sim([notify(1, "PO approved")])
    sim.run()
    assert sim.of(effects.Notify) == [
        effects.Notify(
            step_id=1,
            pass_=1,
            audience="requester",
            message="PO approved",
            recipient="ann",
            title="PO 42: PO approved",
        )
    ]


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"audience": "nobody", "message": "x"}, "no notify rule has the audience 'nobody'"),
        ({"audience": "requester", "message": "x" * 501}, "at most 500 characters"),
        ({"audience": "requester"}, "its message is empty"),
    ],
)
def test_a_notify_step_that_broke_fails_the_run(row: dict[str, object], problem: str) -> None:
    sim = Sim([{"position": 1, "kind": "notify", **row}])
    sim.run()
    assert sim.status == "failed"
    assert problem in (sim.reason or "")
    assert sim.of(effects.Notify) == []


# -- parallel lanes ------------------------------------------------------------------


def test_steps_sharing_a_position_start_together_and_join() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "wait", "duration": "1 hour"},
            {"position": 1, "kind": "wait", "duration": "3 hours"},
            wait_for(1),
            notify(2),
        ]
    )
    sim.run()
    assert [lane.status for lane in sim.state.lanes] == ["waiting"] * 3  # type: ignore[union-attr]
    assert sim.wake == T0 + timedelta(hours=1)
    sim.to_wake().run()
    assert sim.wake == T0 + timedelta(hours=3)
    sim.to_wake().run()
    assert sim.status == "waiting" and sim.wake is None  # the event lane still waits
    assert sim.of(effects.Notify) == []
    sim.emit("po.shipped", order=42)
    sim.run()
    assert sim.status == "done"
    assert len(sim.of(effects.Notify)) == 1


# -- the record and the operator -------------------------------------------------------


def test_a_deleted_record_ends_the_run() -> None:
    sim = Sim([{"position": 1, "kind": "wait", "duration": "1 day"}])
    sim.run()
    sim.record = None
    sim.later(hours=1).run()
    assert sim.status == "cancelled"
    assert sim.reason == "the record was deleted while the run waited"
    assert sim.wake is None


def test_an_operator_cancel_ends_the_run_with_the_reason() -> None:
    sim = Sim([{"position": 1, "kind": "wait", "duration": "1 day"}])
    sim.run()
    sim.run(cancel="duplicate order")
    assert sim.status == "cancelled"
    assert sim.reason == "cancelled by an operator: duplicate order"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"kind": "teleport"}, "the binding has no kind 'teleport'"),
        ({"kind": "wait", "duration": "2 dayz"}, "its duration cannot be read"),
        ({"kind": "wait"}, "its duration is empty"),
        ({"kind": "waitFor", "event": "po.lost"}, "'po.lost' is not one of the binding's events"),
        ({"kind": "branch", "condition": "((("}, "its condition cannot be read"),
        ({"kind": "until", "field": "due_at", "duration": "soon"}, "its duration cannot be read"),
    ],
)
def test_a_step_that_broke_after_it_was_written_fails_the_run(
    row: dict[str, object], problem: str
) -> None:
    sim = Sim([{"position": 1, "title": "Odd", **row}], record={"id": 1, "due_at": T0})
    sim.run()
    assert sim.status == "failed"
    assert sim.reason is not None
    assert sim.reason.startswith(f"step 'Odd' ({row['kind']}, position 1) failed: it is broken:")
    assert problem in sim.reason
    assert sim.wake is None


def test_set_a_date_and_a_null() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "set", "field": "due_on", "value": "today() + 1 week"},
            {"position": 2, "kind": "set", "field": "priority", "value": "null"},
        ],
        record={"id": 1, "priority": "high"},
    )
    sim.run()
    writes = [(w.field, w.value) for w in sim.of(effects.SetField)]
    assert writes == [("due_on", date(2026, 3, 9)), ("priority", None)]


def test_branch_reads_a_full_condition_over_the_working_record() -> None:
    steps = [
        {"position": 1, "kind": "branch", "condition": "status in (open, pending) and amount > 50"},
        notify(2),
    ]
    sim = Sim(steps, record={"id": 1, "status": "pending", "amount": 80})
    sim.run()
    assert len(sim.of(effects.Notify)) == 1
    sim = Sim(steps, record={"id": 1, "status": "pending", "amount": None})
    sim.run()
    assert sim.of(effects.Notify) == [] and sim.status == "done"


def test_a_cancel_wins_over_everything_else_in_the_same_advance() -> None:
    sim = Sim([wait_for(1), notify(2)])
    sim.run()
    sim.emit("po.shipped", order=42)
    sim.run(cancel="wrong record")
    assert sim.status == "cancelled"
    assert sim.of(effects.Notify) == []


def test_the_state_remembers_the_events_it_has_seen() -> None:
    sim = Sim([wait_for(1)])
    sim.emit("po.decided", order=42)
    sim.emit("po.decided", order=42)
    sim.run()
    assert sim.state is not None and sim.state.last_event_id == 2
    assert sim.state.unread == [] and sim.lane().status == "waiting"
