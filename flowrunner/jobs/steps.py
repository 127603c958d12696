"""A claimed job run's step: an event's planned command, a job at times' slot, a tenant
roll-call, one slot run on its own (``overlap="allow"``, a backfill), or an operator's
action on the job's run (run now, pause, resume).

Each slot of a job runs once: before its command the step takes the slot's
idempotency record (``job:NAME:SLOT``, ``…:tenant:T``), in the step's transaction, and a
slot whose record is completed already is not run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import claimed, commands
from flowrunner.engine.mounted import Claimed, Mounted
from flowrunner.flows.interpreter import happened, retry
from flowrunner.foundations import retry_policy, sanitize, statuses
from flowrunner.jobs import catch_up, runs, spec
from flowrunner.store import operations as ops
from flowrunner.store import records

PROGRAM = runs.PROGRAM
WAITING = runs.WAITING


class JobsLike(Protocol):
    """What a step asks of the mounted jobs (``program.Jobs`` is one)."""

    mounted: Mounted
    jobs: dict[str, spec.Job]

    def active_tenants(self, conn: sa.Connection) -> list[str]: ...


class JobStep(claimed.ClaimedStep):
    """One claimed run of a job (see the module's docstring)."""

    def __init__(self, claimed: Claimed, jobs: JobsLike) -> None:
        super().__init__(claimed)
        self.jobs = jobs
        self.name = str(self.run.snapshot.get("job") or self.run.flow_name)

    def failure(self) -> str | None:
        if self.failed is None:
            return None
        return f"run {self.run.id} of job {self.name!r} failed: {self.failed}"

    @property
    def tenant(self) -> str | None:
        return None if self.run.tenant is None else str(self.run.tenant)

    def advance(self) -> None:
        run = self.run
        if run.status in statuses.ENDED:
            ops.set_due(self.conn, run_id=run.id, due_at=None, tenant=run.tenant)
            self.give_up_lease(forget=True)
            return
        job = self.jobs.jobs.get(self.name)
        timed = "every" in run.snapshot or "slot" in run.snapshot
        if job is None or (job.every is not None) != timed:
            self.stop(
                f"this run executes job {self.name!r}, which this runner does not have any more",
                code="program_missing",
            )
            return
        if "every" in run.snapshot and run.state.get("paused"):
            self.save(state=run.state, status=WAITING, due_at=None)  # until resumed
            return
        due = runs.moment(run.state.get("next_at"))
        if due is not None and self.now < due:
            # Woken before its time (an event about its record): it waits on.
            self.save(state=run.state, status=WAITING, due_at=due)
            return
        if "slot" in run.snapshot:
            self._slot_run(job)
        elif "every" not in run.snapshot:
            self._planned(job)
        elif job.realm == "tenant" and run.tenant is None:
            self._roll_call(job)
        else:
            self._slot(job)

    # -- an event's job --------------------------------------------------------------------

    def _planned(self, job: spec.Job) -> None:
        run, snap = self.run, self.run.snapshot
        attempt = int(str(run.state.get("attempt") or 0)) + 1
        command = str(snap["command"])
        record = records.load_record(self.conn, self.mounted.tables, run.record_id, run.tenant)
        if record is None and snap.get("target") is not None:
            message = f"the record {run.record_id} the plan names as its target does not exist" + (
                f" for tenant {run.tenant}" if run.tenant is not None else ""
            )
            self.log("failed", kind=PROGRAM, title=self.name, detail={"message": message})
            self.save(
                state={**run.state, "attempt": attempt},
                status=statuses.RunStatus.FAILED,
                due_at=None,
                error=sanitize.error_envelope("target_missing", message),
                reason=f"job {self.name!r}: {message}",
            )
            return
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

    def _decided(self, job: spec.Job) -> tuple[datetime, dict[str, Any]] | None:
        """The slot to run now and its history line's detail, or None (saved: the job
        waits for its next slot, the slots it passed over said)."""
        run, state, now = self.run, self.run.state, self.now
        slots = job.slots
        retrying = runs.moment(state.get("retrying"))
        detail: dict[str, Any] = {"timezone": slots.timezone}
        if retrying is not None:
            return retrying, detail
        decision = catch_up.decide(
            slots,
            last=runs.moment(state.get("last")) or run.started_at,
            ended=runs.moment(state.get("ended")),
            began=runs.moment(state.get("began")),
            now=now,
            catch_up=job.catch_up,
            overlap=job.overlap,
        )
        if decision.skipped_from is not None:
            if decision.why == "overlap" and job.overlap == "skip":
                detail["overlapped_from"] = decision.skipped_from.isoformat()
                detail["overlapped_to"] = (decision.skipped_to or decision.skipped_from).isoformat()
            else:
                detail["missed_from"] = decision.skipped_from.isoformat()
                detail["missed_to"] = (decision.skipped_to or decision.skipped_from).isoformat()
        if decision.slot is None:
            following = slots.next_slot(decision.after)
            if decision.skipped_from is not None:
                detail["next"] = following.isoformat()
                self.log("job_skipped", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state={
                    **state,
                    "last": decision.after.isoformat(),
                    "next_at": following.isoformat(),
                },
                status=WAITING,
                due_at=following,
            )
            return None
        return decision.slot, detail

    def _slot(self, job: spec.Job) -> None:
        run, state = self.run, self.run.state
        decided = self._decided(job)
        if decided is None:
            return
        slot, detail = decided
        slots = job.slots
        following = slots.next_slot(slot)
        detail = {**_ran(job.command, 1), "slot": slot.isoformat(), **detail}
        if job.overlap == "allow":
            # The slot runs as a run of its own, beside any slot still running.
            started = runs.start_slot(
                self.conn, self.mounted, self.name, job, slot=slot, tenant=self.tenant, now=self.now
            )
            detail["run"] = started
            self.log("job_started", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=runs.timed_state(last=slot, next_at=following, ran=slot),
                status=WAITING,
                due_at=following,
            )
            return
        retrying = state.get("retrying") == slot.isoformat()
        attempt = int(str(state.get("attempt") or 0)) + 1 if retrying else 1
        detail["attempt"] = attempt
        key = runs.command_key(self.name, slot, self.tenant)
        mark = ops.begin_idempotent(self.conn, key=key, tenant=run.tenant, now=self.now)
        if mark.completed:
            self.log("job_already", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=runs.timed_state(last=slot, next_at=following, ran=slot),
                status=WAITING,
                due_at=following,
            )
            return
        result = self._command(
            job,
            job.command,
            principal=job.run_as,
            inputs={"slot": slot.isoformat()},
            key=key,
            attempt=attempt,
            record={},
        )
        ended = self.mounted.clock()
        if result.ok:
            self.log("job_ran", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=runs.timed_state(
                    last=slot, next_at=following, ran=slot, began=self.now, ended=ended
                ),
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
            state={
                **runs.timed_state(
                    last=slot, next_at=following, ran=slot, began=self.now, ended=ended
                ),
                "error": error,
            },
            status=WAITING,
            due_at=following,
        )

    def _roll_call(self, job: spec.Job) -> None:
        """A tenant job's roll-call: at each slot, each active tenant gets its own run of
        the job, due at this slot, if it has none yet."""
        decided = self._decided(job)
        if decided is None:
            return
        slot, _ = decided
        following = job.slots.next_slot(slot)
        started = []
        for tenant in self.jobs.active_tenants(self.conn):
            run_id = runs.start_timed(
                self.conn,
                self.mounted,
                self.name,
                job,
                tenant=tenant,
                last=slot - runs.JUST_BEFORE,
                first=slot,
                now=self.now,
            )
            if run_id is not None:
                started.append(tenant)
        if started:
            detail = {"slot": slot.isoformat(), "timezone": job.timezone, "tenants": started}
            self.log("job_tenants", kind=PROGRAM, title=self.name, detail=detail)
        self.save(
            state=runs.timed_state(last=slot, next_at=following, ran=slot),
            status=WAITING,
            due_at=following,
        )

    # -- one slot's run of its own -----------------------------------------------------------

    def _slot_run(self, job: spec.Job) -> None:
        run, snap, state = self.run, self.run.snapshot, self.run.state
        slot = runs.moment(snap.get("slot"))
        assert slot is not None
        own = ops.find_started(
            self.conn,
            resource=run.resource,
            flow_id=runs.flow_id(self.name),
            start_key=runs.every_key(self.name, self.tenant),
        )
        if own is not None and own.state.get("paused"):
            if not state.get("parked"):
                self.log("job_parked", kind=PROGRAM, title=self.name, detail={"slot": snap["slot"]})
            self.save(state={**state, "parked": True}, status=WAITING, due_at=None)
            return
        attempt = int(str(state.get("attempt") or 0)) + 1
        detail: dict[str, Any] = {
            **_ran(job.command, attempt),
            "slot": slot.isoformat(),
            "timezone": job.timezone,
        }
        key = runs.command_key(self.name, slot, self.tenant)
        mark = ops.begin_idempotent(self.conn, key=key, tenant=run.tenant, now=self.now)
        done = {**state, "attempt": attempt, "parked": False}
        if mark.completed:
            self.log("job_already", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=done,
                status=statuses.RunStatus.DONE,
                due_at=None,
                reason=f"the slot {slot.isoformat()} of job {self.name!r} had run already",
            )
            return
        result = self._command(
            job,
            job.command,
            principal=job.run_as,
            inputs={"slot": slot.isoformat()},
            key=key,
            attempt=attempt,
            record={},
        )
        if result.ok:
            self.log("job_ran", kind=PROGRAM, title=self.name, detail=detail)
            self.save(
                state=done,
                status=statuses.RunStatus.DONE,
                due_at=None,
                reason=f"job {self.name!r} ran {job.command} for the slot {slot.isoformat()}",
            )
            return
        error = dict(result.error or {})
        again = self._again(job, result, attempt)
        if again is not None:
            self.log("retry", kind=PROGRAM, title=self.name, detail=_retry(error, attempt, again))
            self.save(state={**done, "next_at": again.isoformat()}, status=WAITING, due_at=again)
            return
        message = str(error.get("message") or "no reason given")
        self.log("failed", kind=PROGRAM, title=self.name, detail={"message": message})
        self.save(
            state=done,
            status=statuses.RunStatus.FAILED,
            due_at=None,
            error=error,
            reason=f"job {self.name!r}: {job.command} {_failed_how(result, attempt)} for the "
            f"slot {slot.isoformat()}: {message}",
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
        result, _ = self.command(
            command,
            context,
            result_key=f"job-{attempt}",
            timeout=timeout,
            limit=self.mounted.limit_of("job", self.name),
        )
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


class ByHand(JobStep):
    """A job at times run now by an operator (``Jobs.run_now``): its command once,
    journaled; the job's schedule is left as it was."""

    def __init__(self, claimed: Claimed, jobs: JobsLike, operator: str) -> None:
        super().__init__(claimed, jobs)
        self.operator = operator
        self.ran_ok = False
        self.ran_error: str | None = None

    def advance(self) -> None:
        run, job = self.run, self.jobs.jobs[self.name]
        entry = ops.journal(
            self.conn,
            operator=self.operator,
            action="job_run",
            at=self.now,
            run_id=run.id,
            resource=run.resource,
            tenant=run.tenant,
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


class Operated(JobStep):
    """An operator's pause or resume of one of a job's runs: ``paused`` kept in its state
    (None: resumed), said in its history. Paused, it is due at no time;
    resumed, at once (the slots missed meanwhile go as its ``catch_up`` says)."""

    def __init__(self, claimed: Claimed, jobs: JobsLike, operator: str, *, paused: object) -> None:
        super().__init__(claimed, jobs)
        self.operator, self.paused = operator, paused

    def advance(self) -> None:
        run = self.run
        if run.status in statuses.ENDED:
            raise errors.OperatorError(
                f"job {self.name!r} no longer runs: its run {run.id} is {run.status}",
                code="job_ended",
            )
        by = {"by": self.operator}
        if self.paused:
            self.log("job_paused", kind=PROGRAM, title=self.name, detail=by)
        else:
            self.log("job_resumed", kind=PROGRAM, title=self.name, detail=by)
        state = {**run.state, "paused": self.paused}
        due = None if self.paused else self.now
        if due is not None:
            state["next_at"] = due.isoformat()
        self.save(state=state, status=WAITING, due_at=due)


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
