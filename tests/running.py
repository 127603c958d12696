"""Helpers for tests that run the real engine on a real database through the test driver."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import sqlalchemy as sa

from flowrunner import demo, flowfiles, testing
from flowrunner.runner import flow_runner
from flowrunner.store import migrate

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday, 09:00 UTC


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
    **options: Any,
) -> testing.FlowDriver:
    """Create the app's and the engine's tables, mount a runner, import flows, drive it.

    ``flows`` is YAML text; by default the app's own flows file is imported.
    """
    module = app(name)
    module.metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(
        binding or module.binding,
        engine,
        commands={**module.COMMANDS, **(commands or {})},
        **options,
    )
    docs = (
        flowfiles.loads_yaml(flows) if flows is not None else flowfiles.read_file(module.FLOWS_FILE)
    )
    with runner.engine.begin() as conn:
        flowfiles.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
    return testing.FlowDriver(runner, start=start)


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
