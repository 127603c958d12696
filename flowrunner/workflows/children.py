"""A code workflow's children: started once by a step of their parent, waking the
parent when they end, cancelled with it.

A ``child`` step (``w.child``) starts its workflow's latest version as a run of its own,
in the parent's step transaction: the child's start key is the parent's run and the
step's name (``child:run-7/credit``), so it starts once whatever the crashes, and the
parent's wait for it (``Pending.run``) commits with it. The parent then waits, due at
nothing, until the child ends: the child's last step wakes it (``ended``), as an event
wakes the runs of its record, and the parent reads how the child ended (``outcome``):
what it returned, or why it failed or was cancelled (a refusal the parent's ``await``
raises as ``StepRefused``). A parent cancelled cancels its children that have not ended
(``cancel_open``) — the one it waits for, and a failed one an operator retried since —
and each child its own in turn.

The child is an ordinary run — its own history, the operators' actions — whose
snapshot names its parent (``{"parent": {"run": 7, "step": "credit"}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.foundations import payloads, shapes, statuses
from flowrunner.store import operations as ops
from flowrunner.store import records
from flowrunner.workflows import replay, starts

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

PARENT = "parent"


@dataclass(frozen=True)
class Ended:
    """How a child ended, as its parent's step records it: what it returned, or why it
    did not (``refused``: ``{"message": ..., "code": "child_failed"}``)."""

    result: shapes.Json
    refused: shapes.JsonDict | None = None


def start_key(key: str) -> str:
    """The start key of the child a step starts, from the step's idempotency key
    (``run-7/credit``; after an operator retried its refusal, ``run-7/credit/retry-1``)."""
    return f"child:{key}"


def start(
    mounted: Mounted,
    conn: sa.Connection,
    parent: ops.RunRow,
    ask: replay.Ask,
    key: str,
    now: datetime,
) -> int | str:
    """Start the child ``ask`` names, in the parent's step transaction; the child's run
    id (the one started before under ``key``, if any), or why it cannot be started."""
    workflows = mounted.workflows
    name = str(ask.target)
    definition = None if workflows is None else workflows.latest(name)
    if definition is None:
        known = ", ".join(workflows.names()) if workflows is not None else ""
        return f"there is no workflow {name!r} (workflows: {known or 'none'})"
    given = ask.options.get("record")
    on = parent.record_id
    if given is not None:
        resource = mounted.binding.resource
        try:
            on = str(mounted.tables.key_value(given))
        except errors.RecordRejected as exc:
            return f"{payloads.quote(given)} cannot be a {resource} key: give {exc.expected}"
        if records.load_record(conn, mounted.tables, on, parent.tenant) is None:
            return f"there is no {resource} {on}"
    started_key = start_key(key)
    child = starts.insert(
        mounted,
        conn,
        definition,
        dict(ask.options.get("input") or {}),
        record_id=on,
        tenant=parent.tenant,
        start_key=started_key,
        started_by=f"run {parent.id}",
        now=now,
        origin={PARENT: {"run": parent.id, "step": ask.name}},
    )
    if child is None:
        found = ops.find_started(
            conn,
            resource=mounted.binding.resource,
            flow_id=starts.flow_id(definition.name),
            start_key=started_key,
        )
        assert found is not None, "a start key that started a run names it"
        child = found.id
    return child


def outcome(conn: sa.Connection, child_id: int, workflow: str) -> Ended | None:
    """How the child ended, or None while it has not."""
    child = ops.find_run(conn, child_id)
    if child is None:
        message = f"child run {child_id} ({workflow}) is gone"
        return Ended(None, {"message": message, "code": "child_missing", "run": child_id})
    if child.status == statuses.RunStatus.DONE:
        return Ended(child.state.get("result"))
    if child.status == statuses.RunStatus.FAILED:
        message = f"child run {child_id} failed" + (f": {child.reason}" if child.reason else "")
        return Ended(None, {"message": message, "code": "child_failed", "run": child_id})
    if child.status == statuses.RunStatus.CANCELLED:
        message = f"child run {child_id} was cancelled" + (
            f" ({child.reason})" if child.reason else ""
        )
        return Ended(None, {"message": message, "code": "child_cancelled", "run": child_id})
    return None


def parent_of(run: ops.RunRow) -> int | None:
    """The run that started ``run`` as its child, if one did."""
    parent = run.snapshot.get(PARENT)
    if isinstance(parent, Mapping) and isinstance(parent.get("run"), int):
        return int(parent["run"])
    return None


def started(state: Mapping[str, object] | None) -> list[int]:
    """The child runs a run's state knows it started and that may not have ended: the
    one it waits for, and those whose failure it recorded (an operator may have retried
    them since). A child that returned is done for good."""
    rec = replay.Recording.from_dict(state)
    found = []
    for step in (*rec.superseded, *rec.steps):
        run = (step.refused or {}).get("run") if step.kind == replay.CHILD else None
        if isinstance(run, int):
            found.append(run)
    if rec.pending is not None and rec.pending.kind == replay.CHILD and rec.pending.run:
        found.append(rec.pending.run)
    return found


def ended(conn: sa.Connection, run: ops.RunRow, now: datetime) -> None:
    """A run that ended (done, failed or cancelled) wakes its parent, in the same
    transaction: the parent's step reads how it ended."""
    parent = parent_of(run)
    if parent is not None:
        ops.wake_run(conn, run_id=parent, now=now)


def cancel_open(conn: sa.Connection, run: ops.RunRow, now: datetime) -> list[int]:
    """A cancelled run's children that have not ended, cancelled with it (and made due,
    so that their own open children are cancelled in turn); their ids."""
    why = f"cancelled with its parent, run {run.id}"
    if run.reason:
        why += f" ({run.reason})"
    cancelled = []
    for child_id in started(run.state):
        child = ops.find_run(conn, child_id)
        if child is None or child.status in statuses.ENDED:
            continue
        ops.save_run(
            conn,
            child.id,
            expected_version=child.version,
            state=child.state,
            status=statuses.RunStatus.CANCELLED,
            now=now,
            reason=why,
            error=child.error,
        )
        ops.set_due(conn, run_id=child.id, due_at=now, tenant=child.tenant)
        detail = {"parent": run.id, "reason": run.reason}
        ops.append_log(conn, run_id=child.id, at=now, what="cancelled_with_parent", detail=detail)
        cancelled.append(child.id)
    return cancelled
