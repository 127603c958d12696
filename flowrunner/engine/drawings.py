"""Reading what a diagram draws: a flow's rows as they are today, or a run over its snapshot.

``FlowRunner.diagram`` delegates here. A flow is named as operators name it (its name
or id); a run is drawn over the snapshot it started with, never today's rows, with its
state and history. The drawing itself is ``flowrunner.diagrams``, which reads no tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import binding, diagrams, errors
from flowrunner.engine import actions
from flowrunner.engine.mounted import program_of
from flowrunner.flows import spelling, starts
from flowrunner.store import flow_rows
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted


def diagram(
    mounted: Mounted,
    conn: sa.Connection,
    flow: Any,
    *,
    run: int | None = None,
    can_read: diagrams.CanRead | None = None,
    tenant: binding.Tenant = None,
) -> diagrams.Diagram:
    """The diagram of ``flow`` (its name or id), or of its ``run`` over the run's snapshot.

    ``tenant`` is as the runner checked it (``FlowRunner._need_tenant``), ``run`` an id.

    ``OperatorError`` (404) when there is no such flow, no such run of this runner's
    resource (and tenant), the run is another flow's, or another program's (a timer).
    """
    config = mounted.config
    if run is None:
        found = flow_rows.flow_by_name_or_id(conn, mounted.tables, flow, tenant)
        if found is None:
            raise _no_flow(mounted, conn, flow, tenant)
        snap = starts.stored_snapshot(conn, mounted.tables, found["id"])
        return diagrams.flow_diagram(snap, config=config, can_read=can_read)
    row = actions.run_for_operator(mounted, conn, run, tenant)
    drawn = actions.program(mounted, row).drawn(mounted, conn, row, can_read)
    if drawn is None:
        raise errors.OperatorError(
            f"run {row.id} runs {program_of(row.snapshot)!r}, not a flow: it has no diagram",
            status_code=404,
            code="not_a_flow",
        )
    if not _is_flow_of(row, flow):
        raise errors.OperatorError(
            f"run {row.id} is a run of flow {row.flow_name!r}, not of {flow!r}",
            status_code=404,
            code="run_unknown",
        )
    return drawn


def _is_flow_of(row: ops.RunRow, flow: Any) -> bool:
    """Whether ``flow`` names the run's flow: its id, or its name when the run started."""
    return str(flow).strip() == row.flow_id or spelling.name_key(flow) == spelling.name_key(
        row.flow_name
    )


def _no_flow(
    mounted: Mounted, conn: sa.Connection, flow: Any, tenant: binding.Tenant
) -> errors.OperatorError:
    column = mounted.tables.tenant
    names = [
        str(row["name"])
        for row in flow_rows.all_flows(conn, mounted.tables)
        if column is None or str(row.get(column)) == str(tenant)
    ]
    hint = spelling.did_you_mean(str(flow), names)
    return errors.OperatorError(
        f"there is no flow {flow!r}{hint}", status_code=404, code="flow_unknown"
    )
