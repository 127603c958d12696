"""Jobs beside the flows: a command run because of an event, or at times — on the same
runs, workers, leases and journal, no second engine.

``Jobs(runner, {"name": Job(...)})`` mounts the declarations (``flowrunner.jobs.spec``):

- **A job on an event** is planned in the event's own transaction (``runner.emit``): its
  ``schedule(event)`` answers a ``Plan`` and the plan becomes a run of the job on the
  event's record, due at ``run_at``, started once per plan key — a re-sent event plans
  nothing new. A worker claims it when due and runs the command once, as the job's
  principal, authorized again on each attempt, retried with the runner's backoff; a
  refusal, or the last failed attempt, fails the run with a sanitized envelope.
- **A job at times** has one run of its own (started ``every:NAME``, made by each
  worker before its first claim, and by ``flowrunner jobs``), due at its next slot.
  Claimed, it runs the slot its ``catch_up`` and ``overlap`` choose
  (``flowrunner.jobs.catch_up``; by default the latest slot due, the missed ones said in
  the history line), then is due at the slot after. Its lease makes it one at a time
  and each slot once however many workers serve. A slot whose command keeps failing (or
  is refused) is written in the history and the job waits for its next slot. In
  ``realm="tenant"`` that run is a roll-call giving each active tenant a run of its own
  (``flowrunner.jobs.steps``); the active tenants are those that own a record of the
  binding's resource, or those ``Jobs(..., tenants=...)`` answers.
- **Operators** run a job at times now (``run_now``), pause and resume it, and
  backfill a range of its slots, each journaled with their name.

Each slot's command has the idempotency key ``job:NAME:SLOT`` (the slot in ISO 8601,
UTC); an event job's ``job:NAME:KEY``; a run by hand (``run_now``, ``flowrunner jobs run``)
``job:NAME:manual:JOURNAL-ID``.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine.mounted import Claimed, Mountable, Mounted, Program, Stepping
from flowrunner.foundations import payloads, statuses
from flowrunner.jobs import runs, spec, steps
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops

PROGRAM = runs.PROGRAM
WAITING = statuses.RunStatus.WAITING
flow_id = runs.flow_id
every_key = runs.every_key

# The most slots one backfill starts: a wider range is refused, to be given in parts.
MOST_BACKFILLED = 10_000

# What answers the active tenants of a ``realm="tenant"`` job, in the roll-call's
# transaction.
ActiveTenants = Callable[[sa.Connection], Sequence[object]]
_S = TypeVar("_S", bound=steps.JobStep)


@dataclass(frozen=True)
class JobInfo:
    """A job as ``flowrunner jobs list`` shows it."""

    name: str
    when: str
    """``on po.decided`` or ``0 6 * * 1-5 (America/New_York)``."""
    command: str
    run_as: str
    run_id: int | None = None
    """A job at times' run (None before a worker or ``jobs list`` made it)."""
    next_at: datetime | None = None
    """When a job at times next runs."""
    last_slot: datetime | None = None
    """The last slot it ran (or gave up), if any."""
    timezone: str | None = None
    """A job at times' wall clock (its slots are shown on it)."""
    paused_by: str | None = None
    """Who paused it (None: it is not paused)."""
    said: str = ""
    """When it runs, as people say it: ``every weekday at 06:00 (America/New_York)``."""


@dataclass(frozen=True)
class Ran:
    """What a run by hand did: the run it was journaled on, and the command's outcome."""

    run_id: int
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class Backfilled:
    """What a backfill did: the slots in its range, the runs it started for them, and
    the slots that had run already (started nothing)."""

    slots: list[datetime]
    started: list[int]
    ran_already: list[datetime]
    entry: int
    """Its journal entry."""


class Jobs(Program):
    """The jobs mounted on one runner, by name (see the module's docstring).

    ``tenants`` answers the active tenants of a ``realm="tenant"`` job, given a
    connection (default: every tenant owning a record of the binding's resource).
    """

    def __init__(
        self,
        runner: Mounted | Mountable,
        jobs: Mapping[str, spec.Job],
        *,
        tenants: ActiveTenants | None = None,
    ) -> None:
        mounted = Mounted.of(runner)
        if mounted.jobs is not None:
            raise errors.BindingError("this runner has jobs mounted already: mount them once")
        if tenants is not None and not callable(tenants):
            raise errors.BindingError(
                "Jobs(tenants=...) is a function of a connection answering the active tenants"
            )
        self.mounted = mounted
        self.tenants = tenants
        self.jobs: dict[str, spec.Job] = {}
        for name, job in jobs.items():
            self._check(name, job)
            self.jobs[name] = job
        mounted.jobs = self
        mounted.programs[PROGRAM] = self
        mounted.on_event.append(self._plan)
        mounted.preparing.append(self.prepare)

    def _check(self, name: object, job: object) -> None:
        mounted = self.mounted
        if (
            not isinstance(name, str)
            or not name.strip()
            or name != name.strip()
            or payloads.text_problem(name) is not None  # it is kept in text columns
        ):
            raise errors.BindingError(f"a job's name is a word such as 'nightly_close': {name!r}")
        if not isinstance(job, spec.Job):
            raise errors.BindingError(f"job {name!r} is a {type(job).__name__}, not a Job")
        mounted.check_command(job.command, principal=job.run_as, needed_by=f"job {name!r}")
        mounted.add_limit("job", name, f"job {name!r}", job.limit)
        if job.on is not None and job.on not in mounted.binding.events:
            known = ", ".join(sorted(mounted.binding.events)) or "none"
            raise errors.BindingError(
                f"job {name!r} runs on event {job.on!r}, which the binding does not have "
                f"(events: {known})"
            )
        if job.realm == "tenant" and mounted.binding.tenant is None:
            raise errors.BindingError(
                f"job {name!r} runs once per tenant (realm='tenant'), but the binding's "
                f"{mounted.binding.resource} records belong to no tenants: leave realm out"
            )

    def job(self, name: str) -> spec.Job:
        """The job of that name; ``OperatorError`` (404) naming the jobs there are."""
        found = self.jobs.get(name)
        if found is None:
            there = ", ".join(sorted(self.jobs)) or "none"
            raise errors.OperatorError(
                f"there is no job {name!r} (jobs: {there})", status_code=404, code="job_unknown"
            )
        return found

    def timed(self, name: str) -> spec.Job:
        """The job at times of that name; ``OperatorError`` for an event's job."""
        job = self.job(name)
        if job.every is None:
            raise errors.OperatorError(
                f"job {name!r} runs on event {job.on!r}: it runs when an event plans it, "
                "not by hand",
                code="job_on_event",
            )
        return job

    def active_tenants(self, conn: sa.Connection) -> builtins.list[str]:
        """The tenants a ``realm="tenant"`` job runs for now: ``tenants(conn)`` when the
        application gave it, else every tenant owning a record of the resource."""
        if self.tenants is None:
            return records.record_tenants(conn, self.mounted.tables)
        found = []
        for tenant in self.tenants(conn):
            if isinstance(tenant, bool) or not isinstance(tenant, str | int) or tenant == "":
                raise errors.BindingError(
                    f"Jobs(tenants=...) answered {tenant!r}: a tenant is a text or a number"
                )
            found.append(str(tenant))
        return sorted(set(found))

    # -- planning an event's job ------------------------------------------------------------

    def _plan(self, conn: sa.Connection, event: spec.Emitted) -> None:
        """Plan each job on ``event`` in the emitting transaction: a run due at its plan's
        ``run_at``, on its target record (the event's own by default), once per plan key."""
        for name, job in self.jobs.items():
            if job.on != event.name:
                continue
            plan = spec.plan_of(name, job, event)
            snapshot = {
                "program": PROGRAM,
                "job": name,
                "on": event.name,
                "event": event.id,
                "key": plan.key,
                "command": job.command,
                "run_as": job.run_as,
                "input": plan.input,
            }
            if plan.target != event.record_id:
                snapshot["target"] = plan.target
            run_id = ops.insert_run(
                conn,
                tenant=event.tenant,
                resource=self.mounted.binding.resource,
                record_id=plan.target,
                flow_id=flow_id(name),
                flow_name=name,
                start_key=f"on:{plan.key}",
                snapshot=snapshot,
                digest=runs.digest(snapshot),
                state={"next_at": plan.run_at.isoformat(), "attempt": 0},
                status=WAITING,
                now=event.at,
                started_by=job.run_as,
                due_at=plan.run_at,
            )
            if run_id is not None:
                planned = {
                    "event": event.name,
                    "run_at": plan.run_at.isoformat(),
                    "key": plan.key,
                }
                if "target" in snapshot:
                    planned["target"] = plan.target
                line = ops.LogLine("job_planned", kind=PROGRAM, title=name, detail=planned)
                ops.append_logs(conn, run_id=run_id, at=event.at, tenant=event.tenant, lines=[line])

    # -- a job at times' run -----------------------------------------------------------------

    def prepare(self, now: datetime | None = None) -> None:
        """Make sure each job at times has its run, due at its next slot after ``now``:
        a job store with no run of the job yet starts at its next slot, never a missed one.
        Idempotent; each worker does it before its first claim."""
        now = self.mounted.clock() if now is None else now
        timed = [(name, job) for name, job in self.jobs.items() if job.every is not None]
        if not timed:
            return
        with dialects.begin(self.mounted.engine) as conn:
            for name, job in timed:
                first = job.slots.next_slot(now)
                runs.start_timed(
                    conn, self.mounted, name, job, tenant=None, last=now, first=first, now=now
                )

    def scheduled_run(self, name: str, tenant: object = None) -> ops.RunRow | None:
        """A job at times' run (a tenant's own, with ``tenant``), or None before it was made."""
        with self.mounted.engine.connect() as conn:
            return ops.find_started(
                conn,
                resource=self.mounted.binding.resource,
                flow_id=flow_id(name),
                start_key=every_key(name, None if tenant is None else str(tenant)),
            )

    def scheduled_runs(self, name: str) -> builtins.list[ops.RunRow]:
        """A job at times' own run, then each tenant's (``realm="tenant"``), oldest first."""
        with self.mounted.engine.connect() as conn:
            return ops.runs_started_with(
                conn,
                resource=self.mounted.binding.resource,
                flow_id=flow_id(name),
                prefix=every_key(name),
                open_only=False,
            )

    def list(self) -> list[JobInfo]:
        """Every job, by name, each job at times with its run, next and last slot."""
        shown = []
        for name in sorted(self.jobs):
            job = self.jobs[name]
            zone = None if job.every is None else job.timezone
            info = JobInfo(
                name, job.describe(), job.command, job.run_as, timezone=zone, said=job.said()
            )
            run = self.scheduled_run(name) if job.every is not None else None
            if run is not None:
                paused = run.state.get("paused")
                info = dataclasses.replace(
                    info,
                    run_id=run.id,
                    next_at=None if paused else runs.moment(run.state.get("next_at")),
                    last_slot=runs.moment(run.state.get("ran")),
                    paused_by=str(paused.get("by")) if isinstance(paused, Mapping) else None,
                )
            shown.append(info)
        return shown

    # -- operators' actions ------------------------------------------------------------------

    def run_now(
        self, name: str, *, operator: str, wait: float = 60.0, tenant: object = None
    ) -> Ran:
        """Run a job at times now, once, as its principal, journaled with ``operator``
        (a ``realm="tenant"`` job: in ``tenant``'s scope, which it names).

        Waits (up to ``wait`` seconds) while a worker's scheduled run of the job holds its
        lease: one at a time. Its schedule goes on as it was. ``OperatorError`` for an
        unknown name (naming the jobs there are), an event's job (it runs when planned),
        and a lease still held after ``wait``.
        """
        job = self.timed(name)
        operator = _operator(operator, "runs the job")
        self.prepare()
        if job.realm == "tenant":
            if tenant is None:
                raise errors.OperatorError(
                    f"job {name!r} runs once per tenant: name the tenant to run it for",
                    code="job_tenant",
                )
            self._tenant_run(name, job, str(tenant))
        run = self.scheduled_run(name, tenant if job.realm == "tenant" else None)
        assert run is not None
        step = self._by_hand(name, run, wait, lambda held: steps.ByHand(held, self, operator))
        return Ran(run.id, step.ran_ok, step.ran_error)

    def pause(self, name: str, *, operator: str, wait: float = 60.0) -> int:
        """Pause a job at times: it runs no slot until resumed (a slot still running ends
        first: this waits for it, up to ``wait`` seconds). Journaled with ``operator``;
        its journal entry's id. Pausing a paused job changes nothing (and is journaled)."""
        self.timed(name)
        operator = _operator(operator, "pauses the job")
        self.prepare()
        at = self.mounted.clock()
        paused = {"by": operator, "at": at.isoformat()}
        for run in self._open_scheduled(name):
            if run.state.get("paused"):
                continue
            self._by_hand(
                name,
                run,
                wait,
                lambda held: steps.Operated(held, self, operator, paused=paused),
            )
        return self._journal(name, operator, "job_pause", {"job": name})

    def resume(self, name: str, *, operator: str, wait: float = 60.0) -> int:
        """Resume a paused job at times: it is due at once, and the slots missed while it
        was paused run as its ``catch_up`` says. Journaled with ``operator``; its journal
        entry's id. Resuming a job that is not paused changes nothing (and is journaled)."""
        self.timed(name)
        operator = _operator(operator, "resumes the job")
        self.prepare()
        for run in self._open_scheduled(name):
            if not run.state.get("paused"):
                continue
            self._by_hand(
                name,
                run,
                wait,
                lambda held: steps.Operated(held, self, operator, paused=None),
            )
        with dialects.begin(self.mounted.engine) as conn:
            # The slots' runs that waited for the job: due now.
            for run in ops.runs_started_with(
                conn,
                resource=self.mounted.binding.resource,
                flow_id=flow_id(name),
                prefix="slot:",
            ):
                if run.state.get("parked"):
                    ops.set_due(conn, run_id=run.id, due_at=self.mounted.clock(), tenant=run.tenant)
        return self._journal(name, operator, "job_resume", {"job": name})

    def backfill(
        self,
        name: str,
        *,
        start: datetime,
        end: datetime,
        operator: str,
        tenant: object = None,
    ) -> Backfilled:
        """Run each slot of a job at times from ``start`` to ``end`` (both included) once:
        a run of its own per slot (per active tenant, or ``tenant``'s alone, in
        ``realm="tenant"``), due now, for the workers. A slot that ran already, by its
        schedule or an earlier backfill, is not run again. Journaled with ``operator``.

        ``OperatorError`` for a range that ends before it starts, or after now (a slot
        that has not come runs at its time), or holds more than ``MOST_BACKFILLED`` slots.
        """
        job = self.timed(name)
        operator = _operator(operator, "backfills the job")
        for said, value in (("start", start), ("end", end)):
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise errors.OperatorError(
                    f"a backfill's {said} is a moment with its time zone, not {value!r}"
                )
        now = self.mounted.clock()
        if end < start:
            raise errors.OperatorError(
                f"the backfill of job {name!r} ends ({end.isoformat()}) before it starts "
                f"({start.isoformat()})"
            )
        if end > now:
            raise errors.OperatorError(
                f"the backfill of job {name!r} ends at {end.isoformat()}, after now "
                f"({now.isoformat()}): a slot that has not come runs at its time"
            )
        slots = job.slots.slots(start - runs.JUST_BEFORE, end)
        if len(slots) > MOST_BACKFILLED:
            raise errors.OperatorError(
                f"the backfill of job {name!r} holds {len(slots)} slots: at most "
                f"{MOST_BACKFILLED} at once, give the range in parts"
            )
        self.prepare()
        started: list[int] = []
        ran: list[datetime] = []
        with dialects.begin(self.mounted.engine) as conn:
            if job.realm == "tenant":
                tenants: list[str | None] = (
                    [str(tenant)] if tenant is not None else list(self.active_tenants(conn))
                )
            else:
                tenants = [None]
            for slot in slots:
                for whose in tenants:
                    key = runs.command_key(name, slot, whose)
                    done = ops.find_idempotent(conn, key=key)
                    if done is not None and done.completed:
                        ran.append(slot)
                        continue
                    run_id = runs.start_slot(
                        conn, self.mounted, name, job, slot=slot, tenant=whose, now=now, by=operator
                    )
                    if run_id is not None:
                        started.append(run_id)
            detail = {
                "job": name,
                "from": start.isoformat(),
                "to": end.isoformat(),
                "slots": len(slots),
                "started": len(started),
            }
            own = self.scheduled_run(name)
            entry = ops.journal(
                conn,
                operator=operator,
                action="job_backfill",
                at=now,
                run_id=None if own is None else own.id,
                resource=self.mounted.binding.resource,
                detail=detail,
            )
        return Backfilled(slots, started, ran, entry)

    def _journal(self, name: str, operator: str, action: str, detail: dict[str, Any]) -> int:
        own = self.scheduled_run(name)
        with dialects.begin(self.mounted.engine) as conn:
            return ops.journal(
                conn,
                operator=operator,
                action=action,
                at=self.mounted.clock(),
                run_id=None if own is None else own.id,
                resource=self.mounted.binding.resource,
                detail=detail,
            )

    def _open_scheduled(self, name: str) -> builtins.list[ops.RunRow]:
        runs = [run for run in self.scheduled_runs(name) if not run.ended]
        if not runs:
            raise errors.OperatorError(
                f"job {name!r} no longer runs: its run was cancelled or ended",
                code="job_ended",
            )
        return runs

    def _tenant_run(self, name: str, job: spec.Job, tenant: str) -> None:
        """Make sure a tenant has its own run of a ``realm="tenant"`` job (due at its
        next slot), as the roll-call would at the job's next slot."""
        now = self.mounted.clock()
        with dialects.begin(self.mounted.engine) as conn:
            runs.start_timed(
                conn,
                self.mounted,
                name,
                job,
                tenant=tenant,
                last=now,
                first=job.slots.next_slot(now),
                now=now,
            )

    def _held(self, name: str, run: ops.RunRow, wait: float) -> tuple[Any, ops.Claim]:
        """``run`` claimed for an operator's step by a worker of its own, waiting up to
        ``wait`` seconds while another worker holds it."""
        from flowrunner.engine import worker as worker_mod

        if run.ended:
            raise errors.OperatorError(
                f"job {name!r} no longer runs: its run {run.id} is {run.status} "
                f"({run.reason or 'no reason given'})",
                code="job_ended",
            )
        hand = worker_mod.Worker(self.mounted, owner=ops.new_owner_id("jobs-run"))
        until = time.monotonic() + wait
        while True:
            claim = ops.claim_run(
                self.mounted.engine,
                run_id=run.id,
                owner=hand.owner,
                now=self.mounted.clock(),
                ttl=hand.lease_ttl,
            )
            if claim is not None:
                return hand, claim
            if time.monotonic() >= until:
                raise errors.OperatorError(
                    f"job {name!r} is still running on a worker after {wait:g} seconds: "
                    "try again when it is done",
                    code="job_busy",
                )
            time.sleep(0.05)  # a worker runs the job's slot: it gives the lease up when done

    def _by_hand(
        self,
        name: str,
        run: ops.RunRow,
        wait: float,
        make: Callable[[Claimed], _S],
    ) -> _S:
        """An operator's step (``make``) on ``run``, claimed (``_held``), in a transaction
        of its own; the step, advanced."""
        hand, claim = self._held(name, run, wait)
        with dialects.begin(self.mounted.engine) as conn:
            now = self.mounted.clock()
            step = make(hand.claimed(conn, claim, now, (), ops.load_run(conn, run.id)))
            step.advance()
        return step

    # -- the program -------------------------------------------------------------------------

    def step(self, claimed: Claimed) -> Stepping:
        """The step of a claimed job run (this is the ``job`` program)."""
        return steps.JobStep(claimed, self)


def _operator(operator: object, does: str) -> str:
    if not isinstance(operator, str) or not operator.strip():
        raise errors.OperatorError(f"name the operator who {does}")
    return operator.strip()
