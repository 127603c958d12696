"""FlowRunner: the application-facing facade mounted on one resource.

The application creates one runner per binding at startup (``flow_runner(...)``); the
runner checks the binding against the database, refuses an outdated engine schema, and
from then on the application's saves, record changes and events go through it::

    runner = flow_runner(binding, engine, commands={"request_approval": request_approval})
    with engine.begin() as conn:
        conn.execute(purchase_order.insert().values(id=7, amount=5000, status="open"))
        runner.record_created(conn, {"id": 7, "amount": 5000, "status": "open"})
    runner.run_due()

The facade is thin: its context (``runner.mounted``: the binding, engine, tables, clock,
commands, tenant rules, programs) is handed to the services it is made of, and each of
its methods is one of theirs —

- ``runner.changes`` (``engine.changes.Changes``): records created, updated, deleted,
  events emitted, in the application's transactions;
- ``runner.feed`` (``engine.feed.EventFeed``): the events, read a page at a time;
- ``runner.editor`` (``flows.editor.FlowEditor``): flow and step rows validated on save;
- ``runner.operations`` (``engine.operations.Operations``): runs, history, operators'
  actions, the Operations room (``RunQuery``), notices, diagrams, pruning.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.authority import grants
from flowrunner.binding import FlowBinding, RecordId, Tenant
from flowrunner.engine import commands as commands_mod
from flowrunner.engine import mounted, operations_room, server_parts
from flowrunner.engine.answer_links import AnswerLinks
from flowrunner.engine.changes import Changes
from flowrunner.engine.feed import EventFeed
from flowrunner.engine.mounted import FLOW, Clock, EventHook, Mounted, Prepare, utc_now
from flowrunner.engine.operations import Operations, RunFilters, RunQuery
from flowrunner.engine.reply_addresses import ReplyAddresses
from flowrunner.flows import column_facts, scheduled, starts
from flowrunner.flows import step as flow_step
from flowrunner.flows.editor import FlowEditor
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.publishing import Publishing
from flowrunner.flows.trial import result, script
from flowrunner.foundations import retry_policy
from flowrunner.inbound import asgi, endpoints, mail_receipt, receipt, signing
from flowrunner.inbound.mail import MailInbound
from flowrunner.store import app_tables, listing
from flowrunner.store import operations as ops
from flowrunner.timers import program as timers
from flowrunner.timers import rules as timer_rules
from flowrunner.workflows import actions as workflow_actions
from flowrunner.workflows import definitions
from flowrunner.workflows import program as workflow_program
from flowrunner.workflows import starts as workflow_starts

if TYPE_CHECKING:
    from flowrunner.jobs.program import Jobs

Authorize = commands_mod.Authorize
_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")


def _of(
    service: str, method: Callable[Concatenate[_S, _P], _R]
) -> Callable[Concatenate[FlowRunner, _P], _R]:
    """The runner's method that is ``method`` of its ``service`` (same signature and
    docstring: ``help(runner.cancel)`` reads ``Operations.cancel``'s)."""

    @functools.wraps(method)
    def call(self: FlowRunner, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return method(getattr(self, service), *args, **kwargs)

    return call


class FlowRunner:
    """Runs the flows of one binding over its resource's records.

    ``commands`` maps each kind's command (and remind command) name to a function taking
    a ``CommandContext``; ``run_as`` is the principal commands run as; ``authorize``
    (principal, command) -> bool is checked at mount for every kind's command and again
    on every attempt. ``clock`` is what "now" is (the test driver moves it by hand).
    ``inbound`` are the signed callbacks it answers (``Inbound``; ``inbound_app()``
    serves them, ``receive`` handles one). ``workflows``: code workflows run beside the
    flows (``Workflows``). ``roles`` and ``principals`` (``Role``, ``Principal``) declare
    who may run what instead of ``authorize``; ``tenant_run_as`` gives each tenant its
    own service principal (docs/principals.md). ``links_secret``
    (32 random bytes) signs answer links.
    """

    def __init__(
        self,
        binding: FlowBinding,
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
        inbound: Iterable[endpoints.Inbound | MailInbound] = (),
        workflows: definitions.Workflows | None = None,
        links_secret: bytes | str | None = None,
        roles: Iterable[grants.Role] = (),
        principals: Iterable[grants.Principal] = (),
        tenant_run_as: Mapping[str, str] | None = None,
    ) -> None:
        self.mounted = Mounted.mount(
            binding,
            engine,
            commands=commands,
            run_as=run_as,
            clock=clock,
            authorize=authorize,
            max_moves=max_moves,
            retry=retry,
            timezone=timezone,
            inbound=inbound,
            roles=roles,
            principals=principals,
            tenant_run_as=tenant_run_as,
        )
        self.mounted.programs[FLOW] = flow_step.program
        self.mounted.programs[timer_rules.PROGRAM] = timers.program
        scheduled.mount(self.mounted)  # flows that start on a schedule
        # The binding's timers on date columns (``at``), or None when it has none: then
        # a record's change costs nothing more for them.
        self.mounted.timers = timers.Timers(self.mounted) if binding.at else None
        if workflows is not None:
            self.mount_workflows(workflows)
        self.mounted.check_schema(check_schema)
        self.changes = Changes(self.mounted)
        self.feed = EventFeed(self.mounted)
        self.editor = FlowEditor(self.mounted)
        self.operations = Operations(self.mounted)
        self.publishing = Publishing(self.mounted)
        self.forks = workflow_actions.Forks(self.mounted)
        self.answers = AnswerLinks(self.mounted, links_secret)
        self.replies = ReplyAddresses(self.answers)

    # -- the context, as the application reads it ----------------------------------------

    @property
    def binding(self) -> FlowBinding:
        return self.mounted.binding

    @property
    def engine(self) -> sa.Engine:
        return self.mounted.engine

    @property
    def tables(self) -> app_tables.AppTables:
        """The application's tables, read once at mount."""
        return self.mounted.tables

    @property
    def columns(self) -> column_facts.ResourceColumns:
        """Each resource column's type and facts."""
        return self.mounted.columns

    @property
    def config(self) -> config_mod.InterpreterConfig:
        return self.mounted.config

    @property
    def commands(self) -> dict[str, commands_mod.Command]:
        return self.mounted.commands

    @property
    def run_as(self) -> str:
        return self.mounted.run_as

    @property
    def authorize(self) -> Authorize | None:
        return self.mounted.authorize

    @authorize.setter
    def authorize(self, authorize: Authorize | None) -> None:
        # The new rule replaces the declared roles' too: one of them decides.
        self.mounted.authorize = authorize
        self.mounted.authority = authorize if isinstance(authorize, grants.Authority) else None

    @property
    def inbound(self) -> dict[str, endpoints.Inbound]:
        return self.mounted.inbound

    @property
    def clock(self) -> Clock:
        """What "now" is; the test driver sets it."""
        return self.mounted.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.mounted.clock = clock

    @property
    def programs(self) -> dict[str, mounted.Program]:
        """The programs this runner's runs execute, by the name a run's snapshot gives."""
        return self.mounted.programs

    @property
    def on_event(self) -> list[EventHook]:
        return self.mounted.on_event

    @property
    def preparing(self) -> list[Prepare]:
        return self.mounted.preparing

    @property
    def jobs(self) -> Jobs | None:
        """The jobs mounted on this runner (``Jobs(runner, {...})``), if any."""
        return self.mounted.jobs  # type: ignore[no-any-return]

    @property
    def timers(self) -> timers.Timers | None:
        return self.mounted.timers  # type: ignore[no-any-return]

    @property
    def workflows(self) -> definitions.Workflows | None:
        return self.mounted.workflows  # type: ignore[no-any-return]

    check_command = _of("mounted", Mounted.check_command)
    check_snapshot = _of("mounted", Mounted.check_snapshot)
    load_snapshot = _of("mounted", Mounted.load_snapshot)
    authorize_command = _of("mounted", Mounted.authorize_command)

    # -- what the application tells it ----------------------------------------------------

    record_created = _of("changes", Changes.record_created)
    record_updated = _of("changes", Changes.record_updated)
    record_deleted = _of("changes", Changes.record_deleted)
    emit = _of("changes", Changes.emit)
    check_event = _of("changes", Changes.check_event)
    events = _of("feed", EventFeed.events)

    # -- editing flows (validated on save) ------------------------------------------------

    save_flow = _of("editor", FlowEditor.save_flow)
    save_step = _of("editor", FlowEditor.save_step)
    delete_step = _of("editor", FlowEditor.delete_step)
    move_step = _of("editor", FlowEditor.move_step)
    delete_flow = _of("editor", FlowEditor.delete_flow)
    snapshot = _of("editor", FlowEditor.snapshot)

    # -- versions: publish, see, compare, roll back, move waiting runs ----------------------

    publish = _of("publishing", Publishing.publish)
    versions = _of("publishing", Publishing.versions)
    compare = _of("publishing", Publishing.compare)
    roll_back = _of("publishing", Publishing.roll_back)
    move_runs = _of("publishing", Publishing.move_runs)

    event_warnings = _of("feed", EventFeed.warnings)

    def try_flow(
        self,
        flow: Mapping[str, Any] | str | int,
        steps: Sequence[Mapping[str, Any]] | None,
        record_id: RecordId,
        *,
        answers: str | Sequence[script.Item | str | None] = (),
        until: str | timedelta = "30 days",
        tenant: Tenant = None,
        start: datetime | None = None,
    ) -> result.TryResult:
        """Try a flow on a record: what it would do, with nothing leaving the try.

        ``flow`` is the flow row as edited, with ``steps`` its step rows (unsaved; judged
        as a save would judge them first, ``RowInvalid`` with every problem), or a saved
        flow's name or id with ``steps`` None. ``answers`` is what happens meanwhile —
        ``Answer``, ``Change`` and ``Refusal`` items, or lines such as ``"bob approves
        after 2 days"`` (``flows.trial.script``). The run starts at ``start`` (default:
        now) and goes on until it ends or ``until`` has passed. The real interpreter runs
        it in a transaction that always rolls back; no command runs. The result is the
        path with its sentences, the values set, the notices, the commands and where it
        ends (``TryResult``; see ``flows.trial.dry_run``).
        """
        from flowrunner.flows.trial import dry_run

        return dry_run.try_flow(
            self.mounted,
            flow,
            steps,
            record_id,
            answers=answers,
            until=until,
            tenant=tenant,
            start=start,
        )

    # -- starting runs ----------------------------------------------------------------------

    def start(
        self, flow: str | int, record_id: RecordId, *, operator: str, tenant: Tenant = None
    ) -> int:
        """An operator starts a manual flow (by name or id) for a record; journaled."""
        return starts.start_manual(self.mounted, flow, record_id, operator=operator, tenant=tenant)

    def start_existing(
        self,
        where: str | None = None,
        *,
        flow: str | int | None = None,
        tenant: Tenant = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Hand records that existed before their flows to the runner as though just created.

        Each chosen record starts each active ``created`` flow whose condition holds
        (``flow`` names one). Running it again starts nothing new. ``progress`` is called
        with (done, total). Returns the number of runs started.
        """
        return starts.start_existing(
            self.mounted, where, flow=flow, tenant=tenant, progress=progress
        )

    def arm_timers(
        self,
        where: str | None = None,
        *,
        tenant: Tenant = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Arm the binding's timers (``at``) for records that existed before them, as
        though each had just been created; again, arms nothing new. How many it armed."""
        if self.timers is None:
            return 0
        return self.timers.arm_existing(where, tenant=tenant, progress=progress)

    def mount_workflows(self, workflows: definitions.Workflows) -> None:
        """Run ``workflows`` (``Workflows``) on this runner: their event starts in ``emit``,
        their runs in its workers. ``BindingError`` when a workflow starts on an event the
        binding does not declare."""
        unknown = sorted(workflows.events() - set(self.binding.events))
        if unknown:
            known = ", ".join(sorted(self.binding.events)) or "none"
            raise errors.BindingError(
                f"a workflow starts on event {unknown[0]!r}, which the binding of "
                f"{self.binding.resource!r} does not declare (events: {known})"
            )
        for definition in workflows.definitions():
            self.mounted.check_run_as(definition.run_as, f"workflow {definition.name!r}")
        self.mounted.workflows = workflows
        for name, limit in workflows.limits.items():  # w.run(..., limit=name)
            self.mounted.add_limit("workflow", name, f"limit {name!r}", limit)
        self.mounted.programs[workflow_program.PROGRAM] = workflow_program.program

    def mount_server(self, parts: server_parts.ServerParts) -> None:
        """Mount what only the server runs (``ServerParts``: jobs, inbound endpoints,
        code workflows and their commands), checked as at mount; ``flowrunner worker
        --jobs MODULE:ATTR`` does it."""
        server_parts.mount(self, parts)

    def start_workflow(
        self,
        name: str,
        start: Mapping[str, Any] | None = None,
        *,
        operator: str,
        record: RecordId | None = None,
        key: str | None = None,
        tenant: Tenant = None,
    ) -> int:
        """Start the manual workflow ``name`` with ``start`` (its body's second argument);
        the new run's id, journaled with ``operator``. ``record``: the record the run is
        on; ``key``: the start happens once. ``OperatorError`` for an unknown workflow,
        one that starts on an event, an unknown record."""
        if self.workflows is None:
            raise errors.OperatorError(
                f"the runner of {self.binding.resource!r} has no workflows", code="workflow_unknown"
            )
        return workflow_starts.start_manual(
            self.mounted,
            self.workflows,
            name,
            start,
            operator=operator,
            record=record,
            key=key,
            tenant=tenant,
        )

    fork = _of("forks", workflow_actions.Forks.fork)

    def run_due(self, limit: int = 100, *, batch: int = 1) -> int:
        """Advance up to ``limit`` due runs in this process; returns how many were claimed."""
        from flowrunner.engine import worker

        return worker.Worker(self.mounted, batch=batch).run_due(limit)

    def deliver_due(self, *, batch: int = 10) -> int:
        """Send the due notices in this process (``deliver --once``); how many it claimed."""
        from flowrunner.delivery import deliverer

        return deliverer.Deliverer(self.mounted, batch=batch).deliver_all()

    # -- seeing and operating (``runner.operations``) ------------------------------------------

    runs = _of("operations", Operations.runs)
    get_run = _of("operations", Operations.get_run)
    history = _of("operations", Operations.history)
    diagram = _of("operations", Operations.diagram)
    cancel = _of("operations", Operations.cancel)
    retry = _of("operations", Operations.retry)
    redrive = _of("operations", Operations.redrive)
    restart = _of("operations", Operations.restart)
    act = _of("operations", Operations.act)
    error_groups = _of("operations", Operations.error_groups)
    journal = _of("operations", Operations.journal)
    outbox = _of("operations", Operations.outbox)
    notices = _of("operations", Operations.notices)
    mark_delivered = _of("operations", Operations.mark_delivered)
    retry_notice = _of("operations", Operations.retry_notice)
    prune = _of("operations", Operations.prune)

    def list_runs(
        self,
        query: RunQuery | None = None,
        *,
        tenant: Tenant = None,
        before_id: object = None,
        limit: object = operations_room.DEFAULT_LIMIT,
        **filters: Unpack[RunFilters],
    ) -> listing.RunPage:
        """Runs across records, newest first, a page at a time (``Operations.list_runs``):
        a ``RunQuery``, or its fields as keywords (``status="failed", older_than="2d"``)."""
        return self.operations.list_runs(
            query or RunQuery(**filters), tenant=tenant, before_id=before_id, limit=limit
        )

    def count_runs(
        self, query: RunQuery | None = None, *, tenant: Tenant = None, **filters: Unpack[RunFilters]
    ) -> dict[str, int]:
        """How many runs have each status, and how many are stuck (``list_runs``' other
        filters apply): ``{"running": 0, "waiting": 12, "done": 40, "failed": 2, ...}``."""
        return self.operations.count_runs(query or RunQuery(**filters), tenant=tenant)

    # -- answer links, signed callbacks and the console -----------------------------------------

    answer_link = _of("answers", AnswerLinks.link)
    reply_address = _of("replies", ReplyAddresses.address)

    def receive(self, name: str, headers: signing.Headers, body: bytes) -> receipt.Received:
        """Handle one signed callback to inbound ``name``: its answer (``status``, and the
        ``reason`` for logs). Never raises; the whole rule is ``inbound.receipt`` (for a
        mail inbound, ``inbound.mail_receipt``)."""
        replies = self.mounted.mail.get(name) if isinstance(name, str) else None
        if replies is not None:
            return mail_receipt.receive(self.mounted, self.replies, replies, headers, body)
        return receipt.receive(self.mounted, name, headers, body)

    def inbound_app(self) -> asgi.InboundApp:
        """The inbound endpoints as an ASGI application answering ``POST /NAME``:
        ``app.mount("/inbound", runner.inbound_app())``. Needs no web framework."""
        return asgi.InboundApp(self.mounted, self.receive)

    def console(self, **options: Any) -> Any:
        """The web console of this runner, an ASGI application to mount:
        ``app.mount("/flows", runner.console(principal=current_user))`` — the same as
        ``flowrunner.web.console.console(runner, ...)``, which says what ``options`` are.
        Needs ``pip install 'flowrunner[console]'``."""
        from flowrunner.web import console

        return console.console(self, **options)

    watch = _of("changes", Changes.watch)  # the ORM hook


def flow_runner(
    binding: FlowBinding,
    engine: sa.Engine,
    *,
    commands: Mapping[str, commands_mod.Command] | None = None,
    run_as: str = "automation",
    clock: Clock = utc_now,
    **options: Any,
) -> FlowRunner:
    """Mount a runner on the binding's resource (see ``FlowRunner`` for the options)."""
    return FlowRunner(binding, engine, commands=commands, run_as=run_as, clock=clock, **options)


__all__ = ["FlowRunner", "RunQuery", "flow_runner", "ops", "utc_now"]
