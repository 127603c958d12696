"""A run as a reader sees it: where it waits, its history in sentences, its diagram with
the run drawn over it, and its failure envelope, leaving out every step the reader may
not read (its lines, its waits, its box in the diagram)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.diagrams import model
from flowrunner.engine import record_names
from flowrunner.flows import snapshot, spelling
from flowrunner.flows.interpreter import waits as waits_mod
from flowrunner.foundations import sanitize
from flowrunner.history import flows, runs
from flowrunner.store import flow_rows
from flowrunner.store import operations as ops
from flowrunner.web.console import shown
from flowrunner.web.console.page import Page

Reads = Callable[[Mapping[str, Any]], bool]


@dataclasses.dataclass(frozen=True)
class StepIO:
    """What one step of a run took in (its row's columns) and what its commands
    answered (their results as the idempotency records keep them, sanitized)."""

    step_id: str
    position: int
    title: str
    inputs: tuple[tuple[str, object], ...]
    answers: tuple[tuple[str, object], ...]


@dataclasses.dataclass(frozen=True)
class RunView:
    """One run, readable parts only."""

    run: ops.RunRow
    waits: tuple[str, ...]
    history: tuple[ops.LogRow, ...]
    diagram_html: str
    steps: tuple[StepIO, ...] = ()
    record: str = ""
    """The run's record as people name it (``PO-3299``, or ``tickets 3``)."""

    @property
    def failure(self) -> Mapping[str, Any] | None:
        """The run's sanitized error envelope, if it failed: ``code`` and ``message``
        first, the rest by name, a nested one (its cause) alike, whatever order the
        database kept it in; its message in the flow's words, and no ``retryable`` flag
        (``retrying`` says it once)."""
        return None if self.run.error is None else ordered(runs.shown_error(self.run.error))

    @property
    def retrying(self) -> str | None:
        """Whether retrying the failed run can help, in one sentence."""
        return runs.retrying(self.run.error)

    @property
    def reason(self) -> str:
        """Why the run ended, in the flow's words (its step by title)."""
        return runs.reason(self.run.reason)


FIRST = ("code", "message")


def ordered(fields: Mapping[str, Any]) -> dict[str, Any]:
    keys = [k for k in FIRST if k in fields] + sorted(k for k in fields if k not in FIRST)
    return {k: ordered(fields[k]) if isinstance(fields[k], Mapping) else fields[k] for k in keys}


def hidden_steps(run: ops.RunRow, reads: Reads) -> set[str]:
    """The ids (as text) of the run's steps the reader may not read."""
    try:
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
    except (KeyError, TypeError, ValueError):
        return set()
    return {str(s.id) for s in snap.steps if not reads(model.step_row(snap.flow, s))}


HIDDEN_AT = "Waits at a step you may not read"


def hidden_wait_sentence(waiting: waits_mod.Waiting, tz: Any) -> str:
    """What a run waits for at a step the reader may not read, in words that name
    neither the step nor its title: for a moment, an event, a subflow, a command."""
    until = shown.moment_in(waiting.until, tz) if waiting.until is not None else None
    awaits = waits_mod.Awaits
    if waiting.awaits == awaits.TIME:
        return f"{HIDDEN_AT}, until {until}" if until else f"{HIDDEN_AT}, for a date to be set"
    if waiting.awaits == awaits.EVENT:
        said = f"{HIDDEN_AT}, for {flows.event_words(waiting.event)}"
        return f"{said}; it gives up at {until}" if until else said
    if waiting.awaits == awaits.SUBFLOW:
        return f"{HIDDEN_AT}, for the run it started to end"
    if waiting.awaits == awaits.COMMAND:
        return f"{HIDDEN_AT}, for the application's command to answer"
    if waiting.awaits == awaits.RETRY:
        return f"{HIDDEN_AT}, to try its command again" + (f" at {until}" if until else "")
    return HIDDEN_AT


def steps_io(
    conn: sa.Connection, run: ops.RunRow, hidden: set[str], reached: set[str]
) -> tuple[StepIO, ...]:
    """Each step of ``run`` it reached (a history line names it, or a command of it
    answered) and the reader may read: what went in and what came out."""
    try:
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
    except (KeyError, TypeError, ValueError):
        return ()
    prefix = f"run-{run.id}/"
    answered: dict[str, list[tuple[str, object]]] = {}
    for found in ops.results_under(conn, prefix=prefix):
        if not found.completed:
            continue
        step_key, _, rest = found.key[len(prefix) :].partition("/")
        ident = step_key.removeprefix("step-")
        answered.setdefault(ident, []).append((rest, found.result))
    shown = []
    for step in snap.steps:
        ident = str(step.id) if step.id is not None else f"p{step.position}"
        if ident in hidden or (ident not in reached and ident not in answered):
            continue
        shown.append(
            StepIO(
                step_id=ident,
                position=step.position,
                title=step.title or step.kind,
                inputs=tuple((k, sanitize.sanitize_value(v)) for k, v in step.values),
                answers=tuple(answered.get(ident, ())),
            )
        )
    return tuple(shown)


def records_named(conn: sa.Connection, page: Page, record_ids: Iterable[object]) -> dict[str, str]:
    """Each record as the page names it, by id: the binding's ``record_label`` filled
    from it (``PO-3299``), else the resource's label and its id (``Purchase orders 7``)."""
    mounted = page.runner.mounted
    wanted = [str(record_id) for record_id in record_ids]
    names = record_names.read(mounted, conn, wanted, page.tenant)
    return {record_id: record_names.named(mounted, names, record_id) for record_id in wanted}


def links(conn: sa.Connection, page: Page) -> model.Href:
    """Where a subflow step's box leads on this console: the page of the flow it runs
    (by name, among the flows of the reader's tenant) and the page of its child run."""
    column = page.runner.binding.tenant
    tenant = page.tenant
    ids = {
        spelling.name_key(flow.get("name")): flow["id"]
        for flow in flow_rows.all_flows(conn, page.runner.tables)
        if column is None or tenant is None or str(flow.get(column)) == str(tenant)
    }

    def href(what: str, key: object) -> str | None:
        if what == "run":
            return page.url(f"/run/{key}")
        found = ids.get(spelling.name_key(str(key)))
        return None if found is None else page.url(f"/flow/{found}")

    return href


def view(
    conn: sa.Connection,
    page: Page,
    run: ops.RunRow,
    *,
    with_steps: bool = True,
    record: str | None = None,
) -> RunView:
    """``run`` (from ``runner.runs``, its waits filled) as the page's reader may see it:
    a wait at a step they may not read says what it waits for, not where; with
    ``with_steps`` what each readable step it reached took in and answered. ``record``:
    its record's name, where the page has read it already."""
    runner = page.runner
    reads = page.console.access.reads(page.reader)
    hidden = hidden_steps(run, reads)
    tz = runner.config.timezone
    waits = tuple(
        flows.waiting_sentence(w, tz)
        if str(w.step_id) not in hidden
        else hidden_wait_sentence(w, tz)
        for w in run.waiting
    )
    lines = tuple(
        line
        for line in runner.operations.history(run.id, tenant=page.tenant)
        if line.step_id is None or str(line.step_id) not in hidden
    )
    reached = {str(line.step_id) for line in lines if line.step_id is not None}
    steps = steps_io(conn, run, hidden, reached) if with_steps else ()
    if record is None:
        record = records_named(conn, page, [run.record_id])[str(run.record_id)]
    try:
        drawn = runner.operations.diagram(
            conn, run.flow_id, run=run.id, can_read=reads, tenant=page.tenant
        )
    except errors.OperatorError as exc:
        if exc.code != "not_a_flow":
            raise
        return RunView(run, waits, lines, "", steps, record)  # its program draws none
    drawing = drawn.html(document=False, href=links(conn, page))
    return RunView(run, waits, lines, drawing, steps, record)
