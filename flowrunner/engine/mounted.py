"""Mounted: what every part of a runner works with, once it is mounted on a resource.

The facade (``FlowRunner``) builds one at mount and hands it down; every module below
it — starting runs, the worker and each program's step, operators' actions, the
Operations room, diagrams, tries, signed callbacks — takes a ``Mounted`` and never the
facade. It holds the binding and what was read for it once (the application's tables,
each column's facts, the interpreter's configuration), the engine, the clock, the
commands and who runs them, the tenant rules, the programs a run may execute, and the
snapshots read so far::

    mounted = Mounted.mount(binding, engine, commands={...}, run_as="automation")
    mounted.need_tenant("acme")  # 'acme'; on a binding without tenants, None is fine
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Protocol

import sqlalchemy as sa

from flowrunner import diagrams, errors
from flowrunner.authority import grants
from flowrunner.binding import FlowBinding, RecordId, Tenant
from flowrunner.engine import commands as commands_mod
from flowrunner.engine import tracing
from flowrunner.flows import column_facts, snapshot, validation
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter.waits import Waiting
from flowrunner.foundations import ids, retry_policy, statuses
from flowrunner.foundations import limits as limits_mod
from flowrunner.history import flows as history_lines
from flowrunner.inbound import endpoints
from flowrunner.inbound import mail as mail_mod
from flowrunner.jobs import spec
from flowrunner.store import app_tables, dialects, migrate
from flowrunner.store import operations as ops

Clock = Callable[[], datetime]
# Told of each event ``emit`` stores, in the emitting transaction (jobs plan from it).
EventHook = Callable[[sa.Connection, spec.Emitted], None]
# What a worker does once before its first claim, given the clock's now (a job at times
# makes sure it has its run).
Prepare = Callable[[datetime], None]
# How often each worker calls the runner's ``ticking`` hooks, on the runner's clock.
TICK = timedelta(minutes=1)

# How many runs' snapshots a runner keeps read (``load_snapshot``); the oldest goes first.
KEPT_SNAPSHOTS = 256

# ``flowrunner migrate`` must load the app before the engine's tables exist, so the
# schema check a runner makes at mount is switched off while it loads.
check_schema_on_mount: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "check_schema_on_mount", default=True
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class Mountable(Protocol):
    """What an application hands to what mounts beside its runner (``Jobs(runner, …)``):
    anything with its ``Mounted`` — the facade is one."""

    @property
    def mounted(self) -> Mounted: ...


@dataclasses.dataclass(eq=False)
class Mounted:
    """One runner's shared context. Built by ``mount``; ``clock`` may be changed (the
    test driver moves it by hand), the rest is fixed while the runner lives, but for the
    programs mounted beside the flows (``programs``, ``jobs``, ``timers``,
    ``workflows``) and the hooks they add (``on_event``, ``preparing``)."""

    binding: FlowBinding
    engine: sa.Engine
    tables: app_tables.AppTables
    # Each column's type and facts: what conditions compare and set steps may write.
    columns: column_facts.ResourceColumns
    config: config_mod.InterpreterConfig
    clock: Clock
    commands: dict[str, commands_mod.Command]
    run_as: str
    authorize: commands_mod.Authorize | None
    # The declared roles and principals (None: the application's ``authorize``, if any,
    # decides alone), and each tenant's own service principal on a tenant binding.
    authority: grants.Authority | None = None
    tenant_run_as: dict[str, str] = dataclasses.field(default_factory=dict)
    inbound: dict[str, endpoints.Inbound] = dataclasses.field(default_factory=dict)
    # The mail inbounds, by name (``MailInbound``): replies answering waiting steps.
    mail: dict[str, mail_mod.MailInbound] = dataclasses.field(default_factory=dict)
    # The programs a run may execute, by the name its snapshot gives (``programs``).
    programs: dict[str, Program] = dataclasses.field(default_factory=dict)
    # Told of each stored event in its transaction (``emit``), and called once by each
    # worker before its first claim: the jobs mounted beside the flows use them.
    on_event: list[EventHook] = dataclasses.field(default_factory=list)
    preparing: list[Prepare] = dataclasses.field(default_factory=list)
    # Called by each worker before its first claim and then at most once a ``TICK`` of
    # the runner's clock: the scheduled flows' runs are made and kept in step by them.
    ticking: list[Prepare] = dataclasses.field(default_factory=list)
    # What is mounted beside the flows, if anything (jobs, timers, code workflows).
    jobs: Any = None
    timers: Any = None
    workflows: Any = None
    # The active flows records start, with a digest of their rows (``flows.starts``).
    startable: dict[object, tuple[object, list[Any]]] = dataclasses.field(default_factory=dict)
    # The calendars business time counts on, with the application's holidays (None:
    # the binding names no calendar and no holidays table).
    business: Any = None
    # The limits on commands, by their keys (``foundations.limits.key``): a kind's, a
    # job's, a code workflow's named limit.
    limits: dict[str, limits_mod.Named] = dataclasses.field(default_factory=dict)
    _checked: dict[str, str | None] = dataclasses.field(default_factory=dict)
    _loaded: dict[str, tuple[dict[str, Any], snapshot.FlowSnapshot]] = dataclasses.field(
        default_factory=dict
    )

    @classmethod
    def mount(
        cls,
        binding: FlowBinding,
        engine: sa.Engine,
        *,
        commands: Mapping[str, commands_mod.Command] | None = None,
        run_as: str = "automation",
        clock: Clock = utc_now,
        authorize: commands_mod.Authorize | None = None,
        max_moves: int = 1000,
        retry: retry_policy.RetryPolicy | None = None,
        timezone: tzinfo | None = None,
        inbound: Iterable[endpoints.Inbound | mail_mod.MailInbound] = (),
        roles: Iterable[grants.Role] = (),
        principals: Iterable[grants.Principal] = (),
        tenant_run_as: Mapping[str, str] | None = None,
    ) -> Mounted:
        """Read the application's tables once, and check the binding against them and
        every command it names, each run as a principal granted it (``BindingError``)."""
        authority = declared(roles, principals, authorize)
        if authority is not None:
            authorize = authority
        engine = dialects.prepare_engine(engine)
        tables = app_tables.reflect(engine, binding)
        columns = binding.check(tables.metadata).resource_columns
        mounted = cls(
            binding=binding,
            engine=engine,
            tables=tables,
            columns=columns,
            config=interpreter_config(
                binding, columns, max_moves=max_moves, retry=retry, timezone=timezone
            ),
            clock=clock,
            commands=dict(commands or {}),
            run_as=run_as,
            authorize=authorize,
            authority=authority,
            tenant_run_as=dict(tenant_run_as or {}),
        )
        mounted.check_principals()
        if binding.has_calendars or binding.holidays_table is not None:
            from flowrunner.engine import business

            mounted.business = business.BusinessCalendars(binding, engine)
        for name, kind in binding.kinds.items():
            for command in filter(None, (kind.command, kind.remind, kind.cancel)):
                for principal in mounted.principals_of(kind.run_as):
                    mounted.check_command(command, principal=principal, needed_by=f"kind {name!r}")
            mounted.add_limit("kind", name, f"kind {name!r}", kind.limit)
        given = list(inbound)
        mounted.mail = mail_mod.check([i for i in given if isinstance(i, mail_mod.MailInbound)])
        mounted.add_inbound([i for i in given if not isinstance(i, mail_mod.MailInbound)])
        return mounted

    def add_inbound(self, inbound: Iterable[endpoints.Inbound]) -> None:
        """Answer these signed callbacks too, each checked as at mount (``BindingError``):
        at mount, or from a server-only module (``ServerParts``)."""
        checked = endpoints.check(
            [*self.inbound.values(), *inbound],
            binding=self.binding,
            commands=self.commands,
            authorize=self.authorize,
        )
        for name, endpoint in checked.items():
            if name in self.mail:
                raise errors.BindingError(f"inbound {name!r} is declared twice")
            if name not in self.inbound:
                self.check_run_as(endpoint.run_as, f"inbound {name!r}")
        self.inbound = checked

    def add_commands(self, commands: Mapping[str, commands_mod.Command]) -> None:
        """Commands only the server runs (a server-only module's: ``ServerParts``), beside
        the application's; ``BindingError`` for a name the application gave already."""
        for name, command in commands.items():
            if name in self.commands:
                raise errors.BindingError(
                    f"command {name!r} is given twice: by the application and by its "
                    "server-only module; give it once"
                )
            if not isinstance(name, str) or not callable(command):
                raise errors.BindingError(
                    f"commands map a name to a function of a CommandContext: {name!r}"
                )
        self.commands.update(commands)

    def add_limit(self, sort: str, name: str, shown: str, limit: limits_mod.Limit | None) -> None:
        """Keep ``limit`` on the commands of ``sort`` ``name`` (a kind, a job, a code
        workflow's named limit), under its key on this runner's resource."""
        named = limits_mod.named(limits_mod.key(sort, self.binding.resource, name), shown, limit)
        if named is not None:
            self.limits[named.key] = named

    def limit_of(self, sort: str, name: str) -> limits_mod.Named | None:
        """The limit on the commands of ``sort`` ``name``, if it has one."""
        return self.limits.get(limits_mod.key(sort, self.binding.resource, name))

    def require_secrets(self) -> None:
        """At startup of what serves or runs beside the callbacks — ``inbound_app()``
        (the console mounts it) and a worker's ``serve`` — refuse, in one line naming
        each variable, while an inbound's secret variable is not set (``BindingError``;
        the command line exits 2 with it). Mounting alone only warns: commands that do
        not serve (``flowrunner runs list``) load the same runner."""
        unset = endpoints.unset_secrets([*self.inbound.values(), *self.mail.values()], os.environ)
        if unset is not None:
            raise errors.BindingError(unset)

    def check_schema(self, check: bool | None = None) -> None:
        """Refuse an outdated engine schema (``SchemaOutdated``), unless ``check`` is
        False (or, when it is None, while ``flowrunner migrate`` loads the app)."""
        if check is None:
            check = check_schema_on_mount.get()
        if check:
            migrate.ensure_current(self.engine)

    @staticmethod
    def of(runner: Mounted | Mountable) -> Mounted:
        """The context itself, or a runner's (what takes either takes it here)."""
        return runner if isinstance(runner, Mounted) else runner.mounted

    # -- commands -------------------------------------------------------------------------

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

    def authorize_command(self, command: str, principal: str | None = None) -> None:
        """Checked on every attempt: a revoked grant refuses the step (or the callback).

        ``principal`` is who runs it: the runner's ``run_as`` unless a job's or an
        inbound's own.
        """
        principal = self.run_as if principal is None else principal
        if self.authority is not None:
            refusal = self.authority.refusal(principal, command)
            if refusal is not None:
                raise errors.CommandRefused(refusal)
            return
        if self.authorize is not None and not self.authorize(principal, command):
            raise errors.CommandRefused(
                f"principal {principal!r} is not allowed to run command {command!r}"
            )

    def check_principals(self) -> None:
        """At mount, with declared principals: the runner's ``run_as`` and each tenant's
        hold service roles alone (``BindingError`` otherwise)."""
        if self.tenant_run_as and self.binding.tenant is None:
            raise errors.BindingError(
                f"tenant_run_as gives tenants their principals, but the binding's "
                f"{self.binding.resource} records belong to no tenants: leave it out"
            )
        for tenant, principal in self.tenant_run_as.items():
            if not isinstance(tenant, str) or not isinstance(principal, str):
                raise errors.BindingError(
                    "tenant_run_as maps each tenant, as text, to the name of its principal"
                )
        self.check_run_as(self.run_as, "the runner")
        for tenant, principal in sorted(self.tenant_run_as.items()):
            self.check_run_as(principal, f"tenant {tenant}")

    def check_run_as(self, own: str | None, needed_by: str) -> None:
        """At mount, with declared principals: what ``needed_by`` runs as (its ``own``
        principal, else the runner's and each tenant's) holds service roles alone."""
        if self.authority is None:
            return
        for principal in self.principals_of(own):
            problem = self.authority.run_as_problem(principal)
            if problem is not None:
                raise errors.BindingError(f"{needed_by} runs as {principal}, but {problem}")

    def principals_of(self, own: str | None) -> list[str]:
        """Every principal a part of the application may run as: its ``own``, else the
        runner's and each tenant's service principal (each is checked at mount)."""
        if own is not None:
            return [own]
        return list(dict.fromkeys([self.run_as, *self.tenant_run_as.values()]))

    def principal_for(self, own: str | None, tenant: object) -> str:
        """Who a step runs as: its ``own`` principal (a kind's ``run_as``), else its
        tenant's service principal, else the runner's ``run_as``."""
        if own is not None:
            return own
        if tenant is not None:
            return self.tenant_run_as.get(str(tenant), self.run_as)
        return self.run_as

    # -- snapshots ------------------------------------------------------------------------

    def check_snapshot(self, snap: snapshot.FlowSnapshot) -> str | None:
        """The load check of a run's snapshot against this binding (a sentence, or None).

        Remembered per snapshot digest: the binding does not change while a runner lives.
        """
        if snap.digest not in self._checked:
            self._checked[snap.digest] = validation.check(snap, self.binding, self.columns)
        return self._checked[snap.digest]

    def config_for(
        self, snap: snapshot.FlowSnapshot, tenant: Tenant
    ) -> config_mod.InterpreterConfig:
        """The interpreter's configuration for a run of ``snap``: ``config`` with the
        calendar its business time counts on (``engine.business``)."""
        if self.business is None:
            return self.config
        found: config_mod.InterpreterConfig = self.business.config_for(self.config, snap, tenant)
        return found

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
            forget_oldest(self._loaded)
        self._loaded[snap.digest] = (copy.deepcopy(dict(stored)), snap)
        return snap

    # -- tenants and keys -------------------------------------------------------------------

    def need_tenant(self, tenant: Tenant) -> str | None:
        """The tenant an operator names, as text; ``OperatorError`` when a tenant binding
        is not given one."""
        if self.binding.tenant and tenant is None:
            raise errors.OperatorError(
                f"{self.binding.resource} records belong to tenants: name the tenant"
            )
        return None if tenant is None else str(tenant)

    def operator_key(self, record_id: RecordId) -> str:
        """A record id an operator (or a program) gives, as runs keep it; else OperatorError."""
        try:
            return str(self.tables.key_value(record_id))
        except errors.RecordRejected as exc:
            raise errors.OperatorError(str(exc)) from None

    def run_id(self, run_id: object) -> int:
        """A run id as an operator gives it (``12`` or ``"12"``, by ``ids.read``); else
        ``OperatorError`` (422, ``id_invalid``)."""
        try:
            return ids.read(run_id, "run")
        except ids.NotAnId as exc:
            raise errors.OperatorError(
                f"there is no run {exc.shown}: a run's id is {ids.EXPECTED}",
                status_code=422,
                code="id_invalid",
            ) from None

    def tenant_of(self, record: Mapping[str, Any]) -> Tenant:
        """The record's tenant as its column holds it; None without tenants.

        ``RecordRejected`` when a tenant binding's record does not name its tenant.
        """
        tenant = record_tenant(self.binding, record)
        return None if tenant is None else self.tables.tenant_value(tenant)

    def record_id(self, record: Mapping[str, Any]) -> str:
        """The record's key as runs and events keep it (``str`` of ``key_value``).

        ``RecordRejected`` when the record has no key, or one its column cannot hold.
        """
        if record.get(self.binding.key) is None:
            raise errors.RecordRejected(
                f"the record has no {self.binding.key!r}, the key of {self.binding.resource!r}: "
                "give the record with its key (read it back after the insert)"
            )
        return str(self.tables.key_value(record[self.binding.key]))

    def identify(self, record: object, what: str) -> tuple[str, Tenant]:
        """The key and tenant of a record handed to the runner, checked before any write."""
        if not isinstance(record, Mapping):
            raise errors.RecordRejected(
                f"{what} takes the record as a mapping of column to value, "
                f"not a {type(record).__name__}"
            )
        return self.record_id(record), self.tenant_of(record)

    def owned(self, row: Mapping[str, Any], tenant: Tenant, what: str) -> Mapping[str, Any]:
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


def declared(
    roles: Iterable[grants.Role],
    principals: Iterable[grants.Principal],
    authorize: commands_mod.Authorize | None,
) -> grants.Authority | None:
    """The declared roles and principals checked together, or None when there are none;
    ``BindingError`` when the application also gives its own ``authorize``."""
    roles, principals = list(roles), list(principals)
    if not roles and not principals:
        return None
    if authorize is not None:
        raise errors.BindingError(
            "give the runner roles and principals, or its own authorize, not both: "
            "one of them decides who may run each command"
        )
    return grants.Authority.declare(roles, principals)


def interpreter_config(
    binding: FlowBinding,
    columns: column_facts.ResourceColumns,
    *,
    max_moves: int = 1000,
    retry: retry_policy.RetryPolicy | None = None,
    timezone: tzinfo | None = None,
) -> config_mod.InterpreterConfig:
    """What the pure interpreter is told about the application, built once per runner."""
    return config_mod.InterpreterConfig(
        columns=columns,
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
                outside=kind.outside,
            )
            for name, kind in binding.kinds.items()
        },
        events={name: binding.event_field(name) for name in binding.events},
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


def record_tenant(bound: FlowBinding, record: Mapping[str, object]) -> object:
    """The tenant a record belongs to (None without tenants); refused if the record lacks it.

    On a tenant binding a record without its tenant column would belong to no one and
    start nothing, silently; it is refused with a sentence instead.
    """
    if bound.tenant is None:
        return None
    tenant = record.get(bound.tenant)
    if tenant is None or (isinstance(tenant, str) and not tenant.strip()):
        raise errors.RecordRejected(
            f"the record has no {bound.tenant!r}: {bound.resource} records belong to "
            "tenants, so give the record with its tenant column",
            expected=f"the record with its {bound.tenant!r}",
        )
    return tenant


def forget_oldest(kept: dict[Any, Any]) -> None:
    """Drop the entry put first into ``kept`` (a runner's memo, which threads share:
    another may have dropped it, or be adding one, meanwhile)."""
    with contextlib.suppress(StopIteration, RuntimeError):
        kept.pop(next(iter(kept)), None)


# -- programs: what every kind of run has in common ----------------------------------------


# What a claimed step tells of each command attempt: the command's name, how long it
# took in seconds, its outcome ("ok", "failed" or "refused") and its attempt number.
CommandObserver = Callable[[str, float, str, int], None]


@dataclasses.dataclass(frozen=True)
class Claimed:
    """One claimed run, as the worker hands it to the run's program: the runner's
    context, the worker's name and lease, its crash hook (tests), the step's
    transaction, the claim and the claims after it in the same batch, the clock's now
    and the run as read. ``commit`` commits the step's transaction so far and goes on
    in a new one under the same claim (a checkpoint: ``ClaimedStep.checkpoint``); a
    step handed over without one keeps a single transaction."""

    mounted: Mounted
    owner: str
    lease_ttl: timedelta
    point: Callable[[str], None]
    conn: sa.Connection
    claim: ops.Claim
    now: datetime
    later: Sequence[ops.Claim]
    run: ops.RunRow
    commit: Callable[[], None] | None = None
    # Told of each command attempt: the command, its seconds, "ok", "failed" or
    # "refused", and its attempt number (the worker's metrics count them).
    observe: CommandObserver | None = None
    # The span of the worker's step, whose children are its command attempts (the one
    # that does nothing when the process traces nothing: ``engine.tracing``).
    traced: tracing.Step = tracing.QUIET_STEP


class Stepping(Protocol):
    """One claimed run's step, as the worker drives it."""

    def advance(self) -> object:
        """Advance the run in the step's transaction and save it."""

    def failure(self) -> str | None:
        """The sentence to log when this step failed the run, or None."""


class Program(Protocol):
    """A kind of run: flows from rows, jobs, timers on a date, code workflows — or one of
    an application's own. Registered in ``Mounted.programs`` under the name its runs'
    stored snapshots give (``{"program": NAME}``); the worker, the operators' actions,
    where a run waits and its diagram ask the run's program and never branch on its name.

    ``step`` is the one member every program writes. A program that subclasses
    ``Program`` takes the others as written here — a run that keeps no steps of its own:
    it waits only for its due time, a cancel ends it, a retry goes on from its state, a
    restart is refused and it has no diagram — and writes those that differ.
    """

    def step(self, claimed: Claimed) -> Stepping:
        """The step of a claimed run of this program."""
        raise NotImplementedError

    def waiting(self, mounted: Mounted, run: ops.RunRow) -> tuple[Waiting, ...]:
        """Where an open run of this program waits, and for what (``run.waiting``)."""
        return ()

    def cancelled(
        self, mounted: Mounted, run: ops.RunRow, why: str, now: datetime
    ) -> tuple[dict[str, Any], datetime | None]:
        """The run's state once an operator cancels it (``why`` says who and why), and
        when it is next due (to tell its steps), or None."""
        return dict(run.state or {}), None

    def retried(
        self, mounted: Mounted, run: ops.RunRow, now: datetime
    ) -> tuple[Mapping[str, object], statuses.RunStatus]:
        """A failed run's state and status once its failed step is to run again."""
        return dict(run.state or {}), statuses.RunStatus.RUNNING

    def restarted(
        self, mounted: Mounted, conn: sa.Connection, run: ops.RunRow, operator: str, now: datetime
    ) -> tuple[int, str]:
        """Start a failed run again as a new run, in ``conn``'s transaction: the new run's
        id and the name the journal gives it. ``OperatorError`` when it cannot be."""
        raise errors.OperatorError(
            f"run {run.id} cannot be restarted: it runs {program_of(run.snapshot)!r}, "
            "not a flow; retry it instead",
            code="not_a_flow",
        )

    def drawn(
        self,
        mounted: Mounted,
        conn: sa.Connection,
        run: ops.RunRow,
        can_read: diagrams.CanRead | None,
    ) -> diagrams.Diagram | None:
        """The run drawn (what is done, where it waits, what is ahead), or None when this
        program draws no diagram."""
        return None

    def sentence(
        self,
        mounted: Mounted,
        run: ops.RunRow,
        line: ops.LogRow,
        names: Mapping[str, str] | None = None,
    ) -> str:
        """One of the run's history lines as a sentence (``run.history``): the shared
        words for its code (``history.flows``), times on the runner's time zone, a record
        it names by its name in ``names`` (by id, as ``engine.record_names`` reads them)."""
        return history_lines.sentence(line, None, mounted.config.timezone, names=names)


FLOW = "flow"  # the program of a run whose snapshot names none: a flow from rows


def program_of(stored: Mapping[str, Any] | None) -> str:
    """Which program a run executes, from its stored snapshot (``"flow"`` unless said).

    >>> program_of({"flow": {"name": "Big orders"}, "steps": []})
    'flow'
    >>> program_of({"program": "job", "job": "nightly"})
    'job'
    """
    if not isinstance(stored, Mapping):
        return FLOW
    name = stored.get("program")
    return name if isinstance(name, str) and name else FLOW
