"""The worker: claim due runs under a lease, advance each, apply its effects in one transaction.

A run's step effects that live in the database — a set step's write, a notice, a
command's own writes, the history lines and the run's new state and due time — commit
together or not at all, so a worker that dies at any point leaves the run as it was
and the next worker does the step exactly once. Saves are fenced: a worker whose lease
was taken over (or whose run moved on) has its late write refused.

The ``Worker`` lives as long as its process and keeps only its lease owner and counts;
each claimed run's step is made for that run by its program (a flow from rows:
``flow_step.Advance``) and dropped after it. While a command runs, a heartbeat keeps the
claim's leases (``flowrunner.engine.heartbeat``); a kind's ``timeout`` bounds one attempt (see
``stepping.ClaimedStep.command``).

A worker claims only what it starts at once (one transaction's ``batch``, by default),
under short leases, so a worker that dies holds up few runs for little time. Its
database failing is not the runs' fault: a step whose connection was cut rolls back,
its claims are handed back, and ``serve`` goes on with a new connection after a short,
bounded wait (see ``Worker.serve``).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import claimed as stepping
from flowrunner.engine import tracing
from flowrunner.engine.mounted import (
    TICK,
    Claimed,
    CommandObserver,
    Mountable,
    Mounted,
    Stepping,
    program_of,
)
from flowrunner.foundations import logs, sanitize, statuses
from flowrunner.store import dialects, wakeups
from flowrunner.store import operations as ops

log = logs.logger("flowrunner.engine.worker")

# A worker's lease on each run it claims: long enough for a step, short enough that a
# dead worker's runs wait little. A heartbeat renews it while a command runs.
LEASE = timedelta(seconds=30)

# After its database failed, ``serve`` waits this long before trying again, doubling
# with each failure in a row up to ``BACKOFF_CAP``.
BACKOFF_FIRST = 0.2
BACKOFF_CAP = 10.0

# Failures of the database itself, not of a run: a cut or refused connection, a
# deadlock, a lock or statement timeout, the pool out of connections, a transaction
# left unusable by a cut connection.
DATABASE_FAILURES: tuple[type[Exception], ...] = (
    sa.exc.OperationalError,
    sa.exc.InterfaceError,
    sa.exc.TimeoutError,
    sa.exc.PendingRollbackError,
)

# Given the name of each commit boundary the worker passes ("claimed", "after-set",
# "before-save", ...); crash-injection tests raise there to stop the worker. During a
# command, "heartbeat" is passed from the heartbeat's thread after each lease renewal;
# what it raises stops the worker when the command returns.
Hook = Callable[[str], None]


def _pass(point: str) -> None:
    """The hook outside tests: a commit boundary is passed without a word."""


@dataclass
class Crash(BaseException):
    """Raised by a test's hook to stop the worker at a named point, as a killed process.

    A ``BaseException``, as ``KeyboardInterrupt`` is: the worker's own handlers (a run's
    failure, a command's) let it through, and the open transaction rolls back.
    """

    point: str


@dataclass
class WorkerStats:
    """What a worker did: runs claimed, advanced, refused (lease lost), not advanced for an
    error (``errors``), claims handed back (after a lost connection, or not started when
    it was stopped), rounds its database
    failed, and runs advanced into failure (``failed``, counted in ``advanced`` too: a
    step failed, or a row broke); runs put back to wait for a turn of their command's
    limit (``deferred``)."""

    claimed: int = 0
    advanced: int = 0
    refused: int = 0
    errors: int = 0
    handed_back: int = 0
    database_failures: int = 0
    failed: int = 0
    wakeups: int = 0  # idle rests ended early by a wake-up (PostgreSQL's LISTEN)
    deferred: int = 0  # runs put back to wait for a turn of their command's limit


class Worker:
    """Claims due runs of one runner and advances them.

    ``batch`` runs share one transaction, each inside its own savepoint, so one run's
    failure never undoes another's step. ``claim`` is how many runs one claim takes
    (default: ``batch``, what one transaction advances), each under a lease of
    ``lease_ttl``. ``crash_at`` is for crash-injection tests: a callable given each
    commit-boundary name, which may raise to stop the worker there.
    """

    def __init__(
        self,
        mounted: Mounted | Mountable,
        *,
        owner: str | None = None,
        lease_ttl: timedelta = LEASE,
        batch: int = 1,
        claim: int | None = None,
        crash_at: Hook | None = None,
    ) -> None:
        # A runner (the facade) is taken for its context.
        self.mounted = Mounted.of(mounted)
        mounted = self.mounted
        dialects.reconnect_when_read_only(mounted.engine)  # a failover: connect anew
        self.owner = owner or ops.new_owner_id("worker")
        self.lease_ttl = lease_ttl
        self.batch = max(1, batch)
        self.claim = self.batch if claim is None else max(1, claim)
        self.stats = WorkerStats()
        self._point: Hook = _pass if crash_at is None else crash_at
        self._prepared = 0  # how many of the runner's ``preparing`` this worker did
        self._ticked: datetime | None = None  # when it last called the ``ticking`` hooks
        self._stop: threading.Event | None = None  # ``serve``'s: set, it starts no new run
        # Told of each run's step (its program, seconds) and each command attempt: how
        # ``engine.metrics`` times them. None: nothing is timed.
        self.on_step: Callable[[str, float], None] | None = None
        self.on_command: CommandObserver | None = None

    def run_due(self, limit: int | None = None) -> int:
        """Claim up to ``limit`` due runs (default: ``claim``) and advance them; how many
        were claimed.

        Should the database fail on the way (a cut connection), the step in hand rolls
        back, the runs not yet advanced are handed back — due again at once, not when
        their leases run out — and the error is raised for the caller (``serve``) to wait
        and try again.
        """
        began, before = time.monotonic(), dataclasses.replace(self.stats)
        now = self.mounted.clock()
        while self._prepared < len(self.mounted.preparing):
            # Once per worker, before its first claim (a job at times has its run).
            self.mounted.preparing[self._prepared](now)
            self._prepared += 1
        if self.mounted.business is not None:
            # A holiday added or taken away moves the waiting runs' business times.
            self.mounted.business.watch(now)
        if self.mounted.ticking and (
            self._ticked is None or not timedelta(0) <= now - self._ticked < TICK
        ):
            self._ticked = now  # a scheduled flow's run is made, or kept in step
            for tick in self.mounted.ticking:
                tick(now)
        claims = ops.claim_due(
            self.mounted.engine,
            now=now,
            owner=self.owner,
            limit=self.claim if limit is None else limit,
            ttl=self.lease_ttl,
            resource=self.mounted.binding.resource,  # only this runner's runs
            fair=self.mounted.binding.tenant is not None,  # shared among tenants
        )
        self.stats.claimed += len(claims)
        pending = list(claims)  # claimed, their steps not committed yet
        try:
            self._point("claimed")
            if pending:
                # One connection for the claim's transactions, one after the other.
                with dialects.connected(self.mounted.engine) as conn:
                    while pending and not self.stopping:
                        group = self._still_ours(pending[: self.batch], now)
                        rest = pending[self.batch :]
                        started = 0
                        with dialects.Checkpoints.within(conn) as unit:
                            for index, claim in enumerate(group):
                                if self.stopping:
                                    break  # stopped: the runs not started go back
                                # A long command keeps the leases of every run still to come.
                                self._one(unit, claim, later=(*group[index + 1 :], *rest))
                                started += 1
                            self._point("before-commit")
                        pending = [*group[started:], *rest]
                        self._point("committed")
        except Exception as exc:
            if database_failed(exc):
                self._hand_back(pending)
            raise
        if pending:  # stopped with runs claimed but not started
            self._hand_back_on_stop(pending)
        self._log_claim(claims, before, time.monotonic() - began)
        return len(claims)

    @property
    def stopping(self) -> bool:
        """Whether the worker was told to stop (``serve``'s event is set): it starts no
        further run, and ``run_due`` hands back the runs it claimed but did not start."""
        return self._stop is not None and self._stop.is_set()

    def _hand_back_on_stop(self, claims: Sequence[ops.Claim]) -> None:
        """Stopping: give back at once the claimed runs not started, one INFO line saying
        which, so another worker takes them now rather than when their leases run out."""
        before = self.stats.handed_back
        self._hand_back(claims)
        back = self.stats.handed_back - before
        ids = [str(c.run_id) for c in claims]
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        log.info(
            "stopping: handed back %d claimed run(s) not started (%s)%s",
            back,
            shown,
            "" if back == len(claims) else f"; {len(claims) - back} wait for their leases",
        )

    def _log_claim(self, claims: Sequence[ops.Claim], before: WorkerStats, took: float) -> None:
        """One INFO line per claim: how many runs, whose, what became of them, how long."""
        if not claims:
            return
        stats = self.stats
        refused, errored = stats.refused - before.refused, stats.errors - before.errors
        log.info(
            "claimed %d run(s)%s: %d advanced (%d failed)%s%s, in %.2f s",
            len(claims),
            _tenants(claims),
            stats.advanced - before.advanced,
            stats.failed - before.failed,
            f", {refused} refused (lease taken over)" if refused else "",
            f", {errored} not advanced for an error" if errored else "",
            took,
        )

    def _hand_back(self, claims: Sequence[ops.Claim]) -> None:
        """Give back claims whose transaction was lost, best effort: what cannot be given
        back now (the database is still away) falls due when its lease runs out."""
        if not claims:
            return
        try:
            self.stats.handed_back += ops.hand_back(
                self.mounted.engine, owner=self.owner, claims=claims
            )
        except Exception as exc:
            if not database_failed(exc):
                raise
            log.warning(
                "%d claimed run(s) not handed back (%s); they wait for their leases",
                len(claims),
                describe(exc),
            )

    def _still_ours(self, group: list[ops.Claim], claimed_at: datetime) -> list[ops.Claim]:
        """The claims of a group whose leases still hold, renewed if half their time is gone.

        A slow run earlier in the same claim must not let the later ones lapse. Renewed
        in a short transaction of its own, so the lease rows are not held locked while
        the steps run: a worker that then pauses past its lease can still be taken over,
        and its late write is refused by the fence at save.
        """
        now = self.mounted.clock()
        if now - claimed_at < self.lease_ttl / 2:
            return group
        kept = []
        with dialects.begin(self.mounted.engine) as conn:
            for claim in group:
                if ops.refresh_lease(
                    conn,
                    name=ops.run_lease(claim.run_id),
                    owner=self.owner,
                    epoch=claim.epoch,
                    now=now,
                    ttl=self.lease_ttl,
                ):
                    kept.append(claim)
                else:
                    self.stats.refused += 1
        return kept

    def _one(
        self, unit: dialects.Checkpoints, claim: ops.Claim, later: Sequence[ops.Claim] = ()
    ) -> bool:
        """Advance one claimed run inside its own savepoint; False if nothing was saved.

        Nothing is saved when its write was refused (the lease is another's now) or the
        database failed for a moment (the lease expires and the run is tried again) —
        nothing since the step's last checkpoint, which stays committed. The lease is
        given up in the step's own transaction, with the save. ``later`` are the claims
        this transaction advances next: a long command keeps them too.
        """
        conn = unit.conn
        # The clock is read per run: a slow run before this one costs no stale time.
        now = self.mounted.clock()
        savepoint = _RunSavepoint(unit, self._point)
        failure: str | None = None
        began = time.monotonic()
        traced = tracing.step(claim.run_id)
        try:
            with traced:
                program, step = self._step(conn, claim, now, later, savepoint.checkpoint, traced)
                step.advance()
                failure = step.failure()
                traced.failed(failure)
            if self.on_step is not None:
                self.on_step(program, time.monotonic() - began)
        except stepping.Deferred as deferred:
            # Its command's limit has no turn for it: nothing since its last checkpoint
            # stands, and it waits in the limit's line, due when a turn is expected.
            savepoint.rollback()
            try:
                self._defer(conn, claim, deferred)
            except errors.LeaseLost:
                self.stats.refused += 1
                return False
            return True
        except errors.LeaseLost as lost:
            savepoint.rollback()
            self.stats.refused += 1
            log.info("run %s: late write refused (%s)", claim.run_id, lost)
            return False
        except Exception as exc:
            if _cut(conn, exc):
                # The transaction went with its connection: nothing of this group can be
                # saved any more, and run_due hands its claims back.
                raise ConnectionLost(describe(exc)) from exc
            if isinstance(exc, DATABASE_FAILURES):
                # A deadlock, a lock timeout: not the run's fault. The lease runs out and
                # the run is tried again.
                savepoint.rollback()
                self.stats.errors += 1
                log.warning(
                    "run %s: the database failed (%s); it will be tried again",
                    claim.run_id,
                    describe(exc),
                )
                return False
            # An engine bug must not stall the other runs.
            savepoint.rollback()
            self.stats.errors += 1
            log.error(
                "run %s could not be advanced: %s", claim.run_id, sanitize.describe_exception(exc)
            )
            log.debug("run %s: raised at %s", claim.run_id, logs.where(exc))
            self._fail_run(conn, claim, now, exc)
            return True
        if self.mounted.limits:
            # A run that waited for a turn and went on without one (woken by an event,
            # cancelled) leaves the line: nobody waits behind it.
            ops.forget_waiting(conn, run_id=claim.run_id)
        savepoint.release()
        self.stats.advanced += 1
        if failure is not None:
            self.stats.failed += 1
            log.error("%s", failure)
        return True

    def _defer(self, conn: sa.Connection, claim: ops.Claim, deferred: stepping.Deferred) -> None:
        """Put a run whose command's limit had no turn back on the due index, due when a
        turn is expected (a freed slot wakes it sooner), its lease given up, one history
        line saying so."""
        now = self.mounted.clock()
        with conn.begin_nested():
            if not deferred.registered:
                ops.wait_turn(conn, limit=deferred.limit, run_id=claim.run_id, now=now)
            again = deferred.turn.again_at or now
            detail = {"limit": deferred.limit.shown, "ahead": deferred.turn.ahead}
            waited = ops.LogLine("turn_waited", detail={**detail, "again_at": again.isoformat()})
            ops.append_logs(conn, run_id=claim.run_id, at=now, tenant=claim.tenant, lines=[waited])
            ops.set_due(
                conn,
                run_id=claim.run_id,
                due_at=again,
                tenant=claim.tenant,
                claim=claim,
            )
            ops.finish_lease(
                conn, name=ops.run_lease(claim.run_id), owner=self.owner, epoch=claim.epoch
            )
        self.stats.deferred += 1
        log.debug("run %s waits for its turn: %s", claim.run_id, deferred)

    def _step(
        self,
        conn: sa.Connection,
        claim: ops.Claim,
        now: datetime,
        later: Sequence[ops.Claim],
        commit: Callable[[], None] | None = None,
        traced: tracing.Step = tracing.QUIET_STEP,
    ) -> tuple[str, Stepping]:
        """The program the claimed run executes — a flow from rows unless its snapshot
        names another the runner registered (``FlowRunner.programs``) — and its step
        (``traced``: its span)."""
        run = ops.load_run(conn, claim.run_id)
        name = program_of(run.snapshot)
        program = self.mounted.programs.get(name)
        traced.about(program=name, flow=run.flow_name, record=run.record_id, tenant=run.tenant)
        claimed = self.claimed(conn, claim, now, later, run, commit, traced)
        if program is None:
            return name, stepping.Unknown(claimed, name)
        return name, program.step(claimed)

    def claimed(
        self,
        conn: sa.Connection,
        claim: ops.Claim,
        now: datetime,
        later: Sequence[ops.Claim],
        run: ops.RunRow,
        commit: Callable[[], None] | None = None,
        traced: tracing.Step = tracing.QUIET_STEP,
    ) -> Claimed:
        """A claimed run as this worker hands it to the run's program."""
        return Claimed(
            mounted=self.mounted,
            owner=self.owner,
            lease_ttl=self.lease_ttl,
            point=self._point,
            conn=conn,
            claim=claim,
            now=now,
            later=later,
            run=run,
            commit=commit,
            observe=self.on_command,
            traced=traced,
        )

    def _fail_run(
        self, conn: sa.Connection, claim: ops.Claim, now: datetime, exc: Exception
    ) -> None:
        """Fail the run with a sanitized envelope; its saved state stays as it was, so an
        operator's retry advances it again from there."""
        run_id = claim.run_id
        with conn.begin_nested():
            ops.finish_lease(
                conn, name=ops.run_lease(run_id), owner=self.owner, epoch=claim.epoch, forget=True
            )
            run = ops.load_run(conn, run_id)
            envelope = sanitize.error_envelope("engine_error", describe(exc))
            ops.save_run(
                conn,
                run_id,
                expected_version=run.version,
                state=run.state,
                status=statuses.RunStatus.FAILED,
                now=now,
                error=envelope,
                reason=f"the engine could not advance this run: {envelope['message']}",
            )
            ops.set_due(conn, run_id=run_id, due_at=None, tenant=run.tenant)

    # -- serving -----------------------------------------------------------------------

    def serve(
        self,
        stop: threading.Event,
        *,
        poll: float = 1.0,
        limit: int | None = None,
        listen: bool = True,
    ) -> None:
        """Advance due runs until ``stop`` is set, resting up to ``poll`` seconds when idle.

        Once ``stop`` is set the run in hand is advanced as far as it goes and committed,
        no other run is started, and the runs claimed but not started are handed back —
        due again at once for another worker — before the listener closes and it returns.

        On PostgreSQL the rest ends the moment work falls due: a start, an event, an
        operator's action wakes idle workers as it commits (``store.wakeups``; ``listen``
        False turns that off). Each wakes its workers, which all try to claim; the
        ``poll`` interval stays for due times that come by the clock — timers, reminders,
        a dead worker's lease running out — and while the listening connection is lost.

        A failing database never stops it: each failure is logged on one line and
        followed by a wait — ``BACKOFF_FIRST`` seconds, doubling while the failures go
        on, at most ``BACKOFF_CAP`` — and the pool gives the next try a new connection.
        """
        self.mounted.require_secrets()  # startup refuses while a secret's variable is unset
        failures = 0
        self._stop = stop  # checked before each run: a stop hands back what is not started
        waking = wakeups.Listener(
            self.mounted.engine, self.mounted.binding.resource, enabled=listen
        )
        with waking:  # listening before the first claim: no wake-up falls in between
            while not stop.is_set():
                try:
                    claimed = self.run_due(limit=limit)
                except Exception as exc:
                    if not database_failed(exc):
                        raise
                    failures += 1
                    self.stats.database_failures += 1
                    pause = backoff(failures)
                    log.warning(
                        "the database failed (%s); trying again in %.1f s",
                        sanitize.describe_exception(exc),
                        pause,
                    )
                    stop.wait(pause)
                    continue
                failures = 0
                if claimed == 0:
                    if waking.wait(stop, poll):
                        self.stats.wakeups += 1
                else:
                    waking.drain()  # what was sent meanwhile: this worker is looking anyway


class _RunSavepoint:
    """One run's part of the claim's transaction: a savepoint, rolled back alone when the
    run's step fails, and the checkpoints its step takes (``checkpoint``: what the step
    did so far commits — with the steps of the batch's runs before it — and the step
    goes on in a new transaction, which holds only this run's work: its start stands
    for the savepoint, and no statement is sent for one)."""

    def __init__(self, unit: dialects.Checkpoints, point: Hook) -> None:
        self.unit = unit
        self.point = point
        self.savepoint = unit.savepoint("flowrunner_run")

    def checkpoint(self) -> None:
        self.point("before-checkpoint")
        self.savepoint.release()
        self.unit.checkpoint()
        self.savepoint = self.unit.savepoint("flowrunner_run")
        self.point("checkpointed")

    def release(self) -> None:
        self.savepoint.release()

    def rollback(self) -> None:
        self.savepoint.rollback()


def _tenants(claims: Sequence[ops.Claim]) -> str:
    """`` for tenant acme``, `` for tenants acme, beta and 3 more``; empty without tenants."""
    names = sorted({str(c.tenant) for c in claims if c.tenant is not None})
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f" for tenant{'s' if len(names) > 1 else ''} {shown}"


def backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` database failures in a row: doubling from
    ``BACKOFF_FIRST`` up to ``BACKOFF_CAP``, less up to a fifth at random, so that the
    workers of one database do not all come back at the same moment."""
    pause = min(BACKOFF_CAP, BACKOFF_FIRST * 2.0 ** min(failures - 1, 32))
    return pause * random.uniform(0.8, 1.0)


class ConnectionLost(Exception):
    """A step's database connection was cut under it (its transaction is gone)."""


def database_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is the database failing, not a run or the engine: ``serve`` waits
    and tries again after one, and stops on anything else."""
    if isinstance(exc, (*DATABASE_FAILURES, ConnectionLost)):
        return True
    return isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated


_cut = stepping.cut


# What a failed run's envelope says of an exception, one line (kept here for callers).
describe = stepping.describe
