"""A claimed run's step, whatever the run executes: what every program's step shares.

A run executes a *program*: a flow from rows (the default), or another program a
runner registers under a name in ``FlowRunner.programs`` (a job, a code workflow). The
run row says which in its stored snapshot's ``"program"`` entry (``program_of``). The
worker claims every due run of its runner the same way — the due-work index, a lease,
one transaction per step — and hands each to its program's step (``Stepping``): made
for that run, asked to ``advance()``, dropped after it.

``ClaimedStep`` is what such a step builds on, one rule in one place:

- ``command(...)`` runs an application command in a savepoint of the step's
  transaction (taken when the command first reads its connection) under a heartbeat,
  authorized again on every attempt, with the kind's deadline, its answer kept as
  JSON; its writes commit with the step or not at all;
- ``log(...)`` gathers history lines and ``save(...)`` writes them, the commands'
  idempotency records and the run's new state, status and due time — fenced by the
  claim's lease epoch, the lease given up in the same statement — so a worker that
  paused past its lease while another took the run over has its late write refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import commands, heartbeat
from flowrunner.engine.mounted import Claimed, Mounted
from flowrunner.flows.interpreter import happened
from flowrunner.foundations import durations, limits, logs, payloads, sanitize, statuses
from flowrunner.store import dialects
from flowrunner.store import operations as ops

log = logs.logger("flowrunner.engine.worker")


class ClaimedStep:
    """One claimed run's step in ``conn``'s transaction: made for the run, then dropped.

    It holds what the step read — the run, the claim, the clock — and what it gathers
    to write at once: history lines and the idempotency records of the commands that
    answered. A program's step subclasses it and implements ``advance``.
    """

    def __init__(self, claimed: Claimed) -> None:
        self.mounted: Mounted = claimed.mounted
        self.owner = claimed.owner
        self.lease_ttl = claimed.lease_ttl
        self.point = claimed.point
        self.conn = claimed.conn
        self.claim = claimed.claim
        self.later = tuple(claimed.later)
        self.now = claimed.now
        self.run = claimed.run
        self.commit = claimed.commit
        self.observe = claimed.observe
        self.traced = claimed.traced
        self.lines: list[ops.LogLine] = []
        self.completed: list[ops.Completed] = []
        # When a checkpoint renews the lease: once a quarter of it has gone.
        self.renew_after = self.now + self.lease_ttl / 4
        # Why the run failed at this step, when it did: logged once the step is saved.
        self.failed: str | None = None

    def failure(self) -> str | None:
        """The sentence to log when this step failed the run: which run, what, why."""
        if self.failed is None:
            return None
        run = self.run
        return (
            f"run {run.id} of {run.flow_name!r} on {self.mounted.binding.resource} "
            f"{run.record_id} failed: {self.failed}"
        )

    # -- history -----------------------------------------------------------------------

    def log(
        self,
        what: str,
        *,
        detail: object = None,
        title: str | None = None,
        kind: str | None = None,
        position: int | None = None,
        step_id: str | None = None,
        pass_: int | None = None,
        due_at: datetime | None = None,
    ) -> None:
        """Gather one history line, written with the run's new state by ``save``."""
        self.traced.reached(title)
        self.lines.append(
            ops.LogLine(
                what=what,
                position=position,
                step_id=step_id,
                title=title,
                kind=kind,
                pass_=pass_,
                detail=detail,
                due_at=due_at,
            )
        )

    # -- saving ------------------------------------------------------------------------

    def write_gathered(self) -> None:
        """Write the gathered history lines and the answered commands' idempotency
        records (before the fenced save, in the same transaction)."""
        run = self.run
        ops.append_logs(self.conn, run_id=run.id, at=self.now, tenant=run.tenant, lines=self.lines)
        self.lines = []
        ops.record_completed(self.conn, self.completed, now=self.now)
        self.completed = []

    def save(
        self,
        *,
        state: Mapping[str, Any],
        status: str,
        due_at: datetime | None,
        error: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> None:
        """Write what the step gathered and the run's new state, status and due time.

        The save is fenced by the claim's lease epoch (a late worker's write is refused
        with ``LeaseLost`` and everything of its step rolls back), gives the lease up,
        and keeps a wake-up that arrived meanwhile. An ended run has no due time.
        """
        run = self.run
        if status == statuses.RunStatus.FAILED and self.failed is None:
            self.failed = reason or str((error or {}).get("message") or "no reason given")
        self.write_gathered()
        self.point("before-save")
        ops.save_step(
            self.conn,
            run_id=run.id,
            expected_version=run.version,
            state=dict(state),
            status=status,
            now=self.now,
            error=None if error is None else dict(error),
            reason=reason,
            owner=self.owner,
            claim=self.claim,
            due_at=None if status in statuses.ENDED else due_at,
            tenant=run.tenant,
        )

    def checkpoint(self, *, state: Mapping[str, Any], status: str) -> bool:
        """Commit what the step did so far and go on under the same claim: the gathered
        history lines and answered commands' records, the run's state and status (still
        open) — with the writes made in the step's transaction — so a worker that dies
        from here on repeats nothing done before this point.

        Fenced as ``save`` is (``LeaseLost`` when the lease is another's now or the run
        moved on), in the save's own statement. The lease is renewed, not given up, once
        a quarter of it has gone since the step began or was last renewed (a command's
        heartbeat keeps it while the command runs). A step handed over without a way to
        commit (``Claimed.commit`` None) keeps one transaction: it does nothing. Whether
        it committed.
        """
        if self.commit is None:
            return False
        run = self.run
        self.write_gathered()
        clock = self.mounted.clock()
        if clock >= self.renew_after:
            self.renew_after = clock + self.lease_ttl / 4
            if not ops.refresh_lease(
                self.conn,
                name=ops.run_lease(run.id),
                owner=self.owner,
                epoch=self.claim.epoch,
                now=clock,
                ttl=self.lease_ttl,
            ):
                raise errors.LeaseLost(
                    f"the lease of run {run.id} was taken over before its step could be "
                    "kept; another worker does the step"
                )
        version = ops.checkpoint_run(
            self.conn,
            run_id=run.id,
            expected_version=run.version,
            state=dict(state),
            status=status,
            now=self.now,
            owner=self.owner,
            epoch=self.claim.epoch,
            stored_status=run.status,
        )
        self.run = ops.checkpointed(
            run, version=version, state=dict(state), status=statuses.RunStatus(status)
        )
        self.commit()
        return True

    def give_up_lease(self, *, forget: bool) -> None:
        ops.finish_lease(
            self.conn,
            name=ops.run_lease(self.run.id),
            owner=self.owner,
            epoch=self.claim.epoch,
            forget=forget,
        )

    def stop(self, why: str, *, code: str = "snapshot_broken") -> None:
        """Fail the run without advancing it (what it executes no longer loads)."""
        conn, run, now = self.conn, self.run, self.now
        self.failed = why
        self.give_up_lease(forget=True)
        ops.save_run(
            conn,
            run.id,
            expected_version=run.version,
            state=run.state,
            status=statuses.RunStatus.FAILED,
            now=now,
            error=sanitize.error_envelope(code, why),
            reason=why,
        )
        ops.set_due(conn, run_id=run.id, due_at=None, tenant=run.tenant)
        failed = [ops.LogLine("failed", detail=why)]
        ops.append_logs(conn, run_id=run.id, at=now, tenant=run.tenant, lines=failed)

    # -- commands ----------------------------------------------------------------------

    def deadline(self, timeout: timedelta | None) -> datetime | None:
        """When an attempt that starts now must have ended, under ``timeout``."""
        return None if timeout is None else self.mounted.clock() + timeout

    def command(
        self,
        command: str,
        context: commands.CommandContext,
        *,
        result_key: str,
        timeout: timedelta | None = None,
        then: Callable[[dict[str, Any]], object] | None = None,
        limit: limits.Named | None = None,
    ) -> tuple[happened.CommandResult, bool]:
        """``attempt`` under ``limit`` (a kind's, a job's, a workflow step's): the
        command starts only with a turn of it — a slot while it runs, a start of its
        rate — and frees its slot when it ends, answering or raising. Without a turn the
        step goes no further: ``Deferred`` is raised, and the worker puts the run back
        on the due index for when a turn is expected (a freed slot wakes it sooner)."""
        if limit is None:
            return self.attempt(command, context, result_key=result_key, timeout=timeout, then=then)
        self.take_turn(limit)
        try:
            answered = self.attempt(
                command, context, result_key=result_key, timeout=timeout, then=then, keep=limit
            )
        except Exception:
            self.free_slot(limit)
            raise
        self.free_slot(limit)
        return answered

    def take_turn(self, limit: limits.Named) -> None:
        """Take a turn of ``limit`` for this run, or raise ``Deferred``.

        On PostgreSQL in a short transaction of its own, committed before the command
        starts, so every worker counts it; on SQLite in the step's own (it holds the
        database's one write lock until it commits, so no other worker starts meanwhile).
        """
        now = self.mounted.clock()
        run_id = self.run.id
        if dialects.is_sqlite(self.conn):
            turn = ops.take_turn(
                self.conn, limit=limit, run_id=run_id, now=now, hold=self.lease_ttl
            )
            if not turn.taken:
                raise Deferred(limit, turn, registered=False)
            return
        with dialects.begin(self.mounted.engine) as conn:
            clock = self.mounted.clock
            turn = ops.take_turn(conn, limit=limit, run_id=run_id, now=clock, hold=self.lease_ttl)
            if not turn.taken:
                ops.wait_turn(conn, limit=limit, run_id=run_id, now=clock())
        if not turn.taken:
            raise Deferred(limit, turn, registered=True)

    def free_slot(self, limit: limits.Named) -> None:
        """Free this run's slot of ``limit`` (its command ended), waking the oldest runs
        waiting whose turn it now is."""
        if limit.concurrency is None:
            return
        now = self.mounted.clock()
        if dialects.is_sqlite(self.conn):
            ops.free_slot(self.conn, limit=limit, run_id=self.run.id, now=now)
            return
        with dialects.begin(self.mounted.engine) as conn:
            ops.free_slot(conn, limit=limit, run_id=self.run.id, now=now)

    def attempt(
        self,
        command: str,
        context: commands.CommandContext,
        *,
        result_key: str,
        timeout: timedelta | None = None,
        then: Callable[[dict[str, Any]], object] | None = None,
        keep: limits.Named | None = None,
    ) -> tuple[happened.CommandResult, bool]:
        """Run ``command`` with ``context`` in a savepoint of the step's transaction,
        under a heartbeat; its result (keyed ``result_key``) and whether it wrote.

        The savepoint is taken when the command first reads ``context.conn`` (or up
        front under a ``timeout``): one that never reads it wrote nothing here to undo.

        With a ``timeout`` the attempt has a deadline (``context.deadline``): the command
        sees it (``ctx.time_left()``), PostgreSQL cancels its statements that run past it,
        the heartbeat keeps the lease only until it, and an attempt that ends after it —
        answering or raising — is rolled back and counts as a failed, retried one. Python
        cannot stop a running function: the command keeps its deadline by passing its time
        on, and the worker holds it to it when it ends.

        An answered command's idempotency record (``context.idempotency_key``) is
        gathered for ``save``, so it commits with the command's writes. A refusal
        (``CommandRefused``, or an answer that cannot be kept) is final; any other
        exception is a failed attempt the caller may retry.

        ``then`` is told the answer inside the command's savepoint, so what it writes (the
        event a kind records) commits with the command's writes or not at all; an
        ``EventRejected`` from it refuses the step for good, the command's writes undone.

        Traced (``engine.tracing``) as a child span of the step's: ``command NAME``.
        """
        with self.traced.attempt(
            f"command {command}",
            step=context.step_title,
            attempt=context.attempt,
            extra={"flowrunner.command": command},
        ) as traced:
            result, wrote = self._attempt(command, context, result_key, timeout, then, keep)
            outcome = "ok" if result.ok else "refused" if result.refused else "failed"
            traced.ended(outcome, result.error)
            return result, wrote

    def _attempt(
        self,
        command: str,
        context: commands.CommandContext,
        result_key: str,
        timeout: timedelta | None,
        then: Callable[[dict[str, Any]], object] | None,
        keep: limits.Named | None,
    ) -> tuple[happened.CommandResult, bool]:
        """One attempt of ``command``, as ``command`` says."""
        mounted, conn, run = self.mounted, self.conn, self.run
        deadline = context.deadline
        beat = heartbeat.Heartbeat(
            mounted.engine,
            owner=self.owner,
            claims=(self.claim, *self.later),
            ttl=self.lease_ttl,
            clock=mounted.clock,
            until=deadline,
            point=self.point,
            keep=None if keep is None or keep.concurrency is None else self._keeping(keep),
        )
        savepoint = _OnFirstWrite(conn, "flowrunner_command")
        if timeout is not None:
            savepoint.open()  # PostgreSQL's statement limit is set inside it
        else:
            commands.on_first_use(context, savepoint.open)
        failed: happened.CommandResult | None = None
        answer: Mapping[str, object] | None = None
        wrote = True
        began = time.monotonic()
        try:
            with beat, dialects.statement_time_limited(conn, timeout):
                mounted.authorize_command(command, context.principal)
                function = mounted.commands[command]
                mark = dialects.write_mark(conn)
                answer = function(context)
                wrote = savepoint.opened and dialects.wrote_since(conn, mark)
            if answer is not None and not isinstance(answer, Mapping):
                raise TypeError(f"command {command!r} answered {type(answer).__name__}")
        except errors.CommandRefused as refused:
            failed = happened.CommandResult(
                key=result_key,
                ok=False,
                refused=True,
                error=sanitize.error_envelope("command_refused", _str(refused)),
            )
        except Exception as exc:
            if cut(conn, exc):
                raise  # the worker's database went away, not the command's doing
            log.warning(
                "run %s: command %s failed: %s",
                run.id,
                command,
                sanitize.describe_exception(exc),
            )
            failed = happened.CommandResult(
                key=result_key,
                ok=False,
                error=sanitize.error_envelope("command_failed", describe(exc), retryable=True),
            )
        if failed is None and answer is not None:
            # The answer is kept as JSON, converted as an event's payload is (a Decimal
            # as its text, a date as ISO 8601, an enum as its value); one that cannot be
            # (a NaN, an object) refuses the step for good: trying again answers the same.
            try:
                answer = payloads.plain(answer)
            except payloads.NotPlain as exc:
                failed = happened.CommandResult(
                    key=result_key,
                    ok=False,
                    refused=True,
                    error=sanitize.error_envelope(
                        "command_answer_invalid",
                        f"command {command!r} answered what cannot be stored: {exc}",
                    ),
                )
        if failed is None and then is not None:
            savepoint.open()
            try:
                then(dict(answer or {}))
            except errors.EventRejected as exc:
                failed = happened.CommandResult(
                    key=result_key,
                    ok=False,
                    refused=True,
                    error=sanitize.error_envelope(
                        "command_answer_invalid",
                        f"command {command!r} answered what its event cannot record: {exc}",
                    ),
                )
        if self.observe is not None:
            outcome = "ok" if failed is None else "refused" if failed.refused else "failed"
            self.observe(command, time.monotonic() - began, outcome, context.attempt)
        if run.id in beat.lost:
            savepoint.rollback()
            raise errors.LeaseLost(
                f"the lease of run {run.id} was taken over while its command ran; "
                "another worker does the step"
            )
        if deadline is not None and timeout is not None and mounted.clock() > deadline:
            # Whatever it said, it said it too late: another attempt may already be due.
            failed = happened.CommandResult(
                key=result_key,
                ok=False,
                error=sanitize.error_envelope(
                    "command_timed_out", f"timed out after {words(timeout)}", retryable=True
                ),
            )
        if failed is not None:
            savepoint.rollback()
            return failed, False
        savepoint.release()
        self.point(f"after-command:{command}")
        # Recorded with the history lines, in the same transaction as the command's writes.
        self.completed.append(
            ops.Completed(context.idempotency_key, run.tenant, dict(answer or {}))
        )
        return happened.CommandResult(key=result_key, ok=True, answer=dict(answer or {})), wrote

    def _keeping(self, limit: limits.Named) -> Callable[[sa.Connection, datetime], None]:
        """What the heartbeat does beside the leases: hold this run's slot of ``limit``
        one lease longer while its command runs."""
        run_id, ttl = self.run.id, self.lease_ttl

        def keep(conn: sa.Connection, now: datetime) -> None:
            ops.keep_slot(conn, limit=limit, run_id=run_id, until=now + ttl)

        return keep


class Deferred(Exception):
    """A command's limit had no turn for its run: the step stops here, what it did since
    its last checkpoint is rolled back, and the worker makes the run due again at
    ``turn.again_at`` (in ``limit``'s waiting line: ``registered`` when already written
    there, as on PostgreSQL)."""

    def __init__(self, limit: limits.Named, turn: ops.Turn, *, registered: bool) -> None:
        super().__init__(f"{limit.shown} has no turn free; {turn.ahead} run(s) wait ahead")
        self.limit = limit
        self.turn = turn
        self.registered = registered


class Unknown(ClaimedStep):
    """The step of a run whose program this runner does not serve: it fails with a
    sentence naming the program (the code that defined it was removed or not mounted)."""

    def __init__(self, claimed: Claimed, name: str) -> None:
        super().__init__(claimed)
        self.name = name

    def advance(self) -> None:
        if self.run.status in statuses.ENDED:
            ops.set_due(self.conn, run_id=self.run.id, due_at=None, tenant=self.run.tenant)
            self.give_up_lease(forget=True)
            return
        self.stop(
            f"this run executes a {self.name} {self.run.flow_name!r}, which this runner "
            f"does not have any more",
            code="program_missing",
        )


class _OnFirstWrite:
    """A command's savepoint, taken only once the command may write (``open``): when it
    reads its connection. Releasing or rolling back one never taken does nothing — the
    command wrote nothing through the step's transaction — and saves the two statements
    a savepoint costs per command."""

    def __init__(self, conn: sa.Connection, name: str) -> None:
        self.conn = conn
        self.name = name
        self.savepoint: dialects.Savepoint | None = None

    @property
    def opened(self) -> bool:
        return self.savepoint is not None

    def open(self) -> None:
        if self.savepoint is None:
            self.savepoint = dialects.Savepoint(self.conn, self.name)

    def release(self) -> None:
        if self.savepoint is not None:
            self.savepoint.release()

    def rollback(self) -> None:
        if self.savepoint is not None:
            self.savepoint.rollback()


def words(length: timedelta) -> str:
    """A timeout in words: ``30 seconds``, ``1 hour 30 minutes``."""
    return str(durations.Duration(days=length.days, seconds=length.seconds))


def cut(conn: sa.Connection, exc: BaseException) -> bool:
    """Whether ``exc`` came with (or after) the loss of ``conn``'s database connection."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return conn.invalidated or isinstance(exc, sa.exc.PendingRollbackError)


def describe(exc: BaseException) -> str:
    """An exception as one line for an error envelope, without the SQL or its parameters.

    A SQLAlchemy statement error's text carries the statement and its bound values
    (record data); only the first line of the driver's own message is kept (the lines
    after it, ``DETAIL`` and the like, quote values). An exception whose text cannot be
    made (its ``__str__`` raises) is described by its type alone.

    >>> class Odd(Exception):
    ...     def __str__(self) -> str:
    ...         raise RuntimeError("no")
    >>> describe(Odd())
    'Odd: <unprintable>'
    """
    if isinstance(exc, sa.exc.StatementError) and exc.orig is not None:
        first = _str(exc.orig).strip().splitlines()[:1]
        return f"{type(exc.orig).__name__}: {' '.join(first)}".rstrip()
    return " ".join(f"{type(exc).__name__}: {_str(exc)}".split())


def _str(exc: BaseException) -> str:
    """``str(exc)``, or ``<unprintable>`` when making it raises."""
    try:
        return str(exc)
    except Exception:
        return "<unprintable>"
