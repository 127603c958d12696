"""The Operations room on a tenant binding: a tenant sees, counts and steers only its own
runs, journal and notices, and must always be named. On SQLite and PostgreSQL."""

from __future__ import annotations

import desk
import pytest
import sqlalchemy as sa
from running import T0

from flowrunner import OperatorError, testing
from flowrunner.store import dialects
from flowrunner.store import operations as ops


def mount(engine: sa.Engine) -> testing.FlowDriver:
    """Both tenants have a flow named Triage that waits for a reply; globex's runs first."""
    runner = desk.runner(engine)
    with engine.begin() as conn:
        for tenant in ("globex", "acme"):
            flow = runner.save_flow(
                conn, {"name": "Triage", "start": "created", "tenant_id": tenant}
            )
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 1,
                    "kind": "waitFor",
                    "event": "desk.replied",
                    "tenant_id": tenant,
                },
            )
    driver = testing.FlowDriver(runner, start=T0)
    for n, tenant in ((1, "globex"), (2, "acme"), (3, "globex"), (4, "acme")):
        driver.create({"id": n, "tenant_id": tenant, "status": "new"})
    return driver


def test_a_tenant_lists_counts_and_reads_only_its_own_runs(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    runner = driver.runner
    acme = runner.list_runs(tenant="acme")
    assert [(run.record_id, run.tenant) for run in acme] == [("4", "acme"), ("2", "acme")]
    assert [run.record_id for run in runner.list_runs(tenant="globex", flow="triage")] == [
        "3",
        "1",
    ]
    assert runner.list_runs(tenant="acme", record=1).rows == ()
    assert runner.count_runs(tenant="acme")["waiting"] == 2
    assert runner.count_runs(tenant="initech") == {
        "running": 0,
        "waiting": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
        "stuck": 0,
    }
    globex_run = runner.list_runs(tenant="globex").rows[0].id
    with pytest.raises(OperatorError) as other:
        runner.get_run(globex_run, tenant="acme")
    assert (other.value.status_code, other.value.code) == (404, "run_unknown")
    assert runner.get_run(globex_run, tenant="globex").tenant == "globex"


def test_without_a_tenant_nothing_is_listed_or_done(any_engine: sa.Engine) -> None:
    runner = mount(any_engine).runner
    asks = (
        lambda: runner.list_runs(),
        lambda: runner.count_runs(),
        lambda: runner.get_run(1),
        lambda: runner.journal(),
        lambda: runner.outbox(),
        lambda: runner.act("cancel", [1], operator="olga"),
    )
    for ask in asks:
        with pytest.raises(OperatorError, match="belong to tenants: name the tenant"):
            ask()


def test_a_tenant_acts_only_on_its_own_runs_and_journals_only_for_itself(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine)
    runner = driver.runner
    acme = [run.id for run in runner.list_runs(tenant="acme")]
    globex = [run.id for run in runner.list_runs(tenant="globex")]
    outcomes = runner.act("cancel", [*acme, *globex], operator="ann", tenant="acme")
    assert [(o.run_id, o.done, o.code) for o in outcomes] == [
        *((run_id, True, None) for run_id in acme),
        *((run_id, False, "run_unknown") for run_id in globex),
    ]
    assert {run.status for run in runner.list_runs(tenant="globex")} == {"waiting"}
    assert {run.status for run in runner.list_runs(tenant="acme")} == {"cancelled"}
    assert [e.run_id for e in runner.journal(tenant="acme")] == acme[::-1]
    assert runner.journal(tenant="globex").rows == ()


def test_the_outbox_is_each_tenants_own(any_engine: sa.Engine) -> None:
    driver = mount(any_engine)
    runner = driver.runner
    # The desk tells nobody; notices as a notify step writes them, one per tenant.
    with dialects.begin(runner.engine) as conn:
        for run in (*runner.list_runs(tenant="acme"), *runner.list_runs(tenant="globex")):
            ops.insert_notice(
                conn,
                tenant=run.tenant,
                run_id=run.id,
                step_id="1",
                pass_=1,
                audience="requester",
                recipient=f"someone at {run.tenant}",
                title=None,
                message="Seen.",
                at=T0,
            )
    assert {n.recipient for n in runner.outbox(tenant="acme")} == {"someone at acme"}
    assert len(runner.outbox("pending", tenant="globex")) == 2
    assert runner.outbox("delivered", tenant="globex").rows == ()
