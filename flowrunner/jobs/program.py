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
  Claimed, it runs the latest slot due — the slots missed while no worker served are
  skipped, said in the history line — then is due at the slot after. Its lease makes it
  one at a time and each slot once however many workers serve: a slot that falls due
  while the last one still runs waits for it and runs as soon as it is done. A slot
  whose command keeps failing (or is refused) is written in the history and the job
  waits for its next slot.

Each slot's command has the idempotency key ``job:NAME:SLOT`` (the slot in ISO 8601,
UTC); an event job's ``job:NAME:KEY``; a run by hand (``run_now``, ``flowrunner jobs run``)
``job:NAME:manual:JOURNAL-ID``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import claimed, commands
from flowrunner.engine.mounted import Claimed, Mountable, Mounted, Program, Stepping
from flowrunner.flows.interpreter import happened, retry
from flowrunner.foundations import payloads, retry_policy, sanitize, statuses
from flowrunner.jobs import spec
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops

PROGRAM = "job"  # the name a job's run gives its program (``engine.mounted.program_of``)
WAITING = statuses.RunStatus.WAITING


def flow_id(name: str) -> str:
    """What a job's runs keep as their flow id: ``job:NAME``."""
    return f"{PROGRAM}:{name}"


def every_key(name: str) -> str:
    """The start key of a job at times' one run."""
    return f"every:{name}"


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


@dataclass(frozen=True)
class Ran:
    """What a run by hand did: the run it was journaled on, and the command's outcome."""

    run_id: int
    ok: bool
    error: str | None = None


class Jobs(Program):
    """The jobs mounted on one runner, by name (see the module's docstring)."""

    def __init__(self, runner: Mounted | Mountable, jobs: Mapping[str, spec.Job]) -> None:
        mounted = Mounted.of(runner)
        if mounted.jobs is not None:
            raise errors.BindingError("this runner has jobs mounted already: mount them once")
        self.mounted = mounted
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
        if job.on is not None and job.on not in mounted.binding.events:
            known = ", ".join(sorted(mounted.binding.events)) or "none"
            raise errors.BindingError(
                f"job {name!r} runs on event {job.on!r}, which the binding does not have "
                f"(events: {known})"
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

    # -- planning an event's job ------------------------------------------------------------

    def _plan(self, conn: sa.Connection, event: spec.Emitted) -> None:
        """Plan each job on ``event`` in the emitting transaction: a run due at its plan's
        ``run_at``, once per plan key."""
        for name, job in self.jobs.items():
            if job.on != event.name:
                continue
            key, run_at, given = spec.plan_of(name, job, event)
            snapshot = {
                "program": PROGRAM,
                "job": name,
                "on": event.name,
                "event": event.id,
                "key": key,
                "command": job.command,
                "run_as": job.run_as,
                "input": given,
            }
            run_id = ops.insert_run(
                conn,
                tenant=event.tenant,
                resource=self.mounted.binding.resource,
                record_id=event.record_id,
                flow_id=flow_id(name),
                flow_name=name,
                start_key=f"on:{key}",
                snapshot=snapshot,
                digest=_digest(snapshot),
                state={"next_at": run_at.isoformat(), "attempt": 0},
                status=WAITING,
                now=event.at,
                started_by=job.run_as,
                due_at=run_at,
            )
            if run_id is not None:
                planned = {"event": event.name, "run_at": run_at.isoformat(), "key": key}
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
                slots = job.slots
                first = slots.next_slot(now)
                snapshot = {
                    "program": PROGRAM,
                    "job": name,
                    "every": slots.every,
                    "timezone": slots.timezone,
                    "command": job.command,
                    "run_as": job.run_as,
                }
                run_id = ops.insert_run(
                    conn,
                    tenant=None,
                    resource=self.mounted.binding.resource,
                    record_id="",
                    flow_id=flow_id(name),
                    flow_name=name,
                    start_key=every_key(name),
                    snapshot=snapshot,
                    digest=_digest(snapshot),
                    state=_timed_state(last=now, next_at=first),
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
                    }
                    line = ops.LogLine("job_scheduled", kind=PROGRAM, title=name, detail=detail)
                    ops.append_logs(conn, run_id=run_id, at=now, tenant=None, lines=[line])

    def scheduled_run(self, name: str) -> ops.RunRow | None:
        """A job at times' run, or None before it was made."""
        with self.mounted.engine.connect() as conn:
            return ops.find_started(
                conn,
                resource=self.mounted.binding.resource,
                flow_id=flow_id(name),
                start_key=every_key(name),
            )

    def list(self) -> list[JobInfo]:
        """Every job, by name, each job at times with its run, next and last slot."""
        shown = []
        for name in sorted(self.jobs):
            job = self.jobs[name]
            zone = None if job.every is None else job.timezone
            info = JobInfo(name, job.describe(), job.command, job.run_as, timezone=zone)
            run = self.scheduled_run(name) if job.every is not None else None
            if run is not None:
                info = dataclasses.replace(
                    info,
                    run_id=run.id,
                    next_at=_moment(run.state.get("next_at")),
                    last_slot=_moment(run.state.get("ran")),
                )
            shown.append(info)
        return shown

    def run_now(self, name: str, *, operator: str, wait: float = 60.0) -> Ran:
        """Run a job at times now, once, as its principal, journaled with ``operator``.

        Waits (up to ``wait`` seconds) while a worker's scheduled run of the job holds its
        lease: one at a time. Its schedule goes on as it was. ``OperatorError`` for an
        unknown name (naming the jobs there are), an event's job (it runs when planned),
        and a lease still held after ``wait``.
        """
        from flowrunner.engine import worker as worker_mod

        job = self.job(name)
        if job.every is None:
            raise errors.OperatorError(
                f"job {name!r} runs on event {job.on!r}: it runs when an event plans it, "
                "not by hand",
                code="job_on_event",
            )
        if not isinstance(operator, str) or not operator.strip():
            raise errors.OperatorError("name the operator who runs the job")
        self.prepare()
        run = self.scheduled_run(name)
        assert run is not None
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
                break
            if time.monotonic() >= until:
                raise errors.OperatorError(
                    f"job {name!r} is still running on a worker after {wait:g} seconds: "
                    "try again when it is done",
                    code="job_busy",
                )
            time.sleep(0.05)  # a worker runs the job's slot: it gives the lease up when done
        with dialects.begin(self.mounted.engine) as conn:
            step = _ByHand(
                hand.claimed(conn, claim, self.mounted.clock(), (), ops.load_run(conn, run.id)),
                self,
            )
            step.operator = operator.strip()
            step.advance()
        return Ran(run.id, step.ran_ok, step.ran_error)

    # -- the program -------------------------------------------------------------------------

    def step(self, claimed: Claimed) -> Stepping:
        """The step of a claimed job run (this is the ``job`` program)."""
        return _JobStep(claimed, self)


class _JobStep(claimed.ClaimedStep):
    """One claimed run of a job: an event's planned command, or a job at times' slot."""

    def __init__(self, claimed: Claimed, jobs: Jobs) -> None:
        super().__init__(claimed)
        self.jobs = jobs
        self.name = str(self.run.snapshot.get("job") or self.run.flow_name)

    def failure(self) -> str | None:
        if self.failed is None:
            return None
        return f"run {self.run.id} of job {self.name!r} failed: {self.failed}"

    def advance(self) -> None:
        run = self.run
        if run.status in statuses.ENDED:
            ops.set_due(self.conn, run_id=run.id, due_at=None, tenant=run.tenant)
            self.give_up_lease(forget=True)
            return
        job = self.jobs.jobs.get(self.name)
        timed = "every" in run.snapshot
        if job is None or (job.every is not None) != timed:
            self.stop(
                f"this run executes job {self.name!r}, which this runner does not have any more",
                code="program_missing",
            )
            return
        due = _moment(run.state.get("next_at"))
        if due is not None and self.now < due:
            # Woken before its time (an event about its record): it waits on.
            self.save(state=run.state, status=WAITING, due_at=due)
            return
        if timed:
            self._slot(job)
        else:
            self._planned(job)

    # -- an event's job --------------------------------------------------------------------

    def _planned(self, job: spec.Job) -> None:
        run, snap = self.run, self.run.snapshot
        attempt = int(str(run.state.get("attempt") or 0)) + 1
        command = str(snap["command"])
        record = records.load_record(self.conn, self.mounted.tables, run.record_id, run.tenant)
        inputs = snap.get("input")
        result = self._command(
            job,
            command,
            principal=str(snap.get("run_as") or job.run_as),
            inputs=dict(inputs) if isinstance(inputs, Mapping) else {},
            key=f"job:{self.name}:{snap.get('key')}",
            attempt=attempt,
            record=record or {},
        )
        if result.ok:
            self.log("job_ran", kind=PROGRAM, title=self.name, detail=_ran(command, attempt))
            self.save(
                state={**run.state, "attempt": attempt},
                status=statuses.RunStatus.DONE,
                due_at=None,
                reason=f"job {self.name!r} ran {command}",
            )
            return
        again = self._again(job, result, attempt)
        error = dict(result.error or {})
        if again is not None:
            self.log("retry", kind=PROGRAM, title=self.name, detail=_retry(error, attempt, again))
            state = {**run.state, "attempt": attempt, "next_at": again.isoformat()}
            self.save(state=state, status=WAITING, due_at=again)
            return
        message = str(error.get("message") or "no reason given")
        self.log("failed", kind=PROGRAM, title=self.name, detail={"message": message})
        self.save(
            state={**run.state, "attempt": attempt},
            status=statuses.RunStatus.FAILED,
            due_at=None,
            error=error,
            reason=f"job {self.name!r}: {command} {_failed_how(result, attempt)}: {message}",
        )

    # -- a job at times' slot --------------------------------------------------------------

    def _slot(self, job: spec.Job) -> None:
        run, state, now = self.run, self.run.state, self.now
        slots = job.slots
        last = _moment(state.get("last")) or run.started_at
        slot = slots.latest_slot(last, now)
        if slot is None:
            self.save(state=state, status=WAITING, due_at=slots.next_slot(last))
            return
        first_missed = slots.next_slot(last)
        retrying = state.get("retrying") == slot.isoformat()
        attempt = int(str(state.get("attempt") or 0)) + 1 if retrying else 1
        result = self._command(
            job,
            job.command,
            principal=job.run_as,
            inputs={"slot": slot.isoformat()},
            key=f"job:{self.name}:{slot.isoformat()}",
            attempt=attempt,
            record={},
        )
        detail: dict[str, Any] = {
            **_ran(job.command, attempt),
            "slot": slot.isoformat(),
            "timezone": slots.timezone,
        }
        if first_missed != slot:
            detail["missed_from"] = first_missed.isoformat()
        following = slots.next_slot(slot)
        if result.ok:
            self.log("job_ran", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=_timed_state(last=slot, next_at=following, ran=slot),
                status=WAITING,
                due_at=following,
            )
            return
        error = dict(result.error or {})
        again = self._again(job, result, attempt)
        if again is not None and again < following:
            self.log("retry", kind=PROGRAM, title=self.name, detail=_retry(error, attempt, again))
            self.save(
                state={
                    **state,
                    "retrying": slot.isoformat(),
                    "attempt": attempt,
                    "next_at": again.isoformat(),
                },
                status=WAITING,
                due_at=again,
            )
            return
        detail["error"] = str(error.get("message") or "no reason given")
        self.log("job_failed", kind=PROGRAM, title=self.name, detail=detail)
        self.save(
            state={**_timed_state(last=slot, next_at=following, ran=slot), "error": error},
            status=WAITING,
            due_at=following,
        )

    # -- the command -------------------------------------------------------------------------

    def _command(
        self,
        job: spec.Job,
        command: str,
        *,
        principal: str,
        inputs: Mapping[str, object],
        key: str,
        attempt: int,
        record: Mapping[str, object],
    ) -> happened.CommandResult:
        """Run the job's command once (``ClaimedStep.command``: a savepoint, a heartbeat,
        the deadline, authorized again as ``principal``)."""
        run = self.run
        timeout = job.timeout_delta
        context = commands.CommandContext(
            record=dict(record),
            inputs=dict(inputs),
            conn=self.conn,
            principal=principal,
            idempotency_key=key,
            run_id=run.id,
            flow_name=self.name,
            step_title=self.name,
            position=0,
            attempt=attempt,
            tenant=run.tenant,
            now=self.now,
            deadline=self.deadline(timeout),
            clock=self.mounted.clock,
        )
        result, _ = self.command(command, context, result_key=f"job-{attempt}", timeout=timeout)
        return result

    def _again(
        self, job: spec.Job, result: happened.CommandResult, attempt: int
    ) -> datetime | None:
        """When a failed attempt is tried again (the engine's backoff), or None: refused,
        or out of attempts."""
        if result.refused:
            return None
        policy: retry_policy.RetryPolicy = job.retry or self.mounted.config.retry
        return retry.decide(policy, attempt, self.now).retry_at


class _ByHand(_JobStep):
    """A job at times run now by an operator (``Jobs.run_now``): its command once,
    journaled; the job's schedule is left as it was."""

    operator = ""
    ran_ok = False
    ran_error: str | None = None

    def advance(self) -> None:
        run, job = self.run, self.jobs.job(self.name)
        entry = ops.journal(
            self.conn,
            operator=self.operator,
            action="job_run",
            at=self.now,
            run_id=run.id,
            resource=run.resource,
            detail={"job": self.name},
        )
        result = self._command(
            job,
            job.command,
            principal=job.run_as,
            inputs={"slot": None, "by": self.operator},
            key=f"job:{self.name}:manual:{entry}",
            attempt=1,
            record={},
        )
        detail: dict[str, Any] = {**_ran(job.command, 1), "by": self.operator}
        self.ran_ok = result.ok
        if result.ok:
            self.log("job_ran", kind=PROGRAM, title=self.name, detail=detail)
        else:
            self.ran_error = str((result.error or {}).get("message") or "no reason given")
            detail["error"] = self.ran_error
            self.log("job_failed", kind=PROGRAM, title=self.name, detail=detail)
        self.save(state=run.state, status=run.status, due_at=self.claim.due_at)


def _timed_state(
    *, last: datetime, next_at: datetime, ran: datetime | None = None
) -> dict[str, Any]:
    """A job at times' state: the slot it last ran (or was scheduled from), when it runs
    next, no attempt under way."""
    return {
        "last": last.isoformat(),
        "ran": None if ran is None else ran.isoformat(),
        "next_at": next_at.isoformat(),
        "attempt": 0,
        "retrying": None,
    }


def _ran(command: str, attempt: int) -> dict[str, Any]:
    return {"command": command, "attempt": attempt}


def _retry(error: Mapping[str, Any], attempt: int, again: datetime) -> dict[str, Any]:
    return {
        "attempt": attempt,
        "error": sanitize.sanitize_text(error.get("message") or "no reason given"),
        "again_at": again.isoformat(),
    }


def _failed_how(result: happened.CommandResult, attempt: int) -> str:
    if result.refused:
        return "was refused"
    return f"failed {attempt} time{'s' if attempt > 1 else ''}"


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _digest(snapshot: Mapping[str, Any]) -> str:
    text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
