"""A shipping desk whose parcels have a column of every type a set step writes.

Each column is one a flow may set: whole numbers of the three sizes, a price with two
decimals, a short code and a long note, a flag, a date and two kinds of date and time;
``rank`` and ``code`` always have a value. Tests mount it with ``mount`` and drive it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import migrated
import sqlalchemy as sa

from flowrunner import tables, testing
from flowrunner.binding import FlowBinding
from flowrunner.runner import flow_runner

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

metadata = sa.MetaData()

parcel = sa.Table(
    "parcel",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("rank", sa.SmallInteger, nullable=False),
    sa.Column("quantity", sa.Integer),
    sa.Column("barcode", sa.BigInteger),
    sa.Column("price", sa.Numeric(8, 2)),
    sa.Column("code", sa.String(20), nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("paid", sa.Boolean),
    sa.Column("due_on", sa.Date),
    sa.Column("shipped_at", sa.DateTime),
    sa.Column("arrived_at", sa.DateTime(timezone=True)),
)

SET_COLUMNS = [c.name for c in parcel.columns if c.name != "id"]

binding = FlowBinding(
    resource="parcel",
    flows_table="parcel_flow",
    steps_table="parcel_flow_step",
    set_columns=SET_COLUMNS,
)

parcel_flow, parcel_flow_step = tables.for_binding(metadata, binding)

# What a parcel holds when it is created (its NOT NULL columns filled).
NEW = {"rank": 1, "code": "NEW"}


def mount(engine: sa.Engine) -> tuple[testing.FlowDriver, Any]:
    """The desk's tables and the engine's on ``engine``, a runner on them, and its driver,
    with the id of its one flow, ``Mark``: it starts when a parcel is created, no steps yet.
    """
    metadata.create_all(engine)
    migrated.upgrade(engine)
    runner = flow_runner(binding, engine)
    with runner.engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Mark", "start": "created"})
    return testing.FlowDriver(runner, start=T0), flow
