"""A claimed run's step of a flow from rows: the interpreter's effects applied in the
step's transaction.

``Advance`` loads the run's record and the events it has not read, asks the pure
interpreter (``flowrunner.flows.interpreter``) for the step's effects and applies them — a set
step's writes (gathered, one statement), a notice, history lines, each command run by
``stepping.ClaimedStep.command`` with the record as the flow left it — entering the
interpreter again with each answer, until the run waits or ends; then saves its new
state and due time, fenced (``ClaimedStep.save``). ``Unknown`` is the step of a run whose
program this runner does not serve. The worker (``flowrunner.engine.worker``) makes one for
each claimed run and drops it after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import diagrams, errors
from flowrunner.diagrams import progress
from flowrunner.engine import changes, claimed, commands
from flowrunner.engine.mounted import Claimed, Mounted, Program
from flowrunner.flows import snapshot, starts, subflows
from flowrunner.flows.interpreter import effects, happened, interpret, state, waits
from flowrunner.flows.interpreter.waits import Waiting
from flowrunner.foundations import statuses
from flowrunner.history import flows as history_lines
from flowrunner.store import flow_rows, records
from flowrunner.store import operations as ops
from flowrunner.workflows import children


class Advance(claimed.ClaimedStep):
    """One claimed run's step of a flow from rows, in ``conn``'s transaction.

    Beside what every step holds (``stepping.ClaimedStep``: the run, the claim, the
    clock, the history lines and answered commands gathered for the save), it gathers
    the record's pending sets.
    """

    def __init__(self, claimed: Claimed) -> None:
        super().__init__(claimed)
        self.sets: dict[str, object] = {}
        self.wrote_record = False
        # Whether the record may differ from the working copy: written by a set (the
        # database may hold its value otherwise typed) or by a command.
        self.stale = False

    @functools.cached_property
    def snap(self) -> snapshot.FlowSnapshot:
        """What the run executes; read only for a run that goes on."""
        return self.mounted.load_snapshot(self.run.snapshot)

    def advance(self) -> state.RunState | None:
        """Advance the run and save it; its new state, or None if it had ended or stopped."""
        mounted, conn, run, now = self.mounted, self.conn, self.run, self.now
        if run.status in statuses.ENDED and not state.cancel_pending(run.state):
            # Claimed once it ended (cancelled with broken rows): its parent is told.
            children.ended(conn, run, now)
            ops.set_due(conn, run_id=run.id, due_at=None, tenant=run.tenant)
            self.give_up_lease(forget=True)
            return None
        snap = self.snap
        problem = mounted.check_snapshot(snap)
        if problem is not None:
            # A row that broke after the run started (a kind removed, a column dropped):
            # the run fails before it does anything more, with the sentence naming it.
            self.stop(problem)
            children.ended(conn, run, now)
            return None
        record = records.load_record(conn, mounted.tables, run.record_id, run.tenant)
        current = state.RunState.from_dict(run.state) if run.state else None
        # A new run counts the events stored after it began (its floor); later, those
        # after the last one the run took.
        after = current.last_event_id if current is not None else (run.event_floor or 0)
        arrived = (
            ops.events_after(
                conn,
                resource=mounted.binding.resource,
                record_id=run.record_id,
                after_id=after,
                tenant=run.tenant,
            )
            if mounted.binding.events
            else []
        )
        latest = max([after, *(e.id for e in arrived)])
        seen = happened.Happened(
            record=record,
            events=tuple(happened.EventIn(e.id, e.name, e.payload, e.at) for e in arrived),
            latest_event_id=latest,
            children=subflows.ended(conn, run.state),
        )
        cfg = mounted.config_for(snap, run.tenant)
        if current is None:
            parent = run.snapshot.get(subflows.PARENT)
            if isinstance(parent, Mapping):  # a subflow's child run says whose it is
                self.log("started_as_child", detail=dict(parent))
            step = interpret.start(
                snap,
                seen,
                now,
                cfg,
                started_at=run.started_at,
                event_floor=run.event_floor or 0,
            )
        else:
            step = interpret.advance(snap, current, seen, now, cfg)
        wake_at: datetime | None = None
        working = dict(record) if record is not None else None
        rounds = 0
        while True:
            results: list[happened.CommandResult] = []
            asked: effects.RunCommand | None = None  # the round's one step command
            for effect in step.effects:
                if type(effect) is effects.Log:  # the most of them: a history line
                    self._log_line(effect)
                elif isinstance(effect, effects.Wake):
                    wake_at = effect.at
                elif isinstance(effect, effects.RunCommand):
                    if asked is not None and not effect.cancel:
                        # One step command per round: the next advance asks for the others
                        # again (``lanes.reissue``), after this one's checkpoint.
                        continue
                    results.append(self._command(effect, working))
                    if not effect.cancel:
                        asked = effect
                elif isinstance(effect, effects.StartSubflow):
                    self._flush_sets()  # the child reads the record as the flow left it
                    results.append(self._subflow(effect))
                    self.point("after-subflow-start")
                elif isinstance(effect, effects.CancelSubflow):
                    subflows.cancel(mounted, conn, run, effect, now)
                    self.point("after-subflow-cancel")
                else:
                    self._apply(effect, working)
            if not results:
                break
            rounds += 1
            if rounds > 2 * mounted.config.max_moves + 10:
                # The interpreter's loop bound should end any flow long before this.
                raise RuntimeError(f"more than {rounds - 1} command rounds in one advance")
            if working is not None:
                self._flush_sets()
                if self.stale:  # read back what the sets and commands wrote
                    working = records.load_record(conn, mounted.tables, run.record_id, run.tenant)
                    self.stale = False
            step = interpret.advance(
                snap,
                step.state,
                happened.Happened(record=working, latest_event_id=latest, results=tuple(results)),
                now,
                cfg,
            )
            if asked is not None and self._outside(asked) and step.state.status in statuses.OPEN:
                self._checkpoint(step.state)
        self._save(step.state, wake_at)
        return step.state

    def _subflow(self, asked: effects.StartSubflow) -> happened.CommandResult:
        """Start a subflow step's child run, once under its key (``subflows.start``)."""
        step = self.snap.step_by_id(asked.step_id)
        title = step.title if step is not None else None
        return subflows.start(self.mounted, self.conn, self.run, asked, title, self.now)

    def _outside(self, command: effects.RunCommand) -> bool:
        """Whether ``command`` may reach outside the database (its kind did not declare
        ``outside=False``): it then has a checkpoint of its own."""
        kind = self.mounted.config.kinds.get(command.kind)
        return kind is None or kind.outside

    def _checkpoint(self, new: state.RunState) -> None:
        """Commit the step so far — the sets, notices and history lines before it, the
        command's writes and answer, the run's state with it taken — and go on under the
        same claim (``ClaimedStep.checkpoint``)."""
        self._flush_sets()
        if self.wrote_record:
            self.wrote_record = False
            ops.wake_record(
                self.conn,
                resource=self.mounted.binding.resource,
                record_id=self.run.record_id,
                tenant=self.run.tenant,
                now=self.now,
                except_run=self.run.id,
            )
        self.checkpoint(state=new.to_dict(), status=new.status)

    def failure(self) -> str | None:
        """The sentence to log when this step failed the run: which run, flow, record, why."""
        if self.failed is None:
            return None
        run = self.run
        return (
            f"run {run.id} of flow {self.snap.flow.name!r} on {self.mounted.binding.resource} "
            f"{run.record_id} failed: {self.failed}"
        )

    def _save(self, new: state.RunState, wake_at: datetime | None) -> None:
        """Write what the step gathered and the run's new state and due time (fenced:
        ``ClaimedStep.save``)."""
        mounted, conn, run, now = self.mounted, self.conn, self.run, self.now
        self._flush_sets()
        if self.wrote_record:
            # The record's other runs follow it (an until step on a date this set).
            ops.wake_record(
                conn,
                resource=mounted.binding.resource,
                record_id=run.record_id,
                tenant=run.tenant,
                now=now,
                except_run=run.id,
            )
        self.save(
            state=new.to_dict(),
            status=new.status,
            due_at=wake_at,
            error=new.error,
            reason=new.reason,
        )
        if new.status in statuses.ENDED:
            children.ended(conn, run, now)  # a subflow's parent reads how it ended

    def _apply(self, effect: effects.Effect, working: dict[str, object] | None) -> None:
        """Apply a set, a notice or a history line; a set changes ``working`` too."""
        if isinstance(effect, effects.SetField):
            # Written with the step's other sets in one statement (before any command
            # runs, and at the end); later steps read the working copy meanwhile.
            self.sets[effect.field] = effect.value
            if working is not None:
                working[effect.field] = effect.value
        elif isinstance(effect, effects.Notify):
            # Filled in by the interpreter from the record as the run saw it at the step.
            run = self.run
            ops.insert_notice(
                self.conn,
                tenant=run.tenant,
                run_id=run.id,
                step_id=str(effect.step_id),
                pass_=effect.pass_,
                audience=effect.audience,
                recipient=effect.recipient,
                title=effect.title,
                message=effect.message,
                email=effect.email,
                problem=effect.problem,
                channel=self._channel(effect.audience),
                at=self.now,
            )
            self.point("after-notify")
        elif isinstance(effect, effects.Log):
            self._log_line(effect)

    def _log_line(self, effect: effects.Log) -> None:
        """Gather a history line, written with the run's new state at its save or at the
        next checkpoint."""
        self.log(
            effect.what,
            position=effect.position,
            step_id=None if effect.step_id is None else str(effect.step_id),
            title=effect.title,
            kind=effect.kind,
            pass_=effect.pass_,
            detail=effect.detail,
            due_at=effect.at,
        )

    def _channel(self, audience: str) -> str | None:
        """The channel the audience's notify rule sends through (None: the application
        delivers the notice itself)."""
        rule = next((r for r in self.mounted.binding.notify if r.audience == audience), None)
        return None if rule is None else rule.channel

    def _flush_sets(self) -> None:
        if self.sets:
            run = self.run
            records.write_fields(
                self.conn, self.mounted.tables, run.record_id, run.tenant, self.sets
            )
            timers = self.mounted.timers
            if timers is not None:  # a set step that writes a timer's column arms it
                timers.arm(
                    self.conn,
                    self.sets,
                    self.now,
                    changed=self.sets,
                    record_id=run.record_id,
                    tenant=run.tenant,
                )
            self.sets = {}
            self.wrote_record = self.stale = True
            self.point("after-set")

    def _command(
        self, effect: effects.RunCommand, working: Mapping[str, object] | None
    ) -> happened.CommandResult:
        """Run a step's command (``ClaimedStep.command``: a savepoint, a heartbeat, the
        kind's deadline), the record as the flow left it."""
        mounted, run, snap = self.mounted, self.run, self.snap
        self._flush_sets()  # the command reads the record as the flow left it
        step = snap.step_by_id(effect.step_id)
        kind = mounted.config.kinds.get(effect.kind)
        timeout = kind.timeout if kind is not None else None
        declared = mounted.binding.kinds.get(effect.kind)
        context = commands.CommandContext(
            record=dict(working or {}),
            inputs=dict(effect.inputs),
            conn=self.conn,
            principal=mounted.principal_for(
                declared.run_as if declared is not None else None, run.tenant
            ),
            idempotency_key=f"run-{run.id}/{effect.key}",
            run_id=run.id,
            flow_name=snap.flow.name,
            step_title=step.title if step is not None else None,
            position=step.position if step is not None else 0,
            attempt=effect.attempt,
            reminder=effect.reminder,
            tenant=run.tenant,
            now=self.now if effect.at is None else effect.at,  # a reminder's planned time
            deadline=self.deadline(timeout),
            clock=mounted.clock,
        )
        result, wrote = self.command(
            effect.command,
            context,
            result_key=effect.key,
            timeout=timeout,
            then=self._recording(effect),
            limit=mounted.limit_of("kind", effect.kind),
        )
        self.stale = self.stale or wrote
        return result

    def _recording(self, effect: effects.RunCommand) -> Callable[[dict[str, Any]], object] | None:
        """What records the kind's event (``Kind(records=...)``) from its command's
        answer, about the run's record, in the command's transaction; None when the
        command records none (a reminder or a cancel never does)."""
        binding = self.mounted.binding
        kind = binding.kinds.get(effect.kind)
        if kind is None or kind.records is None or effect.reminder is not None or effect.cancel:
            return None
        name, run = kind.records, self.run

        def record(answer: dict[str, Any]) -> object:
            keys = self.mounted.tables  # the key and tenant as their columns hold them
            about: dict[str, Any] = {binding.event_field(name): keys.key_value(run.record_id)}
            if binding.tenant is not None:
                about[binding.tenant] = keys.tenant_value(run.tenant)
            return changes.Changes(self.mounted).emit(self.conn, name, {**answer, **about})

        return record


class FlowProgram(Program):
    """Flows from rows as a program: a run of a flow (whose snapshot names no program)."""

    def step(self, claimed: Claimed) -> Advance:
        return Advance(claimed)

    def cancelled(
        self, mounted: Mounted, run: ops.RunRow, why: str, now: datetime
    ) -> tuple[dict[str, Any], datetime | None]:
        """The waiting steps are told by the next advance, due at once: the interpreter
        ends the run there and the kinds' cancel commands run under the run's lease. A
        run whose rows broke cannot run them: it just ends."""
        current = state.RunState.from_dict(run.state) if run.state else state.RunState()
        if mounted.check_snapshot(snapshot.FlowSnapshot.from_dict(run.snapshot)) is None:
            current.cancel_requested = why
            return current.to_dict(), now
        current.status = statuses.RunStatus.CANCELLED
        current.reason = why
        # A subflow's child is due once more, to wake its parent.
        return current.to_dict(), now if children.parent_of(run) is not None else None

    def retried(
        self, mounted: Mounted, run: ops.RunRow, now: datetime
    ) -> tuple[Mapping[str, object], statuses.RunStatus]:
        """The failed step runs again (``interpret.retry_failed``); a run that failed
        before its first step or outside its steps goes on from its saved state."""
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
        saved = state.RunState.from_dict(run.state) if run.state else None
        if saved is None or saved.status != statuses.RunStatus.FAILED:
            problem = mounted.check_snapshot(snap)
            if problem:
                raise errors.OperatorError(
                    f"run {run.id} cannot be retried: {problem}", code="flow_broken"
                )
            going_on = saved.status if saved is not None else statuses.RunStatus.RUNNING
            return run.state or {}, going_on
        step = interpret.retry_failed(snap, saved, now, mounted.config_for(snap, run.tenant))
        return step.state.to_dict(), step.state.status

    def restarted(
        self, mounted: Mounted, conn: sa.Connection, run: ops.RunRow, operator: str, now: datetime
    ) -> tuple[int, str]:
        """The flow's rows as they are now, started on the same record; refused for a
        flow deleted, inactive or broken, and a record deleted."""
        cannot = f"run {run.id} cannot be restarted"
        # The snapshot keeps the flow's id as its column gave it (``run.flow_id`` is text).
        flow_id = snapshot.FlowSnapshot.from_dict(run.snapshot).flow.id
        flow = flow_rows.flow_by_id(conn, mounted.tables, flow_id)
        if flow is None:
            raise _refused(f"{cannot}: its flow {run.flow_name!r} was deleted", "flow_deleted")
        name = str(flow.get("name") or run.flow_name)
        if flow.get("active") is not None and not flow["active"]:
            raise _refused(f"{cannot}: flow {name!r} is not active", "flow_inactive")
        record = records.load_record(conn, mounted.tables, run.record_id, run.tenant)
        if record is None:
            raise _refused(
                f"{cannot}: {mounted.binding.resource} {run.record_id} no longer exists",
                "record_deleted",
            )
        steps = flow_rows.steps_of_flow(conn, mounted.tables, flow["id"])
        problem = mounted.check_snapshot(
            snapshot.FlowSnapshot.build({**flow, "tenant": run.tenant}, steps)
        )
        if problem is not None:
            raise _refused(f"{cannot}: {problem}", "flow_broken")
        new_id = starts.start_run(
            mounted, conn, flow, record, f"restart:{run.id}", operator, now, steps
        )
        if new_id is None:  # another operator's restart committed first
            raise _refused(
                f"run {run.id} changed while it was being restarted; look at it again",
                "run_changed",
            )
        return new_id, name

    def drawn(
        self,
        mounted: Mounted,
        conn: sa.Connection,
        run: ops.RunRow,
        can_read: diagrams.CanRead | None,
    ) -> diagrams.Diagram:
        """The run over the snapshot it started with: what is done and when, where it
        waits and for what, what is ahead."""
        given = progress.run_input(
            run.id,
            run.status,
            run.state,
            ops.run_history(conn, run.id),
            reason=run.reason,
            started_at=run.started_at,
            ended_at=run.ended_at,
        )
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
        return diagrams.flow_diagram(snap, config=mounted.config, can_read=can_read, run=given)

    def sentence(
        self,
        mounted: Mounted,
        run: ops.RunRow,
        line: ops.LogRow,
        names: Mapping[str, str] | None = None,
    ) -> str:
        """A line in the flow's own words: a goto names its target step by the title the
        run's snapshot gives it (none for a snapshot that no longer reads)."""
        try:
            snap: snapshot.FlowSnapshot | None = snapshot.FlowSnapshot.from_dict(run.snapshot)
        except (KeyError, TypeError, ValueError):
            snap = None
        return history_lines.sentence(line, snap, mounted.config.timezone, names=names)

    def waiting(self, mounted: Mounted, run: ops.RunRow) -> tuple[Waiting, ...]:
        """The steps an open run waits at and for what (``interpreter.waits``); none for a
        run whose stored snapshot no longer reads (it fails on it)."""
        try:
            snap = mounted.load_snapshot(run.snapshot)
        except (KeyError, TypeError, ValueError):
            return ()
        return waits.where(snap, run.state, mounted.config)


program = FlowProgram()


def _refused(sentence: str, code: str) -> errors.OperatorError:
    """An action that does not apply to the run as it stands (409, with its code)."""
    return errors.OperatorError(sentence, code=code)
