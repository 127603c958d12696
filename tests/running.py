"""Helpers for tests that run the real engine on a real database through the test driver."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import forked
import migrated
import sqlalchemy as sa

from flowrunner import testing
from flowrunner.cli import demo
from flowrunner.flows import files
from flowrunner.runner import flow_runner
from flowrunner.store import dialects, engine_tables

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday, 09:00 UTC

# Two steps a worker does at once, for tests of the worker itself (on the tickets app).
MARK_AND_TELL = """
- name: Tell
  start: created
  steps:
    - {position: 1, kind: set, title: Mark, field: priority, value: high}
    - {position: 2, kind: notify, title: Tell, audience: requester, message: Hello}
"""

# The flows of the tests where several runners or workers share a database.
ACKNOWLEDGE = """
- name: Acknowledge
  start: created
  steps:
    - {position: 1, kind: assign, title: Hand to triage, assign_to: triage}
    - {position: 2, kind: waitFor, title: Requester replies, event: ticket.replied, duration: 1 day}
    - {position: 3, kind: set, title: Answered, field: status, value: answered}
    - {position: 4, kind: notify, title: Tell triage, audience: assignee, message: Replied.}
"""

APPROVE_AND_SEND = """
- name: Approve and send
  start: created
  steps:
    - {position: 1, kind: approval, title: Approval, approver: boss}
    - {position: 2, kind: set, title: Approved, field: status, value: approved}
    - {position: 3, kind: notify, title: Tell, audience: requester, message: Approved.}
    - {position: 4, kind: send, title: Send}
"""


# One command step: a purchase order sent to its supplier (the worker tests' job).
SEND = """
- name: Send
  start: created
  steps:
    - {position: 1, kind: send, title: Send to supplier}
"""


def order(n: int) -> dict[str, Any]:
    """A big purchase order, numbered ``PO-n``."""
    return {"id": n, "number": f"PO-{n}", "requester_id": "ann", "amount": 25000}


# Tickets' flows whose runs end at once, wait a long time, or fail (retention's tests).
PRUNABLE = """
- name: Quick
  start: created
  condition: status = open
  steps:
    - {position: 1, kind: notify, title: Tell, audience: requester, message: hello}
    - {position: 2, kind: set, title: Work, field: status, value: working}
- name: Listen
  start: created
  condition: status = listen
  steps:
    - {position: 1, kind: waitFor, title: Reply, event: ticket.replied, duration: 400 days}
    - {position: 2, kind: set, title: Answered, field: status, value: answered}
- name: Listen by hand
  start: manual
  steps:
    - {position: 1, kind: waitFor, title: Reply, event: ticket.replied, duration: 400 days}
- name: Hand over
  start: created
  condition: status = handover
  steps:
    - {position: 1, kind: assign, title: Hand over, assign_to: triage}
"""


def decide(
    driver: testing.FlowDriver,
    order_id: int,
    approver: str,
    decision: str = "approved",
    *,
    run: bool = True,
) -> int:
    """An approver answers through the purchase-order app's own ``decide`` (it records
    the decision on the order and emits ``po.decided``), then the work it made due runs."""
    with dialects.begin(driver.runner.engine) as conn:
        event_id = int(
            app("purchase_orders").decide(driver.runner, conn, order_id, approver, decision)
        )
    if run:
        driver.run_until_idle()
    return event_id


def sentences(driver: testing.FlowDriver, run_id: int) -> list[str]:
    """The run's history as 'title: sentence' lines (a line about the whole run: 'run')."""
    return [f"{line.title or 'run'}: {line.sentence}" for line in driver.history(run_id)]


def app(name: str) -> ModuleType:
    """A sample app from fixtures/ ("tickets" or "purchase_orders")."""
    return demo.load_fixture(name)


def mount(
    engine: sa.Engine,
    name: str,
    *,
    flows: str | None = None,
    commands: Mapping[str, Any] | None = None,
    start: datetime = T0,
    binding: Any = None,
    copy_of: sa.Engine | None = None,
    **options: Any,
) -> testing.FlowDriver:
    """Create the app's and the engine's tables, mount a runner, import flows, drive it.

    ``flows`` is YAML text; by default the app's own flows file is imported.

    ``copy_of``, for tests that need many databases alike: a SQLite database on which
    ``mount`` was called with the same app and flows, and nothing done since. Its file is
    copied to ``engine``'s (a new SQLite file, not connected yet) instead of the tables,
    migrations and flows being made again.
    """
    module = app(name)
    if copy_of is not None:
        assert engine.dialect.name == copy_of.dialect.name == "sqlite"
        assert engine.url.database and copy_of.url.database
        copy_of.dispose()
        shutil.copyfile(copy_of.url.database, engine.url.database)
    else:
        migrated.create(module.metadata, engine)
        migrated.upgrade(engine)
    runner = flow_runner(
        binding or module.binding,
        engine,
        commands={**module.COMMANDS, **(commands or {})},
        **options,
    )
    if copy_of is not None:
        return testing.FlowDriver(runner, start=start)
    docs = files.loads_yaml(flows) if flows is not None else files.read_file(module.FLOWS_FILE)
    with runner.engine.begin() as conn:
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    return testing.FlowDriver(runner, start=start)


def ticket(n: int) -> dict[str, object]:
    """A ticket of the tickets app, due at ``T0``."""
    return {"id": n, "title": f"T{n}", "requester_id": "ann", "due_at": T0}


def stored(driver: testing.FlowDriver, record_id: Any, *, tenant: Any = None) -> dict[str, Any]:
    """The record as stored now, which must exist."""
    record = driver.record(record_id, tenant=tenant)
    assert record is not None, f"record {record_id} does not exist"
    return record


def count(engine: sa.Engine, table: sa.Table, **where: Any) -> int:
    query = sa.select(sa.func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def whats(driver: testing.FlowDriver, run_id: int) -> list[str]:
    """The run's history as 'title: what' lines, for readable assertions."""
    return [f"{line.title or line.kind or ''}: {line.what}" for line in driver.history(run_id)]


def serving_worker(engine: sa.Engine, name: str, seconds: int) -> subprocess.Popen[str]:
    """A worker process serving app ``name`` on the engine's PostgreSQL schema until its
    resource has no run left to finish, or ``seconds`` pass (``serving_worker.py``)."""
    with engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar()
    env = {
        **os.environ,
        "SERVE_DB": engine.url.render_as_string(hide_password=False),
        "SERVE_OPTIONS": f"-csearch_path={schema}",
    }
    return forked.popen(
        [sys.executable, str(Path(__file__).with_name("serving_worker.py")), name, str(seconds)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def done_twice(conn: sa.Connection) -> list[Any]:
    """Each (run, step, pass) with more than one "done" line: a step processed twice."""
    log = engine_tables.step_log
    return list(
        conn.execute(
            sa.select(log.c.run_id, log.c.step_id, log.c["pass"])
            .where(log.c.what == "done")
            .group_by(log.c.run_id, log.c.step_id, log.c["pass"])
            .having(sa.func.count() > 1)
        ).all()
    )
