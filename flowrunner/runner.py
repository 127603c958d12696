"""FlowRunner: the application-facing facade mounted on one resource.

The application creates one runner per binding at startup (``flow_runner(...)``); the
runner checks the binding against the database, refuses an outdated engine schema, and
from then on the application's saves, record changes and events go through it::

    runner = flow_runner(binding, engine, commands={"request_approval": request_approval})
    with engine.begin() as conn:
        conn.execute(purchase_order.insert().values(id=7, amount=5000, status="open"))
        runner.record_created(conn, {"id": 7, "amount": 5000, "status": "open"})
    runner.run_due()
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

import sqlalchemy as sa
from sqlalchemy import orm

from flowrunner import binding as binding_mod
from flowrunner import diagrams, errors
from flowrunner.engine import actions, claimed, drawings, operations_room
from flowrunner.engine import app_loader as app_mod
from flowrunner.engine import commands as commands_mod
from flowrunner.flows import column_facts, edits, rows, snapshot, starts, validation
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import waits
from flowrunner.flows.trial import result, script
from flowrunner.foundations import durations as durations_mod
from flowrunner.foundations import payloads, retry_policy, statuses
from flowrunner.history import flows
from flowrunner.inbound import asgi as inbound_app
from flowrunner.inbound import endpoints as inbound_mod
from flowrunner.inbound import receipt, signing
from flowrunner.jobs import spec
from flowrunner.store import (
    app_tables,
    dialects,
    engine_tables,
    flow_rows,
    listing,
    migrate,
    records,
    retention,
)
from flowrunner.store import operations as ops
from flowrunner.timers import program, rules
from flowrunner.workflows import definitions as workflows_mod
from flowrunner.workflows import program as advancing
from flowrunner.workflows import starts as workflow_launching
from flowrunner.workflows import waits as workflow_seeing

Clock = Callable[[], datetime]
Authorize = commands_mod.Authorize
# Told of each event ``emit`` stores, in the emitting transaction (jobs plan from it).
EventHook = Callable[[sa.Connection, spec.Emitted], None]
# What a worker does once before its first claim, given the clock's now (a job at times
# makes sure it has its run).
Prepare = Callable[[datetime], None]


# How many runs' snapshots a runner keeps read (``load_snapshot``); the oldest goes first.
KEPT_SNAPSHOTS = 256


def utc_now() -> datetime:
    return datetime.now(UTC)


class FlowRunner:
    """Runs the flows of one binding over its resource's records.

    ``commands`` maps each kind's command (and remind command) name to a function taking
    a ``CommandContext``; ``run_as`` is the principal commands run as; ``authorize``
    (principal, command) -> bool is checked at mount for every kind's command and again
    on every attempt. ``clock`` is what "now" is (the test driver moves it by hand).
    ``inbound`` are the signed callbacks it answers (``Inbound``; ``inbound_app()``
    serves them, ``receive`` handles one).
    """

    def __init__(
        self,
        binding: binding_mod.FlowBinding,
        engine: sa.Engine,
        *,
        commands: Mapping[str, commands_mod.Command] | None = None,
        run_as: str = "automation",
        clock: Clock = utc_now,
        authorize: Authorize | None = None,
        max_moves: int = 1000,
        retry: retry_policy.RetryPolicy | None = None,
        timezone: tzinfo | None = None,
        check_schema: bool | None = None,
        inbound: Iterable[inbound_mod.Inbound] = (),
        workflows: workflows_mod.Workflows | None = None,
    ) -> None:
        self.binding = binding
        self.engine = dialects.prepare_engine(engine)
        self.commands = dict(commands or {})
        self.run_as = run_as
        self.clock = clock
        self.authorize = authorize
        # The application's tables are read once, here; every statement after uses them.
        self.tables = app_tables.reflect(self.engine, binding)
        schema = binding.check(self.tables.metadata)
        # Each column's type and facts: what conditions compare and set steps may write.
        self.columns: column_facts.ResourceColumns = schema.resource_columns
        self._check_commands()
        self.inbound = inbound_mod.check(
            inbound, binding=binding, commands=self.commands, authorize=authorize
        )
        receipt.warn_unset(self.inbound)
        self._checked: dict[str, str | None] = {}
        self._loaded: dict[str, tuple[dict[str, Any], snapshot.FlowSnapshot]] = {}
        # The active flows records start, with a digest of their rows (starting.startable).
        self._startable: dict[Any, tuple[Any, list[starts.Startable]]] = {}
        # The programs this runner's runs may execute besides flows from rows, by the
        # name a run's snapshot gives (``stepping.program_of``): jobs, code workflows.
        # Told of each stored event in its transaction (``emit``), and called once by
        # each worker before its first claim: the jobs mounted beside the flows use them.
        self.on_event: list[EventHook] = []
        self.preparing: list[Prepare] = []
        # The jobs mounted on this runner (``flowrunner.jobs.Jobs``), if any.
        self.jobs: Any = None
        self.programs: dict[str, claimed.Program] = {rules.PROGRAM: program.program}
        # The binding's timers on date columns (``at``), or None when it has none: then
        # a record's change costs nothing more for them.
        self.timers: program.Timers | None = program.Timers(self) if binding.at else None
        # The code workflows this runner starts and runs (``flowrunner.workflows``).
        self.workflows: workflows_mod.Workflows | None = None
        if workflows is not None:
            self.mount_workflows(workflows)
        if check_schema is None:
            check_schema = app_mod.check_schema_on_mount.get()
        if check_schema:
            migrate.ensure_current(self.engine)
        self.config = config_mod.InterpreterConfig(
            columns=self.columns,
            kinds={
                name: config_mod.KindConfig(
                    name=name,
                    command=kind.command,
                    inputs=tuple(kind.input),
                    wait_for=kind.wait_for,
                    remind=kind.remind,
                    retry=kind.retry,
                    timeout=kind.timeout_delta,
                    by=kind.by,
                    cancel=kind.cancel,
                )
                for name, kind in binding.kinds.items()
            },
            events=dict(binding.events),
            notify={
                rule.audience: config_mod.NotifyConfig(
                    audience=rule.audience, to=rule.to, title=rule.title, email=rule.email
                )
                for rule in binding.notify
            },
            set_columns=frozenset(binding.set_columns),
            max_moves=max_moves,
            retry=retry or retry_policy.RetryPolicy(),
            timezone=timezone,
        )

    def mount_workflows(self, workflows: workflows_mod.Workflows) -> None:
        """Run ``workflows`` (``flowrunner.workflows.Workflows``) on this runner: their
        event starts in ``emit``, their runs in this runner's workers. ``BindingError``
        when a workflow starts on an event the binding does not declare."""
        unknown = sorted(workflows.events() - set(self.binding.events))
        if unknown:
            known = ", ".join(sorted(self.binding.events)) or "none"
            raise errors.BindingError(
                f"a workflow starts on event {unknown[0]!r}, which the binding of "
                f"{self.binding.resource!r} does not declare (events: {known})"
            )
        self.workflows = workflows
        self.programs[advancing.PROGRAM] = advancing.program

    def start_workflow(
        self,
        name: str,
        start: Mapping[str, Any] | None = None,
        *,
        operator: str,
        record: binding_mod.RecordId | None = None,
        key: str | None = None,
        tenant: binding_mod.Tenant = None,
    ) -> int:
        """Start the manual workflow ``name`` with ``start`` (its body's second argument);
        the new run's id. Journaled with ``operator``.

        ``record``: the record the run is on (its ``wait_for`` steps count that record's
        events). ``key``: the start happens once; a second start with the same key is
        refused. ``OperatorError`` for an unknown workflow, one that starts on an event,
        an unknown record.
        """
        if self.workflows is None:
            raise errors.OperatorError(
                f"the runner of {self.binding.resource!r} has no workflows", code="workflow_unknown"
            )
        return workflow_launching.start_manual(
            self,
            self.workflows,
            name,
            start,
            operator=operator,
            record=record,
            key=key,
            tenant=tenant,
        )

    def _check_commands(self) -> None:
        for name, kind in self.binding.kinds.items():
            for command in filter(None, (kind.command, kind.remind, kind.cancel)):
                self.check_command(command, principal=self.run_as, needed_by=f"kind {name!r}")

    def check_command(self, command: str, *, principal: str, needed_by: str) -> None:
        """At mount: a command the runner was given, which ``principal`` may run
        (``BindingError`` naming what needs it otherwise)."""
        commands_mod.check_mounted(
            command,
            principal=principal,
            commands=self.commands,
            authorize=self.authorize,
            needed_by=needed_by,
        )

    def check_snapshot(self, snap: snapshot.FlowSnapshot) -> str | None:
        """The load check of a run's snapshot against this binding (a sentence, or None).

        Remembered per snapshot digest: the binding does not change while a runner lives.
        """
        if snap.digest not in self._checked:
            self._checked[snap.digest] = validation.check(snap, self.binding, self.columns)
        return self._checked[snap.digest]

    def load_snapshot(self, stored: Mapping[str, Any]) -> snapshot.FlowSnapshot:
        """A run's stored snapshot (``FlowSnapshot.from_dict``), remembered by digest.

        A stored copy is compared whole with the one remembered for its digest, so a
        snapshot changed on its row is read (and refused) as ``from_dict`` does.
        """
        digest = stored.get("digest")
        kept = self._loaded.get(digest) if isinstance(digest, str) else None
        if kept is not None and kept[0] == stored:
            return kept[1]
        snap = snapshot.FlowSnapshot.from_dict(stored)
        if len(self._loaded) >= KEPT_SNAPSHOTS:
            starts.forget_oldest(self._loaded)
        self._loaded[snap.digest] = (copy.deepcopy(dict(stored)), snap)
        return snap

    def authorize_command(self, command: str, principal: str | None = None) -> None:
        """Checked on every attempt: a revoked grant refuses the step (or the callback).

        ``principal`` is who runs it: the runner's ``run_as`` unless a job's or an
        inbound's own.
        """
        principal = self.run_as if principal is None else principal
        if self.authorize is not None and not self.authorize(principal, command):
            raise errors.CommandRefused(
                f"principal {principal!r} is not allowed to run command {command!r}"
            )

    # -- editing flows (validated on save) ----------------------------------------------

    def _owned(self, row: Mapping[str, Any], tenant: Any, what: str) -> Mapping[str, Any]:
        """On a tenant binding, the row as the named tenant's (its flow must be theirs too)."""
        column = self.binding.tenant
        if column is None:
            return row
        owner = row.get(column, tenant)
        if owner is None:
            raise errors.RowInvalid(
                [
                    errors.FieldError(
                        column, f"a {what} belongs to a tenant; name it", "column_required"
                    )
                ]
            )
        if tenant is not None and str(owner) != str(tenant):
            raise errors.RowInvalid(
                [errors.FieldError(column, f"a {what} of another tenant", "tenant_mismatch")]
            )
        return {**row, column: owner}

    def _flow_of_tenant(self, conn: sa.Connection, flow_id: Any, tenant: Any) -> None:
        if self.binding.tenant is None:
            return
        flow = flow_rows.flow_by_name_or_id(conn, self.tables, flow_id, self._need_tenant(tenant))
        if flow is None or str(flow["id"]) != str(flow_id):
            raise errors.OperatorError(
                f"there is no flow {flow_id!r}", status_code=404, code="flow_unknown"
            )

    def _step_of_tenant(self, conn: sa.Connection, step_id: Any, tenant: Any) -> None:
        """On a tenant binding, ``OperatorError`` (404) unless the step is the tenant's."""
        if self.binding.tenant is None:
            return
        step = flow_rows.step_by_id(conn, self.tables, step_id)
        owner = None if step is None else step[self.binding.tenant]
        if owner is None or str(owner) != str(self._need_tenant(tenant)):
            raise errors.OperatorError(
                f"there is no step {step_id!r}", status_code=404, code="step_unknown"
            )

    def save_flow(self, conn: sa.Connection, row: Mapping[str, Any], *, tenant: Any = None) -> Any:
        """Insert or update a flow row after validating it; raises ``RowInvalid``.

        On a tenant binding the row is the ``tenant``'s (or names its tenant). It is
        written in a savepoint of ``conn``'s transaction: a refusal leaves that usable.
        """
        row = self._owned(row, tenant, "flow")
        with conn.begin_nested():
            return edits.save_flow(conn, self.binding, self.tables, row, columns=self.columns)

    def save_step(self, conn: sa.Connection, row: Mapping[str, Any], *, tenant: Any = None) -> Any:
        """Insert or update a step row after validating it; raises ``RowInvalid``.

        On a tenant binding the step is the ``tenant``'s, and its flow must be too. It is
        written in a savepoint of ``conn``'s transaction: a refusal leaves that usable.
        """
        row = self._owned(row, tenant, "step")
        if row.get("id") is not None:
            row = {**row, "id": _step_id(row["id"])}
        with conn.begin_nested():
            return edits.save_step(conn, self.binding, self.tables, row, columns=self.columns)

    def delete_step(self, conn: sa.Connection, step_id: Any, *, tenant: Any = None) -> None:
        """Delete a step, unless a goto still needs it; raises ``RowInvalid``.

        On a tenant binding the step must be the ``tenant``'s.
        """
        step_id = _step_id(step_id)
        with conn.begin_nested():
            self._step_of_tenant(conn, step_id, tenant)
            edits.delete_step(conn, self.binding, self.tables, step_id)

    def move_step(
        self, conn: sa.Connection, step_id: Any, by: int, *, tenant: Any = None
    ) -> list[Any]:
        """Move a step one place up (``by=-1``) or down (``+1``) in its flow; the ids of
        the steps whose position or goto changed (none when it is first or last).

        A step alone at its position trades places with the steps beside it; one sharing
        its position moves to a position of its own; gotos follow the steps they named.
        The flow as it would be is judged whole, as an import is: ``RowInvalid`` listing
        every problem, and nothing written. On a tenant binding the step must be the
        ``tenant``'s. Written in a savepoint of ``conn``'s transaction.
        """
        step_id = _step_id(step_id)
        with conn.begin_nested():
            self._step_of_tenant(conn, step_id, tenant)
            return edits.move_step(
                conn, self.binding, self.tables, step_id, by, columns=self.columns
            )

    def delete_flow(self, conn: sa.Connection, flow_id: Any, *, tenant: Any = None) -> None:
        """Delete a flow and its steps; runs already started keep their snapshot.

        A flow that does not exist (or, on a tenant binding, is not the ``tenant``'s) is
        refused with ``OperatorError`` (404). Written in a savepoint of ``conn``'s
        transaction.
        """
        key = edits.read_id(flow_id, self.tables.flows.c.id)
        column = self.binding.tenant
        owner = None if column is None else self._need_tenant(tenant)
        with conn.begin_nested():
            found = None if key is None else flow_rows.flow_by_id(conn, self.tables, key)
            if found is None or (column is not None and str(found[column]) != owner):
                raise errors.OperatorError(
                    f"there is no flow {flow_id!r}", status_code=404, code="flow_unknown"
                )
            edits.delete_flow(conn, self.binding, self.tables, key)

    def snapshot(
        self, conn: sa.Connection, flow_id: Any, *, tenant: Any = None
    ) -> snapshot.FlowSnapshot:
        """The flow and its steps as a run would keep them."""
        self._flow_of_tenant(conn, flow_id, tenant)
        return starts.stored_snapshot(conn, self.tables, flow_id)

    def try_flow(
        self,
        flow: Mapping[str, Any] | str | int,
        steps: Sequence[Mapping[str, Any]] | None,
        record_id: binding_mod.RecordId,
        *,
        answers: str | Sequence[script.Item | str | None] = (),
        until: str | timedelta = "30 days",
        tenant: binding_mod.Tenant = None,
        start: datetime | None = None,
    ) -> result.TryResult:
        """Try a flow on a record: what it would do, with nothing leaving the try.

        ``flow`` is the flow row as edited, with ``steps`` its step rows (unsaved; judged
        as a save would judge them first, ``RowInvalid`` with every problem), or a saved
        flow's name or id with ``steps`` None. ``answers`` is what happens meanwhile —
        ``Answer``, ``Change`` and ``Refusal`` items, or lines such as ``"bob approves
        after 2 days"`` (``flowrunner.flows.trial.script``). The run starts at ``start`` (default:
        now) and goes on until it ends or ``until`` has passed.

        The real interpreter runs it in a transaction that always rolls back: its set
        steps and the script's changes write the record there; no command runs (each is
        shown and taken to succeed); notices are shown, not written. The result is the
        path with its sentences, the values set, the notices, the commands and where it
        ends (``TryResult``). See ``flowrunner.flows.trial.dry_run``.
        """
        from flowrunner.flows.trial import dry_run as trying

        return trying.try_flow(
            self,
            flow,
            steps,
            record_id,
            answers=answers,
            until=until,
            tenant=tenant,
            start=start,
        )

    # -- starting runs --------------------------------------------------------------------

    def _tenant_of(self, record: Mapping[str, Any]) -> Any:
        """The record's tenant as its column holds it; None without tenants.

        ``RecordRejected`` when a tenant binding's record does not name its tenant.
        """
        tenant = starts.record_tenant(self.binding, record)
        return None if tenant is None else self.tables.tenant_value(tenant)

    def _record_id(self, record: Mapping[str, Any]) -> str:
        """The record's key as runs and events keep it (``str`` of ``key_value``).

        ``RecordRejected`` when the record has no key, or one its column cannot hold.
        """
        if record.get(self.binding.key) is None:
            raise errors.RecordRejected(
                f"the record has no {self.binding.key!r}, the key of {self.binding.resource!r}: "
                "give the record with its key (read it back after the insert)"
            )
        return str(self.tables.key_value(record[self.binding.key]))

    def _identify(self, record: Any, what: str) -> tuple[str, Any]:
        """The key and tenant of a record handed to the runner, checked before any write."""
        if not isinstance(record, Mapping):
            raise errors.RecordRejected(
                f"{what} takes the record as a mapping of column to value, "
                f"not a {type(record).__name__}"
            )
        return self._record_id(record), self._tenant_of(record)

    def record_created(self, conn: sa.Connection, record: Mapping[str, Any]) -> list[int]:
        """Start every active ``created`` flow whose condition holds, in ``conn``'s transaction.

        Starting twice for the same record starts nothing new. The binding's timers
        (``at``) whose column the record gives an instant are armed (not in the list).
        A record without its key
        (or, on a tenant binding, its tenant), or with a key its column cannot hold, is
        refused with ``RecordRejected`` before anything is written; what is written goes
        in a savepoint, so an error leaves ``conn``'s transaction usable.
        """
        record_id, _ = self._identify(record, "record_created")
        now = self.clock()
        with dialects.Savepoint(conn, "flowrunner_start"):
            started = starts.start_flows(self, conn, "created", record, f"created:{record_id}", now)
            if self.timers is not None:
                self.timers.arm(conn, record, now)
            return started

    def record_updated(
        self, conn: sa.Connection, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> list[int]:
        """Start each active ``updated`` flow that matches this change, once per change.

        The same change reported again in the same transaction (by ``watch`` and by an
        explicit call, or twice) starts nothing new; the same change in a later
        transaction is a new change (see ``starting.change_of``). A flow with ``changes``
        starts only when that column changed. Runs of the record that wait are woken, so
        an ``until`` step follows a changed date; a timer (``at``) whose column changed to
        an instant is armed for it. Refused as ``record_created`` is, before
        anything is written, and written in a savepoint.
        """
        if not isinstance(before, Mapping):
            raise errors.RecordRejected(
                "record_updated takes the record before the change as a mapping of column "
                f"to value, not a {type(before).__name__}"
            )
        record_id, tenant = self._identify(after, "record_updated")
        now = self.clock()
        with conn.begin_nested():
            change = starts.change_of(conn, before, after, record_id=record_id, tenant=tenant)
            started = starts.start_flows(
                self, conn, "updated", after, change.key, now, changed=change.columns
            )
            ops.wake_record(
                conn, resource=self.binding.resource, record_id=record_id, tenant=tenant, now=now
            )
            if self.timers is not None:
                self.timers.arm(conn, after, now, changed=change.columns)
        return started

    def start(self, flow: Any, record_id: Any, *, operator: str, tenant: Any = None) -> int:
        """An operator starts a manual flow (by name or id) for a record; journaled."""
        return starts.start_manual(self, flow, record_id, operator=operator, tenant=tenant)

    def start_existing(
        self,
        where: str | None = None,
        *,
        flow: Any = None,
        tenant: Any = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Hand records that existed before their flows to the runner as though just created.

        Each chosen record starts each active ``created`` flow whose condition holds
        (``flow`` names one). Running it again starts nothing new. ``progress`` is called
        with (done, total). Returns the number of runs started.
        """
        return starts.start_existing(self, where, flow=flow, tenant=tenant, progress=progress)

    def arm_timers(
        self,
        where: str | None = None,
        *,
        tenant: Any = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Arm the binding's timers (``at``) for records that existed before them: each
        chosen record's instants, as though the record had just been created. Running it
        again arms nothing new. ``progress`` is called with (done, total). Returns how
        many timers it armed (none on a binding without ``at``).
        """
        if self.timers is None:
            return 0
        return self.timers.arm_existing(where, tenant=tenant, progress=progress)

    # -- events ---------------------------------------------------------------------------

    def emit(self, conn: sa.Connection, name: str, payload: Mapping[str, Any]) -> int:
        """Record an event in the application's transaction and wake the record's runs.

        The binding's ``events`` names the payload field that identifies the record; its
        value follows the key rule (``store.app_tables.key_of``: ``7`` or ``"7"`` for an
        integer key, never ``"007"``), and the event is stored under the key as the
        record's runs hold it. The payload must be plain data (``flowrunner.foundations.payloads``).
        An unknown event, a payload that is not plain, does not name its record (or, on
        a tenant binding, its tenant) as a key, or names no record is refused with
        ``EventRejected`` before anything is written; the writes go in a savepoint, so a
        refusal leaves ``conn``'s transaction usable.
        """
        field, record_id, tenant, plain = self._event(name, payload)
        now = self.clock()
        with conn.begin_nested():
            if self._load(conn, record_id, tenant) is None:
                raise errors.EventRejected(
                    f"event {name!r} names {self.binding.resource} {payloads.quote(record_id)} "
                    f"in field {field!r}, which does not exist",
                    status_code=404,
                    code="record_unknown",
                )
            event_id = ops.insert_event(
                conn,
                tenant=tenant,
                resource=self.binding.resource,
                record_id=str(record_id),
                name=name,
                payload=plain,
                at=now,
            )
            ops.wake_record(
                conn,
                resource=self.binding.resource,
                record_id=str(record_id),
                tenant=tenant,
                now=now,
            )
            if self.on_event:
                stored = spec.Emitted(
                    id=event_id,
                    name=name,
                    payload=plain,
                    record_id=str(record_id),
                    tenant=None if tenant is None else str(tenant),
                    at=now,
                )
                for hook in self.on_event:
                    hook(conn, stored)
            if self.workflows is not None:
                workflow_launching.start_on_event(
                    self,
                    conn,
                    self.workflows,
                    name,
                    plain,
                    record_id=str(record_id),
                    tenant=tenant,
                    now=now,
                )
        return event_id

    def check_event(self, name: str, payload: Mapping[str, Any]) -> None:
        """``emit``'s checks that need no database — a known event, a plain payload naming
        its record (and tenant) as keys — raising ``EventRejected`` as ``emit`` would.

        ``emit`` checks them again, and that the record exists.
        """
        self._event(name, payload)

    def _load(self, conn: sa.Connection, record_id: Any, tenant: Any) -> dict[str, Any] | None:
        """The record, or None; inside ``emit``'s savepoint.

        Integer and text keys are judged before anything is sent; a key column of another
        type (a UUID, say) takes the value as given, and a value the database cannot
        compare with it names no record (the savepoint undoes the failed statement).
        """
        try:
            return records.load_record(conn, self.tables, record_id, tenant)
        except (sa.exc.DataError, sa.exc.ProgrammingError):
            return None
        except sa.exc.StatementError as exc:
            if isinstance(exc, sa.exc.DBAPIError):
                raise  # the connection or the server failed: not about the key
            return None  # the key column's type refused the value before sending it

    def _event(self, name: Any, payload: Any) -> tuple[str, Any, Any, dict[str, Any]]:
        """The checks of ``emit``, none of which reads or writes: the field naming the
        record, the record's key and tenant as their columns hold them (checked first, so
        a wrong key is refused by the key rule), and the plain payload."""
        if not isinstance(name, str) or name not in self.binding.events:
            known = ", ".join(sorted(self.binding.events)) or "none"
            raise errors.EventRejected(
                f"there is no event {payloads.quote(name)} (events: {known})",
                status_code=404,
                code="event_unknown",
            )
        if not isinstance(payload, Mapping):
            raise errors.EventRejected(f"event {name!r} needs a mapping of fields as its payload")
        field = self.binding.events[name]
        resource = self.binding.resource
        if payload.get(field) is None:
            raise errors.EventRejected(
                f"event {name!r} must name its {resource} in field {field!r}"
            )
        try:
            record_id = self.tables.key_value(payload[field])
        except errors.RecordRejected as exc:
            raise errors.EventRejected(
                f"event {name!r} names {resource} {payloads.quote(payload[field])} in field "
                f"{field!r}, which cannot be a {resource} key: send {exc.expected}"
            ) from None
        tenant = None
        column = self.binding.tenant
        if column is not None:
            if payload.get(column) is None:
                raise errors.EventRejected(
                    f"event {name!r} must name its tenant in field {column!r}: "
                    f"{resource} records belong to tenants"
                )
            try:
                tenant = self.tables.tenant_value(payload[column])
            except errors.RecordRejected as exc:
                raise errors.EventRejected(
                    f"event {name!r} names tenant {payloads.quote(payload[column])} in field "
                    f"{column!r}, which cannot be a tenant key: send {exc.expected}"
                ) from None
        try:
            plain = payloads.plain(payload)
        except payloads.NotPlain as exc:
            raise errors.EventRejected(f"event {name!r}: {exc}") from None
        return field, record_id, tenant, plain

    # -- working ----------------------------------------------------------------------------

    def run_due(self, limit: int = 100, *, batch: int = 1) -> int:
        """Advance up to ``limit`` due runs in this process; returns how many were claimed."""
        from flowrunner.engine import worker

        return worker.Worker(self, batch=batch).run_due(limit)

    # -- seeing and operating -----------------------------------------------------------------

    def _need_tenant(self, tenant: Any) -> Any:
        if self.binding.tenant and tenant is None:
            raise errors.OperatorError(
                f"{self.binding.resource} records belong to tenants: name the tenant"
            )
        return None if tenant is None else str(tenant)

    def _operator_key(self, record_id: Any) -> str:
        """A record id an operator (or a program) gives, as runs keep it; else OperatorError."""
        try:
            return str(self.tables.key_value(record_id))
        except errors.RecordRejected as exc:
            raise errors.OperatorError(str(exc)) from None

    def _run_id(self, run_id: Any) -> int:
        """A run id as an operator gives it (``12`` or ``"12"``); else ``OperatorError``."""
        try:
            return int(app_tables.key_of(engine_tables.runs.c.id, run_id, "run"))
        except errors.RecordRejected as exc:
            raise errors.OperatorError(
                f"there is no run {payloads.quote(run_id)}: a run's id is {exc.expected}",
                status_code=404,
                code="run_unknown",
            ) from None

    def runs(
        self, record_id: binding_mod.RecordId, *, tenant: binding_mod.Tenant = None
    ) -> list[ops.RunRow]:
        """The record's runs, newest first (with a tenant binding: of that tenant's record).

        Each open run says where it stands in ``run.waiting``: the steps it waits at and
        for what (``Waiting``: a time, an event and the answers counted so far, a
        command's answer or its next attempt).
        """
        tenant = self._need_tenant(tenant)
        key = self._operator_key(record_id)
        with self.engine.connect() as conn:
            found = ops.runs_for_record(
                conn, resource=self.binding.resource, record_id=key, tenant=tenant
            )
        return [self._standing(run) for run in found]

    def _standing(self, run: ops.RunRow) -> ops.RunRow:
        if run.status in statuses.ENDED or not run.state:
            return run
        if claimed.program_of(run.snapshot) == advancing.PROGRAM:
            return dataclasses.replace(run, waiting=workflow_seeing.where(run.state))
        snap = _snapshot_of(run)
        if snap is None:
            return run
        return dataclasses.replace(run, waiting=waits.where(snap, run.state, self.config))

    def history(self, run_id: int, *, tenant: binding_mod.Tenant = None) -> list[ops.LogRow]:
        """What happened in the run, step by step, in order; each line with its
        ``sentence`` in the flow's own words (times on the runner's time zone).

        A run of another runner's resource (or another tenant's) is refused as unknown.
        """
        run_id = self._run_id(run_id)
        with self.engine.connect() as conn:
            run = actions.run_for_operator(self, conn, run_id, self._need_tenant(tenant))
            lines = ops.run_history(conn, run_id)
        snap = _snapshot_of(run)
        tz = self.config.timezone
        return [
            dataclasses.replace(line, sentence=flows.sentence(line, snap, tz)) for line in lines
        ]

    def notices(
        self, *, undelivered: bool = False, tenant: binding_mod.Tenant = None
    ) -> list[ops.NoticeRow]:
        """The notices outbox: what notify steps of this resource's runs wrote, for your
        mailer to deliver.

        ``undelivered=True`` gives the notices to deliver now: not delivered yet, and
        deliverable. A notice whose recipient's column was empty is kept with
        ``deliverable`` False and its ``problem`` (``the record's assignee is empty``);
        it is listed only without ``undelivered``.
        """
        with self.engine.connect() as conn:
            return list(
                ops.notices(
                    conn,
                    undelivered=undelivered,
                    tenant=self._need_tenant(tenant),
                    resource=self.binding.resource,
                )
            )

    def mark_delivered(self, notice_id: int) -> bool:
        """Record that a notice was delivered; False if it already was (or is
        undeliverable, or is not one of this resource's notices)."""
        with dialects.begin(self.engine) as conn:
            return ops.mark_delivered(
                conn, notice_id=notice_id, at=self.clock(), resource=self.binding.resource
            )

    def record_deleted(self, conn: sa.Connection, record_id: Any, *, tenant: Any = None) -> None:
        """Tell the runner a record was deleted (in your transaction): its waiting runs end.

        ``record_id`` follows the key rule (``RecordRejected`` otherwise); on a tenant
        binding ``tenant`` is required. Written in a savepoint of ``conn``'s transaction.
        """
        key = str(self.tables.key_value(record_id))
        owner = None
        if self.binding.tenant is not None:
            if tenant is None:
                raise errors.RecordRejected(
                    f"{self.binding.resource} records belong to tenants: name the deleted "
                    "record's tenant"
                )
            owner = str(self.tables.tenant_value(tenant))
        now = self.clock()
        with conn.begin_nested():
            ops.wake_record(
                conn, resource=self.binding.resource, record_id=key, tenant=owner, now=now
            )

    def cancel(self, run_id: int, *, operator: str, reason: str = "", tenant: Any = None) -> None:
        """Cancel a run that has not ended; journaled with the operator's name."""
        actions.cancel(self, self._run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def retry(self, run_id: int, *, operator: str, reason: str = "", tenant: Any = None) -> None:
        """Run a failed run's failed step again; journaled (with ``reason``, when given)."""
        actions.retry(self, self._run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def redrive(self, run_id: int, *, operator: str, reason: str = "", tenant: Any = None) -> None:
        """Make a stuck run due now and free its lease; journaled (with ``reason``)."""
        actions.redrive(self, self._run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def prune(
        self,
        *,
        older_than: str | durations_mod.Duration | timedelta,
        dry_run: bool = False,
        include_failed: bool = False,
        batch: int = retention.BATCH,
        progress: retention.Progress | None = None,
    ) -> ops.Pruned:
        """Delete this resource's history older than ``older_than`` (``"90d"``); the counts.

        Goes: runs that ended done or cancelled (failed too with ``include_failed``) before
        the cutoff, with their history lines and notices (delivered, or undeliverable);
        events no run may still read; completed idempotency records. Kept: open runs,
        notices still to deliver and their runs, the journal. In batches of ``batch``
        rows, each its own transaction, so workers go on meanwhile; ``dry_run`` counts
        and deletes nothing. Rules: ``flowrunner.store.retention``.
        """
        before = retention.cutoff(self.clock(), older_than, self.config.timezone)
        return ops.prune(
            self.engine,
            before=before,
            resource=self.binding.resource,
            include_failed=include_failed,
            batch=batch,
            dry_run=dry_run,
            progress=progress,
        )

    def diagram(
        self,
        conn: sa.Connection,
        flow: Any,
        run: Any = None,
        can_read: diagrams.CanRead | None = None,
        *,
        tenant: binding_mod.Tenant = None,
    ) -> diagrams.Diagram:
        """The diagram of ``flow`` (its name or id), with ``.html()``, ``.svg()``, ``.mermaid()``.

        Without ``run``: the flow's rows as they are now. With ``run`` (an id): that run of
        the flow drawn over the snapshot it started with (what is done and when, where it
        waits and for what, what is ahead, the way it went). ``can_read(step_row)`` says
        whether the reader may see a step; one they cannot is not drawn. ``OperatorError``
        (404) for an unknown flow, or a run that is not one of this flow's (or of the tenant).

            with runner.engine.connect() as conn:
                page = runner.diagram(conn, "Big orders", run=7).html()
        """
        run_id = None if run is None else self._run_id(run)
        return drawings.diagram(
            self, conn, flow, run=run_id, can_read=can_read, tenant=self._need_tenant(tenant)
        )

    def restart(self, run_id: int, *, operator: str, reason: str = "", tenant: Any = None) -> int:
        """Start a failed run's flow again as a new run on the same record; its id.

        The new run takes the flow's rows as they are now. The old run stays failed and
        points at the new one (``RunRow.restarted_as``); journaled with the operator's
        name. Refused (``OperatorError``, a sentence) for a run that has not failed, one
        already restarted, and a flow deleted, inactive or broken.
        """
        return actions.restart(
            self, self._run_id(run_id), operator=operator, reason=reason, tenant=tenant
        )

    # -- the Operations room: runs across records, the journal, the outbox ------------------

    def list_runs(
        self,
        *,
        status: str | Iterable[str] | None = None,
        flow: Any = None,
        record: Any = None,
        started_after: operations_room.Moment = None,
        started_before: operations_room.Moment = None,
        older_than: operations_room.Age = None,
        newer_than: operations_room.Age = None,
        stuck_after: operations_room.Age | listing.Stuck = None,
        tenant: binding_mod.Tenant = None,
        before_id: Any = None,
        limit: Any = operations_room.DEFAULT_LIMIT,
    ) -> listing.RunPage:
        """Runs across records, newest first, a page at a time; each open run with where
        it waits (``run.waiting``), the stuck ones' ids in ``page.stuck``. On a tenant
        binding, only the ``tenant``'s.

        ``status``: one of ``running``, ``waiting``, ``done``, ``failed``, ``cancelled``
        or ``stuck`` (or several) — stuck: not ended, held by no worker, its due work
        missed or its lease run out more than ``stuck_after`` ago (15 minutes). ``flow``:
        a name in any case, or an id. ``record``: a record's key. ``older_than`` /
        ``newer_than`` (``"2d"``) and ``started_after`` / ``started_before`` (a date or
        moment): when it started. ``before_id``: the page's ``next_before``. What cannot
        be used is refused with ``RowInvalid`` naming each field.
        """
        owner = self._need_tenant(tenant)
        where = operations_room.run_filter(
            self,
            tenant=owner,
            status=status,
            flow=flow,
            record=record,
            started_after=started_after,
            started_before=started_before,
            older_than=older_than,
            newer_than=newer_than,
            stuck_after=stuck_after,
        )
        return operations_room.list_runs(
            self, where, tenant=owner, before_id=before_id, limit=limit
        )

    def count_runs(
        self,
        *,
        flow: Any = None,
        record: Any = None,
        started_after: operations_room.Moment = None,
        started_before: operations_room.Moment = None,
        older_than: operations_room.Age = None,
        newer_than: operations_room.Age = None,
        stuck_after: operations_room.Age | listing.Stuck = None,
        tenant: binding_mod.Tenant = None,
    ) -> dict[str, int]:
        """How many runs have each status, and how many are stuck (``list_runs``' other
        filters apply): ``{"running": 0, "waiting": 12, "done": 40, "failed": 2,
        "cancelled": 1, "stuck": 1}``."""
        owner = self._need_tenant(tenant)
        where = operations_room.run_filter(
            self,
            tenant=owner,
            flow=flow,
            record=record,
            started_after=started_after,
            started_before=started_before,
            older_than=older_than,
            newer_than=newer_than,
            stuck_after=stuck_after,
        )
        return operations_room.count_runs(self, where, tenant=owner)

    def get_run(self, run_id: Any, *, tenant: binding_mod.Tenant = None) -> ops.RunRow:
        """One run with where it waits; ``OperatorError`` (404) for a run of another
        resource or tenant, or none."""
        return operations_room.get_run(self, self._run_id(run_id), tenant=self._need_tenant(tenant))

    def journal(
        self,
        *,
        run_id: Any = None,
        operator: str | None = None,
        action: str | None = None,
        tenant: binding_mod.Tenant = None,
        before_id: Any = None,
        limit: Any = operations_room.DEFAULT_LIMIT,
    ) -> listing.Page[ops.JournalRow]:
        """Operators' actions on this resource's runs, newest first, a page at a time
        (``operations_room.journal_sentence`` says each in words)."""
        return operations_room.journal(
            self,
            tenant=self._need_tenant(tenant),
            run_id=None if run_id is None else self._run_id(run_id),
            operator=operator,
            action=action,
            before_id=before_id,
            limit=limit,
        )

    def outbox(
        self,
        state: str | None = None,
        *,
        run_id: Any = None,
        tenant: binding_mod.Tenant = None,
        before_id: Any = None,
        limit: Any = operations_room.DEFAULT_LIMIT,
    ) -> listing.Page[ops.NoticeRow]:
        """The notices outbox, newest first, a page at a time: ``pending`` (to deliver),
        ``delivered``, ``undeliverable`` (``notice.problem`` says why), or all."""
        return operations_room.outbox(
            self,
            state,
            tenant=self._need_tenant(tenant),
            run_id=None if run_id is None else self._run_id(run_id),
            before_id=before_id,
            limit=limit,
        )

    def act(
        self,
        action: str,
        run_ids: Iterable[Any],
        *,
        operator: str,
        reason: str = "",
        tenant: binding_mod.Tenant = None,
        dry_run: bool = False,
    ) -> list[actions.Outcome]:
        """``cancel``, ``retry``, ``redrive`` or ``restart`` each run, each in its own
        transaction; one ``Outcome`` per run: done, or refused with the reason (the others
        go on). ``dry_run``: what would be done, nothing kept."""
        return actions.act(
            self,
            action,
            run_ids,
            operator=operator,
            reason=reason,
            tenant=tenant,
            dry_run=dry_run,
        )

    # -- signed callbacks -----------------------------------------------------------------------

    def receive(self, name: str, headers: signing.Headers, body: bytes) -> receipt.Received:
        """Handle one signed callback to inbound ``name``: its answer (``status``, and the
        ``reason`` for logs). Never raises; the whole rule is ``flowrunner.inbound.receipt``.

        For a web framework of your own: ``runner.receive(name, request.headers,
        request.body).status`` is the status to answer with, and nothing else.
        """
        return receipt.receive(self, name, headers, body)

    def inbound_app(self) -> inbound_app.InboundApp:
        """The inbound endpoints as an ASGI application answering ``POST /NAME``:
        ``app.mount("/inbound", runner.inbound_app())``. Needs no web framework."""
        return inbound_app.InboundApp(self)

    # -- the console ------------------------------------------------------------------------------

    def console(self, **options: Any) -> Any:
        """The web console of this runner, an ASGI application to mount:
        ``app.mount("/flows", runner.console(principal=current_user))``.

        ``principal`` (request -> ``Principal``) or ``token`` says who reads;
        ``can_read``, ``can_edit`` and ``can_operate`` what they may read, edit and do
        (``flowrunner.web.console``). Needs ``pip install 'flowrunner[console]'``.
        """
        from flowrunner.web import console

        return console.console(self, **options)

    # -- ORM hook -------------------------------------------------------------------------------

    def watch(self, mapped_class: type[Any]) -> Callable[[], None]:
        """Opt in: ORM inserts and updates of ``mapped_class`` call record_created/updated.

        They run in the flush's own transaction. Returns a function that stops watching.
        """
        mapper = orm.class_mapper(mapped_class)
        names = [c.key for c in mapper.column_attrs]

        def as_record(target: Any) -> dict[str, Any]:
            return {name: getattr(target, name) for name in names}

        def after_insert(_mapper: Any, connection: sa.Connection, target: Any) -> None:
            self.record_created(connection, as_record(target))

        def after_update(_mapper: Any, connection: sa.Connection, target: Any) -> None:
            after = as_record(target)
            before = dict(after)
            changed = False
            for name in names:
                history = orm.attributes.instance_state(target).attrs[name].history
                if history.deleted:
                    before[name] = history.deleted[0]
                    changed = True
            if changed:
                self.record_updated(connection, before, after)

        sa.event.listen(mapped_class, "after_insert", after_insert)
        sa.event.listen(mapped_class, "after_update", after_update)

        def unwatch() -> None:
            sa.event.remove(mapped_class, "after_insert", after_insert)
            sa.event.remove(mapped_class, "after_update", after_update)

        return unwatch


def _snapshot_of(run: ops.RunRow) -> snapshot.FlowSnapshot | None:
    try:
        return snapshot.FlowSnapshot.from_dict(run.snapshot)
    except (KeyError, TypeError, ValueError):
        return None  # a stored snapshot that no longer reads: the run fails on it


def _step_id(step_id: Any) -> Any:
    """A step's id as given to ``save_step``/``delete_step`` (``rows.whole``), else
    ``RowInvalid``: an id its column cannot hold is never sent to the database."""
    try:
        return rows.whole(step_id)
    except ValueError:
        raise errors.RowInvalid(
            [
                errors.FieldError(
                    "id", f"there is no step with id {payloads.quote(step_id)}", "step_unknown"
                )
            ]
        ) from None


def flow_runner(
    binding: binding_mod.FlowBinding,
    engine: sa.Engine,
    *,
    commands: Mapping[str, commands_mod.Command] | None = None,
    run_as: str = "automation",
    clock: Clock = utc_now,
    **options: Any,
) -> FlowRunner:
    """Mount a runner on the binding's resource (see ``FlowRunner`` for the options)."""
    return FlowRunner(binding, engine, commands=commands, run_as=run_as, clock=clock, **options)


__all__ = ["FlowRunner", "flow_runner", "utc_now"]
