"""A business user edits flows while the application runs: every start uses them as they are.

A runner keeps the flows records start between starts (with a digest of their rows, read
again by each start), so these scenarios hold whoever made the edit — another runner in
another process, a script writing the rows around validation — and whenever: the next
start that can see the edit uses it, and an edit rolled back is never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from running import app, mount, stored
from test_runs_tenants import mount as tenant_desk_of_two
from test_runs_tenants import record as desk_record

from flowrunner import flow_runner, testing
from flowrunner.flows import starts
from flowrunner.store import dialects, engine_tables, flow_rows

TICKETS = app("tickets")
FLOWS = TICKETS.ticket_flow
STEPS = TICKETS.ticket_flow_step

TRIAGE = """
- name: Triage
  start: created
  condition: status = open
  steps:
    - {position: 1, kind: set, title: Mark, field: priority, value: high}
- name: Follow up
  start: updated
  changes: status
  condition: status = waiting
  steps:
    - {position: 1, kind: set, title: Chase, field: priority, value: high}
"""


def ticket(n: int, **extra: Any) -> dict[str, Any]:
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "status": "open", **extra}


def flows_of(driver: testing.FlowDriver, n: int, run_ids: list[int]) -> list[str]:
    """The names of the flows of these runs of ticket ``n``, in the order they started."""
    runs = sorted((run for run in driver.runs(n) if run.id in run_ids), key=lambda run: run.id)
    return [run.flow_name for run in runs]


def started(driver: testing.FlowDriver, n: int, **extra: Any) -> list[str]:
    """Create ticket ``n`` and name the flows it started."""
    return flows_of(driver, n, driver.create(ticket(n, **extra), run=False))


def triage_id(engine: sa.Engine) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.select(FLOWS.c.id).where(FLOWS.c.name == "Triage")).scalar_one()


def test_a_condition_edited_by_another_process_is_used_by_the_next_start(
    any_engine: sa.Engine,
) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    assert started(desk, 1) == ["Triage"]
    # The flow editor's own runner (another process of the application) narrows it.
    editor = flow_runner(TICKETS.binding, any_engine, commands=TICKETS.COMMANDS)
    with any_engine.begin() as conn:
        editor.save_flow(
            conn,
            {
                "id": triage_id(any_engine),
                "name": "Triage",
                "start": "created",
                "condition": "status = open and priority = high",
            },
        )
    assert started(desk, 2) == []
    assert started(desk, 3, priority="high") == ["Triage"]


def test_rows_written_around_the_runner_are_used_by_the_next_start(
    any_engine: sa.Engine,
) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    assert started(desk, 1) == ["Triage"]
    flow_id = triage_id(any_engine)
    # A script changes the step's value, then switches the flow off, then on again with
    # a second step: each start sees the rows as the script left them.
    with any_engine.begin() as conn:
        conn.execute(sa.update(STEPS).where(STEPS.c.flow_id == flow_id).values(value="urgent"))
    assert started(desk, 2) == ["Triage"]
    desk.run_until_idle()
    assert desk.record(2)["priority"] == "urgent"  # type: ignore[index]
    with any_engine.begin() as conn:
        conn.execute(sa.update(FLOWS).where(FLOWS.c.id == flow_id).values(active=False))
    assert started(desk, 3) == []
    with any_engine.begin() as conn:
        conn.execute(sa.update(FLOWS).where(FLOWS.c.id == flow_id).values(active=True))
        conn.execute(
            sa.insert(STEPS).values(
                flow_id=flow_id, position=2, kind="set", title="Take", field="assignee", value="bo"
            )
        )
    assert started(desk, 4) == ["Triage"]
    desk.run_until_idle()
    assert {k: desk.record(4)[k] for k in ("priority", "assignee")} == {  # type: ignore[index]
        "priority": "urgent",
        "assignee": "bo",
    }


def test_a_flow_saved_with_the_record_starts_for_it(any_engine: sa.Engine) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    assert started(desk, 1) == ["Triage"]
    runner = desk.runner
    with dialects.begin(any_engine) as conn:
        flow_id = runner.save_flow(conn, {"name": "Welcome", "start": "created"})
        runner.save_step(
            conn,
            {"flow_id": flow_id, "position": 1, "kind": "set", "field": "status", "value": "seen"},
        )
        conn.execute(sa.insert(TICKETS.ticket).values(**ticket(2)))
        run_ids = runner.record_created(conn, ticket(2))
    assert flows_of(desk, 2, run_ids) == ["Triage", "Welcome"]


def test_an_edit_rolled_back_is_never_used(any_engine: sa.Engine) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    assert started(desk, 1) == ["Triage"]
    runner, flow_id = desk.runner, triage_id(any_engine)
    with dialects.begin(any_engine) as conn:
        conn.execute(
            sa.update(FLOWS).where(FLOWS.c.id == flow_id).values(condition="status = closed")
        )
        conn.execute(sa.insert(TICKETS.ticket).values(**ticket(2)))
        assert runner.record_created(conn, ticket(2)) == []  # the edit, in its transaction
        conn.rollback()
    assert started(desk, 3) == ["Triage"]


def test_an_updated_flow_edited_meanwhile_starts_on_its_new_column(
    any_engine: sa.Engine,
) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    desk.create(ticket(1), run=False)
    assert flows_of(desk, 1, desk.update(1, status="waiting", run=False)) == ["Follow up"]
    with any_engine.begin() as conn:
        conn.execute(
            sa.update(FLOWS)
            .where(FLOWS.c.name == "Follow up")
            .values(changes="priority", condition="priority = low")
        )
    assert desk.update(1, status="open", run=False) == []
    assert flows_of(desk, 1, desk.update(1, priority="low", run=False)) == ["Follow up"]


@contextmanager
def statements(engine: sa.Engine) -> Iterator[list[str]]:
    """The SQL statements sent on ``engine`` inside the block."""
    sent: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        sent.append(statement)

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)


def test_a_start_on_unchanged_flows_reads_their_digest_only(any_engine: sa.Engine) -> None:
    desk = mount(any_engine, "tickets", flows=TRIAGE)
    started(desk, 1)
    with statements(any_engine) as sent:
        assert started(desk, 2) == ["Triage"]
    reads = [s for s in sent if s.lstrip().upper().startswith("SELECT") and "ticket_flow" in s]
    # One statement reads the flows' digest; their rows and steps are not read again.
    assert len(reads) == 1, reads
    with any_engine.connect() as conn:
        assert flow_rows.startable_digest(conn, desk.runner.tables, "created") != (None, None)
        assert flow_rows.startable_digest(conn, desk.runner.tables, "manual") == (None, None)
    runs = engine_tables.runs
    with any_engine.connect() as conn:
        digests = set(conn.execute(sa.select(runs.c.digest)).scalars())
    assert len(digests) == 1  # both runs execute the same snapshot


def tenant_desk(engine: sa.Engine) -> testing.FlowDriver:
    """The tenants' desk with a third tenant's flow beside acme's and globex's."""
    driver = tenant_desk_of_two(engine)
    runner = driver.runner
    with engine.begin() as conn:
        flow = runner.save_flow(
            conn, {"name": "Triage", "start": "created", "tenant_id": "initech"}
        )
        runner.save_step(
            conn,
            {
                "flow_id": flow,
                "position": 1,
                "kind": "set",
                "field": "status",
                "value": "'seen by initech'",
                "tenant_id": "initech",
            },
        )
    return driver


def test_each_tenant_starts_its_own_flows_however_many_tenants_take_turns(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A runner keeps two tenants' flows at most here; three tenants take turns.
    monkeypatch.setattr(starts, "KEPT_FLOW_LISTS", 2)
    driver = tenant_desk(any_engine)
    for n, tenant in enumerate(["acme", "globex", "initech", "acme", "initech", "globex"]):
        driver.create(desk_record(n, tenant))
        assert stored(driver, n, tenant=tenant)["status"] == f"seen by {tenant}"
        assert len(driver.runner.mounted.startable) <= 2
