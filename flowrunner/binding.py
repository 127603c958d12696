"""The application's binding: which resource its flows run on, and what flow rows may say.

A ``FlowBinding`` is checked when constructed (names, kinds, notify rules) and again
against the database at startup (``binding.check(engine)``), so a misconfigured
binding fails with one ``BindingError`` sentence before any run starts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import pydantic
import sqlalchemy as sa

from flowrunner import calendars as calendars_mod
from flowrunner import errors, query
from flowrunner.delivery import channels as channels_mod
from flowrunner.flows import column_facts
from flowrunner.foundations import (
    durations,
    flow_columns,
    limits,
    retry_policy,
    sqltypes,
    suggest,
    templates,
)
from flowrunner.foundations.shapes import RecordId as RecordId
from flowrunner.foundations.shapes import StepKind as StepKind
from flowrunner.foundations.shapes import Tenant as Tenant

# A record's key (``RecordId``), a tenant (``Tenant``) and a step's kind (``StepKind``) as
# they pass between the layers: named in ``foundations.shapes``, and handed out here too.

# Kinds every binding has; an application's kinds may not reuse these names.
BUILTIN_KINDS: tuple[StepKind, ...] = (
    "set",
    "wait",
    "until",
    "branch",
    "waitFor",
    "notify",
    "subflow",
)

# The fixed columns of the flows and steps tables, as the seed names them.
FLOW_COLUMNS = flow_columns.FLOW_COLUMNS
STEP_COLUMNS = flow_columns.STEP_COLUMNS

# Placeholders a notify title may use besides the resource's own columns.
TITLE_PLACEHOLDERS = ("message", "flow", "title")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EVENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]*$")


def _name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{what} {value!r} must be a name of letters, digits and underscores")
    return value


class _Model(pydantic.BaseModel):
    """A frozen model whose construction errors are ``BindingError`` sentences."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: object) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise errors.BindingError(_sentences(type(self).__name__, exc)) from None


def _sentences(model: str, exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        # A place named by what the application passed (a mapping's key) is quoted unless
        # it is a plain name: the sentence stays on one line, whatever the key holds.
        where = ".".join(
            str(p) if isinstance(p, int) or str(p).isidentifier() else repr(p) for p in err["loc"]
        )
        message = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return f"{model}: " + "; ".join(parts).replace("\r", "\\r").replace("\n", "\\n")


class Kind(_Model):
    """An application kind: a command run on the record, maybe waiting for an event after.

    ``input`` names the steps-table columns the command receives; ``wait_for`` the
    binding event that ends the step; ``remind`` a command run while it waits.
    ``retry`` (a ``RetryPolicy``) replaces the runner's policy for this kind's command;
    ``timeout`` (``"30 seconds"``) is how long one attempt of its commands may take —
    an attempt that ends later counts as a failed one and is retried. ``by`` names the
    event field saying who answered: the step's mode then counts distinct answerers,
    not events. ``cancel`` names a command run once when a waiting step
    stops waiting for any reason but its answers (the run cancelled or failed, the
    wait given up, its condition holding), so the application can withdraw its asks.
    ``outside`` (True unless said) is whether its commands may reach outside the
    database — send an email, call an API: each such command then has a checkpoint of
    its own, committed before the next one starts, so a worker that dies repeats at
    most the command it was in. ``outside=False`` declares that they only write
    through ``ctx.conn``; the commands of a run's step then share one commit.
    ``answer`` names the event field that carries the decision (``"decision"``): with
    ``by``, the runner can then make answer links (``runner.answer_link``) whose event
    says who answered and what.
    ``records`` names a binding event the command records from its answer: the mapping
    it returns (with the record's key and tenant fields filled in) is that event's
    payload, validated by its shape and stored in the command's own transaction.
    ``run_as`` names the principal its commands run as (none: the runner's, or the
    record's tenant's service principal).
    ``concurrency`` (``5``) and ``rate`` (``"10/minute"``) limit its commands across
    every worker on one database: at most that many in flight, at most that many
    started in any such stretch of time; a run over the limit waits its turn.

    >>> Kind(command="request_approval", wait_for="po.decided", by="approver").by
    'approver'
    """

    command: str
    input: Sequence[str] = ()
    wait_for: str | None = None
    remind: str | None = None
    retry: retry_policy.RetryPolicy | None = None
    timeout: str | None = None
    by: str | None = None
    cancel: str | None = None
    outside: bool = True
    answer: str | None = None
    records: str | None = None
    run_as: str | None = None
    concurrency: int | None = None
    rate: str | None = None

    @pydantic.field_validator("concurrency", mode="before")
    @classmethod
    def _concurrency(cls, value: object) -> object:
        try:
            return None if value is None else limits.check_concurrency(value)
        except errors.BindingError as exc:
            raise ValueError(str(exc)) from None

    @pydantic.field_validator("rate")
    @classmethod
    def _rate(cls, value: str | None) -> str | None:
        try:
            return None if value is None else str(limits.parse_rate(value))
        except errors.BindingError as exc:
            raise ValueError(str(exc)) from None

    @property
    def limit(self) -> limits.Limit | None:
        """Its ``concurrency`` and ``rate`` as one ``Limit`` (None: unlimited)."""
        if self.concurrency is None and self.rate is None:
            return None
        return limits.Limit(self.concurrency, self.rate)

    @pydantic.field_validator("command", "remind", "cancel")
    @classmethod
    def _command(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a command name cannot be empty")
        return value

    @pydantic.field_validator("by")
    @classmethod
    def _by(cls, value: str | None) -> str | None:
        return None if value is None else _name(value, "the answerer field (by)")

    @pydantic.field_validator("answer")
    @classmethod
    def _answer(cls, value: str | None) -> str | None:
        return None if value is None else _name(value, "the answer field (answer)")

    @pydantic.field_validator("input")
    @classmethod
    def _inputs(cls, value: Sequence[str]) -> tuple[str, ...]:
        for column in value:
            _name(column, "input column")
            if column in STEP_COLUMNS:
                raise ValueError(
                    f"input column {column!r} is one of the steps table's fixed columns; "
                    "give the input its own column"
                )
        if len(set(value)) != len(value):
            raise ValueError("an input column is listed twice")
        return tuple(value)

    @pydantic.field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str | None) -> str | None:
        if value is not None:
            durations.parse_timeout(value)
        return value

    @pydantic.model_validator(mode="after")
    def _waiting_needs_wait(self) -> Kind:
        if self.wait_for is not None:
            return self
        if self.remind is not None:
            raise ValueError(
                f"remind {self.remind!r} needs wait_for: a kind reminds only while it waits"
            )
        if self.by is not None:
            raise ValueError(
                f"by {self.by!r} needs wait_for: it names who answered the awaited event"
            )
        if self.cancel is not None:
            raise ValueError(f"cancel {self.cancel!r} needs wait_for: a kind cancels only a wait")
        if self.answer is not None:
            raise ValueError(
                f"answer {self.answer!r} needs wait_for: it names a field of the awaited event"
            )
        return self

    @property
    def waits(self) -> bool:
        return self.wait_for is not None

    @property
    def timeout_delta(self) -> timedelta | None:
        """``timeout`` as elapsed time, or None when the kind has none."""
        return None if self.timeout is None else durations.parse_timeout(self.timeout)


class Event(_Model):
    """An event of the binding: the field naming the record (``key``), and maybe its
    ``shape``, a pydantic model whose fields are the event's fields (the plain form,
    ``events={"po.decided": "order"}``, is ``Event(key="order")``).

    With a shape, ``emit`` validates each payload against it (``EventRejected`` with the
    field errors, nothing written) and stores the model's fields as JSON; a step's
    condition may read only its fields (``event.decision``), and a kind's ``by`` must be
    one of them. ``emitted`` says the application emits the event itself
    (``runner.emit``); left False on an event no kind records (``Kind(records=...)``) and
    no inbound endpoint emits, the event check names it (``[api-event-unknown]``).

    >>> class Decided(pydantic.BaseModel):
    ...     order: int
    ...     decision: Literal["approved", "rejected"]
    >>> Event(key="order", shape=Decided).fields
    ('order', 'decision')
    """

    key: str
    shape: type[pydantic.BaseModel] | None = None
    emitted: bool = False

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    @pydantic.field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return _name(value, "the event's key field")

    @pydantic.field_validator("shape", mode="before")
    @classmethod
    def _shape(cls, value: object) -> object:
        if value is not None and not (
            isinstance(value, type) and issubclass(value, pydantic.BaseModel)
        ):
            raise ValueError(f"shape must be a pydantic model class, not {value!r}")
        return value

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The shape's fields as a payload names them (aliases where given); None
        without a shape (any field)."""
        if self.shape is None:
            return None
        return tuple(f.alias or name for name, f in self.shape.model_fields.items())


class NotifyRule(_Model):
    """Who a notify step's ``audience`` reaches: the user in column ``to``, on which channel.

    ``channel`` names one of the binding's ``channels``: a deliverer (``flowrunner
    deliver``, ``flowrunner worker --deliver``) sends its notices through it. Without
    one the application delivers them itself (``runner.notices(undelivered=True)``).
    """

    audience: str
    to: str
    title: str = "{message}"
    email: bool = False
    channel: str | None = None

    @pydantic.field_validator("audience")
    @classmethod
    def _audience(cls, value: str) -> str:
        return _name(value, "audience")

    @pydantic.field_validator("to")
    @classmethod
    def _to(cls, value: str) -> str:
        return _name(value, "column")

    @pydantic.field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        # The same safe templates as a notify step's message (``flowrunner.foundations.templates``).
        wrong = templates.mistake(value)
        if wrong is not None:
            raise ValueError(f"title {value!r} is not a valid template: {wrong}")
        return value

    def placeholders(self) -> tuple[str, ...]:
        return templates.placeholders(self.title)


class At(_Model):
    """A timer on a date or timestamp column of the resource (``FlowBinding.at``).

    ``command`` runs once the record's ``column`` instant has passed, on the record as it
    is then, if it matches ``when`` (the query language over the resource's columns;
    none: always) — once for each instant the column holds (``flowrunner.timers``).
    ``retry`` replaces the runner's policy for the command; ``timeout`` (``"30
    seconds"``) is how long one attempt may take. ``run_as`` names the principal the
    command runs as (none: the runner's when it is granted the command, else the first
    declared principal that is).

    >>> At(column="warn_at", command="warn_sla", when="status = open").when
    'status = open'
    """

    column: str
    command: str
    when: str | None = None
    retry: retry_policy.RetryPolicy | None = None
    timeout: str | None = None
    run_as: str | None = None

    @pydantic.field_validator("column")
    @classmethod
    def _column(cls, value: str) -> str:
        return _name(value, "column")

    @pydantic.field_validator("command")
    @classmethod
    def _command(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a command name cannot be empty")
        return value

    @pydantic.field_validator("when")
    @classmethod
    def _when(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            query.parse(value)
        except errors.QueryError as exc:
            raise ValueError(f"when {value!r} is not a condition: {exc}") from None
        return value

    @pydantic.field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str | None) -> str | None:
        if value is not None:
            durations.parse_timeout(value)
        return value

    @property
    def timeout_delta(self) -> timedelta | None:
        return None if self.timeout is None else durations.parse_timeout(self.timeout)

    def condition(self, columns: Mapping[str, query.ColumnType]) -> query.Condition | None:
        """``when`` read against the resource's columns (None: the timer always runs);
        ``BindingError`` when it does not read."""
        if self.when is None:
            return None
        try:
            return query.parse(self.when, columns)
        except errors.QueryError as exc:
            raise errors.BindingError(
                f"the timer at {self.column!r}: when {self.when!r} does not fit the "
                f"resource's columns: {exc}"
            ) from None

    def check(self, columns: Mapping[str, query.ColumnType], resource: str) -> None:
        """``BindingError`` unless ``column`` is a date or timestamp column of the resource
        and ``when`` reads against its columns."""
        where = f"the resource table {resource!r}"
        _need(columns, self.column, where, f"which the timer at {self.column!r} waits for")
        kind = columns[self.column]
        if kind not in (query.ColumnType.DATE, query.ColumnType.TIMESTAMP):
            raise errors.BindingError(
                f"the timer at {self.column!r} needs a date or timestamp column, but "
                f"{resource}.{self.column} holds {kind.noun}"
            )
        self.condition(columns)


@dataclass(frozen=True)
class Schema:
    """What ``FlowBinding.check`` learned from the database, kept by the runner."""

    # Name → query type, with each column's facts (what a set step may write into it).
    resource_columns: column_facts.ResourceColumns
    flows_columns: frozenset[str]
    steps_columns: frozenset[str]


class FlowBinding(_Model):
    """Mounts flows on one resource table; see the product contract for each field.

    ``publish`` says when an edit of a flow's rows reaches the runs that start:
    ``"on_save"`` (the default) — every save, as the rows are, each new state of a flow
    kept as a version when a run first starts on it or ``runner.publish`` is called;
    ``"explicit"`` — the rows are a draft, and runs start on the flow's latest version
    published with ``runner.publish`` (a flow never published starts nothing).

    Business time (``2 business days`` wherever a step reads a duration) is counted on a
    calendar (``flowrunner.calendars.Calendar``): ``calendars`` names them, ``calendar``
    is the default one, a flow row may choose another in its ``calendar`` column, and
    ``calendar_for(tenant)`` gives each tenant its own (it wins over the default, a
    flow's own choice wins over both). ``holidays_table`` names the application's table
    of holidays (a ``day`` date column; optional ``calendar`` and tenant columns narrow
    a row to one calendar or tenant), read by every worker and added to the calendars.

    The console's page of a record shows its ``record_columns`` (by default the key,
    the ``record_search`` columns and the columns flows set); ``record_search`` names
    the columns people know a record by (``number``: ``PO-3299``), which the console's
    search finds it by, besides its key.

    How people name the resource and its records: ``label`` (``"Purchase orders"``; the
    table's name without one) heads the console's pages, and ``record_label`` (a
    template over the record's columns, ``"{number}"``) names one record wherever a page
    or a history names it; a record whose label would be empty is named by its id.

    >>> b = FlowBinding(resource="walk_order", flows_table="f", steps_table="s",
    ...                 label="Purchase orders", record_label="{number}")
    >>> b.resource_label, b.record_name({"id": 7, "number": "PO-7"}, 7), b.record_name(None, 7)
    ('Purchase orders', 'PO-7', '7')
    """

    resource: str
    flows_table: str
    steps_table: str
    events: dict[str, str | Event] = pydantic.Field(default_factory=dict)
    kinds: dict[StepKind, Kind] = pydantic.Field(default_factory=dict)
    set_columns: Sequence[str] = ()
    notify: Sequence[NotifyRule] = ()
    tenant: str | None = None
    key: str = "id"
    at: Sequence[At] = ()
    publish: Literal["on_save", "explicit"] = "on_save"
    calendars: dict[str, calendars_mod.Calendar] = pydantic.Field(default_factory=dict)
    calendar: str | None = None
    calendar_for: Callable[[Tenant], calendars_mod.Calendar] | None = None
    holidays_table: str | None = None
    label: str | None = None
    record_label: str | None = None
    record_columns: Sequence[str] = ()
    record_search: Sequence[str] = ()
    # Judged by ``_check_channels``, in a sentence (pydantic would list every type it tried).
    channels: dict[str, pydantic.SkipValidation[channels_mod.Channel]] = pydantic.Field(
        default_factory=dict
    )
    delivery_retry: retry_policy.RetryPolicy = channels_mod.DELIVERY_RETRY

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    @pydantic.field_validator("resource", "flows_table", "steps_table", "key")
    @classmethod
    def _table(cls, value: str) -> str:
        return _name(value, "name")

    @pydantic.field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if not text or "\n" in text or len(text) > _LONGEST_LABEL:
            raise ValueError(
                f"label {value!r} must be one line of 1 to {_LONGEST_LABEL} characters, "
                'as people name the resource ("Purchase orders")'
            )
        return text

    @pydantic.field_validator("record_label")
    @classmethod
    def _record_label(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # The same safe templates as a notify rule's title (``foundations.templates``).
        wrong = templates.mistake(value)
        if wrong is not None:
            raise ValueError(f"record_label {value!r} is not a valid template: {wrong}")
        if not templates.placeholders(value) or "\n" in value:
            raise ValueError(
                f"record_label {value!r} must name a record by its columns on one line, "
                'e.g. "{number}" or "{number} ({requester_id})"'
            )
        return value

    @property
    def resource_label(self) -> str:
        """How people name the resource: ``label``, or the table's name."""
        return self.label or self.resource

    def record_name(self, record: Mapping[str, object] | None, record_id: object) -> str:
        """How people name one record: ``record_label`` filled from its columns, or its
        id (no label, no record, or a label its values leave empty)."""
        if self.record_label is None or record is None:
            return str(record_id)
        values = {k: "" if v is None else v for k, v in record.items()}
        said = templates.render(self.record_label, values).strip()
        return said or str(record_id)

    @pydantic.field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        return None if value is None else _name(value, "tenant column")

    @pydantic.field_validator("events")
    @classmethod
    def _events(cls, value: dict[str, str | Event]) -> dict[str, str | Event]:
        for event, field in value.items():
            if not _EVENT.match(event):
                raise ValueError(f"event name {event!r} must be letters, digits, '.', '_' or '-'")
            if isinstance(field, str):
                _name(field, f"the field of event {event!r}")
        return value

    @pydantic.field_validator("set_columns")
    @classmethod
    def _set_columns(cls, value: Sequence[str]) -> tuple[str, ...]:
        for column in value:
            _name(column, "set column")
        if len(set(value)) != len(value):
            raise ValueError("a set column is listed twice")
        return tuple(value)

    @pydantic.field_validator("record_columns", "record_search")
    @classmethod
    def _record_columns(cls, value: Sequence[str]) -> tuple[str, ...]:
        for column in value:
            _name(column, "record column")
        if len(set(value)) != len(value):
            raise ValueError("a record column is listed twice")
        return tuple(value)

    @pydantic.field_validator("notify")
    @classmethod
    def _notify(cls, value: Sequence[NotifyRule]) -> tuple[NotifyRule, ...]:
        return tuple(value)

    @pydantic.field_validator("at")
    @classmethod
    def _at(cls, value: Sequence[At]) -> tuple[At, ...]:
        columns = [timer.column for timer in value]
        for column in columns:
            if columns.count(column) > 1:
                raise ValueError(f"column {column!r} has more than one timer (at)")
        return tuple(value)

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> FlowBinding:
        if len({self.resource, self.flows_table, self.steps_table}) != 3:
            raise ValueError("the resource, flows and steps tables must be three different tables")
        for name, kind in self.kinds.items():
            _name(name, "kind")
            if name.casefold() in {builtin.casefold() for builtin in BUILTIN_KINDS}:
                # Built-in kinds are read in any case, so ``Wait`` would be ``wait``.
                raise ValueError(
                    f"kind {name!r} is a built-in kind ({', '.join(BUILTIN_KINDS)}); "
                    "give the application's kind another name"
                )
            if kind.wait_for is not None and kind.wait_for not in self.events:
                raise ValueError(
                    f"kind {name!r} waits for {kind.wait_for!r}, which is not one of the "
                    f"binding's events ({', '.join(self.events) or 'none'})"
                )
            if kind.answer is not None:
                self._check_answer(name, kind)
            self._check_kind_events(name, kind)
        audiences = [rule.audience for rule in self.notify]
        for audience in audiences:
            if audiences.count(audience) > 1:
                raise ValueError(f"audience {audience!r} has more than one notify rule")
        for column in (self.key, self.tenant):
            if column is not None and column in self.set_columns:
                raise ValueError(f"set column {column!r} is the key or tenant column")
        self._check_calendars()
        self._check_channels()
        return self

    def _check_answer(self, name: str, kind: Kind) -> None:
        # The answer field is its own: not the answerer's, the record's or the tenant's.
        assert kind.wait_for is not None and kind.answer is not None
        taken = {
            kind.by: "the answerer field (by)",
            self.event_field(kind.wait_for): f"the field naming the record in {kind.wait_for!r}",
            self.tenant: "the tenant column",
        }
        if kind.answer in taken:
            raise ValueError(
                f"kind {name!r}: answer {kind.answer!r} is {taken[kind.answer]}; "
                "name the event field that carries the decision"
            )

    def _check_kind_events(self, name: str, kind: Kind) -> None:
        """A kind's ``by`` is a field of its event's shape; what it records is an event."""
        if kind.wait_for is not None and kind.by is not None:
            fields = self.event(kind.wait_for).fields
            if fields is not None and kind.by not in fields:
                raise ValueError(
                    f"kind {name!r}: by {kind.by!r} is not a field of {kind.wait_for} "
                    f"— {', '.join(fields)}"
                )
        if kind.wait_for is not None and kind.answer is not None:
            fields = self.event(kind.wait_for).fields
            if fields is not None and kind.answer not in fields:
                raise ValueError(
                    f"kind {name!r}: answer {kind.answer!r} is not a field of "
                    f"{kind.wait_for} — {', '.join(fields)}"
                )
        if kind.records is not None and kind.records not in self.events:
            raise ValueError(
                f"kind {name!r} records {kind.records!r}, which is not one of the "
                f"binding's events ({', '.join(self.events) or 'none'})"
            )

    def _check_channels(self) -> None:
        for name, channel in self.channels.items():
            _name(name, "channel")
            kinds = (channels_mod.Smtp, channels_mod.Webhook, channels_mod.Deliver)
            if not isinstance(channel, kinds):
                raise ValueError(
                    f"channel {name!r} is not a flowrunner.delivery Smtp, Webhook or Deliver"
                )
        for rule in self.notify:
            if rule.channel is not None and rule.channel not in self.channels:
                known = ", ".join(self.channels) or "none"
                hint = suggest.did_you_mean(rule.channel, self.channels)
                raise ValueError(
                    f"the notify rule of audience {rule.audience!r} sends through channel "
                    f"{rule.channel!r}, which is not one of the binding's channels "
                    f"({known}){hint}"
                )

    def _check_calendars(self) -> None:
        for name, found in self.calendars.items():
            if not isinstance(found, calendars_mod.Calendar):
                raise ValueError(f"calendar {name!r} is not a flowrunner.calendars.Calendar")
            if found.name != name:
                raise ValueError(
                    f"calendar {name!r} is named {found.name!r}; name it as the binding does"
                )
        if self.calendar is not None and self.calendar not in self.calendars:
            known = ", ".join(self.calendars) or "none"
            raise ValueError(
                f"the default calendar {self.calendar!r} is not one of the binding's "
                f"calendars ({known})"
            )
        if self.calendar_for is not None and self.tenant is None:
            raise ValueError("calendar_for gives each tenant a calendar: it needs a tenant column")
        if self.holidays_table is not None:
            _name(self.holidays_table, "holidays table")
            if self.holidays_table in (self.resource, self.flows_table, self.steps_table):
                raise ValueError("the holidays table must be a table of its own")

    # -- what later layers ask of the binding --------------------------------------

    @property
    def kind_names(self) -> tuple[StepKind, ...]:
        return (*BUILTIN_KINDS, *self.kinds)

    @property
    def input_columns(self) -> tuple[str, ...]:
        """Every app kind's input columns, each once, in binding order."""
        seen: dict[str, None] = {}
        for kind in self.kinds.values():
            seen.update(dict.fromkeys(kind.input))
        return tuple(seen)

    @property
    def audiences(self) -> tuple[str, ...]:
        return tuple(rule.audience for rule in self.notify)

    @property
    def has_calendars(self) -> bool:
        """Whether any flow of this binding may count business time."""
        return bool(self.calendars) or self.calendar_for is not None

    def calendar_applies(self, name: str | None) -> bool:
        """Whether a flow naming calendar ``name`` (None: none) counts business time on one."""
        if name is not None:
            return name in self.calendars
        return self.calendar is not None or self.calendar_for is not None

    def calendar_of(self, name: str | None, tenant: Tenant = None) -> calendars_mod.Calendar | None:
        """The calendar a flow counts business time on: the one it names, else its
        tenant's (``calendar_for``), else the binding's default; None when none applies.
        ``BindingError`` when ``calendar_for`` gives no calendar."""
        if name is not None:
            return self.calendars.get(name)
        if self.calendar_for is not None and tenant is not None:
            found = self.calendar_for(tenant)
            if not isinstance(found, calendars_mod.Calendar):
                raise errors.BindingError(
                    f"calendar_for({tenant!r}) gave {found!r}, not a flowrunner.calendars.Calendar"
                )
            return found
        return None if self.calendar is None else self.calendars[self.calendar]

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The resource's columns a record's page shows: ``record_columns`` if given,
        else the key, the columns people look a record up by (``record_search``), the
        columns flows set and the timers' columns, each once."""
        if self.record_columns:
            return tuple(self.record_columns)
        found = (self.key, *self.record_search, *self.set_columns, *(t.column for t in self.at))
        return tuple(dict.fromkeys(found))

    def timer_at(self, column: str) -> At | None:
        """The timer waiting for ``column``, or None."""
        return next((timer for timer in self.at if timer.column == column), None)

    def rule_for(self, audience: str) -> NotifyRule:
        for rule in self.notify:
            if rule.audience == audience:
                return rule
        raise errors.BindingError(f"no notify rule has audience {audience!r}")

    def event(self, event: str) -> Event:
        """``event`` as declared, the plain form (``"order"``) as ``Event(key="order")``."""
        try:
            found = self.events[event]
        except KeyError:
            known = ", ".join(self.events) or "none"
            raise errors.BindingError(
                f"event {event!r} is not one of the binding's events ({known})"
            ) from None
        return Event(key=found) if isinstance(found, str) else found

    def event_field(self, event: str) -> str:
        """The field of ``event``'s payload that names the record (``"order"``)."""
        return self.event(event).key

    # -- against the database ------------------------------------------------------

    def resource_columns(
        self, bind: sa.Engine | sa.Connection | sa.MetaData
    ) -> column_facts.ResourceColumns:
        """The resource's columns and their query-language types, read from ``bind``."""
        return self.check(bind).resource_columns

    def check(self, bind: sa.Engine | sa.Connection | sa.MetaData) -> Schema:
        """Check the binding against the database (or a MetaData); raise ``BindingError``.

        Reads the tables by reflection, so it works for tables the application
        already has as well as those declared with ``flowrunner.tables``.
        """
        if not isinstance(bind, sa.MetaData):
            # The store reads the database; the binding, below it, only judges what it read.
            from flowrunner.store import app_tables

            bind = app_tables.reflect(bind, self).metadata
        resource = _columns(bind, self.resource, "resource")
        flows = _columns(bind, self.flows_table, "flows")
        steps = _columns(bind, self.steps_table, "steps")
        for column in (self.key, *self.set_columns):
            _need(resource, column, f"the resource table {self.resource!r}", _use(self, column))
        for column in self.record_columns:
            _need(
                resource,
                column,
                f"the resource table {self.resource!r}",
                "which a record's page shows (record_columns)",
            )
        for column in self.record_search:
            _need(
                resource,
                column,
                f"the resource table {self.resource!r}",
                "which people look a record up by (record_search)",
            )
        for name, kind in self.kinds.items():
            for column in kind.input:
                _need(
                    steps,
                    column,
                    f"the steps table {self.steps_table!r}",
                    f"which kind {name!r} reads",
                )
        for column in FLOW_COLUMNS:
            if column in flow_columns.LATER_FLOW_COLUMNS:
                continue  # used when there: a row that sets one elsewhere is refused
            _need(flows, column, f"the flows table {self.flows_table!r}", "a fixed flow column")
        for column in STEP_COLUMNS:
            if column in flow_columns.LATER_STEP_COLUMNS:
                continue  # used when there: a row that sets one elsewhere is refused
            _need(steps, column, f"the steps table {self.steps_table!r}", "a fixed step column")
        for name in templates.placeholders(self.record_label or ""):
            _need(
                resource, name, f"the resource table {self.resource!r}", "which record_label uses"
            )
        for rule in self.notify:
            where = f"the resource table {self.resource!r}"
            _need(resource, rule.to, where, f"which notify rule {rule.audience!r} sends to")
            for name in rule.placeholders():
                if name not in TITLE_PLACEHOLDERS:
                    _need(
                        resource, name, where, f"which notify rule {rule.audience!r}'s title uses"
                    )
        resource_columns = column_facts.ResourceColumns.of_table(bind.tables[self.resource])
        for timer in self.at:
            timer.check(resource_columns, self.resource)
        if self.tenant is not None:
            for table, cols, what in (
                (self.resource, resource, "resource"),
                (self.flows_table, flows, "flows"),
                (self.steps_table, steps, "steps"),
            ):
                _need(cols, self.tenant, f"the {what} table {table!r}", "the tenant column")
        return Schema(
            resource_columns=resource_columns,
            flows_columns=frozenset(flows),
            steps_columns=frozenset(steps),
        )


# The longest label the console's headings show whole.
_LONGEST_LABEL = 80


def _use(binding: FlowBinding, column: str) -> str:
    return "the key column" if column == binding.key else "a set column"


def _need(columns: Mapping[str, object], column: str, where: str, why: str) -> None:
    if column not in columns:
        hint = suggest.did_you_mean(column, columns)
        raise errors.BindingError(f"{where} has no column {column!r}, {why}{hint}")


def _columns(metadata: sa.MetaData, table: str, what: str) -> dict[str, sqltypes.SqlType]:
    """Column name -> SQLAlchemy type of ``table`` in ``metadata``."""
    found = metadata.tables.get(table)
    if found is None:
        raise errors.BindingError(f"the {what} table {table!r} is not in the MetaData")
    return {str(c.name): c.type for c in found.columns}
