"""Flows that start on a schedule: at each slot, one run for every record the condition
holds for — once per (flow, slot, record), however many workers serve; a slot missed
while no worker served is skipped for the latest one; each tenant's records with that
tenant's flows. On SQLite and PostgreSQL, on the test driver's clock."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import desk
import pytest
import sqlalchemy as sa
from running import count, mount, stored, ticket
from sizes import sized

from flowrunner import RowInvalid, testing
from flowrunner.engine import worker
from flowrunner.flows import scheduled
from flowrunner.store import engine_tables

# Monday mornings at six in Berlin (05:00 UTC in March, before the clocks go forward).
MONDAY_CHASE = """
- name: Monday chase
  start: schedule
  schedule: 0 6 * * mon Europe/Berlin
  condition: status = open
  steps:
    - {position: 1, kind: set, title: Chase, field: priority, value: high}
"""
NEXT_MONDAY = datetime(2026, 3, 9, 5, 0, tzinfo=UTC)  # T0 is Monday 2 March, 09:00 UTC
WEEK = timedelta(days=7)


def _tickets(driver: testing.FlowDriver, statuses: dict[int, str]) -> None:
    for n, status in statuses.items():
        driver.create({**ticket(n), "status": status})


def _flow_runs(driver: testing.FlowDriver, record_id: int) -> list[Any]:
    return [run for run in driver.runs(record_id) if run.flow_name == "Monday chase"]


def _schedule_run(driver: testing.FlowDriver) -> Any:
    table = engine_tables.runs
    with driver.runner.engine.connect() as conn:
        return conn.execute(
            sa.select(table).where(table.c.flow_id.like(f"{scheduled.PROGRAM}:%"))
        ).one()


def test_each_matching_record_starts_once_at_each_slot(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    _tickets(driver, {1: "open", 2: "closed", 3: "open"})
    driver.advance_to(NEXT_MONDAY - timedelta(minutes=1))
    assert [_flow_runs(driver, n) for n in (1, 2, 3)] == [[], [], []]  # not before six

    driver.advance_to(NEXT_MONDAY + timedelta(minutes=1))
    assert [len(_flow_runs(driver, n)) for n in (1, 2, 3)] == [1, 0, 1]
    run = _flow_runs(driver, 1)[0]
    assert run.status == "done"
    assert stored(driver, 1)["priority"] == "high"
    assert stored(driver, 2)["priority"] == "normal"  # closed: not chased
    said = [line.sentence for line in driver.history(run.id)]
    assert said[0] == "Started by the Monday 06:00 schedule"

    driver.advance_to(NEXT_MONDAY + timedelta(hours=12))  # nothing more that Monday
    assert [len(_flow_runs(driver, n)) for n in (1, 2, 3)] == [1, 0, 1]
    driver.update(2, status="open")
    driver.advance_to(NEXT_MONDAY + WEEK + timedelta(minutes=1))
    assert [len(_flow_runs(driver, n)) for n in (1, 2, 3)] == [2, 1, 2]
    schedule_run = _schedule_run(driver)
    assert [line.sentence for line in driver.history(schedule_run.id)][-2:] == [
        "Started 2 runs for the Monday 06:00 slot (Mon 9 Mar 06:00)",
        "Started 3 runs for the Monday 06:00 slot (Mon 16 Mar 06:00)",
    ]


def test_a_slot_over_many_records_starts_a_page_at_a_time(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduled, "BATCH", 7)
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    total = sized(40, 400)
    _tickets(driver, {n: "open" if n % 3 else "closed" for n in range(1, total + 1)})
    driver.advance_to(NEXT_MONDAY + timedelta(minutes=1))
    runs = engine_tables.runs
    with any_engine.connect() as conn:
        started = Counter(
            conn.execute(
                sa.select(runs.c.record_id).where(runs.c.start_key.like("schedule:%"))
            ).scalars()
        )
    matching = {str(n) for n in range(1, total + 1) if n % 3}
    assert set(started) == matching
    assert set(started.values()) == {1}
    # Each page its own step of the schedule's run: saved, and due again at once.
    history = driver.history(_schedule_run(driver).id)
    assert history[-1].sentence == (
        f"Started {len(matching):,} runs for the Monday 06:00 slot (Mon 9 Mar 06:00)"
    )


def test_two_workers_racing_the_same_slot_start_each_record_once(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduled, "BATCH", 3)
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    _tickets(driver, {n: "open" for n in range(1, 21)})
    driver.run_until_idle()
    driver.advance_to(NEXT_MONDAY + timedelta(seconds=30), run=False)
    a, b = worker.Worker(driver.runner), worker.Worker(driver.runner)
    for _ in range(200):  # they take turns at whatever is due, a run at a time
        if a.run_due(limit=1) + b.run_due(limit=1) == 0:
            break
    assert a.stats.claimed > 0 and b.stats.claimed > 0
    runs = engine_tables.runs
    with any_engine.connect() as conn:
        keys = list(
            conn.execute(
                sa.select(runs.c.start_key).where(runs.c.start_key.like("schedule:%"))
            ).scalars()
        )
    assert len(keys) == len(set(keys)) == 20
    # A worker that takes the schedule's run on as its lease ran out starts nobody again.
    again = worker.Worker(driver.runner)
    again.run_due()
    assert count(any_engine, runs, flow_name="Monday chase") == 20 + 1  # and the schedule's


def test_a_slot_missed_while_no_worker_served_is_skipped_for_the_latest(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    _tickets(driver, {1: "open"})
    driver.run_until_idle()
    # The workers stop for three Mondays; they come back on the Wednesday after.
    driver.advance_to(NEXT_MONDAY + 2 * WEEK + timedelta(days=2), run=False)
    driver.run_until_idle()
    assert len(_flow_runs(driver, 1)) == 1  # the latest Monday's only
    said = [line.sentence for line in driver.history(_schedule_run(driver).id)]
    assert said[-1] == (
        "Started 1 run for the Monday 06:00 slot (Mon 23 Mar 06:00); the slots missed "
        "from Mon 9 Mar 06:00 were skipped"
    )
    driver.advance_to(NEXT_MONDAY + 3 * WEEK + timedelta(minutes=1))  # then on as before
    assert len(_flow_runs(driver, 1)) == 2


def test_a_flow_saved_through_the_runner_runs_at_its_next_slot(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows="[]")
    _tickets(driver, {1: "open", 2: "open"})
    driver.run_until_idle()
    with any_engine.begin() as conn:
        driver.runner.save_flow(
            conn,
            {
                "name": "Monday chase",
                "start": "Schedule",
                "schedule": "0 6 * * mon Europe/Berlin",
                "condition": "id = 2",
            },
        )
    driver.advance_to(NEXT_MONDAY + timedelta(minutes=1))
    assert [len(_flow_runs(driver, n)) for n in (1, 2)] == [0, 1]


def test_an_inactive_flow_starts_nothing_until_made_active_again(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    _tickets(driver, {1: "open"})
    driver.run_until_idle()
    flows = driver.runner.tables.flows
    with any_engine.connect() as conn:
        flow_id = conn.execute(sa.select(flows.c.id)).scalar_one()
    with any_engine.begin() as conn:
        driver.runner.save_flow(
            conn,
            {
                "id": flow_id,
                "name": "Monday chase",
                "start": "schedule",
                "active": False,
                "schedule": "0 6 * * mon Europe/Berlin",
                "condition": "status = open",
            },
        )
    driver.advance_to(NEXT_MONDAY + timedelta(hours=1))
    assert _flow_runs(driver, 1) == []
    with any_engine.begin() as conn:
        driver.runner.save_flow(
            conn,
            {
                "id": flow_id,
                "name": "Monday chase",
                "start": "schedule",
                "active": True,
                "schedule": "0 7 * * mon Europe/Berlin",
                "condition": "status = open",
            },
        )
    driver.advance_to(NEXT_MONDAY + WEEK + timedelta(hours=1, minutes=1))
    runs = _flow_runs(driver, 1)
    assert len(runs) == 1
    assert driver.history(runs[0].id)[0].sentence == "Started by the Monday 07:00 schedule"


def test_a_new_schedule_counts_its_slots_from_when_it_is_saved(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=MONDAY_CHASE)
    _tickets(driver, {1: "open"})
    driver.advance_to(NEXT_MONDAY + timedelta(days=1, hours=4))  # Tuesday 09:00 UTC
    assert len(_flow_runs(driver, 1)) == 1
    flows = driver.runner.tables.flows
    with any_engine.begin() as conn:
        flow_id = conn.execute(sa.select(flows.c.id)).scalar_one()
        driver.runner.save_flow(
            conn,
            {
                "id": flow_id,
                "name": "Monday chase",
                "start": "schedule",
                "schedule": "0 8 * * tue UTC",  # this Tuesday's 08:00 passed before the save
                "condition": "status = open",
            },
        )
    driver.advance_to(NEXT_MONDAY + WEEK)
    assert len(_flow_runs(driver, 1)) == 1
    driver.advance_to(NEXT_MONDAY + WEEK + timedelta(days=1, hours=3, minutes=1))
    runs = _flow_runs(driver, 1)
    assert len(runs) == 2
    assert driver.history(runs[0].id)[0].sentence == "Started by the Tuesday 08:00 schedule"


def test_each_tenants_records_start_with_that_tenants_flows(any_engine: sa.Engine) -> None:
    runner = desk.runner(any_engine)
    driver = testing.FlowDriver(runner, start=datetime(2026, 3, 2, 0, 0, tzinfo=UTC))
    with any_engine.begin() as conn:
        for tenant, hour in (("acme", 6), ("globex", 8)):
            flow = runner.save_flow(
                conn,
                {
                    "name": "Morning",
                    "start": "schedule",
                    "schedule": f"0 {hour} * * * UTC",
                    "condition": "status = new",
                    "tenant_id": tenant,
                },
            )
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": 1,
                    "kind": "set",
                    "field": "priority",
                    "value": f"'{tenant} morning'",
                    "tenant_id": tenant,
                },
            )
    for n, tenant in ((1, "acme"), (2, "globex"), (3, "acme")):
        driver.create({"id": n, "tenant_id": tenant, "status": "new", "priority": "low"})
    driver.advance_to(datetime(2026, 3, 2, 7, 0, tzinfo=UTC))
    assert [stored(driver, n, tenant=t)["priority"] for n, t in ((1, "acme"), (2, "globex"))] == [
        "acme morning",
        "low",
    ]
    driver.advance_to(datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    assert stored(driver, 2, tenant="globex")["priority"] == "globex morning"
    assert stored(driver, 3, tenant="acme")["priority"] == "acme morning"
    assert [len(driver.runs(n, tenant=t)) for n, t in ((1, "acme"), (2, "globex"))] == [1, 1]


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        (
            {"start": "schedule"},
            "schedule",
            "a flow that starts on a schedule needs one: five cron fields such as "
            "'0 6 * * mon', then a time zone such as 'Europe/Berlin' (UTC without one)",
        ),
        (
            {"start": "schedule", "schedule": "0 25 * * mon Europe/Berlin"},
            "schedule",
            "the schedule '0 25 * * mon' cannot be read: Bad hour",
        ),
        (
            {"start": "schedule", "schedule": "0 6 * * mon Berlin"},
            "schedule",
            "there is no time zone 'Berlin': name one such as 'America/New_York' or 'UTC'",
        ),
        (
            {"start": "created", "schedule": "@daily"},
            "schedule",
            "only a flow that starts on 'schedule' has a schedule",
        ),
    ],
)
def test_a_schedule_that_cannot_be_kept_is_refused_with_a_sentence(
    any_engine: sa.Engine, row: dict[str, Any], field: str, message: str
) -> None:
    driver = mount(any_engine, "tickets", flows="[]")
    with pytest.raises(RowInvalid) as raised, any_engine.begin() as conn:
        driver.runner.save_flow(conn, {"name": "Mornings", **row})
    assert [(e.field, e.message) for e in raised.value.errors] == [(field, message)]


def test_a_flows_table_from_before_schedules_mounts_and_refuses_one(
    any_engine: sa.Engine,
) -> None:
    desk.metadata.create_all(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE desk_flow DROP COLUMN schedule"))
    runner = desk.runner(any_engine)  # no schedule column: it mounts all the same
    with any_engine.begin() as conn:
        runner.save_flow(conn, {"name": "New", "start": "created", "tenant_id": "acme"})
    with pytest.raises(RowInvalid) as raised, any_engine.begin() as conn:
        runner.save_flow(
            conn,
            {"name": "Mornings", "start": "schedule", "schedule": "@daily", "tenant_id": "acme"},
        )
    assert [(e.field, e.message) for e in raised.value.errors] == [
        (
            "schedule",
            "the table 'desk_flow' has no column 'schedule': add it (a nullable column, as "
            "flowrunner.tables declares it) to use it",
        )
    ]
    testing.FlowDriver(runner).run_until_idle()  # the workers' look finds nothing to do


# -- the guide's example (docs/flows.md) ---------------------------------------------------

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "flows.md"
GUIDE_TEXT = GUIDE.read_text(encoding="utf-8")
PROSE = " ".join(re.sub(r"```.*?```", "", GUIDE_TEXT, flags=re.S).split())


def test_the_guides_scheduled_flow_runs_as_it_says(any_engine: sa.Engine) -> None:
    [example] = [
        block
        for block in re.findall(r"```yaml\n(.*?)```", GUIDE_TEXT, re.S)
        if " schedule:" in block
    ]
    driver = mount(any_engine, "tickets", flows=example)
    _tickets(driver, {1: "open", 2: "closed"})
    driver.run_until_idle()
    driver.advance_to(NEXT_MONDAY + 2 * WEEK + timedelta(hours=1), run=False)  # an outage
    driver.run_until_idle()
    [run] = _flow_runs(driver, 1)
    first = driver.history(run.id)[0].sentence
    assert _flow_runs(driver, 2) == []
    assert f"`{first}`" in PROSE
    slot = [line.sentence for line in driver.history(_schedule_run(driver).id)][-1]
    assert slot == (
        "Started 1 run for the Monday 06:00 slot (Mon 23 Mar 06:00); the slots missed from "
        "Mon 9 Mar 06:00 were skipped"
    )
    assert slot.replace("Started 1 run", "Started 12 runs") in PROSE
    assert "`there is no time zone 'Berlin': name one such as 'America/New_York' or 'UTC'`" in PROSE
