"""Versions of a flow, as the people who change it would state the cases: edit a draft
while runs start, publish with a note, compare two versions, roll back, and move waiting
runs to a new version — on the support desk's tickets, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from running import app, mount, ticket

from flowrunner import testing
from flowrunner.errors import OperatorError
from flowrunner.store import flow_rows, flow_versions

FOLLOW_UP = """
- name: Follow up
  start: created
  steps:
    - {position: 1, kind: waitFor, title: Requester replies, event: ticket.replied,
       duration: 30 days}
    - {position: 2, kind: wait, title: Second look, duration: 5 days}
    - {position: 3, kind: set, title: Answered, field: status, value: answered}
"""


def desk(engine: sa.Engine, publish: str = "explicit") -> testing.FlowDriver:
    tickets = app("tickets")
    return mount(
        engine,
        "tickets",
        flows=FOLLOW_UP,
        binding=tickets.binding.model_copy(update={"publish": publish}),
    )


def steps(driver: testing.FlowDriver) -> dict[str, dict[str, Any]]:
    """The flow's step rows (its draft) by title."""
    runner = driver.runner
    with runner.engine.connect() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, runner.tables, "Follow up")
        assert flow is not None
        return {
            str(s["title"]): s for s in flow_rows.steps_of_flow(conn, runner.tables, flow["id"])
        }


def edit(driver: testing.FlowDriver, step: str, **changes: Any) -> None:
    """A business user changes one step of the draft and saves it."""
    row = steps(driver)[step]
    with driver.runner.engine.begin() as conn:
        driver.runner.save_step(conn, {**row, **changes})


def publish(driver: testing.FlowDriver, note: str = "") -> int:
    with driver.runner.engine.begin() as conn:
        return driver.runner.publish(conn, "Follow up", by="olga", note=note).number


def version_run(driver: testing.FlowDriver, ticket_id: int) -> int | None:
    """The version the ticket's run started on."""
    (run,) = driver.runs(ticket_id)
    known = driver.runner.versions("Follow up")
    return flow_versions.version_of_run(known, run.digest, run.started_at)


def kinder_words(driver: testing.FlowDriver) -> int:
    """An editor rewords Big orders' rejection notice (its draft); the flow's id."""
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, runner.tables, "Big orders")
        assert flow is not None
        [tell] = [
            s
            for s in flow_rows.steps_of_flow(conn, runner.tables, flow["id"])
            if s["title"] == "Tell the requester it was rejected"
        ]
        runner.save_step(conn, {**tell, "message": "Sorry: your order was rejected."})
    return int(flow["id"])


def test_runs_start_on_the_published_version_while_the_draft_is_edited(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    # Never published: a new ticket starts nothing.
    driver.create(ticket(1))
    assert driver.runs(1) == []

    assert publish(driver, "first") == 1
    driver.create(ticket(2))
    assert version_run(driver, 2) == 1

    # The draft is edited: runs keep starting on version 1.
    edit(driver, "Requester replies", duration="10 days")
    driver.create(ticket(3))
    assert version_run(driver, 3) == 1
    assert [line.sentence for line in driver.runner.compare("Follow up", 1).changes] == [
        "Step 1 'Requester replies': duration 30 days → 10 days"
    ]

    # Published with a note: the next run uses it.
    assert publish(driver, "a shorter wait") == 2
    driver.create(ticket(4))
    assert version_run(driver, 4) == 2
    listed = driver.runner.versions("Follow up")
    assert [(v.number, v.published_by, v.note, v.waiting) for v in listed] == [
        (1, "olga", "first", 2),
        (2, "olga", "a shorter wait", 1),
    ]


def test_publishing_what_is_published_or_a_broken_draft_is_refused(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    publish(driver)
    with pytest.raises(OperatorError, match="nothing to publish: flow 'Follow up' is as version 1"):
        publish(driver)
    # A draft whose wait reads a column the desk does not have cannot be published.
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, runner.tables, "Follow up")
        assert flow is not None
        conn.execute(
            sa.update(runner.tables.steps)
            .where(runner.tables.steps.c.title == "Second look")
            .values(duration="5 fortnights")
        )
    with pytest.raises(OperatorError, match=r"cannot be published: .*Second look"):
        publish(driver)
    assert [v.number for v in runner.versions("Follow up")] == [1]


def test_compare_says_what_changed_in_words(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    publish(driver)
    edit(driver, "Requester replies", duration="1 week", title="The requester replies")
    with driver.runner.engine.begin() as conn:
        runner = driver.runner
        flow = flow_rows.flow_by_name_or_id(conn, runner.tables, "Follow up")
        assert flow is not None
        runner.delete_step(conn, steps(driver)["Second look"]["id"])
        runner.save_step(
            conn,
            {
                "flow_id": flow["id"],
                "position": 2,
                "kind": "notify",
                "title": "Tell the requester",
                "audience": "requester",
                "message": "Thanks",
            },
        )
        runner.save_flow(conn, {**flow, "condition": "priority = high"})
    publish(driver, "tell them")
    assert driver.runner.compare("Follow up", 1, 2).sentences == [
        "Flow: condition (none) → priority = high",
        "Step 1 'The requester replies': title Requester replies → The requester replies; "
        "duration 30 days → 1 week",
        "Added step 2 'Tell the requester'",
        "Removed step 2 'Second look'",
    ]
    assert driver.runner.compare("Follow up", 2, "draft").changes == ()


def test_a_roll_back_publishes_the_old_rows_again_and_the_next_run_uses_them(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    publish(driver, "first")
    edit(driver, "Requester replies", duration="10 days")
    publish(driver, "shorter")
    edit(driver, "Second look", duration="1 day")
    publish(driver, "shorter still")
    with driver.runner.engine.begin() as conn:
        rolled = driver.runner.roll_back(conn, "Follow up", 1, by="olga")
    assert (rolled.number, rolled.note) == (4, "rolled back to version 1")
    # The draft follows it, and the next run starts on the old rows.
    assert driver.runner.compare("Follow up", 1, "draft").changes == ()
    assert steps(driver)["Requester replies"]["duration"] == "30 days"
    driver.create(ticket(1))
    assert version_run(driver, 1) == 4
    versions = driver.runner.versions("Follow up")
    assert [(v.number, v.note) for v in versions] == [
        (1, "first"),
        (2, "shorter"),
        (3, "shorter still"),
        (4, "rolled back to version 1"),
    ]
    assert versions[0].digest == versions[3].digest
    actions = [(e.action, e.operator) for e in driver.runner.journal().rows]
    assert actions.count(("publish", "olga")) == 3 and ("roll_back", "olga") in actions


def test_on_save_each_new_state_of_the_rows_is_a_version_its_runs_name(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine, publish="on_save")
    driver.create(ticket(1))  # runs start on the rows as they are
    edit(driver, "Requester replies", duration="10 days")
    driver.create(ticket(2))
    versions = driver.runner.versions("Follow up")
    assert [(v.number, v.published_by, v.waiting) for v in versions] == [
        (1, None, 1),
        (2, None, 1),
    ]
    assert version_run(driver, 2) == 2


def test_moving_100_waiting_runs_moves_90_and_refuses_10_with_sentences(
    any_engine: sa.Engine,
) -> None:
    driver = desk(any_engine)
    publish(driver, "first")
    for n in range(1, 101):
        driver.create(ticket(n), run=False)
    driver.run_until_idle()
    # Ten requesters replied: their runs went on to the second look.
    for n in range(91, 101):
        driver.emit("ticket.replied", {"ticket": n}, run=False)
    driver.run_until_idle()

    # Version 2 drops the second look and tells the requester instead.
    runner = driver.runner
    with runner.engine.begin() as conn:
        flow = flow_rows.flow_by_name_or_id(conn, runner.tables, "Follow up")
        assert flow is not None
        runner.delete_step(conn, steps(driver)["Second look"]["id"])
        runner.save_step(
            conn,
            {
                "flow_id": flow["id"],
                "position": 2,
                "kind": "notify",
                "title": "Tell the requester",
                "audience": "requester",
                "message": "Thanks for your reply",
            },
        )
    publish(driver, "no second look")

    dry = runner.move_runs("Follow up", from_version=1, by="olga")
    assert sum(o.moved for o in dry) == 90 and all(o.dry_run for o in dry)
    assert [v.waiting for v in runner.versions("Follow up")] == [100, 0]  # nothing moved

    outcomes = runner.move_runs("Follow up", from_version=1, by="olga", dry_run=False)
    moved = [o for o in outcomes if o.moved]
    refused = [o for o in outcomes if not o.moved]
    assert (len(moved), len(refused)) == (90, 10)
    run_91 = driver.runs(91)[0].id
    assert f"run {run_91} waits at 'Second look', which version 2 removes" in [
        o.sentence for o in refused
    ]
    assert [v.waiting for v in runner.versions("Follow up")] == [10, 90]
    run_1 = driver.runs(1)[0].id
    assert "olga moved the run from version 1 to version 2" in [
        line.sentence for line in runner.history(run_1)
    ]

    # The moved runs finish on the new rows, each effect once.
    for n in range(1, 91):
        driver.emit("ticket.replied", {"ticket": n}, run=False)
    driver.run_until_idle()
    for n in (1, 45, 90):
        (run,) = driver.runs(n)
        assert run.status == "done", run.reason
        assert [notice.message for notice in driver.notices(run.id)] == ["Thanks for your reply"]
        assert (driver.record(n) or {})["status"] == "answered"
    assert len(driver.notices()) == 90
    # The refused ones go on on version 1.
    driver.advance("6 days")
    assert (driver.record(95) or {})["status"] == "answered"
    assert driver.notices(driver.runs(95)[0].id) == []


def test_a_tenant_publishes_and_sees_only_its_own_flows_versions(any_engine: sa.Engine) -> None:
    import desk as tenants_desk  # a shared desk whose tickets and flows belong to tenants

    runner = tenants_desk.runner(any_engine)
    with any_engine.begin() as conn:
        for tenant in ("acme", "beta"):
            flow = runner.save_flow(conn, {"name": "Triage", "start": "created"}, tenant=tenant)
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 1,
                    "kind": "set",
                    "title": "Mark",
                    "field": "status",
                    "value": tenant,
                },
                tenant=tenant,
            )
        acme = runner.publish(conn, "Triage", by="ann", note="acme's", tenant="acme")
    assert (acme.number, acme.tenant) == (1, "acme")
    assert [v.note for v in runner.versions("Triage", tenant="acme")] == ["acme's"]
    assert runner.versions("Triage", tenant="beta") == []  # beta never published its own
    with pytest.raises(OperatorError, match="name the tenant"):
        runner.versions("Triage")
    assert [c.sentence for c in runner.compare("Triage", 1, tenant="acme").changes] == []
    with pytest.raises(OperatorError, match="has no version 1"):
        runner.compare("Triage", 1, tenant="beta")


def test_a_moved_approval_keeps_the_answers_it_had_and_asks_no_one_again(
    any_engine: sa.Engine,
) -> None:
    """The manager approved order 1 on version 1; the finance approvers had not yet. The
    run moves to version 2 (a kinder rejection notice), the finance approvers answer, and
    the order goes on to the supplier: no approver asked twice, each effect once."""
    from running import decide, order

    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    decide(driver, 1, "manager@example.com")
    kinder_words(driver)
    with any_engine.begin() as conn:
        driver.runner.publish(conn, "Big orders", by="olga", note="kinder words")
    outcomes = driver.runner.move_runs("Big orders", from_version=1, by="olga", dry_run=False)
    assert [o.moved for o in outcomes] == [True]
    decide(driver, 1, "cfo@example.com")
    decide(driver, 1, "controller@example.com")
    (run,) = driver.runs(1)
    assert run.status == "done", run.reason
    lines = [(line.title, line.what) for line in driver.history(run.id)]
    assert lines.count(("Manager approval", "command")) == 1  # asked once, before the move
    assert lines.count(("Finance approval", "command")) == 1
    assert ("Send to supplier", "command") in lines
    assert [n.message for n in driver.notices(run.id)] == [
        "Your order was approved and goes to the supplier now."
    ]
