"""What the worker does when things go wrong: a database hiccup, a row that broke after
the run started, an engine error — and how runs follow writes and the outbox is read."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from running import T0, app, mount

from flowrunner import FlowBinding, flow_runner
from flowrunner.engine import worker
from flowrunner.store import engine_tables

UNTIL_AND_SET = """
- name: Wait for due
  start: created
  steps:
    - {position: 1, kind: until, title: Due, field: due_at}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: due now}
- name: Move due date
  start: manual
  steps:
    - {position: 1, kind: set, title: Due soon, field: due_at, value: "now() + 1 hour"}
"""


def ticket(n: int, **extra: object) -> dict[str, object]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "due_at": None, **extra}


def test_a_set_step_wakes_the_records_other_runs(any_engine: sa.Engine) -> None:
    module = app("tickets")
    binding = FlowBinding(
        **{**module.binding.model_dump(), "set_columns": ["priority", "status", "due_at"]}
    )
    driver = mount(any_engine, "tickets", flows=UNTIL_AND_SET, binding=binding)
    driver.create(ticket(1))
    [waiting] = driver.runs(1)
    assert waiting.status == "waiting" and driver.next_due() is None
    driver.runner.start("Move due date", 1, operator="olga")
    driver.run_until_idle()
    driver.advance("1 hour")
    assert [n.title for n in driver.notices()] == ["T1: due now"]


def test_a_database_hiccup_leaves_the_run_to_be_tried_again(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    hits = {"n": 0}

    def hiccup(point: str) -> None:
        if point == "before-save" and hits["n"] == 0:
            hits["n"] += 1
            raise sa.exc.OperationalError("UPDATE ...", {}, Exception("deadlock detected"))

    driver.worker = worker.Worker(driver.runner, lease_ttl=timedelta(minutes=1), crash_at=hiccup)
    driver.create(ticket(1, due_at=T0 + timedelta(hours=8)))
    [run] = driver.runs(1)
    assert run.status == "running" and driver.worker.stats.errors == 1
    driver.advance("2 minutes")  # the lease ran out: tried again
    [run] = driver.runs(1)
    assert run.status == "waiting"


def test_a_row_that_broke_after_the_run_started_stops_it_until_an_operator_retries(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders")
    module = app("purchase_orders")
    driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 50000})
    [run] = driver.runs(1)
    assert run.status == "waiting"
    # A new release of the application drops the approval kind while the run waits.
    smaller = FlowBinding(
        **{**module.binding.model_dump(), "kinds": {"send": module.binding.kinds["send"]}}
    )
    shrunk = flow_runner(smaller, any_engine, commands=module.COMMANDS, clock=lambda: driver.now)
    driver.advance("1 day", run=False)
    worker.Worker(shrunk).run_due()
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.reason is not None
    assert "Manager approval" in run.reason and "approval" in run.reason
    reminders = module.approval_reminder
    with any_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(reminders)).scalar() == 0
    # The release is rolled back; an operator retries and the run goes on where it was.
    driver.runner.retry(run.id, operator="olga")
    driver.run_until_idle()
    [run] = driver.runs(1)
    assert run.status == "waiting"
    with any_engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(reminders)).scalar() == 2


def test_an_engine_error_fails_the_run_with_a_clean_envelope_and_retry_resumes(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets")
    broken = {"on": True}

    def bug(point: str) -> None:
        if point == "before-save" and broken["on"]:
            raise KeyError("secret token sk_live_4eC39HqLyjWDarjtT1zdp7dc\nsecond line")

    driver.worker = worker.Worker(driver.runner, crash_at=bug)
    driver.create(ticket(1, due_at=T0 + timedelta(hours=8)))
    [run] = driver.runs(1)
    assert run.status == "failed"
    assert run.error is not None
    assert "\n" not in str(run.error["message"])
    assert "sk_live_4eC39HqLyjWDarjtT1zdp7dc" not in str(run.error)
    broken["on"] = False
    driver.runner.retry(run.id, operator="olga")
    driver.run_until_idle()
    assert driver.runs(1)[0].status == "waiting"


def test_the_outbox_is_read_and_marked_delivered(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets")
    driver.create(ticket(1, assignee="bob", due_at=T0 + timedelta(hours=8)))
    driver.advance("4 hours")
    [notice] = driver.runner.notices(undelivered=True)
    assert notice.recipient == "bob"
    assert driver.runner.mark_delivered(notice.id) is True
    assert driver.runner.mark_delivered(notice.id) is False
    assert driver.runner.notices(undelivered=True) == []


def test_a_snapshot_changed_on_its_run_row_fails_that_run_alone(any_engine: sa.Engine) -> None:
    # Two tickets wait for their due time; the worker has read their snapshot already.
    driver = mount(any_engine, "tickets", flows=UNTIL_AND_SET.split("- name: Move")[0])
    for n in (1, 2):
        driver.create(ticket(n, due_at=T0 + timedelta(hours=1)))
    [first], [second] = driver.runs(1), driver.runs(2)
    assert first.status == second.status == "waiting"
    # Someone edits the second run's copy of the flow on its row, keeping its digest.
    edited = dict(second.snapshot)
    steps: list[dict[str, object]] = second.snapshot["steps"]  # type: ignore[assignment]
    edited["steps"] = [{**step, "title": "Edited"} for step in steps]
    runs = engine_tables.runs
    with any_engine.begin() as conn:
        conn.execute(sa.update(runs).where(runs.c.id == second.id).values(snapshot=edited))
    driver.advance("1 hour")
    [first], [second] = driver.runs(1), driver.runs(2)
    assert first.status == "done"
    assert second.status == "failed"
    assert second.error is not None
    assert "does not match its digest" in str(second.error["message"])
