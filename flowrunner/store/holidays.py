"""The application's holidays table, read for business time; and the waiting runs made
due again when it changes.

Business users keep the holidays in a table of the application's (``FlowBinding(
holidays_table="holidays")``): one row a day off, its ``day`` a date; a ``calendar``
column, when the table has one, narrows a row to the calendar of that name, and the
binding's tenant column, when the table has it, to that tenant (empty: every calendar,
every tenant). ``holidays_table`` declares such a table::

    holidays = holidays_table(metadata, "holidays", tenant="tenant_id")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.foundations import sqltypes, statuses
from flowrunner.store import app_tables, engine_tables


@dataclass(frozen=True)
class Holiday:
    """One row of the holidays table: the day, and whose it is (None: everyone's)."""

    day: date
    calendar: str | None = None
    tenant: str | None = None


def holidays_table(
    metadata: sa.MetaData,
    name: str,
    *,
    tenant: str | None = None,
    tenant_type: sqltypes.SqlType | None = None,
) -> sa.Table:
    """A holidays table: ``id, day, calendar, name`` (and the tenant column)."""
    columns: list[sqltypes.TableColumn] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("calendar", sa.Text),
        sa.Column("name", sa.Text),
    ]
    if tenant is not None:
        columns.append(sa.Column(tenant, tenant_type or sa.String(64)))
    return sa.Table(name, metadata, *columns)


def reflect(bind: sa.Engine | sa.Connection, name: str, tenant: str | None) -> sa.Table:
    """The holidays table as the database has it; ``BindingError`` when it is missing or
    has no ``day`` column."""
    [table] = app_tables.read_tables(bind, {name: "holidays"})
    if "day" not in table.c:
        raise errors.BindingError(
            f"the holidays table {name!r} has no column 'day', the date of each holiday"
        )
    return table


def read(conn: sa.Connection, table: sa.Table, tenant_column: str | None) -> tuple[Holiday, ...]:
    """Every holiday of the table, in order (a row without a day is skipped)."""
    calendar = table.c.get("calendar")
    tenant = table.c.get(tenant_column) if tenant_column is not None else None
    query = sa.select(
        table.c.day,
        calendar if calendar is not None else sa.null(),
        tenant if tenant is not None else sa.null(),
    )
    found = set()
    for day, named, owner in conn.execute(query):
        if day is None:
            continue
        if isinstance(day, datetime):
            day = day.date()
        elif isinstance(day, str):
            day = date.fromisoformat(day[:10])
        found.add(
            Holiday(
                day,
                None if named is None or not str(named).strip() else str(named).strip(),
                None if owner is None or not str(owner).strip() else str(owner),
            )
        )
    return tuple(sorted(found, key=lambda h: (h.day, h.calendar or "", h.tenant or "")))


def wake_waiting(conn: sa.Connection, *, resource: str, now: datetime) -> int:
    """Make every open run of ``resource``'s flows from rows that waits for a later time
    due now (its business times are counted again then); how many.

    A flow from rows keeps its flow row's id as its ``flow_id``; the programs' runs
    (``job:…``, ``at:…``, ``workflow:…``) are left as they are.
    """
    due, runs = engine_tables.due, engine_tables.runs
    flows_runs = sa.select(runs.c.id).where(
        runs.c.resource == resource,
        runs.c.status.in_(sorted(s.value for s in statuses.OPEN)),
        runs.c.flow_id.not_like("%:%"),
    )
    result = conn.execute(
        sa.update(due)
        .where(due.c.resource == resource, due.c.due_at > now, due.c.run_id.in_(flows_runs))
        .values(due_at=now, wakes=due.c.wakes + 1)
    )
    return int(result.rowcount or 0)
