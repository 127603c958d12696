"""Reading and writing the application's own tables: the resource's records and its flows.

The engine's tables live in ``schema``; this module is the only place that touches the
application's tables, always with bound parameters and always within the caller's
transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa


@dataclass(frozen=True)
class AppTables:
    """The application's tables a runner works on, reflected once at mount."""

    resource: sa.Table
    flows: sa.Table
    steps: sa.Table
    key: str
    tenant: str | None
    # Statements built once for this runner's tables (see store.prepared).
    built: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def statement(self, key: Any, build: Any) -> Any:
        found = self.built.get(key)
        if found is None:
            found = self.built[key] = build()
        return found

    @classmethod
    def reflect(
        cls,
        engine: sa.Engine,
        *,
        resource: str,
        flows: str,
        steps: str,
        key: str,
        tenant: str | None,
    ) -> AppTables:
        metadata = sa.MetaData()
        tables = [
            sa.Table(name, metadata, autoload_with=engine) for name in (resource, flows, steps)
        ]
        return cls(tables[0], tables[1], tables[2], key, tenant)

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


def load_record(
    conn: sa.Connection, tables: AppTables, record_id: Any, tenant: Any = None
) -> dict[str, Any] | None:
    query = tables.statement(
        "load_record", lambda: sa.select(tables.resource).where(tables.where_record_params())
    )
    row = (
        conn.execute(query, {"p_key": tables.key_value(record_id), "p_tenant": tenant})
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def write_fields(
    conn: sa.Connection,
    tables: AppTables,
    record_id: Any,
    tenant: Any,
    values: Mapping[str, Any],
) -> int:
    """Write a set step's values to the record; returns the number of rows changed."""
    if not values:
        return 0
    names = tuple(sorted(values))
    stmt = tables.statement(
        ("write_fields", names),
        lambda: (
            sa.update(tables.resource)
            .where(tables.where_record_params())
            .values({n: sa.bindparam(f"v_{n}", type_=tables.resource.c[n].type) for n in names})
        ),
    )
    result = conn.execute(
        stmt,
        {"p_key": tables.key_value(record_id), "p_tenant": tenant}
        | {f"v_{n}": values[n] for n in names},
    )
    return int(result.rowcount or 0)


def flows_to_start(
    conn: sa.Connection, tables: AppTables, start: str, tenant: Any = None
) -> list[dict[str, Any]]:
    """Active flows of one start kind, of the record's tenant when the binding has tenants."""
    flows = tables.flows
    query = sa.select(flows).where(flows.c.start == start)
    if "active" in flows.c:
        query = query.where(sa.or_(flows.c.active.is_(None), flows.c.active == sa.true()))
    if tables.tenant is not None:
        query = query.where(flows.c[tables.tenant] == tenant)
    return [dict(row) for row in conn.execute(query.order_by(flows.c.id)).mappings()]


def find_flow(
    conn: sa.Connection, tables: AppTables, name_or_id: Any, tenant: Any = None
) -> dict[str, Any] | None:
    flows = tables.flows
    by = flows.c.name == str(name_or_id)
    if isinstance(name_or_id, int) or str(name_or_id).isdigit():
        by = sa.or_(by, flows.c.id == int(str(name_or_id)))
    query = sa.select(flows).where(by)
    if tables.tenant is not None:
        query = query.where(flows.c[tables.tenant] == tenant)
    row = conn.execute(query).mappings().first()
    return dict(row) if row is not None else None


def flow_steps(conn: sa.Connection, tables: AppTables, flow_id: Any) -> list[dict[str, Any]]:
    steps = tables.steps
    query = (
        sa.select(steps).where(steps.c.flow_id == flow_id).order_by(steps.c.position, steps.c.id)
    )
    return [dict(row) for row in conn.execute(query).mappings()]


def record_ids(
    conn: sa.Connection,
    tables: AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Any = None,
    batch: int = 500,
) -> Iterator[Sequence[Any]]:
    """Ids of the records matching ``where``, in key order, a batch at a time."""
    key = tables.resource.c[tables.key]
    query = sa.select(key).order_by(key)
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(tables.resource.c[tables.tenant] == tenant)
    result = conn.execute(query)
    while True:
        chunk = result.fetchmany(batch)
        if not chunk:
            return
        yield [row[0] for row in chunk]


def count_records(
    conn: sa.Connection,
    tables: AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Any = None,
) -> int:
    query = sa.select(sa.func.count()).select_from(tables.resource)
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(tables.resource.c[tables.tenant] == tenant)
    return int(conn.execute(query).scalar_one())
