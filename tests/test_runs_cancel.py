"""Cancelling tells the application: a kind's cancel command runs once per stopped wait.

Through the real worker on SQLite and PostgreSQL: the purchase-order app's approval kind
has ``cancel="close_approval_requests"``; here a counting stand-in writes one row per
run of it in the step's transaction (so a duplicate would show) and remembers each call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, cast

import pytest
import sqlalchemy as sa
from running import app, count, mount, stored, whats

from flowrunner import errors, testing
from flowrunner.engine import commands, worker

PO = app("purchase_orders")

meta = sa.MetaData()
closed = sa.Table(
    "test_closed",
    meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False),
    sa.Column("approver", sa.String(200)),
)

WAITS = """
- name: Approve
  start: created
  steps:
    - {{position: 1, kind: approval, title: Approval, approver: "ann, bob"{extra}}}
    - {{position: 2, kind: set, title: Next, field: priority, value: high}}
"""


class Closer:
    """A cancel command that counts: a row per committed run, a call per attempt."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[commands.CommandContext] = []
        self.fail = fail

    def __call__(self, ctx: commands.CommandContext) -> None:
        self.calls.append(ctx)
        ctx.conn.execute(
            sa.insert(closed).values(key=ctx.idempotency_key, approver=ctx.inputs.get("approver"))
        )
        if self.fail:
            raise RuntimeError("the approvals service is down")


@pytest.fixture
def closer() -> Closer:
    return Closer()


@pytest.fixture
def drive(any_engine: sa.Engine, closer: Closer) -> Iterator[Callable[..., testing.FlowDriver]]:
    meta.create_all(any_engine)

    def make(extra: str = "", flows: str | None = None, **options: Any) -> testing.FlowDriver:
        text = flows if flows is not None else WAITS.format(extra=extra)
        return mount(
            any_engine,
            "purchase_orders",
            flows=text,
            commands={"close_approval_requests": closer},
            **options,
        )

    yield make


def create(driver: testing.FlowDriver, order_id: int = 1, **extra: Any) -> Any:
    record = {"id": order_id, "number": f"PO-{order_id}", "requester_id": "ann", "amount": 25000}
    driver.create({**record, **extra})
    [run] = driver.runs(order_id)
    return run


def rows(engine: sa.Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [(k, a) for k, a in conn.execute(sa.select(closed.c.key, closed.c.approver))]


def test_an_operators_cancel_runs_the_cancel_command_once_in_the_worker(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine
) -> None:
    driver = drive()
    run = create(driver)
    assert run.status == "waiting"
    driver.runner.cancel(run.id, operator="olga", reason="duplicate order")
    [run] = driver.runs(1)
    assert run.status == "cancelled"  # at once, for the caller
    assert rows(any_engine) == []  # the worker tells the application
    with pytest.raises(errors.OperatorError, match="already ended"):
        driver.runner.cancel(run.id, operator="olga")
    driver.run_until_idle()
    driver.advance("1 week")
    step_id = cast(Any, run.snapshot)["steps"][0]["id"]
    assert rows(any_engine) == [(f"run-{run.id}/step-{step_id}/pass-1/cancel", "ann, bob")]
    assert len(closer.calls) == 1 and closer.calls[0].record["id"] == 1
    [run] = driver.runs(1)
    assert run.status == "cancelled" and run.reason == "cancelled by olga: duplicate order"
    lines = whats(driver, run.id)
    assert lines[-4:] == [": cancelled", ": ended", "Approval: cancel", "Approval: cancel_done"]
    assert stored(driver, 1)["priority"] == "normal"  # nothing more of the flow ran


def test_the_cancel_command_runs_once_when_the_wait_gives_up(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine
) -> None:
    driver = drive(", duration: 1 day")
    run = create(driver)
    driver.advance("23 hours")
    assert rows(any_engine) == []
    driver.advance("1 hour")
    driver.advance("1 week")
    assert len(rows(any_engine)) == 1 and len(closer.calls) == 1
    assert driver.runs(1)[0].status == "done" and stored(driver, 1)["priority"] == "high"
    assert "Approval: timed_out" in whats(driver, run.id)


def test_the_cancel_command_runs_once_when_the_condition_ends_the_wait_early(
    drive: Callable[..., testing.FlowDriver], any_engine: sa.Engine
) -> None:
    driver = drive(", mode: all, condition: event.decision = rejected or status = withdrawn")
    create(driver)
    driver.emit("po.decided", {"order": 1, "approver": "ann", "decision": "rejected"})
    driver.update(1, status="withdrawn")
    assert len(rows(any_engine)) == 1
    assert driver.runs(1)[0].status == "done"


def test_no_cancel_when_the_answers_complete_the_step(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine
) -> None:
    driver = drive(", mode: all, duration: 1 day")
    create(driver)
    for who in ("ann", "bob"):
        driver.emit("po.decided", {"order": 1, "approver": who, "decision": "approved"})
    driver.advance("2 days")
    assert driver.runs(1)[0].status == "done"
    assert rows(any_engine) == [] and closer.calls == []


def test_the_cancel_command_runs_once_when_the_record_is_deleted(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine
) -> None:
    driver = drive()
    create(driver)
    driver.delete(1)
    assert driver.runs(1)[0].status == "cancelled"
    assert len(rows(any_engine)) == 1
    assert closer.calls[0].record == {}  # the record is gone; the inputs still say who


SIBLING = """
- name: Approve and send
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: "ann, bob", mode: all}
    - {position: 1, kind: send, title: Send early}
    - {position: 2, kind: set, title: Next, field: priority, value: high}
"""


def test_the_cancel_command_runs_once_when_a_sibling_fails_and_a_retry_asks_again(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine
) -> None:
    outage = {"on": True}

    def send(ctx: commands.CommandContext) -> None:
        if outage["on"]:
            raise errors.CommandRefused("the supplier is closed")

    driver = drive(flows=SIBLING)
    driver.runner.commands["send_purchase_order"] = send
    run = create(driver)
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert len(rows(any_engine)) == 1
    assert [(lane["status"], lane.get("outcome")) for lane in cast(Any, run.state)["lanes"]] == [
        ("failed", "cancelled"),
        ("failed", "refused"),
    ]
    assert count(any_engine, PO.approval_request) == 2
    outage["on"] = False
    driver.runner.retry(run.id, operator="olga")
    driver.run_until_idle()
    assert count(any_engine, PO.approval_request) == 4  # the approvers are asked again
    for who in ("ann", "bob"):
        driver.emit("po.decided", {"order": 1, "approver": who, "decision": "approved"})
    [run] = driver.runs(1)
    assert run.status == "done" and len(rows(any_engine)) == 1


def test_an_operator_cancelling_a_failed_run_cancels_nothing_twice(
    drive: Callable[..., testing.FlowDriver], any_engine: sa.Engine
) -> None:
    def refuse(ctx: commands.CommandContext) -> None:
        raise errors.CommandRefused("the supplier is closed")

    driver = drive(flows=SIBLING)
    driver.runner.commands["send_purchase_order"] = refuse
    run = create(driver)
    driver.runner.cancel(run.id, operator="olga")
    driver.run_until_idle()
    assert driver.runs(1)[0].status == "cancelled"
    assert len(rows(any_engine)) == 1


def test_a_failing_cancel_is_logged_never_retried_and_changes_nothing(
    any_engine: sa.Engine,
) -> None:
    meta.create_all(any_engine)
    failing = Closer(fail=True)
    driver = mount(
        any_engine,
        "purchase_orders",
        flows=WAITS.format(extra=", duration: 1 day"),
        commands={"close_approval_requests": failing},
    )
    run = create(driver)
    driver.advance("1 day")
    driver.advance("1 week")
    assert len(failing.calls) == 1
    assert rows(any_engine) == []  # its own writes rolled back with it
    [run] = driver.runs(1)
    assert run.status == "done" and stored(driver, 1)["priority"] == "high"
    [line] = [line for line in driver.history(run.id) if line.what == "cancel_failed"]
    assert "the approvals service is down" in str(line.detail)


@pytest.mark.parametrize("how", ["operator", "gives up"])
def test_a_crash_after_the_cancel_command_runs_it_exactly_once(
    drive: Callable[..., testing.FlowDriver], closer: Closer, any_engine: sa.Engine, how: str
) -> None:
    driver = drive(", duration: 1 day")
    lease = timedelta(seconds=1)

    def crash(point: str) -> None:
        if point == "after-command:close_approval_requests":
            raise worker.Crash(point)

    run = create(driver)
    driver.worker = worker.Worker(driver.runner, lease_ttl=lease, crash_at=crash)
    with pytest.raises(worker.Crash):
        if how == "operator":
            driver.runner.cancel(run.id, operator="olga")
            driver.run_until_idle()
        else:
            driver.advance("1 day")
    assert len(closer.calls) == 1 and rows(any_engine) == []  # it ran; nothing committed
    driver.worker = worker.Worker(driver.runner, lease_ttl=lease)  # another worker
    driver.advance(lease + timedelta(seconds=1))
    driver.advance("1 week")
    assert len(closer.calls) == 2  # at least once outside, under one key
    assert len({c.idempotency_key for c in closer.calls}) == 1
    assert len(rows(any_engine)) == 1  # exactly once in the database
    [run] = driver.runs(1)
    assert run.status == ("cancelled" if how == "operator" else "done")
    assert whats(driver, run.id).count("Approval: cancel_done") == 1


def test_the_sample_apps_cancel_withdraws_the_open_requests(any_engine: sa.Engine) -> None:
    flows = WAITS.format(extra=", mode: all, duration: 2 days")
    driver = mount(any_engine, "purchase_orders", flows=flows)
    create(driver)
    driver.emit("po.decided", {"order": 1, "approver": "ann", "decision": "approved"})
    driver.advance("2 days")
    table = PO.approval_request
    with any_engine.connect() as conn:
        found = conn.execute(
            sa.select(table.c.approver, table.c.withdrawn_at.is_not(None)).order_by(table.c.id)
        ).all()
    # Only the event was emitted here (the app would also record ann's decision on her
    # request): both requests were still open, and both are withdrawn.
    assert [(who, bool(done)) for who, done in found] == [("ann", True), ("bob", True)]
