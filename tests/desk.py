"""A resource whose records each belong to a tenant: a shared support desk's tickets,
for the tests of tenancy."""

from __future__ import annotations

import migrated
import sqlalchemy as sa

from flowrunner import FlowBinding, FlowRunner, flow_runner, tables

metadata = sa.MetaData()
ticket = sa.Table(
    "desk_ticket",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant_id", sa.String(32), nullable=False),
    sa.Column("status", sa.String(32)),
    sa.Column("priority", sa.String(32)),
)
BINDING = FlowBinding(
    resource="desk_ticket",
    flows_table="desk_flow",
    steps_table="desk_flow_step",
    events={"desk.replied": "ticket"},
    set_columns=["status", "priority"],
    tenant="tenant_id",
)
tables.for_binding(metadata, BINDING)


def runner(engine: sa.Engine) -> FlowRunner:
    """The desk's tables and the engine's created, and a runner on them (no flows yet)."""
    metadata.create_all(engine)
    migrated.upgrade(engine)
    return flow_runner(BINDING, engine)
