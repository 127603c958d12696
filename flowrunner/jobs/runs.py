"""The runs a job keeps, their start keys and states, and starting them.

By their start keys (``flow_id`` ``job:NAME``):

- ``on:KEY`` — an event's job, on the planned record.
- ``every:NAME`` — a job at times' own run: due at its next slot, it decides which slot
  to run (``flowrunner.jobs.catch_up``). In ``realm="tenant"`` this run is the job's
  *roll-call*: at each slot it makes sure each active tenant has its own run,
  ``every:NAME:tenant:T``, which then runs the tenant's slots as a platform job's run
  does, in the tenant's scope.
- ``slot:SLOT`` (``slot:SLOT:tenant:T``) — one slot run on its own: with
  ``overlap="allow"`` beside the job's other slots, or backfilled by an operator.

A slot's idempotency key is ``job:NAME:SLOT`` (``…:tenant:T`` for a tenant's).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from flowrunner.engine.mounted import Mounted
from flowrunner.foundations import statuses
from flowrunner.jobs import schedules, spec
from flowrunner.store import listing
from flowrunner.store import operations as ops

PROGRAM = "job"  # the name a job's run gives its program (``engine.mounted.program_of``)
WAITING = statuses.RunStatus.WAITING
# How far before its first slot a tenant's new run counts from: it runs that slot.
JUST_BEFORE = timedelta(microseconds=1)


def flow_id(name: str) -> str:
    """What a job's runs keep as their flow id: ``job:NAME`` (the Operations room tells a
    job's runs apart by it: ``listing.JOB_RUNS``)."""
    return f"{listing.JOB_RUNS}{name}"


def every_key(name: str, tenant: str | None = None) -> str:
    """The start key of a job at times' own run (of one tenant's, in ``realm="tenant"``)."""
    return f"every:{name}" if tenant is None else f"every:{name}:tenant:{tenant}"


def slot_key(slot: datetime, tenant: str | None = None) -> str:
    """The start key of one slot's run of its own (``overlap="allow"``, a backfill)."""
    return f"slot:{slot.isoformat()}" + ("" if tenant is None else f":tenant:{tenant}")


def command_key(name: str, slot: datetime, tenant: str | None = None) -> str:
    """A slot's idempotency key: ``job:NAME:SLOT`` (``…:tenant:T`` for a tenant's)."""
    return f"job:{name}:{slot.isoformat()}" + ("" if tenant is None else f":tenant:{tenant}")


def timed_state(
    *,
    last: datetime,
    next_at: datetime,
    ran: datetime | None = None,
    began: datetime | None = None,
    ended: datetime | None = None,
    paused: object = None,
) -> dict[str, Any]:
    """A job at times' state: the slot it last handled (or was scheduled from), when it
    runs next, when its last slot's step began and ended, whether it is paused."""
    return {
        "last": last.isoformat(),
        "ran": None if ran is None else ran.isoformat(),
        "next_at": next_at.isoformat(),
        "attempt": 0,
        "retrying": None,
        "began": None if began is None else began.isoformat(),
        "ended": None if ended is None else ended.isoformat(),
        "paused": paused,
    }


def moment(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    found = datetime.fromisoformat(value)
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found


def digest(snapshot: Mapping[str, Any]) -> str:
    text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def timed_snapshot(name: str, job: spec.Job) -> dict[str, Any]:
    slots = job.slots
    return {
        "program": PROGRAM,
        "job": name,
        "every": slots.every,
        "timezone": slots.timezone,
        "command": job.command,
        "run_as": job.run_as,
        "realm": job.realm,
    }


def start_timed(
    conn: sa.Connection,
    mounted: Mounted,
    name: str,
    job: spec.Job,
    *,
    tenant: str | None,
    last: datetime,
    first: datetime,
    now: datetime,
) -> int | None:
    """Start a job at times' own run (a tenant's, with ``tenant``) due at ``first``,
    once; its id, or None when it was there already."""
    slots = job.slots
    snapshot = timed_snapshot(name, job)
    run_id = ops.insert_run(
        conn,
        tenant=tenant,
        resource=mounted.binding.resource,
        record_id="",
        flow_id=flow_id(name),
        flow_name=name,
        start_key=every_key(name, tenant),
        snapshot=snapshot,
        digest=digest(snapshot),
        state=timed_state(last=last, next_at=first),
        status=WAITING,
        now=now,
        started_by=job.run_as,
        due_at=first,
    )
    if run_id is not None:
        detail = {
            "every": slots.every,
            "timezone": slots.timezone,
            "first": first.isoformat(),
            "command": job.command,
            "interval": isinstance(slots, schedules.Interval),
        }
        line = ops.LogLine("job_scheduled", kind=PROGRAM, title=name, detail=detail)
        ops.append_logs(conn, run_id=run_id, at=now, tenant=tenant, lines=[line])
    return run_id


def start_slot(
    conn: sa.Connection,
    mounted: Mounted,
    name: str,
    job: spec.Job,
    *,
    slot: datetime,
    tenant: str | None,
    now: datetime,
    by: str | None = None,
) -> int | None:
    """Start one slot's run of its own, due now, once per slot (and tenant); its id, or
    None when that slot has its run already."""
    snapshot = {
        "program": PROGRAM,
        "job": name,
        "slot": slot.isoformat(),
        "timezone": job.timezone,
        "command": job.command,
        "run_as": job.run_as,
        "by": by,
    }
    return ops.insert_run(
        conn,
        tenant=tenant,
        resource=mounted.binding.resource,
        record_id="",
        flow_id=flow_id(name),
        flow_name=name,
        start_key=slot_key(slot, tenant),
        snapshot=snapshot,
        digest=digest(snapshot),
        state={"next_at": now.isoformat(), "attempt": 0},
        status=WAITING,
        now=now,
        started_by=by or job.run_as,
        due_at=now,
    )
