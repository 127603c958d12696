"""What a try's script means for one flow: the events that arrive, the record's changes
and the commands that refuse, in time order (``resolve``).

Its rules, in one place:

- An answer's event is the one the flow's waiting steps wait for (``event`` names it
  when they wait for several). ``who`` goes in the field the kind names its answerer
  by (``Kind.by``); ``says`` in the one field of the event the waiting steps'
  conditions read (``event.decision = rejected`` reads ``decision``) — nowhere, when
  they read none. A verb whose past form is not regular is written out:
  ``bob answers with decision = withdrawn``.
- A try runs no command, so it cannot learn whom a waiting step's command asks. It takes
  them from the step: a kind whose input column has the name of its answerer field
  (``Kind(input=["approver"], by="approver")``) asks the people that column lists,
  comma-separated (``asked_by``). ``who`` may be one of them, or the first words of a
  waiting step's title — ``finance`` for the step 'Finance approval' — standing for
  everyone that step asks, one answer each. Anyone else answers as themselves (the
  history then says they were not asked).
- A change's value is a Python value of its column, fitted by the rule a set step's
  value is (``column_facts``); a line's value is read as a set step's value is written.

Every problem is a ``FieldError`` of field ``answers.N`` (N counts the items from 0),
all raised together as one ``RowInvalid``; ``try_script.CODES`` lists their codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo

from flowrunner import binding as binding_mod
from flowrunner import errors, query
from flowrunner.flows import column_facts, snapshot, spelling
from flowrunner.flows.trial.script import (
    NAME,
    After,
    Answer,
    Change,
    Item,
    Refusal,
    Unreadable,
    read,
)
from flowrunner.foundations import durations, payloads, shapes
from flowrunner.foundations.shapes import RecordId, Tenant


@dataclass(frozen=True)
class Setting:
    """What a script is read against: the flow tried, its binding, the record and the time."""

    binding: binding_mod.FlowBinding
    snap: snapshot.FlowSnapshot
    columns: Mapping[str, query.ColumnType]
    record_id: RecordId
    """The record's key as its column holds it (what an event names it by)."""
    tenant: Tenant
    start: datetime
    end: datetime
    tz: tzinfo | None = None
    subflows: tuple[snapshot.FlowSnapshot, ...] = ()
    """The flows its subflow steps run (and theirs): an answer may be for their steps."""

    @property
    def steps(self) -> tuple[snapshot.StepSpec, ...]:
        """The flow's steps, then those of the flows its subflows run."""
        return self.snap.steps + tuple(s for flow in self.subflows for s in flow.steps)


@dataclass(frozen=True)
class Arrival:
    """Events about the record arriving at ``at``: one per payload, in order (one per
    person, where an answer stands for everyone a step asks)."""

    at: datetime
    event: str
    payloads: tuple[shapes.Payload, ...]


@dataclass(frozen=True)
class Writing:
    """The application writing ``values`` (Python values of their columns) to the record."""

    at: datetime
    values: shapes.Row


@dataclass(frozen=True)
class Plan:
    """What happens in a try, in time order, and the commands that refuse (and why)."""

    happenings: tuple[Arrival | Writing, ...] = ()
    refusals: Mapping[str, str] = field(default_factory=dict)


def resolve(items: Sequence[Item | str | None], setting: Setting) -> Plan:
    """The plan of ``items`` (items, or lines of text) against ``setting``; ``RowInvalid``
    listing every problem, each on its field ``answers.N``."""
    problems: list[errors.FieldError] = []
    happenings: list[tuple[datetime, int, Arrival | Writing]] = []
    refusals: dict[str, str] = {}
    for index, given in enumerate(items):
        where = f"answers.{index}"
        try:
            item = read(given) if isinstance(given, str) else given
            if item is None:
                continue
            if isinstance(item, Refusal):
                refusals[_command(item.command, setting)] = item.reason
                continue
            at = _moment(item.after, setting)
            if isinstance(item, Change):
                values = _values(item.values, at, setting, written=item.written)
                happenings.append((at, index, Writing(at, values)))
            elif isinstance(item, Answer):
                happenings.append((at, index, _arrival(item, at, setting)))
            else:
                raise Unreadable("answer_unreadable", f"{item!r} is not an item of a script")
        except Unreadable as exc:
            problems.append(errors.FieldError(where, exc.message, exc.code))
    if problems:
        raise errors.RowInvalid(problems, row="the try's answers")
    happenings.sort(key=lambda h: (h[0], h[1]))
    return Plan(happenings=tuple(h for _, _, h in happenings), refusals=refusals)


def _moment(after: After, setting: Setting) -> datetime:
    if isinstance(after, timedelta):
        if after < timedelta(0):
            raise Unreadable("duration_invalid", "an answer cannot come before the try starts")
        at = setting.start + after
        said = str(durations.Duration(days=after.days, seconds=after.seconds))
    else:
        try:
            length = durations.parse_duration(str(after))
            at = length.add_to(setting.start, setting.tz)
        except errors.DurationError as exc:
            raise Unreadable("duration_invalid", exc.message) from None
        said = str(after).strip()
    if at > setting.end:
        raise Unreadable(
            "answer_too_late",
            f"after {said} is after the try ends: try the flow for longer (until)",
        )
    return at


def _command(name: str, setting: Setting) -> str:
    known = {
        command
        for kind in setting.binding.kinds.values()
        for command in (kind.command, kind.remind, kind.cancel)
        if command
    }
    if name not in known:
        listed = ", ".join(sorted(known)) or "none"
        hint = spelling.did_you_mean(name, known)
        raise Unreadable(
            "command_unknown",
            f"no kind runs a command '{name}'{hint} (commands: {listed})",
        )
    return name


def _values(given: shapes.Row, at: datetime, setting: Setting, *, written: bool) -> shapes.RowDict:
    if not given:
        raise Unreadable("answer_unreadable", "a change needs a column and its value")
    binding = setting.binding
    values: shapes.RowDict = {}
    for name, value in given.items():
        if name in (binding.key, binding.tenant):
            raise Unreadable(
                "column_not_changeable",
                f"{name} is the record's {'key' if name == binding.key else 'tenant'}: "
                "a try changes the record it was given, not another",
            )
        if name not in setting.columns:
            hint = spelling.did_you_mean(name, setting.columns)
            raise Unreadable("column_unknown", f"{binding.resource} has no column '{name}'{hint}")
        facts = column_facts.facts_of(setting.columns, name)
        try:
            text = str(value) if written else _as_written(value, facts)
            values[name] = column_facts.to_write(text, facts, at)
        except column_facts.Refused as refused:
            raise Unreadable(
                refused.code if refused.code.startswith("value_") else "value_invalid",
                f"{name} cannot become {payloads.quote(value)}: {refused.reason}",
            ) from None
    return values


def _as_written(value: object, facts: column_facts.ColumnFacts | None) -> str:
    """A Python value as a set step's value would be written, so one rule fits it: text
    for a text column in quotes, other text as it is (``2026-03-09``), numbers, dates."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if facts is None or facts.type is query.ColumnType.TEXT:
            return str(query.Literal(value, query.ColumnType.TEXT))
        return value
    if isinstance(value, date | datetime | time):
        return value.isoformat()
    return str(value)


def _arrival(item: Answer, at: datetime, setting: Setting) -> Arrival:
    binding = setting.binding
    event = _event(item, setting)
    base: shapes.RowDict = {}
    for name, value in item.fields.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise Unreadable("field_invalid", f"{payloads.quote(name)} is not a field name")
        base[name] = value
    waiting = _waiting_steps(setting, event)
    if item.says is not None:
        read = _read_field(item, event, waiting)
        if read is not None:
            base[read] = item.says
    base[binding.event_field(event)] = setting.record_id
    if binding.tenant is not None:
        base[binding.tenant] = setting.tenant
    people: list[shapes.RowDict] = [{}]
    if item.who is not None:
        by = sorted({kind.by for _, kind in waiting if kind is not None and kind.by})
        if not by:
            raise Unreadable(
                "who_unknown",
                f"{event} does not say who answered: write '{event} arrives' "
                "(with its fields), without a name",
            )
        # 'finance approves': everyone the step 'Finance approval' asks, one answer each.
        people = [{column: who for column in by} for who in _answerers(item.who, waiting)]
    try:
        sent = tuple(payloads.plain({**base, **person}) for person in people)
    except payloads.NotPlain as exc:
        raise Unreadable("field_invalid", f"the answer's {exc}") from None
    return Arrival(at=at, event=event, payloads=sent)


def _event(item: Answer, setting: Setting) -> str:
    events = setting.binding.events
    if item.event is not None:
        if item.event not in events:
            known = ", ".join(sorted(events)) or "none"
            hint = spelling.did_you_mean(item.event, events)
            raise Unreadable(
                "event_unknown", f"there is no event '{item.event}'{hint} (events: {known})"
            )
        return item.event
    awaited = awaited_events(setting.snap, setting.binding, setting.subflows)
    if not awaited:
        raise Unreadable(
            "event_not_awaited",
            f"no step of flow '{setting.snap.flow.name}' waits for an answer",
        )
    if len(awaited) > 1:
        raise Unreadable(
            "event_ambiguous",
            f"the flow's steps wait for {_listed(awaited)}: say which — "
            f"'{awaited[0]} arrives with ...'",
        )
    return awaited[0]


def awaited_events(
    snap: snapshot.FlowSnapshot,
    bound: binding_mod.FlowBinding,
    subflows: Sequence[snapshot.FlowSnapshot] = (),
) -> list[str]:
    """The events the flow's steps wait for (then those of the flows its subflows run),
    in step order, each once."""
    found: dict[str, None] = {}
    for step in (*snap.steps, *(s for flow in subflows for s in flow.steps)):
        kind = bound.kinds.get(step.kind)
        if kind is not None and kind.wait_for is not None:
            found[kind.wait_for] = None
        elif step.kind == "waitFor" and step.get("event"):
            found[str(step.get("event"))] = None
    return list(found)


def _waiting_steps(
    setting: Setting, event: str
) -> list[tuple[snapshot.StepSpec, binding_mod.Kind | None]]:
    """The flow's steps that wait for ``event``: app kinds (with their kind) and waitFors."""
    found: list[tuple[snapshot.StepSpec, binding_mod.Kind | None]] = []
    for step in setting.steps:
        kind = setting.binding.kinds.get(step.kind)
        if kind is not None and kind.wait_for == event:
            found.append((step, kind))
        elif step.kind == "waitFor" and step.get("event") == event:
            found.append((step, None))
    return found


def asked_by(step: snapshot.StepSpec, kind: binding_mod.Kind) -> tuple[str, ...] | None:
    """Whom a try takes a waiting step's command to ask: the names its input column of
    the kind's answerer field lists, comma-separated; None for a kind without such a column.

    >>> approval = binding_mod.Kind(command="ask", input=["approver"], wait_for="decided",
    ...                             by="approver")
    >>> step = snapshot.StepSpec(id=1, position=1, kind="approval",
    ...                          values=(("approver", "cfo, controller, cfo"),))
    >>> asked_by(step, approval)
    ('cfo', 'controller')
    """
    if kind.wait_for is None or kind.by is None or kind.by not in kind.input:
        return None
    listed = str(step.get(kind.by) or "").split(",")
    return tuple(dict.fromkeys(name.strip() for name in listed if name.strip()))


def _answerers(
    who: str, waiting: Sequence[tuple[snapshot.StepSpec, binding_mod.Kind | None]]
) -> list[str]:
    """Who answers: a person a step asks (as the step spells them), everyone a step asks
    whose title starts with ``who`` ('finance' for 'Finance approval'), else ``who``."""
    asked = {
        step.id: list(asked_by(step, kind) or ()) for step, kind in waiting if kind is not None
    }
    wanted = who.strip().casefold()
    for names in asked.values():
        for name in names:
            if name.casefold() == wanted:
                return [name]
    chosen: dict[str, None] = {}
    for step, _ in waiting:
        title = (step.title or "").strip().casefold()
        if title == wanted or title.startswith(wanted + " "):
            chosen.update(dict.fromkeys(asked.get(step.id, ())))
    return list(chosen) or [who]


def _read_field(
    item: Answer, event: str, waiting: Sequence[tuple[snapshot.StepSpec, object]]
) -> str | None:
    """The one field of ``event`` the waiting steps' conditions read (``decision``); None
    when they read none (what the answer says then changes nothing in the flow)."""
    read: dict[str, None] = {}
    for step, _ in waiting:
        text = step.get("condition")
        if not text:
            continue
        try:
            condition = query.parse(str(text), None, event=True)
        except errors.FlowrunnerError:
            continue  # a broken condition fails its step when the run reaches it
        read.update(dict.fromkeys(sorted(condition.event_fields)))
    if len(read) == 1:
        return next(iter(read))
    if not read:
        return None
    raise Unreadable(
        "answer_ambiguous",
        f"the steps waiting for {event} read {_listed(list(read))} of the answer: "
        f"say which — e.g. 'with {next(iter(read))} = {item.says}'",
    )


def _listed(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"
