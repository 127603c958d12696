"""A subflow step's child run: started once by its parent's step, waking the parent when
it ends, cancelled when the parent stops waiting for it.

The same mechanism as a code workflow's ``w.child`` (``flowrunner.workflows.children``):
the child is an ordinary run of the named manual flow — its own history, the operators'
actions — whose snapshot names its parent (``{"parent": {"run": 7, "step": "12"}}``).

- ``start`` starts it in the parent's step transaction, under a start key made of the
  parent's run and the step's pass (``subflow:run-7/step-12/pass-1``), so it starts
  once whatever the crashes; the parent's wait for it commits with it. The child's flow
  is snapshotted then, as any start snapshots it: its latest published version where
  flows are published explicitly, its rows otherwise.
- A child that ends wakes its parent in the same transaction (``children.ended``); the
  parent's next advance reads how it ended (``ended``) and goes on, or fails the step.
- ``cancel`` cancels a child that has not ended, through its own program, so its own
  waiting steps are told and its own children cancelled in turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine.mounted import Mounted, program_of, record_tenant
from flowrunner.flows import spelling, starts
from flowrunner.flows.interpreter import effects, happened, subflows
from flowrunner.foundations import shapes, statuses
from flowrunner.store import operations as ops
from flowrunner.store import records
from flowrunner.workflows import children

PARENT = children.PARENT


def start_key(parent: ops.RunRow, key: str) -> str:
    """The start key of the child a step's pass starts (``subflow:run-7/step-12/pass-1``)."""
    return f"subflow:run-{parent.id}/{key}"


def start(
    mounted: Mounted,
    conn: sa.Connection,
    parent: ops.RunRow,
    asked: effects.StartSubflow,
    title: str | None,
    now: datetime,
) -> happened.CommandResult:
    """Start the child ``asked`` names, in the parent's step transaction: the answer
    ``{"run": id}`` (the run started before under the same key, if any), or refused
    with why it cannot start."""
    resource = mounted.binding.resource
    on = parent.record_id
    if asked.record_id is not None:
        try:
            on = str(mounted.tables.key_value(asked.record_id))
        except errors.RecordRejected as exc:
            said = f"'{asked.record_id}' cannot be a {resource} key: give {exc.expected}"
            return _refused(asked, said)
    record = records.load_record(conn, mounted.tables, on, parent.tenant)
    if record is None:
        return _refused(asked, f"there is no {resource} {on}")
    found = manual_flow(mounted, conn, asked.flow, record_tenant(mounted.binding, record))
    if found is None:
        said = f"there is no active manual flow named '{asked.flow}'"
        if mounted.binding.publish == "explicit":
            said += " with a published version"
        return _refused(asked, said)
    if found.problem is not None:
        return _refused(asked, f"flow '{found.snapshot.flow.name}' is broken: {found.problem}")
    key = start_key(parent, asked.key)
    step = title or f"{asked.step_id}"
    origin = {PARENT: {"run": parent.id, "step": step, "step_id": asked.step_id}}
    child = starts.start_child(mounted, conn, found, record, key, f"run {parent.id}", now, origin)
    if child is None:
        kept = ops.find_started(
            conn, resource=resource, flow_id=str(found.flow["id"]), start_key=key
        )
        assert kept is not None, "a start key that started a run names it"
        child = kept.id
    answer: shapes.JsonDict = {"run": child, "record": on}
    return happened.CommandResult(asked.key, ok=True, answer=answer)


def manual_flow(
    mounted: Mounted, conn: sa.Connection, name: str, tenant: object
) -> starts.Startable | None:
    """The active manual flow ``name`` (whatever its case) as a start snapshots it — its
    latest published version where flows are published explicitly — or None."""
    wanted = spelling.name_key(name)
    return next(
        (
            found
            for found in starts.startable(mounted, conn, "manual", tenant)
            if spelling.name_key(found.snapshot.flow.name) == wanted
        ),
        None,
    )


def _refused(asked: effects.StartSubflow, said: str) -> happened.CommandResult:
    error = {"message": said, "code": "subflow_refused"}
    return happened.CommandResult(asked.key, ok=False, error=error, refused=True)


def ended(conn: sa.Connection, saved: Mapping[str, Any] | None) -> tuple[happened.ChildEnded, ...]:
    """The child runs the run's waiting subflow steps wait for that have ended (read
    from the stored lanes: a run with no subflow step reads nothing more)."""
    found = []
    for lane in (saved or {}).get("lanes") or ():
        run = lane.get("child")
        if not isinstance(run, int) or lane.get("status") != statuses.LaneStatus.WAITING:
            continue
        child = ops.find_run(conn, run)
        if child is None:
            found.append(happened.ChildEnded(run, subflows.GONE))
        elif child.status in statuses.ENDED:
            found.append(happened.ChildEnded(child.id, str(child.status), child.reason))
    return tuple(found)


def cancel(
    mounted: Mounted,
    conn: sa.Connection,
    parent: ops.RunRow,
    asked: effects.CancelSubflow,
    now: datetime,
) -> bool:
    """Cancel the child run ``asked`` names if it has not ended (a failed one too), through
    its program; whether it did."""
    child = ops.find_run(conn, asked.run)
    if child is None or child.status in statuses.FINAL:
        return False
    program = mounted.programs.get(program_of(child.snapshot))
    why = f"cancelled with its parent, run {parent.id} ({asked.why})"
    kept, due = (
        program.cancelled(mounted, child, why, now) if program is not None else (child.state, now)
    )
    ops.save_run(
        conn,
        child.id,
        expected_version=child.version,
        state=kept,
        status=statuses.RunStatus.CANCELLED,
        now=now,
        reason=why,
        error=child.error,
    )
    ops.set_due(conn, run_id=child.id, due_at=due, tenant=child.tenant)
    detail = {"parent": parent.id, "reason": asked.why}
    ops.append_log(conn, run_id=child.id, at=now, what="cancelled_with_parent", detail=detail)
    return True
