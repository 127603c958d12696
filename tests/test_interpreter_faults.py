"""Fault paths and escalations in the pure interpreter.

A command that fails for good (refused, or its retries used up) on a step naming
``on_failure`` fails the step, not the run: the run leaves the position at once — the
steps beside it stop, a waiting one's cancel command runs — and goes on there, the
failure readable as ``failure`` in a branch and ``{failure}`` in a message until a later
command answers. A waiting step with ``escalate`` tells its ``escalate_to`` once, on
the flow's own clock, and waits on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from test_interpreter_driver import KINDS, T0, Sim, approval, config, failing

from flowrunner.flows.interpreter import effects, interpret
from flowrunner.flows.interpreter.config import KindConfig
from flowrunner.flows.interpreter.happened import CommandResult
from flowrunner.flows.interpreter.waits import where


def send(position: int, **extra: Any) -> dict[str, Any]:
    return {"position": position, "kind": "send", "title": "Send", **extra}


def tell(position: int, message: str, title: str = "Tell") -> dict[str, Any]:
    return {
        "position": position,
        "kind": "notify",
        "title": title,
        "audience": "requester",
        "message": message,
    }


def branch(position: int, condition: str) -> dict[str, Any]:
    return {"position": position, "kind": "branch", "title": "Failed?", "condition": condition}


def whats(sim: Sim) -> list[tuple[str | None, str]]:
    return [(log.title, log.what) for log in sim.logs()]


REFUSED = {"send_purchase_order": failing("order on hold", refused=True)}


def test_a_refused_command_goes_on_at_its_fault_path() -> None:
    sim = Sim(
        [
            send(1, on_failure=3),
            tell(2, "Sent."),
            tell(3, "Not sent: {failure}", "Why"),
        ],
        handlers=REFUSED,
    )
    sim.run()
    assert sim.status == "done"
    assert [n.message for n in sim.of(effects.Notify)] == ["Not sent: order on hold"]
    [failed] = [log for log in sim.logs() if log.what == "failed"]
    assert failed.detail == {
        "code": "command.refused",
        "message": "the command refused: order on hold",
        "failure": "order on hold",
        "attempts": 1,
        "on_failure": 3,
    }
    assert sim.state is not None and sim.state.failure == "order on hold"


def test_retries_are_used_up_first() -> None:
    sim = Sim(
        [send(1, on_failure=2), tell(2, "{failure}")],
        handlers={"send_purchase_order": failing("gateway down")},
    )
    sim.run()
    assert sim.status == "waiting"
    sim.to_wake().run()
    sim.to_wake().run()
    assert sim.status == "done"
    assert [c.attempt for c in sim.commands] == [1, 2, 3]
    assert [n.message for n in sim.of(effects.Notify)] == ["gateway down"]


def test_a_branch_reads_whether_the_last_command_failed() -> None:
    flow = [
        send(1, on_failure=2),
        branch(2, "failure is not null"),
        tell(3, "It failed: {failure}"),
    ]
    refused = Sim(flow, handlers=REFUSED)
    refused.run()
    assert [n.message for n in refused.of(effects.Notify)] == ["It failed: order on hold"]
    sent = Sim(flow)
    sent.run()
    assert sent.status == "done" and sent.of(effects.Notify) == []


def test_a_later_command_that_answers_clears_the_failure() -> None:
    kinds = {**KINDS, "ship": KindConfig(name="ship", command="ship_order")}
    sim = Sim(
        [
            send(1, on_failure=2),
            {"position": 2, "kind": "ship", "title": "Ship"},
            branch(3, "failure is null"),
            tell(4, "Failure: [{failure}]"),
        ],
        cfg=config(kinds=kinds),
        handlers=REFUSED,
    )
    sim.run()
    assert [n.message for n in sim.of(effects.Notify)] == ["Failure: []"]


def test_the_steps_beside_a_failed_one_stop_and_a_waiting_one_is_cancelled() -> None:
    kinds = {
        **KINDS,
        "approval": KindConfig(
            name="approval",
            command="request_approval",
            inputs=("approver",),
            wait_for="po.decided",
            cancel="close_requests",
        ),
    }
    sim = Sim(
        [approval(1, title="Approval"), send(1, on_failure=2), tell(2, "Not sent: {failure}")],
        cfg=config(kinds=kinds),
        handlers=REFUSED,
    )
    sim.run()
    assert sim.status == "done"
    assert [c.command for c in sim.commands] == [
        "request_approval",
        "send_purchase_order",
        "close_requests",
    ]
    stopped = [log for log in sim.logs() if log.title == "Approval" and log.what == "done"]
    assert [log.detail for log in stopped] == [{"outcome": "stopped", "why": "Send failed"}]
    [cancel] = [log for log in sim.logs() if log.what == "cancel"]
    assert cancel.detail == {"command": "close_requests", "why": "Send failed"}


def test_a_step_without_a_fault_path_still_fails_the_run() -> None:
    sim = Sim([send(1), tell(2, "Sent.")], handlers=REFUSED)
    sim.run()
    assert sim.status == "failed"
    assert sim.reason == "step 'Send' (send, position 1) failed: the command refused: order on hold"


def test_a_fault_path_that_broke_fails_the_run_before_the_command_runs() -> None:
    sim = Sim([send(1, on_failure=7), tell(2, "Sent.")], handlers=REFUSED)
    sim.run()
    assert sim.status == "failed" and sim.commands == []
    assert sim.reason is not None and "on_failure names position 7" in sim.reason


def test_an_operator_retry_of_a_run_failed_beside_a_fault_runs_both_steps_again() -> None:
    sim = Sim(
        [send(1, on_failure=2), {**send(1), "title": "Other"}, tell(2, "{failure}")],
        handlers=REFUSED,
    )
    sim.run()
    assert sim.status == "failed"  # the other send names no fault path
    assert sim.state is not None and sim.state.fault_to == 2
    step = interpret.retry_failed(sim.snap, sim.state, sim.now, sim.cfg)
    assert step.state.fault_to is None
    assert [lane.status for lane in step.state.lanes] == ["ready", "ready"]


# -- escalation ------------------------------------------------------------------------------


def waiting_for_shipping(**extra: Any) -> list[dict[str, Any]]:
    step = {"position": 1, "kind": "waitFor", "title": "Shipped", "event": "po.shipped"}
    return [{**step, "escalate": "1 day", "escalate_to": "buyer", **extra}, tell(2, "Shipped.")]


def test_a_waiting_step_escalates_once_and_waits_on() -> None:
    sim = Sim(waiting_for_shipping(), record={"id": 42, "buyer_id": "bo", "requester_id": "ann"})
    sim.run()
    assert sim.wake == T0 + timedelta(days=1)
    sim.to_wake().run()
    [told] = sim.of(effects.Notify)
    assert (told.audience, told.recipient, told.message) == (
        "buyer",
        "bo",
        "Shipped has waited 1 day and still waits for the po shipped event.",
    )
    assert sim.status == "waiting" and sim.wake is None
    [waiting] = where(sim.snap, sim.state or {}, sim.cfg)
    assert (waiting.escalate_to, waiting.escalated) == ("buyer", True)
    sim.later(days=3).run()
    sim.emit("po.shipped", order=42)
    sim.run()
    assert sim.status == "done"
    assert [n.audience for n in sim.of(effects.Notify)] == ["buyer", "requester"]


def test_after_an_outage_an_escalation_comes_in_its_place_on_the_flows_clock() -> None:
    # Shipped on day 2: the step waited a day first, so the buyer was told (late).
    late = Sim(waiting_for_shipping(), check_replay=True)
    late.create().later(days=2)
    late.emit("po.shipped", order=42)
    late.later(hours=1).run()
    assert [(n.audience, n.step_id) for n in late.of(effects.Notify)] == [
        ("buyer", 1),
        ("requester", 2),
    ]
    [line] = [log for log in late.logs() if log.what == "escalated"]
    assert line.at == T0 + timedelta(days=1)
    # Shipped within the day: nobody is told, however late the worker comes.
    early = Sim(waiting_for_shipping())
    early.create().later(hours=20)
    early.emit("po.shipped", order=42)
    early.later(days=3).run()
    assert [n.audience for n in early.of(effects.Notify)] == ["requester"]


def test_a_give_up_at_the_same_moment_comes_first() -> None:
    sim = Sim(waiting_for_shipping(duration="1 day"))
    sim.run()
    sim.to_wake().run()
    assert [n.audience for n in sim.of(effects.Notify)] == ["requester"]


def test_an_approval_escalates_from_its_logical_start_whoever_answered() -> None:
    by = KindConfig(
        name="approval",
        command="request_approval",
        inputs=("approver",),
        wait_for="po.decided",
        by="approver",
    )
    sim = Sim(
        [approval(1, mode="all", escalate="2 days", escalate_to="buyer"), tell(2, "Approved.")],
        cfg=config(kinds={**KINDS, "approval": by}),
        handlers={"request_approval": lambda c: _asked(c, ["ann", "bob"])},
        record={"id": 42, "buyer_id": "bo", "requester_id": "ann"},
    )
    sim.run()
    sim.later(days=1)
    sim.emit(order=42, approver="ann")
    sim.run()
    sim.to_wake().run()
    escalated = [n for n in sim.of(effects.Notify) if n.audience == "buyer"]
    assert [n.message for n in escalated] == ["Approval has waited 2 days and still waits for bob."]


def _asked(command: effects.RunCommand, names: list[str]) -> CommandResult:
    return CommandResult(key=command.key, ok=True, answer={"asked": names})
