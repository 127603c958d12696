"""The worker: claim due runs under a lease, advance each, apply its effects in one transaction.

A run's step effects that live in the database — a set step's write, a notice, a
command's own writes, the history lines and the run's new state and due time — commit
together or not at all, so a worker that dies at any point leaves the run as it was
and the next worker does the step exactly once. Saves are fenced: a worker whose lease
was taken over (or whose run moved on) has its late write refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import commands, errors, sanitize, snapshot, statuses, templates
from flowrunner.interpreter import effects, happened, interpret, state
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

log = logging.getLogger("flowrunner.worker")


@dataclass
class Crash(Exception):
    """Raised by a test's crash hook to stop the worker at a named point."""

    point: str


@dataclass
class WorkerStats:
    claimed: int = 0
    advanced: int = 0
    refused: int = 0
    errors: int = 0
    points: list[str] = field(default_factory=list)


class Worker:
    """Claims due runs of one runner and advances them.

    ``batch`` runs share one transaction, each inside its own savepoint, so one run's
    failure never undoes another's step. ``crash_at`` is for crash-injection tests: a
    callable given each commit-boundary name, which may raise to stop the worker there.
    """

    def __init__(
        self,
        runner: FlowRunner,
        *,
        owner: str | None = None,
        lease_ttl: timedelta = timedelta(minutes=5),
        batch: int = 1,
        crash_at: Any = None,
    ) -> None:
        self.runner = runner
        self.owner = owner or ops.new_owner_id("worker")
        self.lease_ttl = lease_ttl
        self.batch = max(1, batch)
        self.crash_at = crash_at
        self.stats = WorkerStats()
        self._lines: list[ops.LogLine] = []
        self._wrote_record = False

    def _point(self, name: str) -> None:
        if self.crash_at is not None:
            self.stats.points.append(name)
            self.crash_at(name)

    def run_due(self, limit: int = 100) -> int:
        """Advance up to ``limit`` due runs; returns how many were claimed."""
        now = self.runner.clock()
        claims = ops.claim_due(
            self.runner.engine, now=now, owner=self.owner, limit=limit, ttl=self.lease_ttl
        )
        self.stats.claimed += len(claims)
        self._point("claimed")
        for start in range(0, len(claims), self.batch):
            group = self._still_ours(claims[start : start + self.batch], now)
            with dialects.begin(self.runner.engine) as conn:
                for claim in group:
                    self._one(conn, claim)
                self._point("before-commit")
            self._point("committed")
        return len(claims)

    def _still_ours(self, group: list[Any], claimed_at: datetime) -> list[Any]:
        """The claims of a group whose leases still hold, renewed if half their time is gone.

        A slow run earlier in the same claim must not let the later ones lapse. Renewed
        in a short transaction of its own, so the lease rows are not held locked while
        the steps run: a worker that then pauses past its lease can still be taken over,
        and its late write is refused by the fence at save.
        """
        now = self.runner.clock()
        if now - claimed_at < self.lease_ttl / 2:
            return group
        kept = []
        with dialects.begin(self.runner.engine) as conn:
            for claim in group:
                if ops.refresh_lease(
                    conn,
                    name=f"run:{claim.run_id}",
                    owner=self.owner,
                    epoch=claim.epoch,
                    now=now,
                    ttl=self.lease_ttl,
                ):
                    kept.append(claim)
                else:
                    self.stats.refused += 1
        return kept

    def _one(self, conn: sa.Connection, claim: Any) -> bool:
        """Advance one claimed run inside its own savepoint; False if nothing was saved.

        Nothing is saved when its write was refused (the lease is another's now) or the
        database failed for a moment (the lease expires and the run is tried again).
        The lease is given up in the step's own transaction, with the save.
        """
        # The clock is read per run: a slow run before this one costs no stale time.
        now = self.runner.clock()
        savepoint = conn.begin_nested()
        try:
            self._advance(conn, claim, now)
        except errors.LeaseLost as lost:
            savepoint.rollback()
            self.stats.refused += 1
            log.info("run %s: late write refused (%s)", claim.run_id, lost)
            return False
        except Crash:
            raise
        except sa.exc.OperationalError:
            # A deadlock, a lock timeout, a dropped connection: not the run's fault.
            savepoint.rollback()
            self.stats.errors += 1
            log.warning("run %s: the database failed; it will be tried again", claim.run_id)
            return False
        except Exception as exc:  # an engine bug must not stall the other runs
            savepoint.rollback()
            self.stats.errors += 1
            log.exception("run %s could not be advanced", claim.run_id)
            self._fail_run(conn, claim, now, exc)
            return True
        savepoint.commit()
        self.stats.advanced += 1
        return True

    def _fail_run(self, conn: sa.Connection, claim: Any, now: datetime, exc: Exception) -> None:
        """Fail the run with a sanitized envelope; its saved state stays as it was, so an
        operator's retry advances it again from there."""
        run_id = claim.run_id
        with conn.begin_nested():
            ops.finish_lease(
                conn, name=f"run:{run_id}", owner=self.owner, epoch=claim.epoch, forget=True
            )
            run = ops.load_run(conn, run_id)
            envelope = sanitize.error_envelope("engine_error", describe(exc))
            ops.save_run(
                conn,
                run_id,
                expected_version=run.version,
                state=run.state,
                status="failed",
                now=now,
                error=envelope,
                reason=f"the engine could not advance this run: {envelope['message']}",
            )
            ops.set_due(conn, run_id=run_id, due_at=None, tenant=run.tenant)

    # -- one run ---------------------------------------------------------------------

    def _stop(self, conn: sa.Connection, run: Any, claim: Any, now: datetime, why: str) -> None:
        ops.finish_lease(
            conn, name=f"run:{run.id}", owner=self.owner, epoch=claim.epoch, forget=True
        )
        ops.save_run(
            conn,
            run.id,
            expected_version=run.version,
            state=run.state,
            status="failed",
            now=now,
            error=sanitize.error_envelope("snapshot_broken", why),
            reason=why,
        )
        ops.set_due(conn, run_id=run.id, due_at=None, tenant=run.tenant)
        ops.append_logs(
            conn,
            run_id=run.id,
            at=now,
            tenant=run.tenant,
            lines=[ops.LogLine("failed", detail=why)],
        )

    def _advance(self, conn: sa.Connection, claim: Any, now: datetime) -> state.RunState | None:
        """Advance one claimed run in ``conn``'s transaction; returns its new state.

        The save is fenced by the claim's lease epoch, and a wake-up that arrived
        meanwhile is kept.
        """
        runner = self.runner
        run_id = claim.run_id
        run = ops.load_run(conn, run_id)
        if run.status in statuses.ENDED and not state.cancel_pending(run.state):
            ops.set_due(conn, run_id=run_id, due_at=None, tenant=run.tenant)
            ops.finish_lease(
                conn, name=f"run:{run_id}", owner=self.owner, epoch=claim.epoch, forget=True
            )
            return None
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
        problem = runner.check_snapshot(snap)
        if problem is not None:
            # A row that broke after the run started (a kind removed, a column dropped):
            # the run fails before it does anything more, with the sentence naming it.
            self._stop(conn, run, claim, now, problem)
            return None
        record = records.load_record(conn, runner.tables, run.record_id, run.tenant)
        current = state.RunState.from_dict(run.state) if run.state else None
        after = current.last_event_id if current is not None else 0
        arrived = (
            ops.events_after(
                conn,
                resource=runner.binding.resource,
                record_id=run.record_id,
                after_id=after,
                tenant=run.tenant,
            )
            if runner.binding.events
            else []
        )
        latest = max([after, *(e.id for e in arrived)])
        seen = happened.Happened(
            record=record,
            events=tuple(happened.EventIn(e.id, e.name, e.payload, e.at) for e in arrived),
            latest_event_id=latest,
        )
        if current is None:
            step = interpret.start(snap, seen, now, runner.config)
        else:
            step = interpret.advance(snap, current, seen, now, runner.config)
        wake_at: datetime | None = None
        working = dict(record) if record is not None else None
        self._lines = []
        self._sets: dict[str, Any] = {}
        self._wrote_record = False
        rounds = 0
        while True:
            results: list[happened.CommandResult] = []
            for effect in step.effects:
                if isinstance(effect, effects.Wake):
                    wake_at = effect.at
                elif isinstance(effect, effects.RunCommand):
                    results.append(self._command(conn, run, snap, effect, working, now))
                else:
                    working = self._apply(conn, run, snap, effect, working, now)
            if not results:
                break
            rounds += 1
            if rounds > 2 * runner.config.max_moves + 10:
                # The interpreter's loop bound should end any flow long before this.
                raise RuntimeError(f"more than {rounds - 1} command rounds in one advance")
            if working is not None:
                self._flush_sets(conn, run)  # then read back what the commands wrote too
                working = records.load_record(conn, runner.tables, run.record_id, run.tenant)
            step = interpret.advance(
                snap,
                step.state,
                happened.Happened(record=working, latest_event_id=latest, results=tuple(results)),
                now,
                runner.config,
            )
        new = step.state
        ended = new.status in statuses.ENDED
        self._flush_sets(conn, run)
        if self._wrote_record:
            # The record's other runs follow it (an until step on a date this set).
            ops.wake_record(
                conn,
                resource=runner.binding.resource,
                record_id=run.record_id,
                tenant=run.tenant,
                now=now,
                except_run=run_id,
            )
        ops.append_logs(conn, run_id=run.id, at=now, tenant=run.tenant, lines=self._lines)
        self._point("before-save")
        # The fence: a worker that paused past its lease while another took the run
        # over is refused here, and everything it wrote rolls back with this step. The
        # same statement gives the lease up (an ended run's lease row goes).
        ops.finish_lease(
            conn, name=f"run:{run_id}", owner=self.owner, epoch=claim.epoch, forget=ended
        )
        ops.save_run(
            conn,
            run_id,
            expected_version=run.version,
            state=new.to_dict(),
            status=new.status,
            now=now,
            error=new.error,
            reason=new.reason,
        )
        ops.set_due(
            conn,
            run_id=run_id,
            due_at=None if ended else wake_at,
            tenant=run.tenant,
            claim=claim,
        )
        return new

    def _apply(
        self,
        conn: sa.Connection,
        run: Any,
        snap: snapshot.FlowSnapshot,
        effect: effects.Effect,
        working: dict[str, Any] | None,
        now: datetime,
    ) -> dict[str, Any] | None:
        runner = self.runner
        if isinstance(effect, effects.SetField):
            # Written with the step's other sets in one statement (before any command
            # runs, and at the end); later steps read the working copy meanwhile.
            self._sets[effect.field] = effect.value
            if working is not None:
                working[effect.field] = effect.value
        elif isinstance(effect, effects.Notify):
            rule = runner.binding.rule_for(effect.audience)
            values = {**(working or {}), "message": effect.message}
            ops.insert_notice(
                conn,
                tenant=run.tenant,
                run_id=run.id,
                step_id=str(effect.step_id),
                pass_=effect.pass_,
                audience=effect.audience,
                recipient=None if working is None else _text(working.get(rule.to)),
                title=templates.render(rule.title, values),
                message=effect.message,
                email=rule.email,
                at=now,
            )
            self._point("after-notify")
        elif isinstance(effect, effects.Log):
            # Written together with the run's new state, in one statement.
            self._lines.append(
                ops.LogLine(
                    what=effect.what,
                    position=effect.position,
                    step_id=None if effect.step_id is None else str(effect.step_id),
                    title=effect.title,
                    kind=effect.kind,
                    pass_=effect.pass_,
                    detail=effect.detail,
                )
            )
        return working

    def _flush_sets(self, conn: sa.Connection, run: Any) -> None:
        if self._sets:
            records.write_fields(conn, self.runner.tables, run.record_id, run.tenant, self._sets)
            self._sets = {}
            self._wrote_record = True
            self._point("after-set")

    def _command(
        self,
        conn: sa.Connection,
        run: Any,
        snap: snapshot.FlowSnapshot,
        effect: effects.RunCommand,
        working: Mapping[str, Any] | None,
        now: datetime,
    ) -> happened.CommandResult:
        runner = self.runner
        self._flush_sets(conn, run)  # the command reads the record as the flow left it
        key = f"run-{run.id}/{effect.key}"
        step = next((s for s in snap.steps if str(s.id) == str(effect.step_id)), None)
        context = commands.CommandContext(
            record=dict(working or {}),
            inputs=dict(effect.inputs),
            conn=conn,
            principal=runner.run_as,
            idempotency_key=key,
            run_id=run.id,
            flow_name=snap.flow.name,
            step_title=step.title if step is not None else None,
            position=step.position if step is not None else 0,
            attempt=effect.attempt,
            reminder=effect.reminder,
            tenant=run.tenant,
            now=now,
        )
        savepoint = conn.begin_nested()
        try:
            runner.authorize_command(effect.command)
            function = runner.commands[effect.command]
            answer = function(context)
            if answer is not None and not isinstance(answer, Mapping):
                raise TypeError(f"command {effect.command!r} answered {type(answer).__name__}")
        except errors.CommandRefused as refused:
            savepoint.rollback()
            return happened.CommandResult(
                key=effect.key,
                ok=False,
                refused=True,
                error=sanitize.error_envelope("command_refused", str(refused)),
            )
        except Crash:
            savepoint.rollback()
            raise
        except Exception as exc:
            savepoint.rollback()
            return happened.CommandResult(
                key=effect.key,
                ok=False,
                error=sanitize.error_envelope("command_failed", describe(exc), retryable=True),
            )
        savepoint.commit()
        self._point(f"after-command:{effect.command}")
        ops.record_idempotent(conn, key=key, tenant=run.tenant, result=dict(answer or {}), now=now)
        return happened.CommandResult(key=effect.key, ok=True, answer=dict(answer or {}))

    # -- serving -----------------------------------------------------------------------

    def serve(
        self,
        stop: threading.Event,
        *,
        poll: float = 1.0,
        limit: int = 100,
    ) -> None:
        """Advance due runs until ``stop`` is set, resting ``poll`` seconds when idle."""
        while not stop.is_set():
            try:
                claimed = self.run_due(limit=limit)
            except sa.exc.OperationalError:
                log.exception("the database could not be reached; trying again")
                claimed = 0
            if claimed == 0:
                stop.wait(poll)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def describe(exc: BaseException) -> str:
    """An exception as one line for an error envelope, without the SQL or its parameters.

    A SQLAlchemy statement error's text carries the statement and its bound values
    (record data); only the driver's own message is kept.
    """
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        return f"{type(exc.orig).__name__}: {exc.orig}"
    return f"{type(exc).__name__}: {exc}"
