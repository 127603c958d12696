""" "All" means everyone asked, once each: with the kind's ``by``, modes count answerers.

Through the real worker on SQLite and PostgreSQL with the purchase-order app, whose
approval kind says ``by="approver"``; and the binding's checks of ``by`` and ``cancel``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
import sqlalchemy as sa
from running import app, decide, mount

from flowrunner import errors, flow_runner, testing
from flowrunner.binding import Kind

PO = app("purchase_orders")


def approval(mode: str, approvers: str = "ann, bob, cara") -> str:
    return f"""
- name: Approve
  start: created
  steps:
    - {{position: 1, kind: approval, title: Approval, approver: "{approvers}", mode: "{mode}"}}
    - {{position: 2, kind: set, title: Done, field: status, value: approved}}
"""


def create(driver: testing.FlowDriver, order_id: int = 1) -> None:
    driver.create(
        {"id": order_id, "number": f"PO-{order_id}", "requester_id": "ann", "amount": 25000}
    )


def answer(driver: testing.FlowDriver, who: str | None, decision: str = "approved") -> None:
    payload: dict[str, Any] = {"order": 1, "decision": decision}
    if who is not None:
        payload["approver"] = who
    driver.emit("po.decided", payload)


def status(driver: testing.FlowDriver) -> str:
    record = driver.record(1)
    assert record is not None
    return str(record["status"])


def answered(driver: testing.FlowDriver) -> list[str]:
    [run] = driver.runs(1)
    return [line.sentence for line in driver.history(run.id) if line.what == "answered"]


def test_ann_approves_three_times_still_waiting_for_bob_and_cara(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders", flows=approval("all"))
    create(driver)
    for _ in range(3):
        answer(driver, "ann")
    assert status(driver) == "open"
    [run] = driver.runs(1)
    assert run.status == "waiting"
    assert cast(Any, run.state)["lanes"][0]["answerers"] == ["ann"]
    answer(driver, "bob")
    assert status(driver) == "open"
    answer(driver, "cara")
    assert status(driver) == "approved"
    assert answered(driver) == [
        "ann approved (1 of 3; waiting for bob and cara)",
        "ann approved again (1 of 3; waiting for bob and cara)",
        "ann approved again (1 of 3; waiting for bob and cara)",
        "bob approved (2 of 3; waiting for cara)",
        "cara approved (3 of 3)",
    ]


@pytest.mark.parametrize(
    ("mode", "answers"),
    [
        ("2", ["ann", "ann", "ann", "bob"]),
        ("60%", ["ann", "bob", "bob", "ann", "cara"]),  # 60% of 5 asked: three people
    ],
)
def test_a_count_and_a_share_count_each_answerer_once(
    any_engine: sa.Engine, mode: str, answers: list[str]
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=approval(mode, "ann, bob, cara, dan, eve"))
    create(driver)
    for n, who in enumerate(answers, start=1):
        assert status(driver) == "open", f"ended after {n - 1} answers"
        answer(driver, who)
    assert status(driver) == "approved"
    assert answered(driver)[-1].startswith(f"{answers[-1]} approved (")


def test_answers_without_the_field_or_from_someone_not_asked_do_not_count(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders", flows=approval("any", "ann"))
    create(driver)
    answer(driver, None)
    answer(driver, "mallory")
    assert status(driver) == "open"
    [run] = driver.runs(1)
    lines = [(line.what, line.sentence) for line in driver.history(run.id)]
    assert ("arrived", "A po decided event named no approver: not counted") in lines
    assert ("answered", "mallory approved but was not asked: not counted") in lines
    answer(driver, "ann")
    assert status(driver) == "approved"


def test_the_sample_flow_counts_each_approver_in_their_own_step(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    create(driver)
    # The manager's answer reaches both approval steps; only the manager's step counts it.
    for who in ("manager@example.com", "cfo@example.com", "cfo@example.com"):
        decide(driver, 1, who)
    assert status(driver) == "open"
    decide(driver, 1, "controller@example.com")
    assert status(driver) == "sent"
    [run] = driver.runs(1)
    finance = [
        line.sentence
        for line in driver.history(run.id)
        if line.what == "answered" and line.title == "Finance approval"
    ]
    assert finance == [
        "manager@example.com approved but was not asked: not counted",
        "cfo@example.com approved (1 of 2; waiting for controller@example.com)",
        "cfo@example.com approved again (1 of 2; waiting for controller@example.com)",
        "controller@example.com approved (2 of 2)",
    ]


# -- the binding ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ({"command": "c", "by": "approver"}, "by 'approver' needs wait_for"),
        ({"command": "c", "cancel": "close"}, "cancel 'close' needs wait_for"),
        ({"command": "c", "wait_for": "e", "by": ""}, "must be a name"),
        ({"command": "c", "wait_for": "e", "by": "who.name"}, "must be a name"),
        ({"command": "c", "wait_for": "e", "cancel": " "}, "a command name cannot be empty"),
    ],
)
def test_by_and_cancel_are_checked_in_the_binding(kind: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.BindingError, match=message):
        Kind(**kind)


def test_the_runner_needs_the_cancel_command(sqlite_engine: sa.Engine) -> None:
    PO.metadata.create_all(sqlite_engine)
    commands = {k: v for k, v in PO.COMMANDS.items() if k != "close_approval_requests"}
    with pytest.raises(errors.BindingError, match="runs command 'close_approval_requests'"):
        flow_runner(PO.binding, sqlite_engine, commands=commands, check_schema=False)
