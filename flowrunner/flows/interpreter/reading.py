"""Reading a step's columns at run time; a column that no longer reads breaks the step.

Rows are validated when written, but a snapshot can still hold a row that broke later
(a kind removed, a column dropped, a row written around validation). Every reader here
raises ``Broken`` with a sentence instead, and the interpreter fails the run with it.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time
from typing import Any

from flowrunner import calendars, errors, query
from flowrunner.flows import column_facts, rows, snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.foundations import durations, modes, shapes
from flowrunner.query import words as query_words


class Broken(Exception):
    """A step that cannot run as written; ``message`` says what is wrong with it."""

    def __init__(self, step: snapshot.StepSpec, message: str) -> None:
        self.step = step
        self.message = message
        super().__init__(f"{describe(step)} is broken: {message}")


def describe(step: snapshot.StepSpec) -> str:
    """How a sentence names a step: ``step 'Manager approval' (approval, position 2)``."""
    name = step.title or step.kind
    return f"step '{name}' ({step.kind}, position {step.position})"


def ended_at(step: snapshot.StepSpec) -> str:
    """Why a run ended at a branch whose condition did not hold, in words: a normal
    end, not a failure (``status is not approved, so the run ended at Approved?``)."""
    name = step.title or f"the {step.kind} step"
    condition = text(step, "condition")
    if condition is None:
        return f"the run ended at {name}"
    otherwise = query_words.describe(condition, negated=True)
    return f"{otherwise}, so the run ended at {name}"


def text(step: snapshot.StepSpec, column: str, *, required: bool = False) -> str | None:
    """The column as text (``None`` when empty); ``required`` breaks the step if empty."""
    value = step.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise Broken(step, f"its {column} is empty")
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


# A length a step reads: time as it passes, or business time on the run's calendar.
Length = durations.Duration | calendars.BusinessDuration


def duration(
    step: snapshot.StepSpec, column: str = "duration", *, allow_sign: bool = False
) -> Length | None:
    raw = text(step, column)
    if raw is None:
        return None
    try:
        if calendars.is_business(raw):
            found = calendars.parse_business(raw)
            if found is None:
                raise Broken(
                    step, f"its {column} '{raw}' is not business time, e.g. '2 business days'"
                )
            return found
        return durations.parse_duration(raw, allow_sign=allow_sign)
    except errors.QueryError as error:
        raise Broken(step, f"its {column} cannot be read: {error.message}") from None


def later(
    step: snapshot.StepSpec,
    cfg: config_mod.InterpreterConfig,
    length: Length,
    moment: datetime,
    times: int = 1,
) -> datetime:
    """``moment`` plus ``times`` the ``length``: time as it passes on the binding's wall
    clock, business time on the run's calendar (which must be there)."""
    if isinstance(length, calendars.BusinessDuration):
        if cfg.calendar is None:
            raise Broken(
                step, f"it counts business time ({length}), but no calendar applies to its flow"
            )
        scaled = calendars.BusinessDuration(length.days * times, length.minutes * times)
        try:
            return calendars.add_business_time(moment, scaled, cfg.calendar)
        except errors.DurationError as error:
            raise Broken(step, error.message) from None
    if times != 1:
        months, days, seconds = length.months, length.days, length.seconds
        length = durations.Duration(months * times, days * times, seconds * times)
    return length.add_to(moment, cfg.timezone)


def is_zero_or_less(length: Length) -> bool:
    if isinstance(length, calendars.BusinessDuration):
        return not (length.days or length.minutes)
    return length.is_zero or length.is_negative


def condition(
    step: snapshot.StepSpec,
    cfg: config_mod.InterpreterConfig,
    *,
    event: bool = False,
    failure: bool = False,
) -> query.Condition:
    """The step's condition; ``failure``: it may read the latest failure (a branch's)."""
    raw = text(step, "condition", required=True)
    assert raw is not None
    # With no columns known there is nothing to check the condition against.
    columns = dict(cfg.columns) or None
    if columns is not None and failure:
        columns = rows.with_failure(columns)
    try:
        return query.parse(raw, columns, event=event)
    except errors.FlowrunnerError as error:
        raise Broken(step, f"its condition cannot be read: {error}") from None


def goto(step: snapshot.StepSpec, snap: snapshot.FlowSnapshot, column: str = "goto") -> int | None:
    """The position a branch's ``goto`` (or a step's ``on_failure``) names, if any."""
    raw = text(step, column)
    if raw is None:
        return None
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not number.is_integer():
        raise Broken(step, f"its {column} '{raw}' is not a position")
    target = int(number)
    if target not in snap.positions:
        raise Broken(step, f"its {column} names position {target}, which the flow does not have")
    return target


def on_failure(step: snapshot.StepSpec, snap: snapshot.FlowSnapshot) -> int | None:
    """Where the run goes on when the step's command fails for good (None: it fails)."""
    return goto(step, snap, rows.ON_FAILURE)


def escalation(
    step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig
) -> tuple[Length, str, str] | None:
    """How long a waiting step waits before it tells its ``escalate_to``, that audience,
    and the duration as written; None for a step that does not escalate."""
    after = text(step, "escalate")
    audience = text(step, "escalate_to")
    if after is None and audience is None:
        return None
    if after is None or audience is None:
        raise Broken(step, "its escalate and escalate_to go together")
    length = duration(step, "escalate")
    assert length is not None
    if is_zero_or_less(length):
        raise Broken(step, "its escalate must be longer than zero")
    if audience not in cfg.audiences:
        raise Broken(step, f"no notify rule has the audience '{audience}' it escalates to")
    return length, audience, after


def mode(step: snapshot.StepSpec) -> modes.Mode:
    """How many events end the step's wait, read as validation reads it."""
    try:
        return modes.parse(text(step, "mode"))
    except ValueError as error:
        raise Broken(step, f"its mode cannot be read: {error}") from None


def set_value(
    step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig, now: datetime
) -> tuple[str, Any]:
    """The field a set step writes and the value, resolved at ``now``."""
    name = text(step, "field", required=True)
    assert name is not None
    if name not in cfg.set_columns:
        raise Broken(step, f"'{name}' is not one of the columns a set step may write")
    raw = text(step, "value")
    try:
        # The rule validation judged the step by: a value that passed is written as is.
        value = column_facts.to_write(raw, column_facts.facts_of(cfg.columns, name), now)
    except column_facts.Refused as refused:
        raise Broken(step, f"its value cannot be written to {name}: {refused.reason}") from None
    return name, value


def until_target(
    step: snapshot.StepSpec,
    record: shapes.Payload,
    cfg: config_mod.InterpreterConfig,
) -> datetime | None:
    """When an until step is due: the record's date plus its duration, or ``None`` if null."""
    name = text(step, "field", required=True)
    assert name is not None
    column_type = cfg.columns.get(name)
    if column_type not in (query.ColumnType.DATE, query.ColumnType.TIMESTAMP):
        raise Broken(step, f"'{name}' is not a date or timestamp column")
    offset = duration(step, allow_sign=True)
    raw = record.get(name)
    if raw is None:
        return None
    try:
        value = query.coerce(raw, column_type)
    except (errors.FlowrunnerError, ValueError, TypeError):
        raise Broken(step, f"the record's {name} is not a date: {raw!r}") from None
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        # A date means its first moment on the binding's wall clock.
        moment = datetime.combine(value, time(0), tzinfo=cfg.timezone or UTC)
    else:
        raise Broken(step, f"the record's {name} is not a date: {raw!r}")
    return moment if offset is None else later(step, cfg, offset, moment)


def notice(step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig) -> tuple[str, str]:
    """A notify step's audience and its message as written (a template over the record)."""
    audience = text(step, "audience", required=True)
    assert audience is not None
    if audience not in cfg.audiences:
        raise Broken(step, f"no notify rule has the audience '{audience}'")
    message = text(step, "message", required=True)
    assert message is not None
    # Judged as when the row was saved; with no columns known there is nothing to check
    # the names against (they are still only looked up by name).
    found = rows.message_errors(message, dict(cfg.columns) or None)
    if found:
        raise Broken(step, f"its message cannot be used: {found[0].message}")
    return audience, message


def event_name(step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig) -> str:
    name = text(step, "event", required=True)
    assert name is not None
    if name not in cfg.events:
        raise Broken(step, f"'{name}' is not one of the binding's events")
    return name


def kind(step: snapshot.StepSpec, cfg: config_mod.InterpreterConfig) -> config_mod.KindConfig:
    found = cfg.kinds.get(step.kind)
    if found is None:
        raise Broken(step, f"the binding has no kind '{step.kind}'")
    if found.wait_for is None:
        for column in ("mode", "condition", "duration", "remind", *rows.ESCALATION):
            if text(step, column) is not None:
                raise Broken(step, f"its {column} is set, but the {step.kind} kind does not wait")
    elif text(step, "remind") is not None and found.remind is None:
        raise Broken(step, f"its remind is set, but the {step.kind} kind has no remind command")
    return found


def inputs(step: snapshot.StepSpec, found: config_mod.KindConfig) -> shapes.JsonDict:
    return {name: step.get(name) for name in found.inputs}
