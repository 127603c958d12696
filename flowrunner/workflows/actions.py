"""Operators' actions on a code workflow's runs, where they differ from a flow's.

A retried run replays its recorded steps and tries its failed step again with all its
attempts, a refused one under a new idempotency key (``retried``); a restarted run is a
new run of the workflow's latest version with the old run's start (``restart``).
Cancel and redrive are the same for every program (``flowrunner.engine.actions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner.store import operations as ops
from flowrunner.workflows import replay, starts

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

PROGRAM = starts.PROGRAM


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
