"""Declaring an application's flows and steps tables in its own SQLAlchemy ``MetaData``.

An application may instead bring tables it already has; ``FlowBinding.check`` reads
them by reflection and names any fixed column they lack. ::

    metadata = sa.MetaData()
    po_flow = tables.flows_table(metadata, "po_flow")
    po_flow_step = tables.steps_table(metadata, "po_flow_step", flows=po_flow, inputs=["approver"])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from flowrunner import binding as binding_mod

# A flow's name is checked to fit (and is unique, so it is not an unbounded text);
# every other column users type into is text of any length, so what validation
# accepts the database stores.
NAME_LENGTH = 200


def flows_table(
    metadata: sa.MetaData,
    name: str,
    *,
    tenant: str | None = None,
    tenant_type: sa.types.TypeEngine[Any] | None = None,
) -> sa.Table:
    """A flows table: ``id, name, start, condition, changes, active`` (and the tenant column).

    A flow's name is unique within the table, or within its tenant.
    """
    columns: list[sa.Column[Any]] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("start", sa.Text, nullable=False),
        sa.Column("condition", sa.Text),
        sa.Column("changes", sa.Text),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
    ]
    unique: tuple[str, ...] = ("name",)
    if tenant is not None:
        columns.append(sa.Column(tenant, tenant_type or sa.String(64), nullable=False))
        unique = (tenant, "name")
    return sa.Table(
        name,
        metadata,
        *columns,
        sa.UniqueConstraint(*unique, name=f"uq_{name}_name"),
    )


def steps_table(
    metadata: sa.MetaData,
    name: str,
    *,
    flows: sa.Table | str | None = None,
    inputs: Iterable[str] = (),
    tenant: str | None = None,
    tenant_type: sa.types.TypeEngine[Any] | None = None,
) -> sa.Table:
    """A steps table with the fixed step columns plus one text column per kind input.

    ``flows`` (the flows table or its name) adds a foreign key from ``flow_id``.
    """
    flows_name = flows.name if isinstance(flows, sa.Table) else flows
    flow_id: sa.Column[Any] = (
        sa.Column("flow_id", sa.Integer, sa.ForeignKey(f"{flows_name}.id"), nullable=False)
        if flows_name
        else sa.Column("flow_id", sa.Integer, nullable=False)
    )
    columns: list[sa.Column[Any]] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        flow_id,
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("title", sa.Text),
        sa.Column("duration", sa.Text),
        sa.Column("field", sa.Text),
        sa.Column("value", sa.Text),
        sa.Column("condition", sa.Text),
        sa.Column("goto", sa.Integer),
        sa.Column("event", sa.Text),
        sa.Column("audience", sa.Text),
        sa.Column("message", sa.Text),
        sa.Column("mode", sa.Text),
        sa.Column("remind", sa.Text),
    ]
    for column in dict.fromkeys(inputs):
        columns.append(sa.Column(column, sa.Text))
    if tenant is not None:
        columns.append(sa.Column(tenant, tenant_type or sa.String(64), nullable=False))
    return sa.Table(name, metadata, *columns, sa.Index(f"ix_{name}_flow", "flow_id", "position"))


def for_binding(
    metadata: sa.MetaData,
    binding: binding_mod.FlowBinding,
    *,
    tenant_type: sa.types.TypeEngine[Any] | None = None,
) -> tuple[sa.Table, sa.Table]:
    """The flows and steps tables a binding names, with every kind's input columns."""
    flows = flows_table(
        metadata, binding.flows_table, tenant=binding.tenant, tenant_type=tenant_type
    )
    steps = steps_table(
        metadata,
        binding.steps_table,
        flows=flows,
        inputs=binding.input_columns,
        tenant=binding.tenant,
        tenant_type=tenant_type,
    )
    return flows, steps


def reflect(
    bind: sa.Engine | sa.Connection, binding: binding_mod.FlowBinding
) -> tuple[sa.Table, sa.Table]:
    """The binding's flows and steps tables as the database has them now."""
    metadata = sa.MetaData()
    flows = sa.Table(binding.flows_table, metadata, autoload_with=bind)
    steps = sa.Table(binding.steps_table, metadata, autoload_with=bind)
    return flows, steps
