"""Reading and writing the application's flow and step rows, as they are stored.

Nothing here judges a row: ``flowrunner.flows.edits`` and the ORM hook validate before they
write through these functions. Every statement runs in the caller's transaction. Rows
come back as plain dicts with ``str`` keys (reflected column names are ``quoted_name``
objects), so they travel to YAML and JSON unchanged.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.flows import spelling
from flowrunner.foundations import ids, payloads, shapes, sqltypes
from flowrunner.foundations.shapes import Tenant
from flowrunner.store import app_tables, dialects, prepared


def _dicts(result: sqltypes.Results) -> list[shapes.RowDict]:
    return [{str(k): v for k, v in row.items()} for row in result.mappings()]


def _first(result: sqltypes.Results) -> shapes.RowDict | None:
    found = _dicts(result)
    return found[0] if found else None


def _by_id(conn: sa.Connection, table: sa.Table, row_id: object) -> shapes.RowDict | None:
    return _first(conn.execute(sa.select(table).where(table.c.id == row_id)))


def _fitted(table: sa.Table, values: shapes.Row) -> dict[str, Any]:
    """``values`` as ``table`` can hold them: an empty value of a column it lacks (one
    added in a later release) is left out; a value for one is refused with a sentence."""
    missing = [k for k in values if k not in table.c]
    refused = [k for k in missing if values[k] not in (None, "")]
    if refused:
        raise errors.RowInvalid(
            [
                errors.FieldError(
                    column,
                    f"the table {table.name!r} has no column {column!r}: add it (a nullable "
                    "column, as flowrunner.tables declares it) to use it",
                    "column_missing",
                )
                for column in refused
            ]
        )
    return {k: v for k, v in values.items() if k not in missing}


def _store(conn: sa.Connection, table: sa.Table, row_id: object, values: shapes.Row) -> Any:
    values = _fitted(table, values)
    if row_id is None:
        key = conn.execute(sa.insert(table).values(dict(values))).inserted_primary_key
        assert key is not None  # an INSERT of one row always has one
        return key[0]
    conn.execute(sa.update(table).where(table.c.id == row_id).values(dict(values)))
    return row_id


# -- flows -------------------------------------------------------------------------


def all_flows(conn: sa.Connection, tables: app_tables.AppTables) -> list[shapes.RowDict]:
    """Every flow row (of every tenant), in id order."""
    flows = tables.flows
    return _dicts(conn.execute(sa.select(flows).order_by(flows.c.id)))


def flow_by_id(
    conn: sa.Connection, tables: app_tables.AppTables, flow_id: object
) -> shapes.RowDict | None:
    return _by_id(conn, tables.flows, flow_id)


def flow_by_name_or_id(
    conn: sa.Connection, tables: app_tables.AppTables, name_or_id: object, tenant: object = None
) -> shapes.RowDict | None:
    """The flow an operator names (``"Big orders"`` or ``7``), of the tenant on a tenant binding."""
    flows = tables.flows
    if payloads.text_problem(str(name_or_id)) is not None:
        return None  # a name no row can hold (a NUL), never sent: PostgreSQL refuses it
    by = flows.c.name == str(name_or_id)
    number = ids.id_or_none(name_or_id)
    limit = app_tables.id_limit(flows.c.id)
    if number is not None and (limit is None or number < limit):
        # Digits past what an id holds (``ids``, the column) can only be a name.
        by = sa.or_(by, flows.c.id == number)
    mine = sa.true() if tables.tenant is None else flows.c[tables.tenant] == tenant
    found = _first(conn.execute(sa.select(flows).where(by, mine)))
    if found is not None:
        return found
    # Flow names are one name whatever their case: "resend" names the flow "Resend".
    wanted = spelling.name_key(name_or_id)
    for row in _dicts(conn.execute(sa.select(flows).where(mine).order_by(flows.c.id))):
        if spelling.name_key(row.get("name")) == wanted:
            return row
    return None


def flows_to_start(
    conn: sa.Connection, tables: app_tables.AppTables, start: str, tenant: Tenant = None
) -> list[shapes.RowDict]:
    """Active flows of one start kind, of the record's tenant when the binding has tenants."""
    query = tables.statement(
        ("flows_to_start",),
        lambda: sa.select(tables.flows).where(_startable(tables)).order_by(tables.flows.c.id),
    )
    return _dicts(conn.execute(query, {"p_start": start, "p_tenant": tenant}))


def active_flows(
    conn: sa.Connection, tables: app_tables.AppTables, tenant: Tenant = None
) -> list[shapes.RowDict]:
    """Every active flow, whatever it starts on, of the tenant on a tenant binding."""
    flows = tables.flows
    query = sa.select(flows).order_by(flows.c.id)
    if "active" in flows.c:
        query = query.where(sa.or_(flows.c.active.is_(None), flows.c.active == sa.true()))
    if tables.tenant is not None:
        query = query.where(flows.c[tables.tenant] == tenant)
    return _dicts(conn.execute(query))


def scheduled_flows(conn: sa.Connection, tables: app_tables.AppTables) -> list[shapes.RowDict]:
    """Every active flow that starts on a schedule, of every tenant, in id order: its id,
    name, schedule and tenant; none when the flows table has no ``schedule`` column."""
    flows = tables.flows
    if "schedule" not in flows.c:
        return []
    picked: list[sa.ColumnElement[Any]] = [flows.c.id, flows.c.name, flows.c.schedule]
    if tables.tenant is not None:
        picked.append(flows.c[tables.tenant].label("tenant"))
    query = sa.select(*picked).where(flows.c.start == "schedule").order_by(flows.c.id)
    if "active" in flows.c:
        query = query.where(sa.or_(flows.c.active.is_(None), flows.c.active == sa.true()))
    return _dicts(conn.execute(query))


def startable(
    conn: sa.Connection, tables: app_tables.AppTables, start: str, tenant: Tenant = None
) -> list[tuple[shapes.RowDict, list[shapes.RowDict]]]:
    """``flows_to_start`` with each flow's steps (as ``steps_of_flow``): two statements."""
    flows = flows_to_start(conn, tables, start, tenant)
    if not flows:
        return []

    def build() -> sqltypes.Query:
        steps, chosen = tables.steps, sa.select(tables.flows.c.id).where(_startable(tables))
        return (
            sa.select(steps)
            .where(steps.c.flow_id.in_(chosen))
            .order_by(steps.c.flow_id, steps.c.position, steps.c.id)
        )

    found: dict[object, list[shapes.RowDict]] = {flow["id"]: [] for flow in flows}
    query = tables.statement(("startable_steps",), build)
    for step in _dicts(conn.execute(query, {"p_start": start, "p_tenant": tenant})):
        # A flow that turned active between the two reads waits for the next start.
        found.get(step["flow_id"], []).append(step)
    return [(flow, found[flow["id"]]) for flow in flows]


def startable_digest(
    conn: sa.Connection, tables: app_tables.AppTables, start: str, tenant: Tenant = None
) -> tuple[object, object]:
    """A digest of what ``startable`` reads: it differs whenever those rows differ.

    One statement; a runner compares it with the digest of the flows it keeps, and reads
    them again only when it differs (``starting.startable``).
    """

    def build() -> sa.Select[str | None, str | None]:
        flows, steps = tables.flows, tables.steps
        chosen = _startable(tables)
        ids = sa.select(flows.c.id).where(chosen)
        return sa.select(
            dialects.rows_digest(conn, list(flows.c), chosen, [flows.c.id]),
            dialects.rows_digest(conn, list(steps.c), steps.c.flow_id.in_(ids), [steps.c.id]),
        )

    dialect = conn.dialect
    query = tables.statement(
        ("startable_digest", type(dialect), dialect.paramstyle),
        lambda: prepared.compile_for(build(), dialect),
    )
    row = query.execute(conn, {"p_start": start, "p_tenant": tenant}).one()
    return row[0], row[1]


def _startable(tables: app_tables.AppTables) -> sa.ColumnElement[bool]:
    """The active flows of the start kind ``p_start`` (of the tenant ``p_tenant``)."""
    flows = tables.flows
    clause: sa.ColumnElement[bool] = flows.c.start == sa.bindparam("p_start")
    if "active" in flows.c:
        clause = sa.and_(clause, sa.or_(flows.c.active.is_(None), flows.c.active == sa.true()))
    if tables.tenant is not None:
        clause = sa.and_(clause, flows.c[tables.tenant] == sa.bindparam("p_tenant"))
    return clause


def store_flow(
    conn: sa.Connection, tables: app_tables.AppTables, flow_id: object, values: shapes.Row
) -> Any:
    """Insert a flow row, or update the one with ``flow_id`` when it is given; its id."""
    return _store(conn, tables.flows, flow_id, values)


def delete_flow(conn: sa.Connection, tables: app_tables.AppTables, flow_id: object) -> None:
    """Delete a flow row and its steps."""
    steps, flows = tables.steps, tables.flows
    conn.execute(sa.delete(steps).where(steps.c.flow_id == flow_id))
    conn.execute(sa.delete(flows).where(flows.c.id == flow_id))


# -- steps -------------------------------------------------------------------------


def steps_of_flow(
    conn: sa.Connection, tables: app_tables.AppTables, flow_id: object
) -> list[shapes.RowDict]:
    """A flow's step rows in position order (then id: the order steps sharing one were added)."""
    steps = tables.steps
    query = sa.select(steps).where(steps.c.flow_id == flow_id)
    return _dicts(conn.execute(query.order_by(steps.c.position, steps.c.id)))


def subflow_steps(conn: sa.Connection, tables: app_tables.AppTables) -> list[shapes.RowDict]:
    """Every flow's subflow steps (kind ``subflow``, as stored), each with its ``flow_id``:
    the ways one flow starts another, judged together when a flow's steps change."""
    steps = tables.steps
    query = sa.select(steps).where(steps.c.kind == sa.bindparam("p_kind", "subflow"))
    return _dicts(conn.execute(query.order_by(steps.c.flow_id, steps.c.position, steps.c.id)))


def steps_of_kind(
    conn: sa.Connection, tables: app_tables.AppTables, kind: str
) -> list[shapes.RowDict]:
    """Every flow's steps of ``kind`` (as stored), each with its ``flow_id``."""
    steps = tables.steps
    query = sa.select(steps).where(steps.c.kind == sa.bindparam("p_kind", kind))
    return _dicts(conn.execute(query.order_by(steps.c.flow_id, steps.c.position, steps.c.id)))


def step_by_id(
    conn: sa.Connection, tables: app_tables.AppTables, step_id: object
) -> shapes.RowDict | None:
    return _by_id(conn, tables.steps, step_id)


def store_step(
    conn: sa.Connection, tables: app_tables.AppTables, step_id: object, values: shapes.Row
) -> Any:
    """Insert a step row, or update the one with ``step_id`` when it is given; its id."""
    return _store(conn, tables.steps, step_id, values)


def insert_step(conn: sa.Connection, tables: app_tables.AppTables, values: shapes.Row) -> Any:
    """Insert a step row with the id it names when that id is free (a roll back gives a
    step its id again), else with a new one; its id."""
    steps = tables.steps
    wanted = values.get("id")
    if wanted is not None and step_by_id(conn, tables, wanted) is None:
        conn.execute(sa.insert(steps).values(_fitted(steps, values)))
        return wanted
    return store_step(conn, tables, None, {k: v for k, v in values.items() if k != "id"})


def delete_steps_of_flow(
    conn: sa.Connection, tables: app_tables.AppTables, flow_id: object
) -> None:
    steps = tables.steps
    conn.execute(sa.delete(steps).where(steps.c.flow_id == flow_id))


def delete_step(conn: sa.Connection, tables: app_tables.AppTables, step_id: object) -> None:
    steps = tables.steps
    conn.execute(sa.delete(steps).where(steps.c.id == step_id))
