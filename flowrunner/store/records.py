"""Reading and writing the resource's records: the application's own rows flows run on.

Flow and step rows are ``flow_rows``; the engine's own tables are ``engine_tables``.
Every statement has bound parameters and runs within the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.foundations import payloads, shapes, sqltypes
from flowrunner.foundations.shapes import RecordId, Tenant
from flowrunner.store import app_tables, dialects, prepared


def load_record(
    conn: sa.Connection, tables: app_tables.AppTables, record_id: RecordId, tenant: Tenant = None
) -> shapes.RowDict | None:
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

    def build() -> sqltypes.Query:
        return sa.select(tables.resource).where(tables.where_record_params())

    values = {"p_key": key, "p_tenant": tenant}
    if dialects.is_sqlite(conn) and all(c.key == c.name for c in tables.resource.c):
        # Every worker's step reads its record: compiled once, each value converted by
        # its column's type, as SQLAlchemy's row would hold it.
        dialect = conn.dialect
        compiled = tables.statement(
            ("load_record", "compiled", type(dialect), dialect.paramstyle),
            lambda: prepared.compile_for(build(), dialect, typed=True),
        )
        found = compiled.fetch(conn, values)
        return found[0] if found else None
    row = conn.execute(tables.statement("load_record", build), values).mappings().first()
    return dict(row) if row is not None else None


def _may_exist(conn: sa.Connection, column: sqltypes.TableColumn, value: object) -> bool:
    if isinstance(value, int) and isinstance(column.type, sa.Integer):
        low, high = dialects.integer_range(conn, column.type)
        return low <= value <= high
    return True


def write_fields(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    record_id: RecordId,
    tenant: Tenant,
    values: shapes.Row,
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


def insert_record(conn: sa.Connection, tables: app_tables.AppTables, values: shapes.Row) -> None:
    """Insert a record, as the application would (the test driver's ``create``)."""
    conn.execute(sa.insert(tables.resource).values(dict(values)))


def delete_record(conn: sa.Connection, tables: app_tables.AppTables, record_id: RecordId) -> None:
    """Delete a record by its key, as the application would (the test driver's ``delete``)."""
    resource = tables.resource
    conn.execute(sa.delete(resource).where(resource.c[tables.key] == tables.key_value(record_id)))


def record_ids(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Tenant = None,
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


def records_by_key(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    record_ids: Sequence[object],
    tenant: Tenant = None,
    *,
    batch: int = 500,
) -> dict[str, shapes.RowDict]:
    """The records with these keys (of ``tenant``, where one is given), by key as runs
    keep it (``str``); an id its column cannot hold, or no record has, is left out."""
    keys = []
    try:
        for record_id in record_ids:
            keys.append(tables.key_value(record_id))
        owner = None if tables.tenant is None or tenant is None else tables.tenant_value(tenant)
    except errors.RecordRejected:
        return {}  # an id, or a tenant, no record of this table can have
    resource = tables.resource
    column = resource.c[tables.key]
    found: dict[str, shapes.RowDict] = {}
    for start in range(0, len(keys), batch):
        query = sa.select(resource).where(column.in_(keys[start : start + batch]))
        if tables.tenant is not None and owner is not None:
            query = query.where(resource.c[tables.tenant] == owner)
        for row in conn.execute(query):
            found[str(row._mapping[column])] = {str(k): v for k, v in row._mapping.items()}
    return found


def records_with(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    columns: Sequence[str],
    where: sa.ColumnElement[bool] | None,
    tenant: Tenant = None,
    *,
    after: object = None,
    batch: int = 1000,
) -> list[shapes.RowDict]:
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


def records_after(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Tenant = None,
    *,
    after: object = None,
    batch: int = 1000,
) -> list[shapes.RowDict]:
    """The next ``batch`` whole records matching ``where`` (of ``tenant``), after key
    ``after`` in key order: one page of a scheduled flow's slot."""
    resource = tables.resource
    key = resource.c[tables.key]
    query = sa.select(resource).order_by(key).limit(batch)
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(resource.c[tables.tenant] == tenant)
    if after is not None:
        query = query.where(key > after)
    return [{str(k): v for k, v in row._mapping.items()} for row in conn.execute(query)]


def count_records(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    where: sa.ColumnElement[bool] | None,
    tenant: Tenant = None,
) -> int:
    query = sa.select(sa.func.count()).select_from(tables.resource)
    if where is not None:
        query = query.where(where)
    if tables.tenant is not None:
        query = query.where(tables.resource.c[tables.tenant] == tenant)
    return int(conn.execute(query).scalar_one())


def record_tenants(conn: sa.Connection, tables: app_tables.AppTables) -> list[str]:
    """The tenants that own at least one record of the resource, in order; none without
    tenants (what a job in ``realm="tenant"`` takes as the active tenants by default)."""
    if tables.tenant is None:
        return []
    column = tables.resource.c[tables.tenant]
    query = sa.select(column).where(column.is_not(None)).distinct().order_by(column)
    return [str(tenant) for tenant in conn.execute(query).scalars()]


def find_records(
    conn: sa.Connection,
    tables: app_tables.AppTables,
    columns: Sequence[str],
    text: str,
    tenant: Tenant = None,
    *,
    limit: int = 20,
) -> list[shapes.RowDict]:
    """The records (of ``tenant``, on a tenant binding) whose value in one of
    ``columns`` is ``text``, in any case (``po-3299`` finds ``PO-3299``): whole records,
    in key order, at most ``limit``. ``text`` is sent as a bound parameter."""
    wanted = text.strip().lower()
    if not columns or not wanted or payloads.text_problem(wanted) is not None:
        return []  # a text no column can hold (a NUL) finds nothing, and is not sent
    resource = tables.resource
    said = sa.bindparam("p_text", wanted, type_=sa.Text)
    query = (
        sa.select(resource)
        .where(
            sa.or_(*(sa.func.lower(sa.cast(resource.c[name], sa.Text)) == said for name in columns))
        )
        .order_by(resource.c[tables.key])
        .limit(limit)
    )
    if tables.tenant is not None:
        query = query.where(resource.c[tables.tenant] == tables.tenant_value(tenant))
    return [{str(k): v for k, v in row._mapping.items()} for row in conn.execute(query)]
