"""The worker's step of a code workflow's run: replay the body, do the next step, save.

The body is driven by hand (``coroutine.send``), never by an event loop: each step it
awaits is judged by ``replay.replay`` — a finished step gets its stored result back at
once, the first unfinished one is done now — until the body waits (a timer, an event,
a retry's backoff: the run is saved waiting, due then), returns (done), raises
(failed) or asks at a recorded place for another step than the run recorded (failed
as diverged, with a sentence naming the step).

What each kind of step does, in the step's transaction:

- ``run``: the command in a savepoint under a heartbeat (``ClaimedStep.command``); its
  writes, its idempotency record and the step's record commit together, at a
  checkpoint of its own (``ClaimedStep.checkpoint``) before the body goes on: a crash
  repeats at most the command in flight, with the same key. A step declared
  ``outside=False`` shares the next step's commit instead.
- ``call``: one HTTP attempt (``http_call``) under a heartbeat; its answer is kept at a
  checkpoint at once, so an answer is never asked for again once kept. A crash before
  it sends the request again with the same Idempotency-Key.
- ``wait_for``: the record's events since the run began (its floor), first match wins.
- ``sleep``, ``until``: a moment on the run's own clock (``sleep`` counts from when
  the step before it finished); ``now``: the clock, kept.
- ``child``: the child run started with the parent's wait for it (``children``); the
  parent is woken when the child ends, and reads what it returned or why it failed.
"""

from __future__ import annotations

import copy
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import diagrams, errors
from flowrunner.engine import claimed, commands, heartbeat
from flowrunner.engine.mounted import Claimed, Mounted, Program, Stepping
from flowrunner.flows.interpreter import retry
from flowrunner.flows.interpreter.waits import Waiting
from flowrunner.foundations import durations, payloads, sanitize, statuses
from flowrunner.store import operations as ops
from flowrunner.store import records
from flowrunner.workflows import (
    actions,
    awaited,
    children,
    context,
    http_call,
    replay,
    starts,
    waits,
)

FAILED = statuses.RunStatus.FAILED


@dataclass(frozen=True)
class _Done:
    """The step finished: its result (JSON), or its refusal, at a moment of the run's clock."""

    result: Any
    at: datetime
    refused: dict[str, Any] | None = None
    run: int | None = None
    """The child run a ``child`` step waited for."""


@dataclass(frozen=True)
class _Wait:
    """The step is not finished: the run waits, due at ``due`` (None: until woken)."""

    pending: replay.Pending
    due: datetime | None


@dataclass(frozen=True)
class _Fail:
    """The run fails here, with a sentence and a code."""

    reason: str
    code: str


class WorkflowStep(claimed.ClaimedStep):
    """One claimed run of a code workflow, advanced in the step's transaction."""

    def advance(self) -> None:
        run = self.run
        if run.status in statuses.ENDED:
            # Claimed once it ended (an operator cancelled it): its children that have
            # not ended are cancelled with it, and its parent is told.
            if run.status == statuses.RunStatus.CANCELLED:
                children.cancel_open(self.conn, run, self.now)
            children.ended(self.conn, run, self.now)
            ops.set_due(self.conn, run_id=run.id, due_at=None, tenant=run.tenant)
            self.give_up_lease(forget=True)
            return
        kept = run.snapshot
        name, version = str(kept.get("workflow")), kept.get("version")
        workflows = self.mounted.workflows
        definition = None
        if workflows is not None and isinstance(version, int):
            definition = workflows.find(name, version)
        if definition is None:
            self.stop(
                f"this run executes workflow {name!r} version {version}, which this runner "
                "does not have any more",
                code="workflow_missing",
            )
            children.ended(self.conn, run, self.now)
            return
        self.definition = definition
        self.recording = replay.Recording.from_dict(run.state)
        if not run.state:
            parent = kept.get(children.PARENT)
            if isinstance(parent, Mapping):
                said = {"workflow": name, "version": version, **parent}
                self.log("started_as_child", detail=said)
            else:
                self.log("started", detail={"workflow": name, "version": version})
            self.recording.clock = run.started_at.isoformat()
        w = context.Context(
            workflow=name,
            version=definition.version,
            run_id=run.id,
            key=run.start_key.split(":", 1)[-1],
            record_id=run.record_id,
        )
        body = definition.body(w, copy.deepcopy(kept.get("start") or {}))
        try:
            self._drive(body)
        finally:
            body.close()

    # -- driving the body -----------------------------------------------------------------

    def _drive(self, body: Coroutine[Any, Any, Any]) -> None:
        rec, version = self.recording, self.definition.version
        index = 0
        value: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                asked = awaited.next_step(body, value, thrown)
            except StopIteration as stop:
                diverged = replay.ended_early(rec, index, version)
                if diverged is not None:
                    return self._fail(_Fail(diverged.sentence, diverged.code), diverged=True)
                return self._end(stop.value)
            except Exception as exc:
                if thrown is not None:
                    rec.fail_on_refusal(index)
                return self._fail(_raised(exc))
            value, thrown = None, None
            judged = replay.replay(rec, index, asked, version)
            if isinstance(judged, replay.Diverged):
                return self._fail(_Fail(judged.sentence, judged.code), diverged=True)
            if isinstance(judged, replay.Fresh):
                outcome = self._do(asked, index, judged.pending)
                if isinstance(outcome, _Fail):
                    return self._fail(outcome)
                if isinstance(outcome, _Wait):
                    return self._wait(asked, index, outcome)
                rec.finish(asked, outcome.result, outcome.at, outcome.refused)
                self._said(asked, index, outcome)
                if replay.reaches_outside(asked) and not self._kept():
                    # No checkpoint here: the answer is kept by a save now, and the run
                    # goes on in its next claim.
                    return self._save(statuses.RunStatus.RUNNING, due=self.now)
                step = rec.steps[-1]
            else:
                step = judged.step
            try:
                value = replay.delivered(step)
            except errors.StepRefused as refused:
                thrown = refused
            index += 1

    # -- doing one step ---------------------------------------------------------------------

    def _do(
        self, asked: replay.Ask, index: int, pending: replay.Pending | None
    ) -> _Done | _Wait | _Fail:
        since = (
            pending.since if pending is not None else (self.recording.clock or self.now.isoformat())
        )
        if asked.kind == replay.NOW:
            return _Done(self.now.isoformat(), self.now)
        if asked.kind in (replay.SLEEP, replay.UNTIL):
            if pending is not None and pending.until is not None:
                until = replay.moment(pending.until)
            elif asked.kind == replay.SLEEP:
                length = durations.parse_duration(str(asked.options["length"]))
                until = length.add_to(replay.moment(since), self.mounted.config.timezone)
            else:
                until = replay.moment(str(asked.options["when"]))
            if self.now >= until:
                # A moment already past when the step is reached ends it then, not before.
                return _Done(None, max(until, replay.moment(since)))
            return _Wait(
                replay.Pending(asked.name, asked.kind, None, since, until.isoformat()), until
            )
        if asked.kind == replay.WAIT_FOR:
            return self._wait_for(asked, since)
        if asked.kind == replay.RUN:
            return self._run(asked, index, since, pending)
        if asked.kind == replay.CHILD:
            return self._child(asked, since, pending)
        return self._call(asked, since, pending)

    def _wait_for(self, asked: replay.Ask, since: str) -> _Done | _Wait | _Fail:
        run = self.run
        began = replay.moment(since)
        timeout = asked.options.get("timeout")
        deadline = (
            None
            if timeout is None
            else durations.parse_duration(str(timeout)).add_to(began, self.mounted.config.timezone)
        )
        match = asked.options.get("match")
        for event in ops.events_after(
            self.conn,
            resource=run.resource,
            record_id=run.record_id,
            after_id=run.event_floor or 0,
            names=[str(asked.target)],
            tenant=run.tenant,
        ):
            if deadline is not None and event.at > deadline:
                break
            try:
                matched = True if match is None else bool(match(event.payload))
            except Exception as exc:
                return _Fail(
                    f"step {asked.name!r}: its match raised {claimed.describe(exc)}",
                    "workflow_failed",
                )
            if matched:
                return _Done(dict(event.payload), max(began, event.at))
        if deadline is not None and self.now >= deadline:
            return _Done(None, deadline)
        until = None if deadline is None else deadline.isoformat()
        return _Wait(replay.Pending(asked.name, asked.kind, asked.target, since, until), deadline)

    def _run(
        self, asked: replay.Ask, index: int, since: str, pending: replay.Pending | None
    ) -> _Done | _Wait | _Fail:
        mounted, run = self.mounted, self.run
        command = str(asked.target)
        if command not in mounted.commands:
            known = ", ".join(sorted(mounted.commands)) or "none"
            message = f"there is no command {command!r} (commands: {known})"
            return _Done(None, self.now, {"message": message, "code": "command_unknown"})
        named = asked.options.get("limit")
        declared = getattr(mounted.workflows, "limits", {})
        if named is not None and named not in declared:
            known = ", ".join(sorted(declared)) or "none"
            message = (
                f"step {asked.name!r} takes its turn of limit {named!r}, which the workflows "
                f"do not declare (limits: {known})"
            )
            return _Done(None, self.now, {"message": message, "code": "limit_unknown"})
        attempt = (pending.attempt if pending is not None else 0) + 1
        target = asked.options.get("target")
        on = run.record_id if target is None else str(target)
        record = (
            records.load_record(self.conn, mounted.tables, on, run.tenant)
            if self._keyed(on)
            else None
        )
        context_ = commands.CommandContext(
            record=record if record is not None else {mounted.binding.key: on},
            inputs=dict(asked.options.get("input") or {}),
            conn=self.conn,
            principal=mounted.principal_for(self.definition.run_as, self.run.tenant),
            idempotency_key=self.recording.idempotency_key(run.id, asked.name),
            run_id=run.id,
            flow_name=self.definition.name,
            step_title=asked.name,
            position=index + 1,
            attempt=attempt,
            tenant=run.tenant,
            now=self.now,
            clock=mounted.clock,
        )
        result, _ = self.command(
            command,
            context_,
            result_key=asked.name,
            limit=None if named is None else mounted.limit_of("workflow", str(named)),
        )
        if result.ok:
            return _Done(result.answer, self.now)
        error = dict(result.error or {})
        message = str(error.get("message") or "no reason given")
        if result.refused:
            return _Done(None, self.now, {"message": message, "code": error.get("code")})
        return self._again(asked, since, attempt, message, mounted.config.retry)

    def _child(
        self, asked: replay.Ask, since: str, pending: replay.Pending | None
    ) -> _Done | _Wait:
        """The child started, with the wait for it; once it ended, what it returned (or
        its failure, a refusal)."""
        if pending is not None and pending.run is not None:
            ended = children.outcome(self.conn, pending.run, str(asked.target))
            if ended is None:
                return _Wait(pending, None)  # woken before the child ended: wait on
            return _Done(ended.result, self.now, ended.refused, pending.run)
        key = self.recording.idempotency_key(self.run.id, asked.name)
        started = children.start(self.mounted, self.conn, self.run, asked, key, self.now)
        if isinstance(started, str):
            return _Done(None, self.now, {"message": started, "code": "child_refused"})
        return _Wait(replay.Pending(asked.name, asked.kind, asked.target, since, run=started), None)

    def _keyed(self, record_id: str) -> bool:
        """Whether ``record_id`` can be a key of the runner's resource (a manual run's
        key may not be)."""
        try:
            self.mounted.tables.key_value(record_id)
        except errors.RecordRejected:
            return False
        return True

    def _call(
        self, asked: replay.Ask, since: str, pending: replay.Pending | None
    ) -> _Done | _Wait | _Fail:
        workflows = self.mounted.workflows
        name = str(asked.target)
        connection = None if workflows is None else workflows.connections.get(name)
        if connection is None:
            known = ", ".join(sorted(workflows.connections)) if workflows else ""
            message = f"there is no connection {name!r} (connections: {known or 'none'})"
            return _Done(None, self.now, {"message": message, "code": "connection_unknown"})
        attempt = (pending.attempt if pending is not None else 0) + 1
        request = asked.options["request"]
        key = self.recording.idempotency_key(self.run.id, asked.name)
        beat = heartbeat.Heartbeat(
            self.mounted.engine,
            owner=self.owner,
            claims=(self.claim, *self.later),
            ttl=self.lease_ttl,
            clock=self.mounted.clock,
            point=self.point,
        )
        with (
            self.traced.attempt(
                f"call {name}",
                step=asked.name,
                attempt=attempt,
                extra={
                    "flowrunner.connection": name,
                    "http.request.method": str(request.get("method", "GET")),
                },
            ) as traced,
            beat,
        ):
            # The call sends the trace context of its span (``traceparent``).
            answer = http_call.attempt(connection, request, key=key)
            traced.ended(*http_call.traced(answer))
        if self.run.id in beat.lost:
            raise errors.LeaseLost(
                f"the lease of run {self.run.id} was taken over while its call was out"
            )
        self.point(f"after-call:{asked.name}")
        if isinstance(answer, http_call.Answered):
            return _Done(answer.body, self.now)
        if isinstance(answer, http_call.Refused):
            refused = {"message": answer.message, "status": answer.status, "code": "call_refused"}
            return _Done(None, self.now, refused)
        policy = asked.options["retry"]
        return self._again(asked, since, attempt, answer.message, policy)

    def _again(
        self, asked: replay.Ask, since: str, attempt: int, message: str, policy: Any
    ) -> _Wait | _Fail:
        """A failed attempt: tried again after its backoff, or the run fails."""
        decision = retry.decide(policy, attempt, self.now)
        if decision.retry_at is None:
            return _Fail(
                f"step {asked.name!r} failed after {attempt} attempt"
                f"{'s' if attempt > 1 else ''}: {message}",
                "step_failed",
            )
        self.log(
            "retry",
            title=asked.name,
            kind=asked.kind,
            detail={
                "attempt": attempt,
                "error": message,
                "again_at": decision.retry_at.isoformat(),
            },
        )
        again = replay.Pending(
            asked.name,
            asked.kind,
            asked.target,
            since,
            decision.retry_at.isoformat(),
            attempt,
            message,
        )
        return _Wait(again, decision.retry_at)

    # -- saving ---------------------------------------------------------------------------

    def _said(self, asked: replay.Ask, index: int, done: _Done) -> None:
        """The history line of a finished step."""
        detail: dict[str, Any] = {"name": asked.name, "target": asked.target}
        if done.refused is not None:
            detail["refused"] = done.refused.get("message")
        elif asked.kind == replay.WAIT_FOR:
            detail["arrived"] = done.result is not None
        elif asked.kind == replay.CALL:
            request = asked.options["request"]
            detail["request"] = f"{request['method']} {request['path']}"
        if done.run is not None:
            detail["run"] = done.run
        if asked.kind in (replay.SLEEP, replay.UNTIL, replay.NOW, replay.WAIT_FOR):
            detail["at"] = done.at.isoformat()
        self.log(
            "workflow_step",
            title=asked.name,
            kind=asked.kind,
            position=index + 1,
            detail=detail,
            due_at=done.at,
        )

    def _wait(self, asked: replay.Ask, index: int, waiting: _Wait) -> None:
        rec = self.recording
        first = rec.pending is None or rec.pending.name != asked.name
        rec.pending = waiting.pending
        if first and asked.kind in (replay.SLEEP, replay.UNTIL, replay.WAIT_FOR, replay.CHILD):
            detail: dict[str, Any] = {
                "name": asked.name,
                "target": asked.target,
                "until": waiting.pending.until,
            }
            if waiting.pending.run is not None:
                detail["run"] = waiting.pending.run
            self.log(
                "workflow_waiting",
                title=asked.name,
                kind=asked.kind,
                position=index + 1,
                detail=detail,
            )
        self._save(statuses.RunStatus.WAITING, due=waiting.due)

    def _end(self, result: Any) -> None:
        try:
            kept = _plain_result(result)
        except ValueError as exc:
            return self._fail(
                _Fail(f"the workflow returned what cannot be kept: {exc}", "workflow_failed")
            )
        self.recording.result = kept
        self.recording.pending = None
        self.log("ended", detail={"status": "done", "reason": None})
        self._save(statuses.RunStatus.DONE, due=None)

    def _fail(self, failed: _Fail, *, diverged: bool = False) -> None:
        reason = f"diverged: {failed.reason}" if diverged else failed.reason
        if diverged:
            self.log("diverged", detail={"message": failed.reason})
        else:
            self.log("failed", detail={"message": failed.reason})
        self._save(
            FAILED,
            due=None,
            error=sanitize.error_envelope(failed.code, failed.reason),
            reason=reason,
        )

    def _kept(self) -> bool:
        """A checkpoint after a step that reached outside: its result, its writes and
        history commit before the body goes on, so a crash from here on never does it
        again. False when the step cannot commit part way (it then saves and stops)."""
        return self.checkpoint(state=self.recording.to_dict(), status=statuses.RunStatus.RUNNING)

    def _save(
        self,
        status: statuses.RunStatus,
        *,
        due: datetime | None,
        error: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> None:
        self.save(
            state=self.recording.to_dict(), status=status, due_at=due, error=error, reason=reason
        )
        if status in statuses.ENDED:
            children.ended(self.conn, self.run, self.now)  # its parent reads how it ended

    def failure(self) -> str | None:
        if self.failed is None:
            return None
        run = self.run
        return (
            f"run {run.id} of workflow {run.flow_name!r} on {self.mounted.binding.resource} "
            f"{run.record_id} failed: {self.failed}"
        )


def _raised(exc: Exception) -> _Fail:
    """Why the run fails when its body raised ``exc``."""
    if isinstance(exc, awaited.NotAStep):
        return _Fail(str(exc), "workflow_awaited")
    if isinstance(exc, errors.StepRefused):
        return _Fail(f"step {exc.step!r} was refused: {exc}", "step_refused")
    return _Fail(f"the workflow raised {claimed.describe(exc)}", "workflow_failed")


def _plain_result(result: Any) -> Any:
    try:
        return payloads.plain({"result": result})["result"]
    except payloads.NotPlain as exc:
        raise ValueError(str(exc)) from None


class WorkflowProgram(Program):
    """The ``workflow`` program: a code workflow's run, replayed and taken one step on."""

    def step(self, claimed: Claimed) -> Stepping:
        return WorkflowStep(claimed)

    def cancelled(
        self, mounted: Mounted, run: ops.RunRow, why: str, now: datetime
    ) -> tuple[dict[str, Any], datetime | None]:
        """Ended where it stands; due now when it started children (those not ended are
        cancelled with it) or has a parent to tell: its next step does both."""
        told = bool(children.started(run.state)) or children.parent_of(run) is not None
        return dict(run.state or {}), now if told else None

    def retried(
        self, mounted: Mounted, run: ops.RunRow, now: datetime
    ) -> tuple[Mapping[str, object], statuses.RunStatus]:
        """The failed step is tried again with all its attempts, the finished ones
        replayed; a refused step the run failed on runs again under a new key."""
        return actions.retried(run.state), statuses.RunStatus.RUNNING

    def restarted(
        self, mounted: Mounted, conn: sa.Connection, run: ops.RunRow, operator: str, now: datetime
    ) -> tuple[int, str]:
        """The workflow's latest version started again with the same start."""
        new_id = actions.restart(mounted, conn, run, operator, now)
        if new_id is None:
            raise errors.OperatorError(
                f"run {run.id} cannot be restarted: its workflow {run.flow_name!r} is not "
                "defined any more",
                code="workflow_missing",
            )
        return new_id, run.flow_name

    def drawn(
        self,
        mounted: Mounted,
        conn: sa.Connection,
        run: ops.RunRow,
        can_read: diagrams.CanRead | None,
    ) -> diagrams.Diagram:
        """No rows to draw ahead of it: its recorded steps so far."""
        return diagrams.workflow_diagram(
            run.flow_name,
            run.snapshot.get("version"),
            run.state,
            run_id=run.id,
            status=str(run.status),
            reason=run.reason,
            started_at=run.started_at,
            ended_at=run.ended_at,
            zone=mounted.config.timezone,
        )

    def waiting(self, mounted: Mounted, run: ops.RunRow) -> tuple[Waiting, ...]:
        """The steps an open run waits at (``workflows.waits``)."""
        return waits.where(run.state)


program = WorkflowProgram()


PROGRAM = starts.PROGRAM
