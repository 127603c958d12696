"""Timers on a record's date (a binding's ``at``), on the engine's own runs.

Arming: in the transaction that writes an instant into a timer's column — a record
created or updated (``record_created``, ``record_updated``, the ORM hook), a flow's set
step, or ``arm_existing`` for records that were there before — one run row is inserted,
due at the instant, keyed by the column, record and instant (``at_timers.Arming``): the
same instant arms once, a new one arms again, an empty column arms nothing. The due-work
index finds it when the instant comes, at a cost that follows what is due, each tenant
in turn, as any run.

Firing: the run's step (``TimerStep``, the program ``"at"``) reads the record as it is
then. If the column holds another instant (re-armed, or emptied) it ends, saying so; if
the record does not match the timer's ``when`` now, it ends, saying so, and only a new
instant arms the timer again; otherwise the command runs once (one idempotency record per
record, column and instant), tried again under the retry policy, and a refusal fails the
run with a sanitized envelope. A run woken before its instant (every change of its record
wakes its runs) goes back to sleep until then.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import binding, errors, query
from flowrunner.engine import claimed, commands
from flowrunner.engine.mounted import Claimed, Mounted, Program, Stepping
from flowrunner.flows.interpreter import retry as retry_mod
from flowrunner.foundations import sanitize, statuses
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops
from flowrunner.timers import rules


class Timers:
    """A runner's timers, read once at mount: each one's ``when`` parsed against the
    resource's columns (``BindingError`` if one does not read), its command checked."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted
        self.timers = tuple(mounted.binding.at)
        self.conditions: dict[str, query.Condition | None] = {
            timer.column: timer.condition(mounted.columns) for timer in self.timers
        }
        for timer in self.timers:
            needed_by = f"the timer at {timer.column!r}"
            tenants = [None, *mounted.tenant_run_as]
            for principal in dict.fromkeys(runs_as(mounted, timer, t) for t in tenants):
                mounted.check_command(timer.command, principal=principal, needed_by=needed_by)

    # -- arming ------------------------------------------------------------------------

    def arm(
        self,
        conn: sa.Connection,
        record: Mapping[str, object],
        now: datetime,
        *,
        changed: Collection[str] | None = None,
        record_id: str | None = None,
        tenant: object = None,
    ) -> list[int]:
        """Arm the timers whose column ``record`` gives an instant (of a change: only the
        ``changed`` columns'); the new runs' ids. An instant armed before arms nothing."""
        mounted = self.mounted
        armed = []
        for arming in rules.to_arm(
            self.timers, mounted.columns, record, mounted.config.timezone, changed
        ):
            if record_id is None:
                record_id, tenant = mounted.record_id(record), _tenant(mounted, record)
            run_id = ops.insert_run(
                conn,
                tenant=tenant,
                resource=mounted.binding.resource,
                record_id=record_id,
                flow_id=arming.flow_id,
                flow_name=arming.flow_name,
                start_key=arming.start_key(record_id, tenant),
                snapshot=arming.snapshot(),
                digest=rules.PROGRAM,
                state={},
                status=statuses.RunStatus.WAITING,
                now=now,
                started_by=mounted.run_as,
                due_at=arming.instant,
            )
            if run_id is not None:
                armed.append(run_id)
        return armed

    def arm_existing(
        self,
        where: str | None = None,
        *,
        tenant: binding.Tenant = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Arm the timers of records that were there before them (or before the runner
        watched them): each chosen record's columns, as though just created. Running it
        again arms nothing new. Returns how many runs it armed."""
        mounted = self.mounted
        if mounted.binding.tenant is not None and tenant is None:
            raise errors.OperatorError(
                f"{mounted.binding.resource} records belong to tenants: name the tenant"
            )
        owner = None if tenant is None else mounted.tables.tenant_value(tenant)
        now = mounted.clock()
        condition = query.parse(where, mounted.columns) if where else None
        clause = condition.to_sql(mounted.tables.resource, now) if condition else None
        columns = [timer.column for timer in self.timers]
        with mounted.engine.connect() as conn:
            total = records.count_records(conn, mounted.tables, clause, owner)
        armed = done = 0
        after: Any = None
        while True:
            with dialects.begin(mounted.engine) as conn:
                batch = records.records_with(
                    conn, mounted.tables, columns, clause, owner, after=after
                )
                for record in batch:
                    armed += len(self.arm(conn, record, now))
            if not batch:
                break
            after = batch[-1][mounted.binding.key]
            done += len(batch)
            if progress is not None:
                progress(done, total)
        return armed


def _tenant(mounted: Mounted, record: Mapping[str, object]) -> object:
    tenant = mounted.tenant_of(record)
    return None if tenant is None else str(tenant)


# -- firing ----------------------------------------------------------------------------


class TimerStep(claimed.ClaimedStep):
    """A claimed timer run: fire its command if its instant is still the record's and the
    record matches ``when``; else end, saying why."""

    def advance(self) -> None:
        run, mounted, now = self.run, self.mounted, self.now
        column = str(run.snapshot.get("column"))
        armed_for = str(run.snapshot.get("instant"))
        timer = mounted.binding.timer_at(column)
        timers = mounted.timers
        if timer is None or timers is None:
            self.stop(
                f"this run fires a timer at {column!r}, which the binding does not declare "
                "any more",
                code="program_missing",
            )
            return
        instant = datetime.fromisoformat(armed_for)
        again = run.state.get("again_at")
        if isinstance(again, str) and not run.state.get("gave_up"):
            instant = max(instant, datetime.fromisoformat(again))  # a retry's backoff
        if now < instant:
            # Woken early (its record changed): the instant decides, so sleep until it.
            self.save(state=run.state, status=statuses.RunStatus.WAITING, due_at=instant)
            return
        record = records.load_record(self.conn, mounted.tables, run.record_id, run.tenant)
        said = {"column": column, "instant": armed_for, "command": timer.command}
        if record is None:
            self.log("timer_gone", detail={**said, "resource": mounted.binding.resource})
            self.save(state=run.state, status=statuses.RunStatus.DONE, due_at=None)
            return
        holds = rules.instant_of(
            record.get(column), mounted.columns[column], mounted.config.timezone
        )
        if holds is None or rules.iso(holds) != armed_for:
            now_holds = None if holds is None else rules.iso(holds)
            self.log("timer_moved", detail={**said, "holds": now_holds})
            self.save(state=run.state, status=statuses.RunStatus.DONE, due_at=None)
            return
        condition = timers.conditions.get(column)
        if condition is not None and not _holds(condition, record, now):
            self.log("timer_unmatched", detail={**said, "when": timer.when})
            self.save(state=run.state, status=statuses.RunStatus.DONE, due_at=None)
            return
        self._fire(timer, record, said)

    def _fire(self, timer: binding.At, record: Mapping[str, object], said: dict[str, Any]) -> None:
        run, mounted, now = self.run, self.mounted, self.now
        # An operator's retry of a run that gave up starts its attempts again.
        tried = 0 if run.state.get("gave_up") else int(str(run.state.get("attempts", 0)))
        attempt = tried + 1
        key = rules.idempotency_key(
            mounted.binding.resource, run.tenant, run.record_id, timer.column, said["instant"]
        )
        if ops.find_idempotent(self.conn, key=key) is not None:
            self.log("timer_fired", detail={**said, "already": True})
            self.save(state=run.state, status=statuses.RunStatus.DONE, due_at=None)
            return
        context = commands.CommandContext(
            record=dict(record),
            inputs={"column": timer.column, "instant": said["instant"]},
            conn=self.conn,
            principal=runs_as(mounted, timer, run.tenant),
            idempotency_key=key,
            run_id=run.id,
            flow_name=run.flow_name,
            step_title=run.flow_name,
            position=0,
            attempt=attempt,
            tenant=run.tenant,
            now=now,
            deadline=self.deadline(timer.timeout_delta),
            clock=mounted.clock,
        )
        result, _ = self.command(
            timer.command, context, result_key=timer.column, timeout=timer.timeout_delta
        )
        if result.ok:
            self.log("timer_fired", detail={**said, "attempt": attempt})
            self.save(state={}, status=statuses.RunStatus.DONE, due_at=None)
            return
        error = dict(result.error or {})
        message = str(error.get("message") or "no reason given")
        policy = timer.retry or mounted.config.retry
        decision = retry_mod.decide(policy, attempt, now)
        if not result.refused and not decision.gives_up:
            assert decision.retry_at is not None
            self.log(
                "retry",
                detail={
                    "attempt": attempt,
                    "error": message,
                    "again_at": decision.retry_at.isoformat(),
                    "command": timer.command,
                },
            )
            self.save(
                state={"attempts": attempt, "again_at": decision.retry_at.isoformat()},
                status=statuses.RunStatus.WAITING,
                due_at=decision.retry_at,
            )
            return
        self.log(
            "failed", detail={"message": f"{timer.command} {_failed(result.refused)}: {message}"}
        )
        self.save(
            state={"attempts": attempt, "gave_up": True},
            status=statuses.RunStatus.FAILED,
            due_at=None,
            error=error or sanitize.error_envelope("command_failed", message),
            reason=f"the timer at {timer.column!r}: {timer.command} {_failed(result.refused)}: "
            f"{message}",
        )


def _failed(refused: bool) -> str:
    return "was refused" if refused else "failed"


def _holds(condition: query.Condition, record: Mapping[str, object], now: datetime) -> bool:
    try:
        return condition.matches(record, now)
    except errors.QueryError:
        return False


class TimerProgram(Program):
    """The ``at`` program: a timer's run fires its command once (registered as
    ``Mounted.programs["at"]``)."""

    def step(self, claimed: Claimed) -> Stepping:
        return TimerStep(claimed)


program = TimerProgram()


def runs_as(mounted: Mounted, timer: binding.At, tenant: object) -> str:
    """Who a timer's command runs as: its own ``run_as``; else the runner's (or the
    record's tenant's) service principal when it is granted the command; else the first
    declared principal that is (the seed: "as the first principal granted it")."""
    if timer.run_as is not None:
        return timer.run_as
    default = mounted.principal_for(None, tenant)
    authority = mounted.authority
    if authority is None or authority(default, timer.command):
        return default
    return authority.first_granted(timer.command) or default
