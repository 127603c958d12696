"""Operators' actions on a code workflow's runs, where they differ from a flow's.

A retried run replays its recorded steps and tries its failed step again with all its
attempts, a refused one under a new idempotency key (``retried``); a restarted run is a
new run of the workflow's latest version with the old run's start (``restart``); a
forked run is a new run of the same version, on the same record and start, that
replays the old run's steps before a named one and does that step and the rest anew
(``Forks.fork``). Cancel and redrive are the same for every program
(``flowrunner.engine.actions``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import binding, errors
from flowrunner.engine.mounted import FLOW, program_of
from flowrunner.foundations import payloads
from flowrunner.store import dialects
from flowrunner.store import operations as ops
from flowrunner.workflows import definitions, replay, starts

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

PROGRAM = starts.PROGRAM
# What a fork's snapshot says of the run it was forked from.
FORKED = "forked"


def retried(state: Mapping[str, Any]) -> dict[str, Any]:
    """The run's state as an operator's retry leaves it: its waiting step's failed
    attempts forgotten, or the refused step it failed on set aside (``superseded``), so
    that the step runs again, under a new idempotency key."""
    rec = replay.Recording.from_dict(state)
    pending = rec.pending
    if pending is not None and pending.kind in (replay.RUN, replay.CALL):
        rec.pending = None
    elif rec.failed_on is not None and rec.steps and rec.steps[-1].name == rec.failed_on:
        rec.superseded.append(rec.steps.pop())
    rec.failed_on = None
    return rec.to_dict()


def restart(
    mounted: Mounted, conn: sa.Connection, run: ops.RunRow, operator: str, now: datetime
) -> int | None:
    """Start the run's workflow again (its latest version, the same start) as a new run on
    the same record; its id, or None when the workflow is not defined any more."""
    workflows = mounted.workflows
    name = str(run.snapshot.get("workflow"))
    definition = None if workflows is None else workflows.latest(name)
    if definition is None:
        return None
    start = run.snapshot.get("start")
    return starts.insert(
        mounted,
        conn,
        definition,
        start if isinstance(start, Mapping) else {},
        record_id=run.record_id,
        tenant=run.tenant,
        start_key=f"restart:{run.id}",
        started_by=operator,
        now=now,
    )


class Forks:
    """Operators' forks of one runner's code workflow runs (``runner.fork``)."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    def fork(
        self,
        run_id: object,
        *,
        from_step: str,
        operator: str,
        reason: str = "",
        tenant: binding.Tenant = None,
    ) -> int:
        """Fork a code workflow's run from ``from_step``: a new run of the same workflow
        version, on the same record, with the same start, that replays the steps the run
        recorded before ``from_step`` — their results as recorded, nothing called again —
        and does ``from_step`` and the steps after it anew (new idempotency keys, timers
        counted from the fork); the new run's id. Journaled, and said in both runs'
        histories; the old run stays as it is.

        ``OperatorError`` with a sentence for a step the run never reached, a run of a
        flow from rows (or any other program), a workflow version this runner no longer
        has, no operator, or a run of another resource or tenant.
        """
        mounted = self.mounted
        who = (operator or "").strip()
        if not who:
            raise errors.OperatorError(
                "name the operator: every fork is journaled with who did it",
                code="operator_missing",
            )
        owner = mounted.need_tenant(tenant)
        key = mounted.run_id(run_id)
        now = mounted.clock()
        with dialects.begin(mounted.engine) as conn:
            run = ops.find_run(conn, key)
            if (
                run is None
                or run.resource != mounted.binding.resource
                or (mounted.binding.tenant and run.tenant != owner)
            ):
                raise errors.OperatorError(
                    f"there is no run {key}", status_code=404, code="run_unknown"
                )
            begins = _forkable(mounted, run, from_step, now)
            start = run.snapshot.get("start")
            new_id = starts.insert(
                mounted,
                conn,
                begins.definition,
                start if isinstance(start, Mapping) else {},
                record_id=run.record_id,
                tenant=run.tenant,
                start_key=f"fork:{run.id}:{uuid.uuid4().hex}",
                started_by=who,
                now=now,
                origin={FORKED: {"run": run.id, "step": from_step}},
                state=begins.recording.to_dict(),
            )
            assert new_id is not None, "a fork's start key is its own"
            said = {"by": who, "step": from_step, **({"reason": reason} if reason else {})}
            kept = len(begins.recording.steps)
            ops.append_log(
                conn,
                run_id=new_id,
                at=now,
                what="forked_from",
                detail={**said, "run": run.id, "kept": kept, "workflow": run.flow_name},
            )
            ops.append_log(
                conn, run_id=run.id, at=now, what="forked", detail={**said, "forked_as": new_id}
            )
            ops.journal(
                conn,
                operator=who,
                action="fork",
                at=now,
                tenant=run.tenant,
                run_id=run.id,
                resource=run.resource,
                record_id=run.record_id,
                detail={"from": from_step, "forked_as": new_id, "reason": reason},
            )
        return new_id


@dataclass(frozen=True)
class _Begins:
    """What a fork begins with: the run's workflow at its version, the steps it keeps."""

    definition: definitions.Definition
    recording: replay.Recording


def _forkable(mounted: Mounted, run: ops.RunRow, step: object, now: datetime) -> _Begins:
    """What a fork of ``run`` from ``step`` begins with; ``OperatorError`` when it
    cannot be forked there."""
    program = program_of(run.snapshot)
    if program != PROGRAM:
        what = "a flow from rows" if program == FLOW else f"a {program}"
        raise errors.OperatorError(
            f"run {run.id} runs {what} ({run.flow_name}), not a workflow in code: only a code "
            "workflow's run is forked from a step",
            code="not_a_workflow",
        )
    name, version = str(run.snapshot.get("workflow")), run.snapshot.get("version")
    workflows = mounted.workflows
    definition = None
    if isinstance(version, int) and workflows is not None:
        definition = workflows.find(name, version)
    if not isinstance(definition, definitions.Definition):
        raise errors.OperatorError(
            f"run {run.id} executes workflow {name!r} version {version}, which this runner "
            "does not have any more: register it again to fork the run",
            code="workflow_missing",
        )
    recording = replay.Recording.from_dict(run.state)
    begins = replay.forked(recording, step, now) if isinstance(step, str) else None
    if begins is None:
        reached = ", ".join(repr(name) for name in replay.reached(recording))
        raise errors.OperatorError(
            f"run {run.id} never reached a step {payloads.quote(step)}: it cannot be forked "
            f"there (its steps: {reached or 'none yet'})",
            code="step_unknown",
        )
    return _Begins(definition, begins)
