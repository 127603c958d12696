"""Flow and step rows as pydantic models, and the checks one row can make on its own.

The models read what users typed (blank text is empty, ``"3"`` is position 3); the
checks then hold each row to its kind and the binding, returning every problem as a
``FieldError`` sentence. Checks across rows (gotos, a branch alone, unique names)
live in ``flowrunner.flows.validation``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import Annotated, Any, TypeGuard, TypeVar

import pydantic
import pydantic_core

from flowrunner import binding as binding_mod
from flowrunner import calendars, errors, query
from flowrunner.flows import column_facts, spelling
from flowrunner.foundations import durations, modes, sanitize, shapes, templates
from flowrunner.jobs import schedules

STARTS = spelling.STARTS
MESSAGE_LIMIT = 500
NAME_LIMIT = 200

# A step that waits for something outside the flow may tell an audience once it has
# waited this long (``escalate``), and keep waiting.
ESCALATION = ("escalate", "escalate_to")
# Built-in kind -> (columns it needs, columns it may have); title is open to every kind.
BUILTIN_READS: dict[binding_mod.StepKind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "set": (("field", "value"), ()),
    "wait": (("duration",), ()),
    "until": (("field",), ("duration", *ESCALATION)),
    "branch": (("condition",), ("goto",)),
    "waitFor": (("event",), ("duration", *ESCALATION)),
    "notify": (("audience", "message"), ()),
    # The manual flow it runs (by name) in ``value``; ``field``: the column holding the
    # id of the record it runs on (empty: this run's record); ``duration``: when it gives
    # up waiting; ``on_failure``: where the run goes when the subflow fails.
    "subflow": (("value",), ("field", "duration", "on_failure")),
}
# The built-in kind that runs another flow of the resource and waits until it ends.
SUBFLOW = "subflow"
# What a waiting app-kind step may also say.
WAITING_EXTRAS = ("mode", "condition", "duration", "remind", *ESCALATION)
# What a step that runs a command may also say: where the run goes when it fails for good.
ON_FAILURE = "on_failure"
STEP_READ_COLUMNS = tuple(c for c in binding_mod.STEP_COLUMNS if c not in ("id", "flow_id"))
# The name a branch's condition and a notify step's message read the latest failure by:
# what the command of the last step that ran one said when it failed for good and the
# run took its ``on_failure`` (empty otherwise). A record's own column of that name wins.
FAILURE = "failure"


def _text(value: object) -> str | None:
    """What a user typed, as text; blank is empty (None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, str):
        if "\x00" in value:
            # PostgreSQL cannot store it; say so rather than fail at the write.
            raise pydantic_core.PydanticCustomError(
                "type_invalid", "the text holds a NUL character, which cannot be stored"
            )
        return value.strip() or None
    raise pydantic_core.PydanticCustomError(
        "type_invalid", "{text} is not text", {"text": repr(value)}
    )


# Positions and gotos are stored as 32-bit integers on every database; ids may be 64-bit.
WHOLE_LIMIT = 2**31
ID_LIMIT = 2**63
# A whole number as people type it: ASCII digits as ``str(int)`` prints them (a minus
# but no plus, no leading zeros, no ``_``), blanks around it allowed. ``int()`` and
# ``re``'s ``\d`` would also take ``+3``, ``1_000`` and ``٣``.
WHOLE_TEXT = re.compile(r"0|-?[1-9][0-9]*")


def whole(value: object, *, limit: int = WHOLE_LIMIT) -> int | None:
    """A whole number, from an int or from text such as ``" 3 "``; ValueError if it is not.

    Blank text is None. Text must be the digits ``str(int)`` prints; a float or Decimal
    must have no fraction; ``True`` is not a number here. The one rule for positions,
    gotos and ids, wherever they are typed.

    >>> whole("42"), whole(" -3 "), whole(7.0), whole("")
    (42, -3, 7, None)
    >>> for text in ("٣", "+3", "007", "1_000", "3.5"):
    ...     try:
    ...         whole(text)
    ...     except ValueError as error:
    ...         print(error)
    '٣' is not a whole number
    '+3' is not a whole number
    '007' is not a whole number
    '1_000' is not a whole number
    '3.5' is not a whole number
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number: int | None = None
    too_large = False
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif _integral(value):
        too_large = isinstance(value, Decimal) and value.adjusted() > len(str(limit))
        number = None if too_large else int(value)
    elif isinstance(value, str) and WHOLE_TEXT.fullmatch(value.strip()):
        digits = value.strip()
        # Checked before int(), which refuses (or is slow on) thousands of digits.
        too_large = len(digits.lstrip("-")) > len(str(limit))
        number = None if too_large else int(digits)
    if number is None and not too_large:
        raise pydantic_core.PydanticCustomError(
            "type_invalid", "{text} is not a whole number", {"text": _shown(value)}
        )
    if number is None or not -limit <= number < limit:
        raise pydantic_core.PydanticCustomError(
            "type_invalid", "{text} is too large a number", {"text": _shown(value)}
        )
    return number


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _id(value: object) -> int | None:
    return whole(value, limit=ID_LIMIT)


def _integral(value: object) -> TypeGuard[float | Decimal]:
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer()
    return isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value()


def read_ids(
    row: shapes.Row, limits: Mapping[str, int]
) -> tuple[shapes.RowDict, list[errors.FieldError]]:
    """``row`` with its ids as integers, and the problems of those that are not.

    ``limits`` names the id columns and the bound of each (its column's integer size).
    ``"7"`` from a web form is the id 7; ``"٣"``, ``"7a"`` or ``7.5`` are refused with the
    field. A bad id is left out of the row returned.

    >>> found, problems = read_ids({"id": "7", "flow_id": "x"}, {"id": 2**31, "flow_id": 2**31})
    >>> found, [(p.field, p.message) for p in problems]
    ({'id': 7}, [('flow_id', "'x' is not a whole number")])
    """
    out = dict(row)
    problems: list[errors.FieldError] = []
    for column, limit in limits.items():
        if column not in row:
            continue
        try:
            out[column] = whole(row[column], limit=limit)
        except ValueError as exc:
            del out[column]
            problems.append(errors.FieldError(column, _message(exc), "type_invalid"))
    return out, problems


def _message(exc: ValueError) -> str:
    if isinstance(exc, pydantic_core.PydanticCustomError):
        return exc.message()
    return str(exc)  # pragma: no cover - whole raises only PydanticCustomError


def _flag(value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    raise pydantic_core.PydanticCustomError(
        "type_invalid", "{text} is not true or false", {"text": repr(value)}
    )


def _kind(value: object) -> str | None:
    return spelling.canonical_kind(_text(value))


def _start(value: object) -> str | None:
    return spelling.canonical_start(_text(value))


def _mode(value: object) -> str | None:
    return spelling.canonical_mode(_text(value))


Text = Annotated[str | None, pydantic.BeforeValidator(_text)]
# flowrunner's own words, read in any case and kept in their one spelling (``spelling``).
KindText = Annotated[str | None, pydantic.BeforeValidator(_kind)]
StartText = Annotated[str | None, pydantic.BeforeValidator(_start)]
ModeText = Annotated[str | None, pydantic.BeforeValidator(_mode)]
Whole = Annotated[int | None, pydantic.BeforeValidator(whole)]
Id = Annotated[int | None, pydantic.BeforeValidator(_id)]
Flag = Annotated[bool | None, pydantic.BeforeValidator(_flag)]


class _Row(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")

    id: Any = None

    def present(self, column: str) -> Any:
        return getattr(self, column, None)


_M = TypeVar("_M", bound=_Row)


class FlowRow(_Row):
    """A flow row as typed: ``name, start`` and optionally ``condition, changes, active,
    calendar`` and ``schedule`` (a flow that starts on a schedule)."""

    name: Text = None
    start: StartText = None
    condition: Text = None
    changes: Text = None
    active: Flag = None
    calendar: Text = None
    schedule: Text = None


class StepRow(_Row):
    """A step row as typed; an app kind's input columns are added per binding."""

    flow_id: Id = None
    position: Whole = None
    kind: KindText = None
    title: Text = None
    duration: Text = None
    field: Text = None
    value: Text = None
    condition: Text = None
    goto: Whole = None
    event: Text = None
    audience: Text = None
    message: Text = None
    mode: ModeText = None
    remind: Text = None
    on_failure: Whole = None
    escalate: Text = None
    escalate_to: Text = None


@functools.lru_cache(maxsize=64)
def step_model(inputs: tuple[str, ...]) -> type[StepRow]:
    """The step model with the given input columns (as text)."""
    if not inputs:
        return StepRow
    fields: dict[str, Any] = {column: (Text, None) for column in inputs}
    model: type[StepRow] = pydantic.create_model("StepRow", __base__=StepRow, **fields)
    return model


def _read(
    model: type[_M], row: shapes.Row, allowed: frozenset[str]
) -> tuple[_M, list[errors.FieldError]]:
    """The model of ``row`` and the problems of reading it; a bad field reads as empty."""
    problems = [
        errors.FieldError(
            str(key),
            f"'{key}' is not a column of this table{spelling.did_you_mean(str(key), allowed)}",
            "column_unknown",
        )
        for key in row
        if key not in allowed
    ]
    data = {k: v for k, v in row.items() if k in allowed}
    try:
        return model.model_validate(data), problems
    except pydantic.ValidationError as exc:
        bad = set()
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "row"
            bad.add(field)
            code = err["type"] if err["type"] == "type_invalid" else "type_invalid"
            problems.append(errors.FieldError(field, str(err["msg"]), code))
        return model.model_validate({k: v for k, v in data.items() if k not in bad}), problems


def read_flow(
    binding: binding_mod.FlowBinding, row: shapes.Row, extra: Collection[str] = ()
) -> tuple[FlowRow, list[errors.FieldError]]:
    """The flow model of ``row``; ``extra`` are further columns its table has (not read)."""
    allowed = frozenset(binding_mod.FLOW_COLUMNS) | _tenant(binding) | frozenset(extra)
    return _read(FlowRow, row, allowed)


def read_step(
    binding: binding_mod.FlowBinding, row: shapes.Row, extra: Collection[str] = ()
) -> tuple[StepRow, list[errors.FieldError]]:
    """The step model of ``row``; ``extra`` are further columns its table has (not read)."""
    inputs = binding.input_columns
    allowed = frozenset(binding_mod.STEP_COLUMNS) | frozenset(inputs) | _tenant(binding)
    allowed |= frozenset(extra)
    return _read(step_model(inputs), row, allowed)


def _tenant(binding: binding_mod.FlowBinding) -> frozenset[str]:
    return frozenset() if binding.tenant is None else frozenset({binding.tenant})


# -- one flow row ------------------------------------------------------------------


def flow_errors(
    binding: binding_mod.FlowBinding,
    row: shapes.Row,
    columns: Mapping[str, query.ColumnType],
    *,
    extra: Collection[str] = (),
) -> list[errors.FieldError]:
    """Every problem of one flow row on its own (not its name's uniqueness)."""
    flow, problems = read_flow(binding, row, extra)
    add = problems.append
    if flow.name is None:
        add(errors.FieldError("name", "a flow needs a name", "column_required"))
    elif len(flow.name) > NAME_LIMIT:
        message = f"a flow's name has at most {NAME_LIMIT} characters"
        add(errors.FieldError("name", message, "name_too_long"))
    if flow.start is None:
        message = "say when the flow starts: created, updated, manual or schedule"
        add(errors.FieldError("start", message, "column_required"))
    elif flow.start not in STARTS:
        message = f"'{flow.start}' is not a start — write created, updated, manual or schedule"
        message += spelling.did_you_mean(flow.start, STARTS, joint="; ")
        add(errors.FieldError("start", message, "start_invalid"))
    if flow.condition is not None:
        add_condition(problems, flow.condition, columns, event=False)
    if flow.changes is not None:
        if flow.start != "updated":
            message = "only a flow that starts on 'updated' can name the column an update changes"
            add(errors.FieldError("changes", message, "changes_without_update"))
        add_changes(problems, binding, flow.changes, columns)
    add_schedule(problems, flow)
    if binding.tenant is not None and _blank(row.get(binding.tenant)):
        message = "a flow belongs to a tenant; name it"
        add(errors.FieldError(binding.tenant, message, "column_required"))
    if flow.calendar is not None and flow.calendar not in binding.calendars:
        known = ", ".join(binding.calendars) or "none"
        message = f"'{flow.calendar}' is not one of the binding's calendars ({known})"
        message += spelling.did_you_mean(flow.calendar, binding.calendars)
        add(errors.FieldError("calendar", message, "calendar_unknown"))
    return _ordered(problems)


def add_schedule(problems: list[errors.FieldError], flow: FlowRow) -> None:
    """A flow that starts on a schedule needs one that reads; no other flow has one."""
    if "schedule" in _fields(problems):
        return
    if flow.schedule is None:
        if flow.start == "schedule":
            message = (
                "a flow that starts on a schedule needs one: five cron fields such as "
                "'0 6 * * mon', then a time zone such as 'Europe/Berlin' (UTC without one)"
            )
            problems.append(errors.FieldError("schedule", message, "column_required"))
        return
    if flow.start != "schedule":
        message = "only a flow that starts on 'schedule' has a schedule"
        problems.append(errors.FieldError("schedule", message, "schedule_without_start"))
        return
    try:
        schedules.flow_schedule(flow.schedule)
    except errors.BindingError as exc:
        problems.append(errors.FieldError("schedule", str(exc), "schedule_invalid"))


# -- one step row ------------------------------------------------------------------


def reads(
    binding: binding_mod.FlowBinding, kind: binding_mod.StepKind
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The columns a kind needs and the ones it may also have (besides ``title``)."""
    if kind in BUILTIN_READS:
        return BUILTIN_READS[kind]
    app = binding.kinds[kind]
    optional: tuple[str, ...] = (ON_FAILURE,)
    if app.waits:
        optional += ("mode", "condition", "duration") + (("remind",) if app.remind else ())
        optional += ESCALATION
    return tuple(app.input), optional


def with_failure(columns: Mapping[str, query.ColumnType]) -> dict[str, query.ColumnType]:
    """The columns a branch's condition reads: the record's, and ``failure`` (text)
    unless the record has a column of that name.

    >>> with_failure({"status": query.ColumnType.TEXT})["failure"].value
    'text'
    """
    return {FAILURE: query.ColumnType.TEXT, **columns}


def step_errors(
    binding: binding_mod.FlowBinding,
    row: shapes.Row,
    columns: Mapping[str, query.ColumnType],
    *,
    need_flow: bool = True,
    extra: Collection[str] = (),
) -> list[errors.FieldError]:
    """Every problem of one step row on its own (not its goto's target).

    ``extra`` are columns the steps table has beyond flowrunner's (the application's
    own, such as audit columns): allowed, and not read.
    """
    step, problems = read_step(binding, row, extra)
    add = problems.append
    if need_flow and step.flow_id is None and "flow_id" not in _fields(problems):
        message = "a step belongs to a flow; name its flow"
        add(errors.FieldError("flow_id", message, "column_required"))
    if step.position is None:
        if "position" not in _fields(problems):
            add(errors.FieldError("position", "a step needs a position, e.g. 1", "column_required"))
    elif step.position < 0:
        message = "a position is a whole number of 0 or more"
        add(errors.FieldError("position", message, "position_invalid"))
    if step.goto is not None and step.goto < 0:
        message = "a goto names a position, a whole number of 0 or more"
        add(errors.FieldError("goto", message, "goto_invalid"))
    if step.on_failure is not None and step.on_failure < 0:
        message = "on_failure names a position, a whole number of 0 or more"
        add(errors.FieldError(ON_FAILURE, message, "on_failure_invalid"))
    if step.kind is None:
        if "kind" not in _fields(problems):
            add(errors.FieldError("kind", "a step needs a kind", "column_required"))
        return _ordered(problems)
    if step.kind not in binding.kind_names:
        known = ", ".join(binding.kind_names)
        message = f"kind '{step.kind}' is not in the binding — use one of {known}"
        message += spelling.did_you_mean(step.kind, binding.kind_names, joint="; ")
        add(errors.FieldError("kind", message, "kind_unknown"))
        return _ordered(problems)
    needed, optional = reads(binding, step.kind)
    skip = _fields(problems)
    for column in needed:
        if column not in skip and step.present(column) is None:
            message = f"{_a(step.kind)} step needs '{column}'"
            add(errors.FieldError(column, message, "column_required"))
    open_columns = {*needed, *optional, "title"}
    for column in (*STEP_READ_COLUMNS, *binding.input_columns):
        if column in open_columns or column in ("position", "kind"):
            continue
        if step.present(column) is not None:
            add(_not_read(binding, step.kind, column))
    for column in sorted(open_columns & set(type(step).model_fields)):
        value = step.present(column)
        if value is not None and column not in skip:
            _check_value(problems, binding, step, column, value, columns)
    if "escalate" in open_columns:
        _check_escalation(problems, step, skip)
    return _ordered(problems)


def _check_escalation(problems: list[errors.FieldError], step: StepRow, skip: set[str]) -> None:
    """``escalate`` and ``escalate_to`` go together: how long, and whom to tell then."""
    if step.escalate is not None and step.escalate_to is None and "escalate_to" not in skip:
        message = (
            "a step that escalates needs 'escalate_to': the audience told once it has "
            f"waited {step.escalate}"
        )
        problems.append(errors.FieldError("escalate_to", message, "column_required"))
    if step.escalate_to is not None and step.escalate is None and "escalate" not in skip:
        message = (
            f"a step that escalates to {step.escalate_to} needs 'escalate': how long it "
            "waits before it tells them, e.g. 2 days"
        )
        problems.append(errors.FieldError("escalate", message, "column_required"))


def _ordered(problems: list[errors.FieldError]) -> list[errors.FieldError]:
    # A column the table does not know is the least telling problem: say it last.
    return sorted(problems, key=lambda p: p.code == "column_unknown")


def _a(kind: binding_mod.StepKind) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def _fields(problems: list[errors.FieldError]) -> set[str]:
    return {p.field for p in problems}


def _not_read(
    binding: binding_mod.FlowBinding, kind: binding_mod.StepKind, column: str
) -> errors.FieldError:
    app = binding.kinds.get(kind)
    if column == ON_FAILURE:
        message = (
            f"{_a(kind)} step runs no command, so it has no fault path; leave 'on_failure' empty"
        )
        return errors.FieldError(column, message, "column_not_read")
    if app is None and column in ESCALATION:
        waits = "waits only for its duration" if kind == "wait" else "does not wait"
        message = f"{_a(kind)} step {waits}, so it cannot escalate; leave '{column}' empty"
        return errors.FieldError(column, message, "column_not_read")
    if app is not None and column in WAITING_EXTRAS:
        if column == "remind" and app.waits:
            message = (
                f"kind '{kind}' has no remind command, so its steps cannot remind; "
                "leave 'remind' empty"
            )
            return errors.FieldError(column, message, "remind_unavailable")
        message = f"kind '{kind}' does not wait, so its steps have no '{column}'; leave it empty"
        return errors.FieldError(column, message, "column_not_read")
    message = f"{_a(kind)} step does not read '{column}'; leave it empty"
    return errors.FieldError(column, message, "column_not_read")


def _check_value(
    problems: list[errors.FieldError],
    binding: binding_mod.FlowBinding,
    step: StepRow,
    column: str,
    value: Any,
    columns: Mapping[str, query.ColumnType],
) -> None:
    add = problems.append
    kind = str(step.kind)
    if column == "duration":
        signed = kind == "until"
        add_duration(problems, column, value, signed=signed)
    elif column == "value" and kind == SUBFLOW:
        if len(value) > NAME_LIMIT:
            message = f"a flow's name has at most {NAME_LIMIT} characters"
            add(errors.FieldError(column, message, "name_too_long"))
    elif column in ("remind", "escalate"):
        add_duration(problems, column, value, signed=False)
    elif column == "field":
        _check_field(problems, binding, step, value, columns)
    elif column == "condition":
        read = with_failure(columns) if kind == "branch" else columns
        add_condition(problems, value, read, event=kind in binding.kinds)
        app = binding.kinds.get(kind)
        if app is not None and app.wait_for is not None:
            problems.extend(event_field_errors(value, binding, app.wait_for))
    elif column == "event" and value not in binding.events:
        known = ", ".join(binding.events) or "none"
        message = f"'{value}' is not one of the binding's events ({known})"
        message += spelling.did_you_mean(value, binding.events)
        add(errors.FieldError(column, message, "event_unknown"))
    elif column in ("audience", "escalate_to") and value not in binding.audiences:
        known = ", ".join(binding.audiences) or "none"
        message = f"'{value}' is not an audience of the notify rules ({known})"
        message += spelling.did_you_mean(value, binding.audiences)
        add(errors.FieldError(column, message, "audience_unknown"))
    elif column == "message":
        problems.extend(message_errors(value, columns, binding.resource))
    elif column == "mode":
        try:
            modes.parse(value)
        except ValueError as exc:
            add(errors.FieldError(column, str(exc), "mode_invalid"))


def message_errors(
    text: str, columns: Mapping[str, query.ColumnType] | None, resource: str = "the record"
) -> list[errors.FieldError]:
    """Every problem of a notify step's ``message``: its length, and its placeholders.

    A message may name the record's columns in braces (``Order {number} was
    approved``), filled when the step runs; it is a safe template (see
    ``flowrunner.foundations.templates``), and each name must be a column of the resource
    (``columns``; None: not checked) that holds no secret (a token, a card number), or
    ``failure``: what the latest failure said (``FAILURE``).
    The one rule for saving a row, checking a run's snapshot and running the step.

    >>> columns = {"number": query.ColumnType.TEXT, "amount": query.ColumnType.NUMBER}
    >>> [e.message for e in message_errors("Order {number} ({amount})", columns)]
    []
    >>> [(e.code, e.message) for e in message_errors("Order {numbr}", columns, "order")]
    [('message_unknown_column', '{numbr} is not a column of order — use one of: number, amount')]
    """
    found: list[errors.FieldError] = []
    if len(text) > MESSAGE_LIMIT:
        message = f"a message has at most {MESSAGE_LIMIT} characters; this one has {len(text)}"
        found.append(errors.FieldError("message", message, "message_too_long"))
    wrong = templates.mistake(text)
    if wrong is not None:
        found.append(errors.FieldError("message", wrong, "message_invalid"))
        return found
    if columns is None:
        return found
    for name in dict.fromkeys(templates.placeholders(text)):
        if name == FAILURE and name not in columns:
            continue  # the latest failure, filled in when the step runs
        if name not in columns:
            known = [c for c in columns if not sanitize.is_sensitive_field(c)]
            listed = ", ".join(known) or "none"
            message = f"{{{name}}} is not a column of {resource} — use one of: {listed}"
            found.append(errors.FieldError("message", message, "message_unknown_column"))
        elif sanitize.is_sensitive_field(name):
            message = f"{{{name}}} holds a secret, which a message may not tell"
            found.append(errors.FieldError("message", message, "message_secret_column"))
    return found


def _check_field(
    problems: list[errors.FieldError],
    binding: binding_mod.FlowBinding,
    step: StepRow,
    field: str,
    columns: Mapping[str, query.ColumnType],
) -> None:
    add = problems.append
    if step.kind == "set":
        if field not in binding.set_columns or field not in columns:
            settable = [c for c in binding.set_columns if c in columns]
            message = (
                f"'{field}' is not a column a set step may write ({', '.join(settable) or 'none'})"
            )
            if field not in columns:  # a near miss, not a column that may not be set
                message += spelling.did_you_mean(field, settable)
            add(errors.FieldError("field", message, "field_not_settable"))
            return
        facts = column_facts.facts_of(columns, field)
        if step.value is not None and facts is not None:
            # The rule the run writes by (column_facts): what passes here is written.
            try:
                column_facts.read(step.value, facts)
            except column_facts.Refused as refused:
                message = f"'{step.value}' cannot be written to '{field}': {refused.reason}"
                add(errors.FieldError("value", message, refused.code))
    elif step.kind == SUBFLOW:
        if field not in columns or field == binding.key:
            known = ", ".join(c for c in columns if c != binding.key) or "none"
            message = (
                f"'{field}' is not a column of {binding.resource} that holds the id of the "
                f"record the subflow runs on ({known}); leave it empty to run it on this record"
            )
            message += spelling.did_you_mean(field, [c for c in columns if c != binding.key])
            add(errors.FieldError("field", message, "field_unknown"))
    elif step.kind == "until":
        kind = columns.get(field)
        if kind not in (query.ColumnType.DATE, query.ColumnType.TIMESTAMP):
            dates = [
                c
                for c, t in columns.items()
                if t in (query.ColumnType.DATE, query.ColumnType.TIMESTAMP)
            ]
            message = (
                f"'{field}' is not a date or timestamp column of {binding.resource} "
                f"({', '.join(dates) or 'none'})"
            )
            if field not in columns:  # a near miss, not a column of another type
                message += spelling.did_you_mean(field, dates)
            add(errors.FieldError("field", message, "field_not_date"))


def add_changes(
    problems: list[errors.FieldError],
    binding: binding_mod.FlowBinding,
    changes: str,
    columns: Mapping[str, query.ColumnType],
) -> None:
    """The column an update must change: one of the record's, and not its key."""
    if changes == binding.key:
        message = (
            f"'{changes}' is the key of {binding.resource}, which an update never changes "
            "— name the column whose change starts the flow"
        )
        problems.append(errors.FieldError("changes", message, "changes_key"))
    elif changes not in columns:
        message = f"'{changes}' is not a column of {binding.resource}"
        message += spelling.did_you_mean(changes, columns)
        problems.append(errors.FieldError("changes", message, "column_unknown"))


def add_duration(
    problems: list[errors.FieldError], column: str, text: str, *, signed: bool
) -> None:
    if calendars.is_business(text):
        _add_business(problems, column, text)
        return
    try:
        duration = durations.parse_duration(text, allow_sign=signed)
    except errors.DurationError as exc:
        problems.append(errors.FieldError(column, exc.message, "duration_invalid"))
        return
    if not signed and (duration.is_zero or duration.is_negative):
        problems.append(
            errors.FieldError(
                column,
                f"'{text}' must be longer than nothing, e.g. '1 day'",
                "duration_not_positive",
            )
        )


def _add_business(problems: list[errors.FieldError], column: str, text: str) -> None:
    """Business time (``2 business days``): a whole number of business days, hours or
    minutes, counted forward on the flow's calendar (``business_problem`` says whether
    one applies)."""
    try:
        length = calendars.parse_business(text)
    except errors.DurationError as exc:
        problems.append(errors.FieldError(column, exc.message, "duration_invalid"))
        return
    if length is None:
        message = (
            f"'{text}' is not business time — write e.g. '2 business days', "
            "'4 business hours' or '30 business minutes'"
        )
        problems.append(errors.FieldError(column, message, "duration_invalid"))
    elif not (length.days or length.minutes):
        message = f"'{text}' must be longer than nothing, e.g. '1 business day'"
        problems.append(errors.FieldError(column, message, "duration_not_positive"))


# The step columns that hold a duration, which may be business time.
DURATION_COLUMNS = ("duration", "remind", "escalate")


def business_problems(
    binding: binding_mod.FlowBinding, row: shapes.Row, flow: shapes.Row | None
) -> list[errors.FieldError]:
    """A step's business durations where no calendar applies to its flow: the binding
    has none, or none by default and the flow names none (``flow`` None: not known, and
    any calendar of the binding may be the flow's)."""
    named = None if flow is None else _text_or_none(flow.get("calendar"))
    if binding.calendar_applies(named) or (flow is None and binding.has_calendars):
        return []
    found = []
    for column in DURATION_COLUMNS:
        value = row.get(column)
        if not calendars.is_business(value):
            continue
        if not binding.has_calendars:
            plain = re.sub(r"\s*business\s+", " ", str(value).strip(), flags=re.IGNORECASE)
            message = (
                f"'{str(value).strip()}' counts business time, but the binding has no "
                "calendar: give it one (FlowBinding(calendars=..., calendar=...)) or write "
                f"the time as it passes, e.g. '{plain}'"
            )
        else:
            known = ", ".join(binding.calendars)
            message = (
                f"'{str(value).strip()}' counts business time, but no calendar applies "
                f"to this flow: name one in the flow's calendar column ({known})"
            )
        found.append(errors.FieldError(column, message, "calendar_missing"))
    return found


def _text_or_none(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def add_condition(
    problems: list[errors.FieldError],
    text: str,
    columns: Mapping[str, query.ColumnType],
    *,
    event: bool,
) -> None:
    try:
        query.parse(text, columns, event=event)
    except errors.QueryError as exc:
        problems.append(
            errors.FieldError(
                "condition", f"the condition cannot be read: {exc}", "condition_invalid"
            )
        )


def event_field_errors(
    text: str, binding: binding_mod.FlowBinding, event: str
) -> list[errors.FieldError]:
    """A condition's ``event.x`` fields that ``event``'s shape does not have (none when
    the event has no shape, or the condition cannot be read: that is said already)."""
    fields = binding.event(event).fields
    if fields is None:
        return []
    try:
        read = query.parse(text, event=True).event_fields
    except errors.QueryError:
        return []
    return [
        errors.FieldError(
            "condition",
            f"event.{name} is not a field of {event} — {', '.join(fields)}"
            + spelling.did_you_mean(name, fields, joint="; "),
            "event_field_unknown",
        )
        for name in sorted(read)
        if name not in fields
    ]


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())
