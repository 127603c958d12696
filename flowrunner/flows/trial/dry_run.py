"""A try of a flow: the real interpreter runs it on one record, on a clock of its own,
inside a transaction that always rolls back — and nothing leaves it.

``FlowRunner.try_flow`` calls ``try_flow``. The flow is the one being edited (its rows,
unsaved, judged by the same rules as a save first: ``RowInvalid`` with every problem,
and nothing runs) or a saved one (by name or id). The run starts at ``start`` on the
record as it is, then the clock moves from one moment to the next — the run's own
timers and the script's items (``flowrunner.flows.trial.script``: answers, changes, refusals) —
until the run ends or the try does (``until`` after the start).

What the run does is done as the worker does it, with three differences:

- its set steps and the script's changes really write the record, so its conditions
  read them, in a transaction no one else sees, rolled back at the end;
- no command runs: each is shown (``TryCommand``) and taken to succeed — answering
  whom a waiting step asks (``try_plan.asked_by``) — unless the script says it refuses
  or the runner's ``authorize`` would refuse it; so a command's own writes are not made;
- no notice, history line, run or event is written anywhere: they are gathered into the
  ``TryResult``.

Only the flow tried runs: a change in the try starts no other flow. Nothing but the
record is written, and it is rolled back, so the database is as it was; a try takes
SQLite's write lock while it lasts (a short while: no command runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import errors, query
from flowrunner.flows import edits, snapshot, starts, validation
from flowrunner.flows import subflows as flow_subflows
from flowrunner.flows.interpreter import effects, happened, interpret, state, subflows, waits
from flowrunner.flows.trial import plan as try_plan
from flowrunner.flows.trial import result, script
from flowrunner.foundations import durations, payloads, sanitize, statuses
from flowrunner.history import flows
from flowrunner.store import dialects, flow_rows, records

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

FlowGiven = Mapping[str, Any] | str | int
"""The flow to try: its row as edited (with ``steps``), or a saved flow's name or id."""
Script = str | Sequence[script.Item | str | None]
"""What happens meanwhile: items, lines of text, or one text of lines."""

# Advances one try may make before it is taken for an engine that does not settle.
_MOST_ADVANCES = 100_000
# How deep subflows may nest in a try (a cycle saved around the checks stops there).
_DEEPEST = 10


def try_flow(
    mounted: Mounted,
    flow: FlowGiven,
    steps: Sequence[Mapping[str, Any]] | None,
    record_id: Any,
    *,
    answers: Script = (),
    until: str | timedelta = "30 days",
    tenant: Any = None,
    start: datetime | None = None,
) -> result.TryResult:
    """Run ``flow`` on the record ``record_id`` as a try; see ``FlowRunner.try_flow``."""
    begun = mounted.clock() if start is None else start
    if begun.tzinfo is None:
        begun = begun.replace(tzinfo=UTC)  # as everywhere: a naive moment is UTC
    end = _end(begun, until, mounted)
    items = script.lines(answers) if isinstance(answers, str) else list(answers)
    owner = mounted.need_tenant(tenant)
    key = _key(mounted, record_id)
    with dialects.rolled_back(mounted.engine) as conn:
        snap, problem = _snapshot(mounted, conn, flow, steps, owner)
        record = records.load_record(conn, mounted.tables, key, owner)
        if record is None:
            raise errors.OperatorError(
                f"there is no {mounted.binding.resource} {payloads.quote(record_id)}"
                + (f" for tenant {owner!r}" if mounted.binding.tenant else ""),
                status_code=404,
                code="record_unknown",
            )
        setting = try_plan.Setting(
            binding=mounted.binding,
            snap=snap,
            columns=mounted.columns,
            record_id=key,
            tenant=None if owner is None else mounted.tables.tenant_value(owner),
            start=begun,
            end=end,
            tz=mounted.config.timezone,
            subflows=_subflows(mounted, conn, snap, owner),
        )
        plan = try_plan.resolve(items, setting)
        attempt = _Try(mounted, conn, snap, setting, plan, items)
        return attempt.run(record, problem)


def _subflows(
    mounted: Mounted, conn: sa.Connection, snap: snapshot.FlowSnapshot, tenant: Any
) -> tuple[snapshot.FlowSnapshot, ...]:
    """The flows the flow's subflow steps run, and theirs, each once, as a start would
    snapshot them (a name that starts nothing is left out: the step fails when tried)."""
    found: dict[str, snapshot.FlowSnapshot] = {snap.flow.name: snap}
    todo = [snap]
    while todo:
        for step in todo.pop().steps:
            name = step.get("value") if step.kind == subflows.KIND else None
            if name is None:
                continue
            manual = flow_subflows.manual_flow(mounted, conn, str(name), tenant)
            if manual is not None and manual.snapshot.flow.name not in found:
                found[manual.snapshot.flow.name] = manual.snapshot
                todo.append(manual.snapshot)
    return tuple(s for name, s in found.items() if name != snap.flow.name)


def _end(begun: datetime, until: str | timedelta, mounted: Mounted) -> datetime:
    """When the try ends; ``RowInvalid`` (field ``until``) for a length it cannot take."""
    try:
        if isinstance(until, timedelta):
            length = durations.Duration(days=until.days, seconds=until.seconds)
        else:
            length = durations.parse_duration(until)
        if length.is_zero or length.is_negative:
            raise _until_invalid(f"a try cannot last {length} — write e.g. '30 days'")
        return length.add_to(begun, mounted.config.timezone)
    except errors.DurationError as exc:
        raise _until_invalid(exc.message) from None


def _until_invalid(message: str) -> errors.RowInvalid:
    problem = errors.FieldError("until", message, "duration_invalid")
    return errors.RowInvalid([problem], row="the try")


def _key(mounted: Mounted, record_id: Any) -> Any:
    """The record's key as its column holds it; ``OperatorError`` for one it cannot hold."""
    try:
        return mounted.tables.key_value(record_id)
    except errors.RecordRejected as exc:
        raise errors.OperatorError(str(exc), status_code=404, code="record_unknown") from None


# -- the flow tried -------------------------------------------------------------------


def _snapshot(
    mounted: Mounted,
    conn: sa.Connection,
    flow: FlowGiven,
    steps: Sequence[Mapping[str, Any]] | None,
    owner: str | None,
) -> tuple[snapshot.FlowSnapshot, str | None]:
    """The snapshot a run of the flow would keep, and its load check's sentence (or None)."""
    if isinstance(flow, Mapping):
        return _edited(mounted, conn, flow, steps or (), owner), None
    if steps is not None:
        message = "a saved flow is tried with its own steps: give its name or id alone"
        raise errors.RowInvalid([errors.FieldError("steps", message, "column_not_read")])
    found = flow_rows.flow_by_name_or_id(conn, mounted.tables, flow, owner)
    if found is None:
        raise errors.OperatorError(
            f"there is no flow {payloads.quote(flow)}", status_code=404, code="flow_unknown"
        )
    snap = starts.stored_snapshot(conn, mounted.tables, found["id"])
    # A row that broke after it was saved fails the run at once, as a real start does.
    return snap, mounted.check_snapshot(snap)


def _edited(
    mounted: Mounted,
    conn: sa.Connection,
    flow: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    owner: str | None,
) -> snapshot.FlowSnapshot:
    """The edited rows as a snapshot, after the checks of a save (``RowsInvalid``)."""
    binding, tables, columns = mounted.binding, mounted.tables, mounted.columns
    row = dict(mounted.owned(flow, owner, "flow"))
    if not all(isinstance(step, Mapping) for step in steps):
        message = "the steps are rows: mappings of column to value"
        raise errors.RowInvalid([errors.FieldError("steps", message, "type_invalid")])
    rows = [_owned_step(mounted, step, row) for step in steps]
    found: list[tuple[str, list[errors.FieldError]]] = []
    stored = flow_rows.all_flows(conn, tables)
    problems = validation.errors_for_flow_row(
        binding, row, columns, existing=stored, extra=tables.flow_extra
    )
    if problems:
        found.append((validation.flow_label(row), problems))
    by_row: dict[int, list[errors.FieldError]] = {}
    for step, problem in validation.state_problems(
        binding, columns, rows, need_flow=False, extra=tables.step_extra, flow=row
    ):
        by_row.setdefault(id(step), []).append(problem)
    found.extend((validation.step_label(s, row), by_row[id(s)]) for s in rows if id(s) in by_row)
    if found:
        raise validation.RowsInvalid(found)
    values = edits.flow_values(binding, row, tables.flow_extra)
    shaped = [
        {
            **edits.step_values(binding, step, row, tables.step_extra),
            "id": step.get("id") if step.get("id") is not None else f"new-{number}",
        }
        for number, step in enumerate(rows, 1)
    ]
    return snapshot.FlowSnapshot.build({**values, "id": row.get("id"), "tenant": owner}, shaped)


def _owned_step(mounted: Mounted, step: Mapping[str, Any], flow: Mapping[str, Any]) -> Any:
    """An edited step as its flow's: no ``flow_id`` to check, its flow's tenant."""
    row = {k: v for k, v in step.items() if k != "flow_id"}
    column = mounted.binding.tenant
    if column is not None:
        row[column] = flow.get(column)
    return row


# -- the run ----------------------------------------------------------------------------


class _Try:
    """One try in progress: the run's state, the clock, and what it gathered so far."""

    def __init__(
        self,
        mounted: Mounted,
        conn: sa.Connection,
        snap: snapshot.FlowSnapshot,
        setting: try_plan.Setting,
        plan: try_plan.Plan,
        items: Sequence[script.Item | str | None] = (),
        depth: int = 0,
    ) -> None:
        self.mounted = mounted
        self.items = items
        self.depth = depth
        # The subflows' tries that ended: when, and how (``ChildEnded``), by child number.
        self.children: dict[int, tuple[datetime, happened.ChildEnded]] = {}
        self.final: state.RunState | None = None
        # The subflows' tries started in this advance, joined after its lines.
        self.joining: list[tuple[str, result.TryResult]] = []
        self.conn = conn
        self.snap = snap
        self.setting = setting
        self.plan = plan
        self.steps = {str(s.id): s for s in snap.steps}
        self.events: list[happened.EventIn] = []
        self.wake: datetime | None = None
        self.lines: list[result.TryLine] = []
        self._reminding: dict[tuple[object, object, object], result.TryLine] = {}
        self.values: list[result.TrySet] = []
        self.notices: list[result.TryNotice] = []
        self.commands: list[result.TryCommand] = []
        self.advances = 0

    def run(self, record: Mapping[str, Any], problem: str | None) -> result.TryResult:
        setting = self.setting
        now = setting.start
        held = self._condition_held(record)
        if problem is not None:
            end = result.TryEnd(
                statuses.RunStatus.FAILED, now, f"It would fail as it starts: {problem}"
            )
            return self._result(held, end)
        cfg = self.mounted.config_for(self.snap, setting.tenant)
        seen = happened.Happened(record=record)
        step = interpret.start(self.snap, seen, now, cfg, started_at=now, event_floor=0)
        run = self._apply(step, now, record)
        pending = list(self.plan.happenings)
        seen_ends: set[int] = set()
        while run.status not in statuses.ENDED:
            # A subflow's end not yet seen is due when it ended (or at once, if that passed).
            ends = [max(at, now) for n, (at, _) in self.children.items() if n not in seen_ends]
            due = [t for t in (self.wake, pending[0].at if pending else None) if t is not None]
            due += ends
            if not due or min(due) > setting.end:
                break
            now = max(now, min(due))
            # What falls due at a moment is done before the world acts at it, as when a
            # test driver's clock reaches it: 'bob approves after 1 day' comes after the
            # reminder due at that moment went out.
            if self.wake is None or self.wake > now:
                while pending and pending[0].at <= now:
                    self._happen(pending.pop(0))
            record_now = self._record()
            seen_ends |= {n for n, (at, _) in self.children.items() if at <= now}
            news = tuple(e for e in self.events if e.id > run.last_event_id)
            seen = happened.Happened(
                record=record_now,
                events=news,
                latest_event_id=len(self.events),
                children=tuple(end for at, end in self.children.values() if at <= now),
            )
            run = self._apply(interpret.advance(self.snap, run, seen, now, cfg), now, record_now)
        self.final = run
        return self._result(held, self._end(run))

    # -- what happens ----------------------------------------------------------------

    def _happen(self, happening: try_plan.Arrival | try_plan.Writing) -> None:
        if isinstance(happening, try_plan.Writing):
            self._write(dict(happening.values))
            return
        for payload in happening.payloads:
            number = len(self.events) + 1
            self.events.append(
                happened.EventIn(number, happening.event, dict(payload), happening.at)
            )

    def _record(self) -> dict[str, Any] | None:
        setting = self.setting
        return records.load_record(
            self.conn, self.mounted.tables, setting.record_id, setting.tenant
        )

    def _write(self, values: Mapping[str, Any]) -> None:
        setting = self.setting
        records.write_fields(
            self.conn, self.mounted.tables, setting.record_id, setting.tenant, values
        )

    # -- one advance and its effects, as the worker applies them -----------------------

    def _apply(
        self, step: interpret.Step, now: datetime, record: Mapping[str, Any] | None
    ) -> state.RunState:
        """Apply the advance's effects; answer its commands and advance again, until no
        command is out. The run's new state; ``wake`` is when it is next due."""
        working = dict(record) if record is not None else None
        while True:
            self._count()
            results: list[happened.CommandResult] = []
            found = step.effects
            for index, effect in enumerate(found):
                if isinstance(effect, effects.Wake):
                    self.wake = effect.at
                elif isinstance(effect, effects.RunCommand):
                    results.append(self._command(effect, _moment(found, index, now, back=True)))
                elif isinstance(effect, effects.StartSubflow):
                    at = _moment(found, index, now, back=True)
                    results.append(self._subflow(effect, at, working))
                elif isinstance(effect, effects.SetField):
                    self._set(effect, working, _moment(found, index, now))
                elif isinstance(effect, effects.Notify):
                    self._notice(effect, _moment(found, index, now))
                elif isinstance(effect, effects.Log):
                    self._line(effect, now)
            if not results:
                for flow, tried in self.joining:
                    self._join(flow, tried)
                self.joining = []
                return step.state
            working = self._record()
            seen = happened.Happened(
                record=working, latest_event_id=len(self.events), results=tuple(results)
            )
            cfg = self.mounted.config_for(self.snap, self.setting.tenant)
            step = interpret.advance(self.snap, step.state, seen, now, cfg)

    def _count(self) -> None:
        self.advances += 1
        if self.advances > _MOST_ADVANCES:
            raise RuntimeError(f"a try of flow {self.snap.flow.name!r} did not settle")

    def _where(self, step_id: Any) -> tuple[int | None, str | None]:
        found = None if step_id is None else self.steps.get(str(step_id))
        if found is None:
            return None, None
        return found.position, found.title or found.kind

    def _line(self, effect: effects.Log, now: datetime) -> None:
        position, title = self._where(effect.step_id)
        said = flows.sentence(effect, self.snap, self.mounted.config.timezone, tried=True)
        line = result.TryLine(
            at=effect.at or now,
            position=effect.position if effect.position is not None else position,
            step=title,
            kind=effect.kind,
            what=effect.what,
            sentence=said,
        )
        # One line per reminder, as a run's history shows it (flows.one_line_each).
        if effect.what == "reminder":
            self._reminding[flows.reminder_key(effect)] = line
        elif effect.what in flows.REMINDER_OUTCOMES:
            sending = self._reminding.pop(flows.reminder_key(effect), None)
            if sending is not None:
                self.lines = [x for x in self.lines if x is not sending]
        self.lines.append(line)

    def _set(self, effect: effects.SetField, working: dict[str, Any] | None, at: datetime) -> None:
        before = None if working is None else working.get(effect.field)
        self._write({effect.field: effect.value})
        if working is not None:
            working[effect.field] = effect.value
        position, title = self._where(effect.step_id)
        self.values.append(result.TrySet(at, position, title, effect.field, before, effect.value))

    def _notice(self, effect: effects.Notify, at: datetime) -> None:
        position, title = self._where(effect.step_id)
        self.notices.append(
            result.TryNotice(
                at=at,
                position=position,
                step=title,
                audience=effect.audience,
                recipient=effect.recipient,
                title=effect.title,
                message=effect.message,
                email=effect.email,
                problem=effect.problem,
            )
        )

    def _command(self, effect: effects.RunCommand, at: datetime) -> happened.CommandResult:
        """Show the command, and answer for it without running it."""
        refused = self.plan.refusals.get(effect.command)
        mounted = self.mounted
        declared = mounted.binding.kinds.get(effect.kind)
        who = mounted.principal_for(declared.run_as if declared is not None else None, None)
        if refused is None:
            # As the worker's check on every attempt (``FlowRunner.authorize_command``).
            try:
                mounted.authorize_command(effect.command, who)
            except errors.CommandRefused as exc:
                refused = str(exc)
        answer = {} if refused is not None else self._answer(effect)
        position, title = self._where(effect.step_id)
        self.commands.append(
            result.TryCommand(
                at=at,
                position=position,
                step=title,
                command=effect.command,
                inputs=dict(effect.inputs),
                attempt=effect.attempt,
                reminder=effect.reminder,
                cancel=effect.cancel,
                answer=answer,
                refused=refused,
            )
        )
        if refused is not None:
            envelope = sanitize.error_envelope("command_refused", refused)
            return happened.CommandResult(key=effect.key, ok=False, refused=True, error=envelope)
        return happened.CommandResult(key=effect.key, ok=True, answer=answer)

    def _subflow(
        self, effect: effects.StartSubflow, at: datetime, working: Mapping[str, Any] | None
    ) -> happened.CommandResult:
        """Try the flow a subflow step runs, from ``at`` on its record, to its end or the
        try's: its lines, values, notices and commands join this try's, named by its flow."""
        mounted, setting = self.mounted, self.setting
        key = setting.record_id
        if effect.record_id is not None:
            try:
                key = mounted.tables.key_value(effect.record_id)
            except errors.RecordRejected as exc:
                return _refused(effect, f"'{effect.record_id}' cannot be a key: {exc}")
        record = records.load_record(self.conn, mounted.tables, key, setting.tenant)
        if record is None:
            return _refused(effect, f"there is no {mounted.binding.resource} {key}")
        found = flow_subflows.manual_flow(mounted, self.conn, effect.flow, setting.tenant)
        if found is None:
            return _refused(effect, f"there is no active manual flow named '{effect.flow}'")
        if self.depth >= _DEEPEST:
            return _refused(effect, f"subflows nest more than {_DEEPEST} deep")
        inner = dataclasses.replace(
            setting,
            snap=found.snapshot,
            record_id=key,
            start=at,
            subflows=_subflows(mounted, self.conn, found.snapshot, setting.tenant),
        )
        try:
            plan = try_plan.resolve(self.items, inner)
        except errors.RowInvalid:  # the script answers this flow's steps, not the subflow's
            plan = try_plan.Plan(refusals=self.plan.refusals)
        if key != setting.record_id:  # the script changes the record tried, not this one
            plan = try_plan.Plan(
                tuple(h for h in plan.happenings if isinstance(h, try_plan.Arrival)),
                plan.refusals,
            )
        child = _Try(mounted, self.conn, found.snapshot, inner, plan, self.items, self.depth + 1)
        tried = child.run(record, found.problem)
        self.joining.append((found.snapshot.flow.name, tried))
        number = len(self.children) + 1
        if tried.end.ended:
            final = child.final
            reason = final.reason if final is not None else tried.end.sentence
            ended = happened.ChildEnded(number, str(tried.end.status), reason)
            self.children[number] = (tried.end.at, ended)
        answer: dict[str, Any] = {"run": number, "record": str(key)}
        return happened.CommandResult(effect.key, ok=True, answer=answer)

    def _join(self, flow: str, tried: result.TryResult) -> None:
        """A subflow's try as part of this one: each of its steps named ``flow › step``."""

        def named(step: str | None) -> str:
            return f"{flow} › {step}" if step else flow

        self.lines += [dataclasses.replace(x, step=named(x.step)) for x in tried.lines]
        self.values += [dataclasses.replace(x, step=named(x.step)) for x in tried.values]
        self.notices += [dataclasses.replace(x, step=named(x.step)) for x in tried.notices]
        self.commands += [dataclasses.replace(x, step=named(x.step)) for x in tried.commands]

    def _answer(self, effect: effects.RunCommand) -> dict[str, Any]:
        """What the try takes a command to answer: whom a waiting step asks, else nothing."""
        if effect.reminder is not None or effect.cancel:
            return {}
        kind = self.mounted.binding.kinds.get(effect.kind)
        step = self.steps.get(str(effect.step_id))
        if kind is None or step is None:
            return {}
        asked = try_plan.asked_by(step, kind)
        return {} if asked is None else {"asked": list(asked)}

    # -- the result ----------------------------------------------------------------------

    def _condition_held(self, record: Mapping[str, Any]) -> bool | None:
        text = self.snap.flow.condition
        if not text:
            return None
        try:
            condition = query.parse(text, self.mounted.columns)
            return condition.matches(record, self.setting.start)
        except errors.FlowrunnerError:
            return False  # a condition that no longer reads: a real start would fail

    def _end(self, run: state.RunState) -> result.TryEnd:
        tz = self.mounted.config.timezone
        if run.status in statuses.ENDED:
            at = run.clock if run.clock is not None else self.setting.end
            reason = run.reason or "no reason given"
            head = {
                statuses.RunStatus.DONE: "Done",
                statuses.RunStatus.FAILED: "Failed",
                statuses.RunStatus.CANCELLED: "Cancelled",
            }[run.status]
            sentence = f"{head} on {flows.when(at, tz)}: {reason}"
            return result.TryEnd(run.status, at, sentence)
        end = self.setting.end
        waits_at = tuple(
            flows.waiting_sentence(w, tz) for w in waits.where(self.snap, run, self.mounted.config)
        )
        sentence = f"Still open when the try ends on {flows.when(end, tz)}"
        if waits_at:
            sentence += ": " + "; ".join(w[0].lower() + w[1:] for w in waits_at)
        return result.TryEnd(run.status, end, sentence, waits_at)

    def _result(self, held: bool | None, end: result.TryEnd) -> result.TryResult:
        setting = self.setting
        if self.depth == 0 and self.children:
            # A subflow's try ran ahead of this one's clock: everything in time order.
            self.lines.sort(key=_when)
            self.values.sort(key=_when)
            self.notices.sort(key=_when)
            self.commands.sort(key=_when)
        return result.TryResult(
            flow=self.snap.flow.name,
            record_id=str(setting.record_id),
            tenant=None if setting.tenant is None else str(setting.tenant),
            started_at=setting.start,
            until=setting.end,
            condition_held=held,
            lines=tuple(self.lines),
            values=tuple(self.values),
            notices=tuple(self.notices),
            commands=tuple(self.commands),
            end=end,
        )


def _when(item: result.TryLine | result.TrySet | result.TryNotice | result.TryCommand) -> datetime:
    return item.at


def _refused(effect: effects.StartSubflow, said: str) -> happened.CommandResult:
    error = sanitize.error_envelope("subflow_refused", said)
    return happened.CommandResult(effect.key, ok=False, refused=True, error=error)


def _moment(
    found: Sequence[effects.Effect], index: int, now: datetime, *, back: bool = False
) -> datetime:
    """When an effect happens on the flow's clock: the moment of its step's history line —
    the line after it (a set, a notice), or the line before it (a command)."""
    order = range(index - 1, -1, -1) if back else range(index + 1, len(found))
    for other in order:
        effect = found[other]
        if isinstance(effect, effects.Log) and effect.at is not None:
            return effect.at
    return now
