"""A failed run can be started again: an operator restarts it as a new run of the same
flow on the same record, with the flow's rows as they are now. The old run stays failed
and points at the new one. On SQLite and PostgreSQL, through the real worker."""

from __future__ import annotations

from typing import Any

import desk
import pytest
import sqlalchemy as sa
from running import T0, mount, stored

from flowrunner import OperatorError, errors, testing
from flowrunner.engine import commands
from flowrunner.store import dialects
from flowrunner.store import operations as ops

SENDING = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
- name: Send again when urgent
  start: updated
  changes: priority
  condition: priority = high
  steps:
    - {position: 1, kind: send, title: Send to supplier}
- name: Resend
  start: manual
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""


class Supplier:
    """The supplier's system: it refuses orders while the account is closed."""

    def __init__(self) -> None:
        self.open = False
        self.sent: list[int] = []

    def send(self, ctx: commands.CommandContext) -> None:
        if not self.open:
            raise errors.CommandRefused("the supplier account is closed")
        self.sent.append(int(str(ctx.record["id"])))


def purchasing(engine: sa.Engine) -> tuple[testing.FlowDriver, Supplier]:
    supplier = Supplier()
    driver = mount(
        engine, "purchase_orders", flows=SENDING, commands={"send_purchase_order": supplier.send}
    )
    return driver, supplier


def order(n: int) -> dict[str, Any]:
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 900}


def failed_order(engine: sa.Engine) -> tuple[testing.FlowDriver, Supplier, ops.RunRow]:
    """Order 1 created while the supplier's account is closed, and its run, which failed."""
    driver, supplier = purchasing(engine)
    driver.create(order(1))
    [failed] = driver.runs(1)
    return driver, supplier, failed


def journal(engine: sa.Engine) -> list[tuple[str, str, int | None, Any]]:
    with engine.connect() as conn:
        return [(e.operator, e.action, e.run_id, e.detail) for e in ops.journal_entries(conn)]


def test_a_failed_run_restarted_finishes_as_a_new_run_and_the_old_one_points_at_it(
    any_engine: sa.Engine,
) -> None:
    driver, supplier, failed = failed_order(any_engine)
    assert failed.status == "failed" and "account is closed" in str(failed.reason)

    supplier.open = True  # the purchasing department reopens the account
    new = driver.runner.restart(failed.id, operator="olga", reason="account reopened")
    driver.run_until_idle()

    old, restarted = sorted(driver.runs(1), key=lambda r: r.id)
    assert restarted.id == new and supplier.sent == [1]
    assert (restarted.flow_name, restarted.status) == ("Send", "done")
    assert restarted.start_key == f"restart:{failed.id}" and restarted.started_by == "olga"
    assert old.status == "failed" and old.restarted_as == new
    last = driver.history(old.id)[-1]
    assert (last.what, last.detail) == (
        "restarted",
        {"by": "olga", "restarted_as": new, "reason": "account reopened"},
    )
    assert last.sentence == f"olga restarted the run as run {new}: account reopened"
    assert journal(any_engine) == [
        (
            "olga",
            "restart",
            old.id,
            {"run": old.id, "restarted_as": new, "flow": "Send", "reason": "account reopened"},
        )
    ]


def test_runs_started_by_a_change_and_by_an_operator_restart_the_same_way(
    any_engine: sa.Engine,
) -> None:
    driver, supplier = purchasing(any_engine)
    driver.create(order(1))
    driver.update(1, priority="high")
    driver.runner.start("Resend", 1, operator="olga")
    driver.run_until_idle()
    failed = sorted(driver.runs(1), key=lambda r: r.id)
    assert [(r.flow_name, r.status) for r in failed] == [
        ("Send", "failed"),
        ("Send again when urgent", "failed"),
        ("Resend", "failed"),
    ]
    supplier.open = True
    for run in failed:
        driver.runner.restart(run.id, operator="olga")
    driver.run_until_idle()
    runs = sorted(driver.runs(1), key=lambda r: r.id)
    assert [(r.flow_name, r.status, r.restarted_as) for r in runs] == [
        ("Send", "failed", runs[3].id),
        ("Send again when urgent", "failed", runs[4].id),
        ("Resend", "failed", runs[5].id),
        ("Send", "done", None),
        ("Send again when urgent", "done", None),
        ("Resend", "done", None),
    ]
    assert supplier.sent == [1, 1, 1]


def test_a_restart_takes_the_flows_rows_as_they_are_now(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    steps = driver.runner.tables.steps
    with any_engine.begin() as conn:  # written around validation: the row is broken
        conn.execute(
            sa.update(steps).where(steps.c.title == "Raise priority").values(field="assignee2")
        )
    driver.create({"id": 1, "title": "Printer", "requester_id": "ann", "due_at": T0})
    [failed] = driver.runs(1)
    assert failed.status == "failed"
    with pytest.raises(OperatorError) as refused:
        driver.runner.restart(failed.id, operator="olga")
    assert str(refused.value).startswith(f"run {failed.id} cannot be restarted: ")
    assert "'Raise priority'" in str(refused.value) and "assignee2" in str(refused.value)
    assert driver.runs(1) == [failed]  # nothing was started, nothing journaled
    assert journal(any_engine) == []

    with any_engine.begin() as conn:  # the flow's editor fixes the row
        conn.execute(
            sa.update(steps).where(steps.c.title == "Raise priority").values(field="priority")
        )
    driver.runner.restart(failed.id, operator="olga")
    driver.run_until_idle()
    old, new = sorted(driver.runs(1), key=lambda r: r.id)
    assert (old.status, old.restarted_as) == ("failed", new.id)
    assert (new.flow_name, new.status) == ("SLA warning", "done")
    assert stored(driver, 1)["priority"] == "high"


def test_restarts_that_are_refused_say_why(any_engine: sa.Engine) -> None:
    driver, supplier, failed = failed_order(any_engine)
    runner = driver.runner
    supplier.open = True
    driver.create(order(2))
    [done] = driver.runs(2)

    with pytest.raises(OperatorError, match=f"run {done.id} has not failed \\(done\\)"):
        runner.restart(done.id, operator="olga")
    with pytest.raises(OperatorError, match="there is no run 9999"):
        runner.restart(9999, operator="olga")
    new = runner.restart(failed.id, operator="olga")
    with pytest.raises(OperatorError, match=f"run {failed.id} was already restarted as run {new}"):
        runner.restart(failed.id, operator="olga")
    with pytest.raises(OperatorError, match=f"was restarted as run {new}"):
        runner.retry(failed.id, operator="olga")
    with pytest.raises(OperatorError, match=f"was restarted as run {new}; it stays failed"):
        runner.cancel(failed.id, operator="olga")
    driver.run_until_idle()
    assert [r.status for r in sorted(driver.runs(1), key=lambda r: r.id)] == ["failed", "done"]
    assert [action for _, action, _, _ in journal(any_engine)] == ["restart"]


def test_a_restart_is_refused_when_its_flow_or_record_is_gone(any_engine: sa.Engine) -> None:
    driver, _supplier = purchasing(any_engine)
    runner = driver.runner
    for n in (1, 2, 3):
        driver.create(order(n))
    first, second, third = (driver.runs(n)[0] for n in (1, 2, 3))
    flows = runner.tables.flows
    with any_engine.begin() as conn:
        conn.execute(sa.update(flows).where(flows.c.name == "Send").values(active=False))
    with pytest.raises(
        OperatorError, match=f"run {first.id} cannot be restarted: flow 'Send' is not active"
    ):
        runner.restart(first.id, operator="olga")
    with any_engine.begin() as conn:
        conn.execute(sa.delete(runner.tables.resource).where(runner.tables.resource.c.id == 2))
        conn.execute(sa.update(flows).where(flows.c.name == "Send").values(active=True))
    with pytest.raises(OperatorError, match="purchase_order 2 no longer exists"):
        runner.restart(second.id, operator="olga")
    with any_engine.begin() as conn:
        conn.execute(sa.delete(runner.tables.steps))
        conn.execute(sa.delete(flows))
    with pytest.raises(OperatorError, match="its flow 'Send' was deleted"):
        runner.restart(third.id, operator="olga")
    assert journal(any_engine) == []


def test_a_run_that_changed_since_it_was_read_is_not_marked_restarted(
    any_engine: sa.Engine,
) -> None:
    _driver, _supplier, failed = failed_order(any_engine)
    with dialects.begin(any_engine) as conn:
        assert not ops.mark_restarted(
            conn, failed.id, expected_version=failed.version - 1, restarted_as=99, now=T0
        )
        assert ops.mark_restarted(
            conn, failed.id, expected_version=failed.version, restarted_as=99, now=T0
        )
        assert not ops.mark_restarted(
            conn, failed.id, expected_version=failed.version + 1, restarted_as=98, now=T0
        )


# -- tenants ---------------------------------------------------------------------------


def test_a_tenant_restarts_only_its_own_failed_runs(any_engine: sa.Engine) -> None:
    runner = desk.runner(any_engine)
    with any_engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Triage", "start": "created", "tenant_id": "acme"})
        runner.save_step(
            conn,
            {"flow_id": flow, "position": 1, "kind": "set", "field": "status", "value": "seen"},
            tenant="acme",
        )
    steps = runner.tables.steps
    with any_engine.begin() as conn:  # broken around validation
        conn.execute(sa.update(steps).values(field="nowhere"))
    driver = testing.FlowDriver(runner, start=T0)
    driver.create({"id": 1, "tenant_id": "acme", "status": "new"})
    [failed] = driver.runs(1, tenant="acme")
    assert failed.status == "failed"
    with any_engine.begin() as conn:
        conn.execute(sa.update(steps).values(field="status"))

    with pytest.raises(OperatorError, match=f"there is no run {failed.id}"):
        runner.restart(failed.id, operator="globex-admin", tenant="globex")
    with pytest.raises(OperatorError, match=f"there is no run {failed.id}"):
        runner.restart(failed.id, operator="someone")  # of no tenant
    new = runner.restart(failed.id, operator="acme-admin", tenant="acme")
    driver.run_until_idle()
    restarted = next(r for r in driver.runs(1, tenant="acme") if r.id == new)
    assert (restarted.tenant, restarted.status) == ("acme", "done")
    assert stored(driver, 1, tenant="acme")["status"] == "seen"
