"""Jobs on a shared support desk whose tickets each belong to a tenant: a nightly job in
``realm="tenant"`` runs once per active tenant per slot, in that tenant's scope, and a
tenant that appears later joins from the next slot; an event's job acts on the record
its plan names as its target. On SQLite and PostgreSQL, through the test driver's clock."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import desk
import pytest
import sqlalchemy as sa

from flowrunner import Job, Jobs, Plan, errors, flow_runner, testing
from flowrunner.engine import commands
from flowrunner.store import migrate
from flowrunner.store import operations as ops

START = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)


def ticket(n: int, tenant: str) -> dict[str, Any]:
    return {"id": n, "tenant_id": tenant, "status": "new", "priority": "low"}


class Seen:
    """A command that notes the tenant, slot and record of each run."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []
        self.keys: list[str] = []
        self.records: list[tuple[object, object]] = []

    def __call__(self, ctx: commands.CommandContext) -> Mapping[str, Any]:
        slot = ctx.inputs.get("slot")
        shown = f"{datetime.fromisoformat(str(slot)):%H:%M}" if slot else "-"
        self.ran.append((str(ctx.tenant), shown))
        self.keys.append(ctx.idempotency_key)
        self.records.append((ctx.record.get("id"), ctx.record.get("tenant_id")))
        if ctx.record:
            ctx.conn.execute(
                sa.update(desk.ticket)
                .where(
                    desk.ticket.c.id == ctx.record["id"],
                    desk.ticket.c.tenant_id == ctx.record["tenant_id"],
                )
                .values(priority="chased")
            )
        return {}


def desk_driver(engine: sa.Engine, jobs: Mapping[str, Job], **options: Any) -> testing.FlowDriver:
    desk.metadata.create_all(engine)
    migrate.upgrade(engine)
    seen = options.pop("seen")
    runner = flow_runner(desk.BINDING, engine, commands={"tidy": seen})
    Jobs(runner, jobs, **options)
    return testing.FlowDriver(runner, start=START)


def mounted(driver: testing.FlowDriver) -> Jobs:
    jobs = driver.runner.jobs
    assert isinstance(jobs, Jobs)
    return jobs


def test_a_tenant_job_runs_once_per_active_tenant_per_slot(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(every="@hourly", command="tidy", run_as="clock", realm="tenant")
    driver = desk_driver(any_engine, {"tidy": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    driver.create(ticket(2, "globex"))
    driver.create(ticket(3, "acme"))
    driver.advance("2 hours")  # 09:00 and 10:00
    assert sorted(seen.ran) == [
        ("acme", "09:00"),
        ("acme", "10:00"),
        ("globex", "09:00"),
        ("globex", "10:00"),
    ]
    assert "job:tidy:2026-03-02T09:00:00+00:00:tenant:acme" in seen.keys

    driver.create(ticket(4, "initech"))  # a new tenant joins from the next slot
    driver.advance("1 hour")
    assert sorted(t for t, slot in seen.ran if slot == "11:00") == ["acme", "globex", "initech"]
    assert [key for key, times in Counter(seen.keys).items() if times > 1] == []

    # The job's own run is its roll-call, in no tenant's scope: it started each tenant's.
    roll_call = mounted(driver).scheduled_run("tidy")
    assert roll_call is not None and roll_call.tenant is None
    with any_engine.connect() as conn:
        lines = ops.run_history(conn, roll_call.id)
    started = [line.detail for line in lines if line.what == "job_tenants"]
    assert [detail["tenants"] for detail in started if isinstance(detail, dict)] == [
        ["acme", "globex"],
        ["initech"],
    ]
    acme = mounted(driver).scheduled_run("tidy", "acme")
    assert acme is not None and acme.tenant == "acme"
    assert [line.sentence for line in driver.history(acme.id, tenant="acme")] == [
        "Scheduled every hour, on the hour (UTC); first slot Mon 2 Mar 09:00",
        "Ran tidy for the slot Mon 2 Mar 09:00",
        "Ran tidy for the slot Mon 2 Mar 10:00",
        "Ran tidy for the slot Mon 2 Mar 11:00",
    ]


def test_the_active_tenants_may_be_the_applications_answer(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(every="@hourly", command="tidy", run_as="clock", realm="tenant")
    driver = desk_driver(any_engine, {"tidy": job}, seen=seen, tenants=lambda conn: ["umbrella"])
    driver.create(ticket(1, "acme"))
    driver.advance("1 hour")
    assert seen.ran == [("umbrella", "09:00")]


def test_a_paused_tenant_job_runs_for_no_tenant_until_resumed(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(every="@hourly", command="tidy", run_as="clock", realm="tenant", catch_up="none")
    driver = desk_driver(any_engine, {"tidy": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    driver.create(ticket(2, "globex"))
    driver.advance("1 hour")
    assert len(seen.ran) == 2
    mounted(driver).pause("tidy", operator="olga")
    driver.advance("2 hours")
    assert len(seen.ran) == 2
    mounted(driver).resume("tidy", operator="olga")
    driver.advance("1 hour")  # 10:00 and 11:00 were missed while paused: none runs
    assert sorted(seen.ran[2:]) == [("acme", "12:00"), ("globex", "12:00")]


def test_a_tenant_job_backfills_each_tenants_slots(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(every="@hourly", command="tidy", run_as="clock", realm="tenant")
    driver = desk_driver(any_engine, {"tidy": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    driver.create(ticket(2, "globex"))
    driver.advance("1 hour")
    done = mounted(driver).backfill(
        "tidy",
        start=datetime(2026, 3, 2, 7, tzinfo=UTC),
        end=datetime(2026, 3, 2, 9, tzinfo=UTC),
        operator="olga",
        tenant="acme",
    )
    assert len(done.started) == 2  # acme's 07:00 and 08:00; its 09:00 ran already
    driver.run_until_idle()
    assert sorted(seen.ran) == [
        ("acme", "07:00"),
        ("acme", "08:00"),
        ("acme", "09:00"),
        ("globex", "09:00"),
    ]


# -- an event's job on another record ------------------------------------------------------


def chase(event: Any) -> Plan:
    """A reply on a ticket chases the ticket it names as its parent."""
    return Plan(key=event.id, target=event.payload["parent"])


def test_a_plan_acts_on_the_record_it_names_as_its_target(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(on="desk.replied", schedule=chase, command="tidy", run_as="clock")
    driver = desk_driver(any_engine, {"chase": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    driver.create(ticket(2, "acme"))
    driver.emit("desk.replied", {"ticket": 1, "tenant_id": "acme", "parent": 2})
    assert seen.records == [(2, "acme")]
    assert (driver.record(2, tenant="acme") or {}).get("priority") == "chased"
    assert (driver.record(1, tenant="acme") or {}).get("priority") == "low"
    [run] = [run for run in driver.runs(2, tenant="acme") if run.flow_name == "chase"]
    assert (run.record_id, run.tenant, run.status) == ("2", "acme", "done")
    assert [line.sentence for line in driver.history(run.id, tenant="acme")][-1] == "Ran tidy"


def test_a_plan_whose_target_does_not_exist_fails_its_run_with_a_sentence(
    any_engine: sa.Engine,
) -> None:
    seen = Seen()
    job = Job(on="desk.replied", schedule=chase, command="tidy", run_as="clock")
    driver = desk_driver(any_engine, {"chase": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    driver.create(ticket(2, "globex"))  # another tenant's: not acme's to act on
    driver.emit("desk.replied", {"ticket": 1, "tenant_id": "acme", "parent": 2})
    assert seen.records == []
    [run] = [run for run in driver.runs(2, tenant="acme") if run.flow_name == "chase"]
    assert run.status == "failed"
    assert run.reason == (
        "job 'chase': the record 2 the plan names as its target does not exist for tenant acme"
    )


@pytest.mark.parametrize("target", [True, 1.5, "", "a\x00b"])
def test_a_plan_with_a_target_that_is_no_record_key_refuses_the_event(
    sqlite_engine: sa.Engine, target: object
) -> None:
    seen = Seen()
    job = Job(
        on="desk.replied",
        schedule=lambda event: Plan(key=1, target=target),
        command="tidy",
        run_as="clock",
    )
    driver = desk_driver(sqlite_engine, {"chase": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    with pytest.raises(errors.BindingError, match="its plan cannot be kept: a plan's target"):
        driver.emit("desk.replied", {"ticket": 1, "tenant_id": "acme"})


def test_a_tenant_job_is_run_now_for_the_tenant_named(any_engine: sa.Engine) -> None:
    seen = Seen()
    job = Job(every="@daily", command="tidy", run_as="clock", realm="tenant")
    driver = desk_driver(any_engine, {"tidy": job}, seen=seen)
    driver.create(ticket(1, "acme"))
    with pytest.raises(errors.OperatorError, match="runs once per tenant: name the tenant"):
        mounted(driver).run_now("tidy", operator="olga")
    ran = mounted(driver).run_now("tidy", operator="olga", tenant="acme")
    assert ran.ok and seen.ran == [("acme", "-")]
    entry = driver.runner.journal(tenant="acme").rows[0]
    assert (entry.operator, entry.action, entry.tenant) == ("olga", "job_run", "acme")
