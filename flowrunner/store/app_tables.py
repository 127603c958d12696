"""The application's tables: declaring its flows and steps tables, and reading all three.

An application declares the flows and steps tables in its own ``MetaData`` (or brings
tables it already has); a runner reads the resource, flows and steps tables by
reflection once, at mount, into an ``AppTables`` that every later statement uses::

    metadata = sa.MetaData()
    po_flow = app_tables.flows_table(metadata, "po_flow")
    po_flow_step = app_tables.steps_table(metadata, "po_flow_step", flows=po_flow)
    tables = app_tables.reflect(engine, binding)

Applications import the declaring helpers from ``flowrunner.tables``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from flowrunner import binding as binding_mod
from flowrunner import errors

# A flow's name is checked to fit (and is unique, so it is not an unbounded text);
# every other column users type into is text of any length, so what validation
# accepts the database stores.
NAME_LENGTH = 200


# -- declaring ---------------------------------------------------------------------


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


def create_declared(bind: sa.Engine | sa.Connection, metadata: sa.MetaData) -> None:
    """Create the tables an application declared (the demo plays the application)."""
    metadata.create_all(bind)


# -- as the database has them --------------------------------------------------------


@dataclass(frozen=True)
class AppTables:
    """The application's tables a runner works on, reflected once (see ``reflect``)."""

    resource: sa.Table
    flows: sa.Table
    steps: sa.Table
    key: str
    tenant: str | None
    # The application's own columns of the flows and steps tables (audit columns, say):
    # kept on save, never judged.
    flow_extra: frozenset[str] = frozenset()
    step_extra: frozenset[str] = frozenset()
    # Statements built once for this runner's tables (see store.prepared).
    built: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def metadata(self) -> sa.MetaData:
        """The ``MetaData`` the three tables were read into (``FlowBinding.check`` takes it)."""
        return self.resource.metadata

    def statement(self, key: Any, build: Any) -> Any:
        found = self.built.get(key)
        if found is None:
            found = self.built[key] = build()
        return found

    def key_value(self, record_id: Any) -> Any:
        """The record id as the key column holds it (runs keep it as text)."""
        column = self.resource.c[self.key]
        try:
            python_type = column.type.python_type
        except NotImplementedError:
            return record_id
        if python_type is int and not isinstance(record_id, int):
            return int(str(record_id))
        if python_type is str:
            return str(record_id)
        return record_id

    def where_record_params(self) -> sa.ColumnElement[bool]:
        """This record (of this tenant): parameters ``p_key`` and ``p_tenant``."""
        clause: sa.ColumnElement[bool] = self.resource.c[self.key] == sa.bindparam("p_key")
        if self.tenant is not None:
            clause = sa.and_(clause, self.resource.c[self.tenant] == sa.bindparam("p_tenant"))
        return clause


def reflect(bind: sa.Engine | sa.Connection, binding: binding_mod.FlowBinding) -> AppTables:
    """The binding's resource, flows and steps tables as the database has them now.

    Raises ``BindingError`` naming a table that does not exist. Reading tables costs a
    few queries each, so callers keep the result: a runner reflects once, at mount.
    """
    metadata = sa.MetaData()
    found = []
    for name, what in (
        (binding.resource, "resource"),
        (binding.flows_table, "flows"),
        (binding.steps_table, "steps"),
    ):
        try:
            found.append(sa.Table(name, metadata, autoload_with=bind))
        except sa.exc.NoSuchTableError:
            raise errors.BindingError(
                f"the {what} table {name!r} does not exist in the database"
            ) from None
    resource, flows, steps = found
    return AppTables(
        resource,
        flows,
        steps,
        key=binding.key,
        tenant=binding.tenant,
        flow_extra=_extra(flows, binding),
        step_extra=_extra(steps, binding),
    )


def _extra(table: sa.Table, binding: binding_mod.FlowBinding) -> frozenset[str]:
    ours = {*binding_mod.FLOW_COLUMNS, *binding_mod.STEP_COLUMNS, *binding.input_columns}
    return frozenset(
        str(c.name) for c in table.columns if c.name not in ours and c.name != binding.tenant
    )
