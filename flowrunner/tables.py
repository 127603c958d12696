"""Declaring an application's flows and steps tables in its own SQLAlchemy ``MetaData``.

An application may instead bring tables it already has; ``FlowBinding.check`` reads
them by reflection and names any fixed column they lack. ``reflect`` reads the three
tables once, for ``flowrunner.flows.edits`` and ``flowrunner.flows.orm_hook.check_session``.
Declaring them::

    metadata = sa.MetaData()
    po_flow = tables.flows_table(metadata, "po_flow")
    po_flow_step = tables.steps_table(metadata, "po_flow_step", flows=po_flow, inputs=["approver"])

The tables themselves live in ``flowrunner.store.app_tables``; this is where
applications import them from.
"""

from __future__ import annotations

from flowrunner.store.app_tables import (
    NAME_LENGTH,
    AppTables,
    flows_table,
    for_binding,
    reflect,
    steps_table,
)
from flowrunner.store.holidays import holidays_table

__all__ = [
    "NAME_LENGTH",
    "AppTables",
    "flows_table",
    "for_binding",
    "holidays_table",
    "reflect",
    "steps_table",
]
