"""Reading and writing the resource's records: the application's own rows flows run on.

Flow and step rows are ``flow_rows``; the engine's own tables are ``engine_tables``.
Every statement has bound parameters and runs within the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from flowrunner.store import app_tables, dialects


def load_record(
    conn: sa.Connection, tables: app_tables.AppTables, record_id: Any, tenant: Any = None
) -> dict[str, Any] | None:
    """The record with this key (of this tenant, on a tenant binding), or None.

    The key and tenant follow ``app_tables.key_of``: one its column cannot hold raises
    ``RecordRejected``; a whole number beyond what the column's type holds on this
    database names no record, and is not sent.
    """
    key = tables.key_value(record_id)
    if tables.tenant is not None and tenant is not None:
        tenant = tables.tenant_value(tenant)
        if not _may_exist(conn, tables.resource.c[tables.tenant], tenant):
            return None
    if not _may_exist(conn, tables.resource.c[tables.key], key):
        return None
    query = tables.statement(
        "load_record", lambda: sa.select(tables.resource).where(tables.where_record_params())
    )
    row = conn.execute(query, {"p_key": key, "p_tenant": tenant}).mappings().first()
    return dict(row) if row is not None else None


def _may_exist(conn: sa.Connection, column: sa.Column[Any], value: Any) -> bool:
    if isinstance(value, int) and isinstance(column.type, sa.Integer):
        low, high = dialects.integer_range(conn, column.type)
        return low <= value <= high
    return True


def write_fields(
    conn: sa.Connection,
    tables: app_tables.AppTables,
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


def insert_record(
    conn: sa.Connection, tables: app_tables.AppTables, values: Mapping[str, Any]
) -> None:
    """Insert a record, as the application would (the test driver's ``create``)."""
    conn.execute(sa.insert(tables.resource).values(dict(values)))


def delete_record(conn: sa.Connection, tables: app_tables.AppTables, record_id: Any) -> None:
    """Delete a record by its key, as the application would (the test driver's ``delete``)."""
    resource = tables.resource
    conn.execute(sa.delete(resource).where(resource.c[tables.key] == tables.key_value(record_id)))


def record_ids(
    conn: sa.Connection,
    tables: app_tables.AppTables,
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


def records_with(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    columns: Sequence[str],
    where: sa.ColumnElement[bool] | None,
    tenant: Any = None,
    *,
    after: Any = None,
    batch: int = 1000,
) -> list[dict[str, Any]]:
    """The next ``batch`` records (after key ``after``, in key order) matching ``where``
    with a value in any of ``columns``: their key, tenant and those columns."""
    resource = tables.resource
    key = resource.c[tables.key]
    picked = [key, *(resource.c[name] for name in columns if name != tables.key)]
    if tables.tenant is not None:
        picked.append(resource.c[tables.tenant])
    query = (
        sa.select(*picked)
        .where(sa.or_(*(resource.c[name].is_not(None) for name in columns)))
        .order_by(key)
        .limit(batch)
    )
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(resource.c[tables.tenant] == tenant)
    if after is not None:
        query = query.where(key > after)
    return [dict(row._mapping) for row in conn.execute(query)]


def count_records(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Any = None,
) -> int:
    query = sa.select(sa.func.count()).select_from(tables.resource)
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(tables.resource.c[tables.tenant] == tenant)
    return int(conn.execute(query).scalar_one())
