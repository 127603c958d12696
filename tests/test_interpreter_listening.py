"""A waiting step that listens from its start: watched conditions, answerers, cancels.

Pure scenario tests of the interpreter (rules 3, 5 and 8 of "a run that listens from
its start"): a condition over the record ends a wait as soon as the record makes it
hold; with the kind's ``by`` a mode counts distinct answerers; a kind's cancel command
runs once whenever a waiting step stops waiting for any reason but its answers.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from test_interpreter_driver import KINDS, T0, Sim, approval, config, failing, ok

from flowrunner import query
from flowrunner.flows.interpreter import effects, interpret, state, watching
from flowrunner.flows.interpreter.config import KindConfig
from flowrunner.flows.interpreter.happened import CommandResult

LISTENING = KindConfig(
    name="approval",
    command="request_approval",
    inputs=("approver",),
    wait_for="po.decided",
    remind="remind_approver",
    by="approver",
    cancel="close_approval",
)


def listening(**overrides: Any) -> Any:
    kind = KindConfig(**{**LISTENING.__dict__, **overrides})
    return config(kinds={**KINDS, "approval": kind})


def after(position: int = 2) -> dict[str, Any]:
    return {"position": position, "kind": "set", "field": "priority", "value": "high"}


def asked(*names: str) -> Any:
    return ok({"asked": list(names)})


def cancels(sim: Sim) -> list[effects.RunCommand]:
    return [c for c in sim.commands if c.cancel]


def details(sim: Sim, what: str) -> list[str]:
    """The lines of one code, as sentences."""
    return sim.sentences(what)


# -- rule 3: a wait's condition over the record is watched ------------------------------


def test_a_record_condition_ends_the_wait_when_the_record_changes_without_an_event() -> None:
    sim = Sim([approval(condition="status = withdrawn"), after()])
    sim.run()
    assert sim.status == "waiting"
    sim.run()
    assert sim.status == "waiting"  # advancing again with nothing changed ends nothing
    assert sim.record is not None
    sim.record["status"] = "withdrawn"
    sim.later(minutes=1).run()
    assert sim.status == "done"
    assert [log.title for log in sim.logs("condition")] == ["Approval"]
    assert sim.record["priority"] == "high"  # the flow went on


def test_a_record_condition_that_holds_when_the_wait_starts_ends_it_at_once() -> None:
    sim = Sim([approval(condition="status = withdrawn")], record={"id": 42, "status": "withdrawn"})
    sim.run()
    assert sim.status == "done"
    assert [c.command for c in sim.commands] == ["request_approval"]
    assert sim.lane().outcome == "condition"


def test_an_event_condition_is_read_only_with_an_event() -> None:
    sim = Sim([approval(mode="all", condition="event.decision != approved")])
    sim.run()
    sim.later(hours=1).run()
    assert sim.status == "waiting"  # `!=` over no event must not end the wait
    sim.emit(approver="ann", decision="rejected")
    sim.run()
    assert sim.status == "done" and sim.lane().outcome == "condition"


@pytest.mark.parametrize(
    ("condition", "record", "ends"),
    [
        # The record alone decides these: event fields count as unknown.
        ("event.decision = rejected or status = withdrawn", {"status": "withdrawn"}, True),
        ("event.decision = rejected or status = withdrawn", {"status": "open"}, False),
        ("event.decision = rejected and status = open", {"status": "open"}, False),
        ("not (event.decision = approved and status = open)", {"status": "closed"}, True),
        ("not (event.decision = approved or status = open)", {"status": "closed"}, False),
        ("event.decision is null or amount > 1000", {"amount": 5000}, True),
        ("event.decision is null", {"amount": 5000}, False),
        ("(status = open or event.x = 1) and amount > 10", {"status": "open", "amount": 50}, True),
        ("(status = open or event.x = 1) and amount > 10", {"status": "open", "amount": 5}, False),
    ],
)
def test_a_mixed_condition_ends_a_wait_between_events_only_if_the_record_decides_it(
    condition: str, record: dict[str, Any], ends: bool
) -> None:
    sim = Sim([approval(condition=condition)], record={"id": 42, **record})
    sim.run()
    assert (sim.status == "done") is ends


def test_an_answer_is_judged_once_when_it_arrives() -> None:
    sim = Sim(
        [approval(mode="all", condition="event.decision = rejected and status = open")],
        record={"id": 42, "status": "closed"},
        handlers={"request_approval": asked("ann", "bob")},
    )
    sim.run()
    sim.emit(approver="ann", decision="rejected")
    sim.run()
    assert sim.status == "waiting"  # the order was closed when ann's answer came
    assert sim.record is not None
    sim.record["status"] = "open"
    sim.later(minutes=1).run()
    assert sim.status == "waiting"  # the old answer is not read again
    sim.emit(approver="bob", decision="rejected")
    sim.run()
    assert sim.lane().outcome == "condition"


def test_watching_reads_three_valued_without_an_event() -> None:
    now = T0
    c = query.parse("event.decision = rejected or status = withdrawn", event=True)
    assert watching.holds(c, {"status": "withdrawn"}, now)
    assert not watching.holds(c, {"status": "open"}, now)
    assert watching.holds(c, {"status": "open"}, now, event={"decision": "rejected"})


# -- rule 5: with `by`, modes count distinct answerers ----------------------------------


def test_ann_approves_three_times_and_all_still_waits_for_bob_and_cara() -> None:
    sim = Sim(
        [approval(mode="all", approver="ann, bob, cara"), after()],
        cfg=listening(),
        handlers={"request_approval": asked("ann", "bob", "cara")},
    )
    sim.run()
    for _ in range(3):
        sim.emit(approver="ann", decision="approved")
        sim.later(minutes=5).run()
    assert sim.status == "waiting"
    assert sim.lane().received == 1 and sim.lane().answerers == ["ann"]
    assert details(sim, "answered") == [
        "ann approved (1 of 3; waiting for bob and cara)",
        "ann approved again (1 of 3; waiting for bob and cara)",
        "ann approved again (1 of 3; waiting for bob and cara)",
    ]
    sim.emit(approver="bob", decision="approved")
    sim.emit(approver="cara", decision="approved")
    sim.run()
    assert sim.status == "done"
    assert details(sim, "answered")[-2:] == [
        "bob approved (2 of 3; waiting for cara)",
        "cara approved (3 of 3)",
    ]
    assert cancels(sim) == []  # completed by its answers: nothing to cancel


@pytest.mark.parametrize(
    ("mode", "answers", "ends_after"),
    [
        ("2", ["ann", "ann", "ann", "bob"], 4),
        ("60%", ["ann", "bob", "ann", "bob", "cara"], 5),  # 60% of 5 asked: 3 people
        ("any", ["ann"], 1),
        ("all", ["ann", "bob", "bob", "cara", "dan", "eve"], 6),
    ],
)
def test_a_count_and_a_share_count_people_not_events(
    mode: str, answers: list[str], ends_after: int
) -> None:
    names = ("ann", "bob", "cara", "dan", "eve")
    sim = Sim([approval(mode=mode)], cfg=listening(), handlers={"request_approval": asked(*names)})
    sim.run()
    for n, who in enumerate(answers, start=1):
        assert sim.status == "waiting", f"ended after {n - 1} answers"
        sim.emit(approver=who, decision="approved")
        sim.later(minutes=1).run()
    assert sim.status == "done"
    assert len(answers) == ends_after
    assert sim.lane().outcome == "complete"


def test_an_answer_without_the_field_is_not_counted_but_is_logged() -> None:
    sim = Sim([approval(mode="any")], cfg=listening())
    sim.run()
    sim.emit(decision="approved")
    sim.emit(approver="  ", decision="approved")
    sim.run()
    assert sim.status == "waiting" and sim.lane().received == 0
    assert details(sim, "arrived") == [
        "A po decided event named no approver: not counted",
        "A po decided event named no approver: not counted",
    ]


def test_the_condition_still_reads_an_answer_without_the_field() -> None:
    sim = Sim([approval(condition="event.decision = rejected")], cfg=listening())
    sim.run()
    sim.emit(decision="rejected")
    sim.run()
    assert sim.lane().outcome == "condition"


def test_the_condition_reads_each_answer_also_of_someone_who_answered_before() -> None:
    sim = Sim(
        [approval(mode="all", condition="event.decision = rejected")],
        cfg=listening(),
        handlers={"request_approval": asked("ann", "bob")},
    )
    sim.run()
    sim.emit(approver="ann", decision="approved")
    sim.run()
    sim.emit(approver="ann", decision="rejected")  # ann changed her mind
    sim.run()
    assert sim.lane().outcome == "condition"


def test_with_names_asked_only_their_answers_count() -> None:
    sim = Sim(
        [approval(mode="all")], cfg=listening(), handlers={"request_approval": asked("cfo", "ctl")}
    )
    sim.run()
    sim.emit(approver="manager", decision="approved")
    sim.run()
    assert sim.lane().received == 0
    assert details(sim, "answered") == ["manager approved but was not asked: not counted"]
    sim.emit(approver="cfo", decision="approved")
    sim.emit(approver="ctl", decision="approved")
    sim.run()
    assert sim.status == "done"


def test_answers_before_the_command_answered_count_once_it_says_whom_it_asked() -> None:
    calls = {"n": 0}

    def fails_once(command: effects.RunCommand) -> CommandResult:
        calls["n"] += 1
        if calls["n"] == 1:
            return cast(CommandResult, failing("busy")(command))
        return cast(CommandResult, asked("ann", "bob")(command))

    sim = Sim([approval(mode="all")], cfg=listening(), handlers={"request_approval": fails_once})
    sim.run()
    sim.emit(approver="ann", decision="approved")
    sim.emit(approver="zed", decision="approved")
    sim.run()
    assert details(sim, "answered") == ["ann approved (1 so far)", "zed approved (2 so far)"]
    sim.to_wake().run()  # the retry succeeds: ann counts, zed was not asked
    assert sim.lane().received == 1 and sim.status == "waiting"
    sim.emit(approver="bob", decision="approved")
    sim.run()
    assert sim.status == "done"


def test_without_by_modes_count_events_as_before() -> None:
    sim = Sim([approval(mode="2")], handlers={"request_approval": asked("ann", "bob")})
    sim.run()
    sim.emit(approver="ann", decision="approved")
    sim.emit(approver="ann", decision="approved")
    sim.run()
    assert sim.status == "done"


def test_answerers_round_trip_and_old_states_still_load() -> None:
    sim = Sim(
        [approval(mode="all")], cfg=listening(), handlers={"request_approval": asked("a", "b")}
    )
    sim.run()
    sim.emit(approver="a", decision="approved")
    sim.run()
    assert sim.state is not None
    data = json.loads(json.dumps(sim.state.to_dict()))
    assert data["lanes"][0]["answerers"] == ["a"] and data["lanes"][0]["asked_names"] == ["a", "b"]
    assert state.RunState.from_dict(data) == sim.state
    # A state stored before lanes kept whom they asked and runs their cancels.
    data["lanes"][0].pop("answerers")
    data["lanes"][0].pop("asked_names")
    data.pop("cancel_requested", None)
    old = state.RunState.from_dict(data)
    assert old.lanes[0].answerers == [] and old.cancel_requested is None


# -- rule 8: the cancel command ----------------------------------------------------------


def test_the_cancel_command_runs_once_when_the_wait_gives_up() -> None:
    sim = Sim([approval(duration="2 days", approver="ann, bob"), after()], cfg=listening())
    sim.run()
    sim.to_wake().run()
    assert sim.status == "done"
    [cancel] = cancels(sim)
    assert cancel == effects.RunCommand(
        key="step-1/pass-1/cancel",
        step_id=1,
        pass_=1,
        kind="approval",
        command="close_approval",
        inputs={"approver": "ann, bob"},
        attempt=1,
        reminder=None,
        cancel=True,
    )
    assert details(sim, "cancel") == [
        "Stopped waiting (the wait gave up): withdrawing the Approval requests"
    ]
    assert [log.title for log in sim.logs("cancel_done")] == ["Approval"]


def test_the_cancel_command_runs_once_when_the_condition_ends_the_wait() -> None:
    sim = Sim([approval(condition="status = withdrawn")], cfg=listening())
    sim.run()
    assert sim.record is not None
    sim.record["status"] = "withdrawn"
    sim.run()
    sim.run()
    assert [c.key for c in cancels(sim)] == ["step-1/pass-1/cancel"]
    assert details(sim, "cancel") == ["Withdrawing the Approval requests"]


def test_no_cancel_when_the_answers_complete_the_step() -> None:
    sim = Sim([approval(), after()], cfg=listening())
    sim.run()
    sim.emit(approver="ann", decision="approved")
    sim.run()
    assert sim.status == "done" and cancels(sim) == []


def test_an_operator_cancel_runs_the_cancel_and_its_answer_is_taken_after_the_end() -> None:
    sim = Sim([approval(), {"position": 1, "kind": "wait", "duration": "1 day"}], cfg=listening())
    sim.run()
    sim.run(cancel="not needed")
    assert sim.status == "cancelled"
    [cancel] = cancels(sim)
    assert cancel.key == "step-1/pass-1/cancel"
    assert details(sim, "cancel") == [
        "Stopped waiting (cancelled by an operator: not needed): withdrawing the Approval requests"
    ]
    assert len(sim.logs("cancel_done")) == 1


def test_a_cancel_recorded_in_the_state_ends_the_run_at_the_next_advance() -> None:
    sim = Sim([approval()], cfg=listening())
    sim.run()
    assert sim.state is not None
    sim.state.cancel_requested = "cancelled by olga: duplicate"
    sim.run()
    assert sim.status == "cancelled" and sim.reason == "cancelled by olga: duplicate"
    assert len(cancels(sim)) == 1


def test_a_deleted_record_cancels_the_waiting_step() -> None:
    sim = Sim([approval()], cfg=listening())
    sim.run()
    sim.record = None
    sim.run()
    assert sim.status == "cancelled"
    assert details(sim, "cancel") == [
        "Stopped waiting (the record was deleted while the run waited): "
        "withdrawing the Approval requests"
    ]


def test_a_failing_sibling_cancels_the_waiting_step_and_a_retry_asks_again() -> None:
    broken = {"on": True}

    def send(command: effects.RunCommand) -> CommandResult:
        return failing("gateway down")(command) if broken["on"] else ok()(command)

    sim = Sim(
        [approval(), {"position": 1, "kind": "send"}],
        cfg=listening(),
        handlers={"send_purchase_order": send},
    )
    sim.run()
    assert [lane.status for lane in sim.state.lanes] == ["waiting", "retrying"]  # type: ignore[union-attr]
    while sim.status != "failed":
        sim.to_wake().run()  # the send's retries run out while the approval waits
    assert [c.key for c in cancels(sim)] == ["step-1/pass-1/cancel"]
    assert details(sim, "cancel") == [
        "Stopped waiting (the run failed): withdrawing the Approval requests"
    ]
    assert sim.state is not None
    assert [(lane.status, lane.outcome) for lane in sim.state.lanes] == [
        ("failed", "cancelled"),
        ("failed", None),
    ]
    sim.later(hours=1).run()
    assert len(cancels(sim)) == 1  # once
    broken["on"] = False
    sim.state = interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg).state
    sim.run()
    assert [c.command for c in sim.commands].count("request_approval") == 2  # asked again
    assert sim.status == "waiting"
    sim.run(cancel="enough")
    assert len(cancels(sim)) == 2  # the new ask is withdrawn in its turn


def test_a_failing_sibling_in_the_same_position_cancels_the_waiting_step() -> None:
    sim = Sim(
        [approval(), {"position": 1, "kind": "send"}],
        cfg=listening(),
        handlers={"send_purchase_order": failing("no", refused=True)},
    )
    sim.run()
    assert sim.status == "failed"
    # The approval's answer came after the send refused; it waited, then was cancelled.
    assert [c.key for c in cancels(sim)] == ["step-1/pass-1/cancel"]
    assert sim.state is not None and sim.state.lanes[0].outcome == "cancelled"
    sim.run(cancel="gave up")
    assert sim.status == "cancelled" and len(cancels(sim)) == 1


def test_a_failing_cancel_is_logged_not_retried_and_changes_nothing() -> None:
    sim = Sim(
        [approval(duration="1 day"), after()],
        cfg=listening(),
        handlers={"close_approval": failing("approvals service down")},
    )
    sim.run()
    sim.to_wake().run()
    assert sim.status == "done"
    assert len(cancels(sim)) == 1
    assert details(sim, "cancel_failed") == [
        "Could not withdraw the Approval requests: approvals service down"
    ]
    assert sim.record is not None and sim.record["priority"] == "high"


def test_a_kind_without_cancel_runs_none() -> None:
    sim = Sim([approval(duration="1 day")], cfg=listening(cancel=None))
    sim.run()
    sim.to_wake().run()
    sim2 = Sim([approval()], cfg=listening(cancel=None))
    sim2.run()
    sim2.run(cancel="x")
    assert cancels(sim) == cancels(sim2) == []


def test_the_doctests_hold() -> None:
    import doctest

    from flowrunner import binding

    assert doctest.testmod(watching).failed == 0
    assert doctest.testmod(binding).failed == 0
