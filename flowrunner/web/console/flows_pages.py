"""The flows: their list, a flow's page (its diagram and its rows as an editable table),
validation as one types, and the flows as YAML files.

Every write goes through the runner's own saves, so it is judged as any save is: a
refused row comes back with each sentence beside its field (status 422) and nothing is
saved. Each write is journaled with the reader's name in its own transaction.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from starlette.responses import JSONResponse, Response

from flowrunner import errors, query
from flowrunner.flows import files, rows, scheduled, starts
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import durations
from flowrunner.history import words as history_words
from flowrunner.store import flow_rows
from flowrunner.store import operations as ops
from flowrunner.web.console import run_view, versions_pages
from flowrunner.web.console.page import Page
from flowrunner.web.console.rows_form import (
    FLOW_FIELDS,
    HINTS,
    Editing,
    Problems,
    StepColumns,
    as_values,
    calendar_options,
    flow_row,
    kind_options,
    next_position,
    step_row,
)

# -- what the pages show -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Running:
    """A flow's runs that have not ended, and on which of its snapshots."""

    total: int = 0
    current: int = 0
    snapshots: tuple[ops.OpenRuns, ...] = ()
    digest: str = ""

    @property
    def older(self) -> int:
        return self.total - self.current

    def sentence(self) -> str:
        """What a save changes for them: nothing (they keep the rows they started with)."""
        if not self.total:
            return "No run of this flow is going on: a save changes the runs that start after it."
        if self.total == 1:
            going = "the 1 run going on now keeps the rows it started with"
        else:
            going = f"the {self.total} runs going on now keep the rows they started with"
        older = f" ({self.older} of them on an older version)" if self.older else ""
        return f"A save changes only the runs that start after it: {going}{older}."


def running(conn: sa.Connection, page: Page, flow_id: Any) -> Running:
    """The flow's open runs by snapshot, against its rows as they are now."""
    found = tuple(
        ops.open_runs(
            conn, resource=page.runner.binding.resource, tenant=page.tenant, flow_id=str(flow_id)
        )
    )
    digest = starts.stored_snapshot(conn, page.runner.tables, flow_id).digest
    return Running(
        total=sum(s.count for s in found),
        current=sum(s.count for s in found if s.digest == digest),
        snapshots=found,
        digest=digest,
    )


# The statuses the flows list counts, as the Operations room counts them: the runs
# going on, and those an operator may have to look at.
LISTED = ("running", "waiting", "failed", "stuck")


@dataclasses.dataclass(frozen=True)
class FlowLine:
    flow: dict[str, Any]
    running: Running
    counts: tuple[tuple[str, int], ...] = ()
    """Its runs by status (``LISTED``, those it has), counted as the Operations room
    counts them with this flow chosen."""


def counted(page: Page, flow: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The flow's runs by status, by the Operations room's own count."""
    try:
        counts = page.runner.count_runs(flow=str(flow["name"]), tenant=page.tenant)
    except errors.RowInvalid:
        return ()
    return tuple((status, counts[status]) for status in LISTED if counts.get(status))


def _rows(page: Page) -> TenantRows:
    return TenantRows(page.runner.mounted)


def _flow(conn: sa.Connection, page: Page, flow_id: Any) -> dict[str, Any]:
    """The reader's tenant's flow ``flow_id``; else 404."""
    return _rows(page).flow(conn, flow_id, page.tenant)


def _readable(page: Page, steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps the reader may read; the others are not shown at all."""
    reads = page.console.access.reads(page.reader)
    return [s for s in steps if reads(s)]


def _may_edit(page: Page, *flows: Mapping[str, Any]) -> None:
    for flow in flows:
        if not page.console.access.may_edit(page.reader, flow):
            name = flow.get("name") or "a new flow"
            raise errors.OperatorError(
                f"{page.reader.name} may not edit {name!r}", status_code=403, code="not_allowed"
            )


# -- the list of flows ----------------------------------------------------------------


def flows_list(
    page: Page, *, editing: Editing | None = None, imported: Problems | None = None
) -> Response:
    with page.reading() as conn:
        flows = _rows(page).flows(conn, page.tenant)
        lines = [
            FlowLine(flow, running(conn, page, flow["id"]), counted(page, flow)) for flow in flows
        ]
    status = 422 if (editing and editing.problems) or imported else 200
    return page.render(
        "flows.html",
        status=status,
        lines=lines,
        editing=editing or Editing("new-flow", {"start": "created", "active": "true"}),
        imported=imported or Problems(),
        may_create=page.console.access.may_edit(page.reader, {}),
        hints=HINTS,
        has_schedule="schedule" in page.runner.tables.flows.c,
        calendars=_calendars(page),
    )


def _calendars(page: Page) -> list[tuple[str, str]]:
    """The calendars a flow's form offers; none where the binding names none or the flows
    table has no ``calendar`` column."""
    binding = page.runner.binding
    if not binding.calendars or "calendar" not in page.runner.tables.flows.c:
        return []
    return calendar_options(binding)


def create_flow(page: Page) -> Response:
    row = flow_row(page.form)
    _may_edit(page, row)
    try:
        with page.writing() as conn:
            flow_id = page.runner.editor.save_flow(conn, row, tenant=page.tenant)
            page.journal(conn, "flow.create", flow=row.get("name"), flow_id=flow_id)
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, FLOW_FIELDS)
        return flows_list(page, editing=Editing("new-flow", as_values(row), problems))
    return page.redirect(f"/flow/{flow_id}", said=f"Flow {row.get('name')!r} created.")


# -- a flow's page ----------------------------------------------------------------------


def flow_page(
    page: Page, *, editing: Editing | None = None, tried: Tried | None = None
) -> Response:
    flow_id = page.params["flow_id"]
    with page.reading() as conn:
        flow = _flow(conn, page, flow_id)
        all_steps = flow_rows.steps_of_flow(conn, page.runner.tables, flow["id"])
        steps = _readable(page, all_steps)
        drawn = page.runner.operations.diagram(
            conn, flow["id"], can_read=page.console.access.reads(page.reader), tenant=page.tenant
        )
        now = running(conn, page, flow["id"])
        diagram_html = drawn.html(document=False, href=run_view.links(conn, page))
    draft = versions_pages.draft_of(page, flow["id"])
    columns = StepColumns(page.runner.binding)
    may_edit = page.console.access.may_edit(page.reader, flow)
    refused = (editing is not None and editing.problems) or (tried and tried.problems)
    status = 422 if refused else 200
    new_values = {"position": str(next_position(steps))}
    found = scheduled.schedule_of(flow)  # a scheduled flow's next slots, on its clock
    zone = None if found is None else found.zone
    slots = scheduled.next_slots(flow, page.runner.clock())
    saved_yaml = flow_yaml(page, flow) if len(steps) == len(all_steps) else ""
    if editing is not None and editing.form == "new-step":
        new_values = editing.values
    return page.render(
        "flow.html",
        status=status,
        flow=flow,
        flow_values=(
            editing.values if editing is not None and editing.form == "flow" else as_values(flow)
        ),
        steps=steps,
        step_values={
            f"step-{s['id']}": (
                editing.values
                if editing is not None and editing.form == f"step-{s['id']}"
                else as_values(s)
            )
            for s in steps
        },
        new_values=new_values,
        editing=editing or Editing("", {}),
        diagram_html=diagram_html,
        running=now,
        draft=draft,
        may_edit=may_edit,
        columns=columns,
        kind_options=[(kind, kind) for kind in columns.kinds],
        kind_sentences=kind_options(columns.kinds),
        hints=HINTS,
        choices=_choices(page, steps),
        saved_yaml=saved_yaml,
        has_schedule="schedule" in page.runner.tables.flows.c,
        calendars=_calendars(page),
        next_slots=[history_words.when(slot, zone) for slot in slots],
        slot_zone=None if found is None else found.timezone,
        tried=tried or Tried({"until": "30 days", "rows": saved_yaml}, Problems()),
    )


def _choices(page: Page, steps: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Suggestions for the columns that name something of the binding."""
    binding = page.runner.binding
    return {
        "field": sorted(page.runner.columns),
        "event": sorted(binding.events),
        "audience": list(binding.audiences),
        "goto": [str(p) for p in sorted({int(s["position"]) for s in steps})],
        "on_failure": [str(p) for p in sorted({int(s["position"]) for s in steps})],
        "escalate_to": list(binding.audiences),
        "changes": sorted(page.runner.columns),
    }


def save_flow(page: Page) -> Response:
    flow_id = page.params["flow_id"]
    changes = flow_row(page.form)
    try:
        with page.writing() as conn:
            stored = _flow(conn, page, flow_id)
            row = {**stored, **changes, "id": stored["id"]}
            _may_edit(page, stored, row)
            page.runner.editor.save_flow(conn, row, tenant=page.tenant)
            page.journal(conn, "flow.save", flow=row.get("name"), flow_id=stored["id"])
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, FLOW_FIELDS)
        return flow_page(page, editing=Editing("flow", as_values(changes), problems))
    return page.redirect(f"/flow/{flow_id}", said="Flow saved.")


def delete_flow(page: Page) -> Response:
    flow_id = page.params["flow_id"]
    with page.reading() as conn:
        flow = _flow(conn, page, flow_id)
        now = running(conn, page, flow["id"])
    _may_edit(page, flow)
    if page.form.get("confirmed") != "yes":
        return page.render(
            "confirm_delete.html",
            flow=flow,
            running=now,
            action=page.url(f"/flow/{flow['id']}/delete"),
        )
    with page.writing() as conn:
        page.runner.editor.delete_flow(conn, flow["id"], tenant=page.tenant)
        page.journal(conn, "flow.delete", flow=flow.get("name"), flow_id=flow["id"])
    return page.redirect("/", said=f"Flow {flow['name']!r} deleted; its runs keep their rows.")


# -- steps --------------------------------------------------------------------------------


def add_step(page: Page) -> Response:
    flow_id = page.params["flow_id"]
    columns = StepColumns(page.runner.binding)
    row = step_row(page.form, columns)
    try:
        with page.writing() as conn:
            flow = _flow(conn, page, flow_id)
            _may_edit(page, flow)
            step_id = page.runner.editor.save_step(
                conn, {**row, "flow_id": flow["id"]}, tenant=page.tenant
            )
            page.journal(
                conn, "step.add", flow=flow["name"], step_id=step_id, title=row.get("title")
            )
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, _shown_fields(columns, row, refused))
        return flow_page(page, editing=Editing("new-step", as_values(row), problems))
    return page.redirect(f"/flow/{flow_id}", said="Step added.")


def _shown_fields(columns: StepColumns, row: Mapping[str, Any], refused: errors.RowInvalid) -> Any:
    """The fields a step's form shows once refused: its kind's, its values', its problems'."""
    problems = Problems(fields={e.field: [e.message] for e in refused.errors})
    return {*(c for c in ("position", "kind", "title")), *columns.shown(row, problems)}


def _step(conn: sa.Connection, page: Page) -> tuple[dict[str, Any], dict[str, Any]]:
    """The flow and the step the address names, the step readable by the reader; else 404."""
    flow = _flow(conn, page, page.params["flow_id"])
    step = _rows(page).step(conn, flow["id"], page.params["step_id"], page.tenant)
    if not _readable(page, [step]):
        raise errors.OperatorError(
            f"there is no step {page.params['step_id']!r} in flow {flow['id']!r}",
            status_code=404,
            code="step_unknown",
        )
    return flow, step


def save_step(page: Page) -> Response:
    columns = StepColumns(page.runner.binding)
    changes = step_row(page.form, columns)
    form = f"step-{page.params['step_id']}"
    try:
        with page.writing() as conn:
            flow, stored = _step(conn, page)
            _may_edit(page, flow)
            row = {**stored, **changes, "id": stored["id"]}
            page.runner.editor.save_step(conn, row, tenant=page.tenant)
            page.journal(
                conn, "step.save", flow=flow["name"], step_id=stored["id"], title=row.get("title")
            )
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, _shown_fields(columns, changes, refused))
        return flow_page(page, editing=Editing(form, as_values(changes), problems))
    return page.redirect(f"/flow/{page.params['flow_id']}", said="Step saved.")


def move_step(page: Page) -> Response:
    by = -1 if page.form.get("by") == "up" else 1
    form = f"step-{page.params['step_id']}"
    try:
        with page.writing() as conn:
            flow, stored = _step(conn, page)
            _may_edit(page, flow)
            moved = page.runner.editor.move_step(conn, stored["id"], by, tenant=page.tenant)
            if moved:
                page.journal(
                    conn,
                    "step.move",
                    flow=flow["name"],
                    step_id=stored["id"],
                    title=stored.get("title"),
                    by=by,
                )
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, ())
        return flow_page(page, editing=Editing(form, as_values(stored), problems))
    said = "Step moved." if moved else "The step is already " + ("first." if by < 0 else "last.")
    return page.redirect(f"/flow/{page.params['flow_id']}", said=said)


def delete_step(page: Page) -> Response:
    form = f"step-{page.params['step_id']}"
    try:
        with page.writing() as conn:
            flow, stored = _step(conn, page)
            _may_edit(page, flow)
            page.runner.editor.delete_step(conn, stored["id"], tenant=page.tenant)
            page.journal(
                conn, "step.delete", flow=flow["name"], step_id=stored["id"], title=stored["title"]
            )
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, ())
        return flow_page(page, editing=Editing(form, as_values(stored), problems))
    return page.redirect(f"/flow/{page.params['flow_id']}", said="Step deleted.")


# -- try it on a record --------------------------------------------------------------------

TRY_FIELDS = ("record", "answers", "until", "rows")


def try_flow(page: Page) -> Response:
    """The flow tried on a record: what it would do, nothing kept.

    The flow is tried as saved, or — when the form's ``rows`` (the flow as YAML, filled
    in with the saved rows) was edited — as edited, without saving it: the edited rows
    are judged as a save would judge them first. A reader tries only a flow whose every
    step they may read (the try shows each)."""
    given = {name: page.form.get(name) for name in TRY_FIELDS}
    with page.reading() as conn:
        flow = _flow(conn, page, page.params["flow_id"])
        steps = flow_rows.steps_of_flow(conn, page.runner.tables, flow["id"])
    if len(_readable(page, steps)) != len(steps):
        raise errors.OperatorError(
            f"flow {flow['name']!r} has steps you may not read, so you cannot try it",
            status_code=403,
            code="not_allowed",
        )
    problems = Problems()
    result = None
    tried_flow, tried_steps = _tried_rows(page, flow, given["rows"], problems)
    if not given["record"].strip():
        problems.fields["record"] = ["name the record to try the flow on"]
    elif not problems.fields:
        try:
            result = page.runner.try_flow(
                tried_flow,
                tried_steps,
                given["record"].strip(),
                answers=given["answers"],
                until=given["until"].strip() or "30 days",
                tenant=page.tenant,
            )
        except errors.RowInvalid as refused:
            problems = _try_problems(refused)
        except errors.OperatorError as refused:
            if refused.code != "record_unknown":
                raise
            problems.fields["record"] = [str(refused)]
    return flow_page(page, tried=Tried(given, problems, result))


def _tried_rows(
    page: Page, flow: dict[str, Any], text: str, problems: Problems
) -> tuple[Any, list[dict[str, Any]] | None]:
    """What to try: the saved flow (its id), or its rows as edited in the form's YAML."""
    if not text.strip() or text.strip() == flow_yaml(page, flow).strip():
        return flow["id"], None
    try:
        docs = files.loads_yaml(text)
    except errors.FlowrunnerError as exc:
        problems.fields["rows"] = [f"the rows cannot be read: {exc}"]
        return flow["id"], None
    if len(docs) != 1:
        problems.fields["rows"] = ["write this one flow: its row, and its steps under 'steps'"]
        return flow["id"], None
    # The version an export names says where the rows came from; it is not a column.
    edited = {k: v for k, v in docs[0].flow.items() if k != files.VERSION} | {"id": flow["id"]}
    column = page.runner.binding.tenant
    if column is not None:
        edited[column] = flow[column]
    return edited, docs[0].steps


def flow_yaml(page: Page, flow: dict[str, Any]) -> str:
    """The saved flow as the try form shows it to edit: the export's YAML."""
    docs, _ = _exported(page, flow["id"])
    return files.dumps_yaml(docs) if docs else ""


def _try_problems(refused: errors.RowInvalid) -> Problems:
    """A try's refusal beside its fields: ``answers.N`` beside the answers, as line N+1."""
    found = Problems()
    for error in refused.errors:
        field, _, index = error.field.partition(".")
        if field == "answers" and index.isdigit():
            message = f"line {int(index) + 1}: {error.message}"
            found.fields.setdefault("answers", []).append(message)
        elif field in TRY_FIELDS:
            found.fields.setdefault(field, []).append(error.message)
        else:
            found.general.append(f"{error.field}: {error.message}")
    return found


@dataclasses.dataclass(frozen=True)
class Tried:
    """A try's form as sent, its problems, and what the try showed."""

    given: dict[str, str]
    problems: Problems
    result: Any = None


# -- validation as one types -----------------------------------------------------------------


def check(page: Page) -> Response:
    """What a save would say of one condition or duration, and where: as JSON.

    ``column`` is condition, duration or remind; ``kind`` the step's kind (``flow`` for
    a flow's condition), which decides whether a condition may read ``event.`` and a
    duration may be negative. The sentence is the one a save's 422 gives.
    """
    column = page.query.get("column", "")
    kind = page.query.get("kind", "flow")
    text = page.query.get("text", "")
    if column not in ("condition", "duration", "remind"):
        return JSONResponse({"detail": "column is condition, duration or remind"}, status_code=422)
    if not text.strip():
        return JSONResponse({"ok": True})
    problems: list[errors.FieldError] = []
    position: errors.QueryError | None = None
    # A save reads the text trimmed: the position is found in it, then put back.
    trimmed = text.strip()
    if column == "condition":
        event = kind in page.runner.binding.kinds
        rows.add_condition(problems, trimmed, page.runner.columns, event=event)
        try:
            query.parse(trimmed, page.runner.columns, event=event)
        except errors.QueryError as exc:
            position = exc
    else:
        signed = column == "duration" and kind == "until"
        rows.add_duration(problems, column, trimmed, signed=signed)
        try:
            durations.parse_duration(trimmed, allow_sign=signed)
        except errors.QueryError as exc:
            position = exc
    if not problems:
        return JSONResponse({"ok": True})
    answer: dict[str, Any] = {"ok": False, "message": problems[0].message}
    if position is not None:
        before = text[: len(text) - len(text.lstrip())]
        line, at = position.line, position.column
        if line == 1:
            at += len(before.rsplit("\n", 1)[-1])
        answer |= {"line": line + before.count("\n"), "column": at}
    return JSONResponse(answer)


# -- files ------------------------------------------------------------------------------


def _exported(page: Page, flow_id: Any = None) -> tuple[list[files.FlowDoc], list[str]]:
    """The reader's flows as a file holds them; the names of those left out (a step the
    reader may not read: an import of the file would lose it)."""
    column = page.runner.binding.tenant
    docs: list[files.FlowDoc] = []
    left_out: list[str] = []
    with page.reading() as conn:
        stored = flow_rows.all_flows(conn, page.runner.tables)
        exported = files.export_flows(conn, page.runner.binding, page.runner.tables)
        for flow, doc in zip(stored, exported, strict=True):
            if column is not None and str(flow[column]) != str(page.tenant):
                continue
            if flow_id is not None and str(flow["id"]) != str(flow_id):
                continue
            steps = flow_rows.steps_of_flow(conn, page.runner.tables, flow["id"])
            if len(_readable(page, steps)) != len(steps):
                left_out.append(str(flow["name"]))
                continue
            docs.append(doc)
    return docs, left_out


def _yaml(docs: list[files.FlowDoc], left_out: list[str], name: str) -> Response:
    text = files.dumps_yaml(docs)
    if left_out:
        text = "# Left out, having steps you may not read: " + ", ".join(left_out) + "\n" + text
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "flows"
    return Response(
        text,
        media_type="application/yaml; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{safe}.yaml"'},
    )


def export_all(page: Page) -> Response:
    docs, left_out = _exported(page)
    return _yaml(docs, left_out, "flows")


def export_flow(page: Page) -> Response:
    with page.reading() as conn:
        flow = _flow(conn, page, page.params["flow_id"])
    docs, left_out = _exported(page, flow["id"])
    if left_out:
        raise errors.OperatorError(
            f"flow {flow['name']!r} has steps you may not read, so you cannot export it",
            status_code=403,
            code="not_allowed",
        )
    return _yaml(docs, [], str(flow["name"]))


def import_flows(page: Page) -> Response:
    text = page.form.get("file") or page.form.get("yaml")
    replace = page.form.get("replace") in ("yes", "on", "true")
    column = page.runner.binding.tenant
    try:
        docs = files.loads_yaml(text)
    except errors.FlowrunnerError as exc:
        return flows_list(page, imported=Problems.saying(f"the file cannot be read: {exc}"))
    if not docs:
        return flows_list(page, imported=Problems.saying("the file holds no flow"))
    for doc in docs:
        if column is not None:
            owner = doc.flow.setdefault(column, page.tenant)
            if str(owner) != str(page.tenant):
                return flows_list(
                    page,
                    imported=Problems.saying(
                        f"flow {doc.flow.get('name')!r} is another tenant's ({owner})"
                    ),
                )
        _may_edit(page, doc.flow)
    try:
        with page.writing() as conn:
            if replace:
                _may_replace(conn, page, docs)
            done = files.import_flows(
                conn,
                page.runner.binding,
                page.runner.tables,
                docs,
                replace=replace,
                columns=page.runner.columns,
            )
            page.journal(conn, "flows.import", created=done.created, replaced=done.replaced)
    except errors.RowInvalid as refused:
        return flows_list(page, imported=Problems.of(refused, ()))
    said = f"Imported {len(done.created) + len(done.replaced)} flows with {done.steps} steps."
    return page.redirect("/", said=said)


def _may_replace(conn: sa.Connection, page: Page, docs: Sequence[files.FlowDoc]) -> None:
    """A flow an import replaces must be one the reader may edit and read whole."""
    from flowrunner.flows import spelling

    names = {spelling.name_key(d.flow.get("name")) for d in docs}
    for flow in _rows(page).flows(conn, page.tenant):
        if spelling.name_key(flow.get("name")) not in names:
            continue
        _may_edit(page, flow)
        steps = flow_rows.steps_of_flow(conn, page.runner.tables, flow["id"])
        if len(_readable(page, steps)) != len(steps):
            raise errors.OperatorError(
                f"flow {flow['name']!r} has steps you may not read, so an import cannot replace it",
                status_code=403,
                code="not_allowed",
            )


ROUTES = [
    ("GET", "/", flows_list),
    ("POST", "/flows", create_flow),
    ("GET", "/flow/{flow_id}", flow_page),
    ("POST", "/flow/{flow_id}", save_flow),
    ("POST", "/flow/{flow_id}/delete", delete_flow),
    ("POST", "/flow/{flow_id}/steps", add_step),
    ("POST", "/flow/{flow_id}/step/{step_id}", save_step),
    ("POST", "/flow/{flow_id}/step/{step_id}/move", move_step),
    ("POST", "/flow/{flow_id}/step/{step_id}/delete", delete_step),
    ("POST", "/flow/{flow_id}/try", try_flow),
    ("GET", "/check", check),
    ("GET", "/export.yaml", export_all),
    ("GET", "/flow/{flow_id}/export.yaml", export_flow),
    ("POST", "/import", import_flows),
]
