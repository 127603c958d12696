"""A record's run drawn over its flow, as support staff read it: what is done and when (and
how), where it waits and for what, what is ahead, and the way it went through the branches.

Real runs of the fixture flows through the engine, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
import test_runs_tenants as tenants
from drawn import columns, figure, fixture_snapshots, having, mermaid_nodes, text
from running import T0, decide, mount, ticket

from flowrunner import diagrams, errors, testing
from flowrunner.diagrams import model

AT_9 = "Mon 2 Mar 09:00 UTC"


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 25000, **extra}


def draw(driver: testing.FlowDriver, flow: str, run: int | None = None, **options: Any) -> Any:
    with driver.runner.engine.connect() as conn:
        return driver.runner.diagram(conn, flow, run=run, **options)


def the_run(driver: testing.FlowDriver, record: int, flow: str) -> int:
    return next(r.id for r in driver.runs(record) if r.flow_name == flow)


def states(drawn: diagrams.Diagram) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """Each drawn step's title -> (state, headline, details)."""
    return {
        box.title: (box.run.state, box.run.text, box.run.details)
        for column in drawn.picture.columns
        for box in column.boxes
        if box.run is not None
    }


def column_states(drawn: diagrams.Diagram) -> dict[int, str | None]:
    return {c.position: c.state for c in drawn.picture.columns}


def taken(drawn: diagrams.Diagram) -> list[tuple[Any, Any, str, int]]:
    """The ways the run went: (from position, to position or 'end', how, times)."""
    cols = drawn.picture.columns

    def at(index: int | None) -> Any:
        if index is None:
            return "end"
        return "start" if index < 0 else cols[index].position

    return [(at(w.source), at(w.target), w.how, w.taken) for w in drawn.picture.ways if w.taken]


@pytest.fixture
def orders(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "purchase_orders")


def test_an_order_waiting_for_approvals_shows_where_it_waits_and_for_what(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(1))
    orders.advance("1 hour")
    decide(orders, 1, "cfo@example.com")
    run = the_run(orders, 1, "Big orders")
    drawn = draw(orders, "Big orders", run)
    found = states(drawn)
    assert found["Manager approval"] == (
        "waiting",
        "Waiting for the po decided event",
        (
            "0 answers of 1 asked, 1 needed",
            "not yet: manager@example.com",
            "gives up Mon 9 Mar 09:00 UTC",
            "next reminder Tue 3 Mar 09:00 UTC",
        ),
    )
    assert found["Finance approval"][2][:2] == (
        "1 answer of 2 asked, 2 needed",
        "not yet: controller@example.com",
    )
    assert {title: s[0] for title, s in found.items() if "approval" not in title} == dict.fromkeys(
        [
            "Undecided after a week?",
            "Reject it",
            "Rejected?",
            "Tell the requester it was rejected",
            "Approved?",
            "Tell the requester",
            "Send to supplier",
        ],
        "ahead",
    )
    assert column_states(drawn)[10] == "current"
    assert set(list(column_states(drawn).values())[1:]) == {"ahead"}
    assert taken(drawn) == [("start", 10, "next", 1)]
    assert drawn.picture.run is not None
    assert drawn.picture.run.sentence == f"Run {run} is waiting at position 10"
    # The page says the same: the current column, each step's state and what it waits for.
    fig = figure(drawn)
    assert columns(fig)[0].get("data-state") == "current"
    first = having(columns(fig)[0], "frd-step")[0]
    assert first.get("data-state") == "waiting"
    assert "not yet: manager@example.com" in text(first)
    assert f"Run {run} is waiting at position 10" in text(fig)
    assert "Waiting for the po decided event" in drawn.svg()
    assert "◔ Waiting for the po decided event" in mermaid_nodes(drawn.mermaid())["s1"]


def test_an_approved_order_shows_each_step_done_and_when_and_the_path_it_took(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(1))
    orders.advance("2 hours")
    for who in ("manager@example.com", "cfo@example.com", "controller@example.com"):
        decide(orders, 1, who)
    run = the_run(orders, 1, "Big orders")
    drawn = draw(orders, "Big orders", run)
    found = states(drawn)
    at_11 = "Mon 2 Mar 11:00 UTC"
    assert found == {
        "Manager approval": ("done", f"Done {at_11}", ("answered",)),
        "Finance approval": ("done", f"Done {at_11}", ("answered",)),
        "Undecided after a week?": (
            "done",
            f"Done {at_11}",
            ("its condition did not hold: to position 40",),
        ),
        "Reject it": ("skipped", "Skipped", ()),
        "Rejected?": ("done", f"Done {at_11}", ("its condition did not hold: to position 60",)),
        "Tell the requester it was rejected": ("skipped", "Skipped", ()),
        "Approved?": ("done", f"Done {at_11}", ("its condition held: on to the next step",)),
        "Tell the requester": ("done", f"Done {at_11}", ()),
        "Send to supplier": ("done", f"Done {at_11}", ()),
    }
    assert taken(drawn) == [
        ("start", 10, "next", 1),
        (10, 20, "next", 1),
        (20, 40, "other", 1),
        (40, 60, "other", 1),
        (60, 70, "next", 1),
        (70, 80, "next", 1),
        (80, "end", "next", 1),
    ]
    assert column_states(drawn)[30] == column_states(drawn)[50] == "skipped"
    assert drawn.picture.run is not None
    assert drawn.picture.run.sentence == f"Run {run} is done: the flow ended after its last step"
    fig = figure(drawn)
    ways = {(w.get("data-from"), w.get("data-to")) for w in having(fig, "frd-way-taken")}
    assert ways == {("-1", "0"), ("0", "1"), ("1", "3"), ("3", "5"), ("5", "6"), ("6", "7")} | {
        ("7", "8")
    }


def test_a_rejected_order_jumps_to_its_goto_and_skips_the_approved_steps(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(1))
    orders.advance("30 minutes")
    decide(orders, 1, "manager@example.com", "rejected")
    drawn = draw(orders, "Big orders", the_run(orders, 1, "Big orders"))
    found = states(drawn)
    at = "Mon 2 Mar 09:30 UTC"
    assert found["Manager approval"] == ("done", f"Done {at}", ("its condition held",))
    assert found["Finance approval"] == ("done", f"Done {at}", ("its condition held",))
    assert found["Undecided after a week?"][2] == ("its condition did not hold: to position 40",)
    assert found["Rejected?"][2] == ("its condition held: on to the next step",)
    assert found["Approved?"][2] == ("its condition did not hold: the run ended",)
    for title in ("Reject it", "Tell the requester", "Send to supplier"):
        assert found[title][0] == "skipped"
    assert found["Tell the requester it was rejected"][0] == "done"
    assert taken(drawn) == [
        ("start", 10, "next", 1),
        (10, 20, "next", 1),
        (20, 40, "other", 1),
        (40, 50, "next", 1),
        (50, 60, "next", 1),
        (60, "end", "other", 1),
    ]
    assert column_states(drawn) == {
        10: "done",
        20: "done",
        30: "skipped",
        40: "done",
        50: "done",
        60: "done",
        70: "skipped",
        80: "skipped",
    }


def test_a_follow_up_that_loops_back_counts_its_passes(any_engine: sa.Engine) -> None:
    desk = mount(any_engine, "tickets")
    desk.create(ticket(1) | {"due_at": T0 + timedelta(days=30)})
    desk.update(1, status="waiting")
    run = the_run(desk, 1, "Follow up")
    waiting = states(draw(desk, "Follow up", run))["Requester replies"]
    assert waiting == (
        "waiting",
        "Waiting for the ticket replied event",
        ("gives up Thu 5 Mar 09:00 UTC",),
    )
    desk.advance("3 days")  # nobody replied: the wait gives up, the requester is nudged
    desk.advance("2 days")  # still waiting: back to the nudge, then two more days
    drawn = draw(desk, "Follow up", run)
    found = states(drawn)
    assert found["Requester replies"] == ("timed_out", "Timed out Thu 5 Mar 09:00 UTC", ())
    assert found["Give them two more days"] == (
        "waiting",
        "Waiting until Mon 9 Mar 09:00 UTC",
        (),
    )
    assert found["Answered?"][:2] == ("ahead", "Ahead")
    assert found["Answered?"][2] == ("pass 1 ended Sat 7 Mar 09:00 UTC",)
    assert found["Tell the assignee"] == ("ahead", "Ahead", ())
    assert (5, 3, "other", 1) in taken(drawn)  # the way back was taken once
    assert (3, 4, "next", 2) in taken(drawn)  # and the nudge was passed twice
    visits = {c.position: c.visits for c in drawn.picture.columns}
    assert visits == {1: 1, 2: 1, 3: 2, 4: 2, 5: 1, 6: 0}
    assert column_states(drawn) == {
        1: "done",
        2: "done",
        3: "done",
        4: "current",
        5: "ahead",
        6: "ahead",
    }
    nudge = next(b for c in drawn.picture.columns for b in c.boxes if b.position == 3)
    assert nudge.run is not None and nudge.run.passes == 2


def test_a_date_wait_says_until_when(any_engine: sa.Engine) -> None:
    desk = mount(any_engine, "tickets")
    desk.create(ticket(1) | {"due_at": T0 + timedelta(days=2)})
    drawn = draw(desk, "SLA warning", the_run(desk, 1, "SLA warning"))
    assert states(drawn)["Four hours before due"] == (
        "waiting",
        "Waiting until Wed 4 Mar 05:00 UTC",
        (),
    )


def test_a_failed_step_says_why_and_where_the_run_stopped(orders: testing.FlowDriver) -> None:
    orders.create(order(1, priority="hold"))
    for who in ("manager@example.com", "cfo@example.com", "controller@example.com"):
        decide(orders, 1, who)
    run = the_run(orders, 1, "Big orders")
    drawn = draw(orders, "Big orders", run)
    found = states(drawn)
    assert found["Send to supplier"] == (
        "failed",
        f"Failed {AT_9}",
        ("the command refused: the order is on hold: release it, then restart the run",),
    )
    assert found["Tell the requester"][0] == "done"
    assert column_states(drawn)[80] == "current"
    assert drawn.picture.run is not None
    assert drawn.picture.run.sentence.startswith(f"Run {run} failed at position 80: step 'Send")
    # A reader who may not read the step does not learn its name from the run's sentence.
    hidden = draw(orders, "Big orders", run, can_read=lambda row: row["kind"] != "send")
    assert hidden.picture.run is not None
    assert hidden.picture.run.sentence == f"Run {run} failed at position 80"
    assert "Send to supplier" not in hidden.html() + hidden.svg() + hidden.mermaid()


def test_a_cancelled_run_shows_its_waiting_steps_stopped(orders: testing.FlowDriver) -> None:
    orders.create(order(1))
    run = the_run(orders, 1, "Big orders")
    orders.runner.cancel(run, operator="olga", reason="duplicate order")
    orders.run_until_idle()
    drawn = draw(orders, "Big orders", run)
    found = states(drawn)
    assert found["Manager approval"] == ("stopped", "Stopped", ("the run ended while it waited",))
    assert {found[t][0] for t in found if "approval" not in t} == {"not_reached"}
    assert drawn.picture.run is not None
    assert drawn.picture.run.sentence == (
        f"Run {run} was cancelled at position 10: cancelled by olga: duplicate order"
    )


def test_a_run_is_drawn_over_the_steps_it_started_with_not_todays_rows(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(1))
    run = the_run(orders, 1, "Big orders")
    with orders.runner.engine.begin() as conn:
        flow = orders.runner.snapshot(conn, int(orders.runs(1)[0].flow_id))
        step = next(s for s in flow.steps if s.title == "Manager approval")
        row = {
            "id": step.id,
            "flow_id": flow.flow.id,
            "position": step.position,
            "kind": step.kind,
            "title": "Line manager approval",
            **step.columns,
        }
        orders.runner.save_step(conn, row)
    assert "Line manager approval" in states_of_flow(draw(orders, "Big orders"))
    assert "Manager approval" in states(draw(orders, "Big orders", run))
    assert "Line manager approval" not in states(draw(orders, "Big orders", run))


def states_of_flow(drawn: diagrams.Diagram) -> list[str]:
    return [b.title for c in drawn.picture.columns for b in c.boxes]


def test_a_flow_or_run_that_is_not_there_is_refused_with_a_sentence(
    orders: testing.FlowDriver,
) -> None:
    orders.create(order(1))
    run = the_run(orders, 1, "Big orders")
    with pytest.raises(errors.OperatorError, match="did you mean 'Big orders'") as unknown:
        draw(orders, "Big order")
    assert unknown.value.status_code == 404 and unknown.value.code == "flow_unknown"
    with pytest.raises(errors.OperatorError, match="there is no run 999"):
        draw(orders, "Big orders", 999)
    with pytest.raises(errors.OperatorError, match="is a run of flow 'Big orders', not of"):
        draw(orders, "Small orders", run)
    # The run is found by its flow's id as well as its name.
    flow_id = orders.runs(1)[0].flow_id
    assert draw(orders, flow_id, run).picture.flow_name == "Big orders"


def test_a_run_not_yet_advanced_has_everything_ahead() -> None:
    snap = fixture_snapshots("purchase_orders")["Small orders"]
    run = diagrams.RunInput(id=5, status="running", state=None)
    drawn = diagrams.flow_diagram(snap, run=run)
    assert {c.state for c in drawn.picture.columns} == {"ahead"}
    assert isinstance(drawn.picture.run, model.RunSummary)
    assert drawn.picture.run.sentence == "Run 5 is running"


def test_a_tenant_draws_only_its_own_flows_and_runs(any_engine: sa.Engine) -> None:
    driver = tenants.mount(any_engine)
    driver.create(tenants.record(1, "acme"))
    [run] = driver.runs(1, tenant="acme")
    for tenant in ("acme", "globex"):
        drawn = draw(driver, "Triage", tenant=tenant)
        values = [f.value for c in drawn.picture.columns for b in c.boxes for f in b.facts]
        assert f"'seen by {tenant}'" in values
    waiting = states(draw(driver, "Triage", run.id, tenant="acme"))
    assert waiting["Wait for"][:2] == ("waiting", "Waiting for the desk replied event")
    with pytest.raises(errors.OperatorError, match=f"there is no run {run.id}"):
        draw(driver, "Triage", run.id, tenant="globex")
    with pytest.raises(errors.OperatorError, match="belong to tenants: name the tenant"):
        draw(driver, "Triage")
