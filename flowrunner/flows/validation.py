"""Checks across rows, and the one place a save or a snapshot is judged whole.

``flowrunner.flows.rows`` checks a row on its own; here a row meets its flow: a ``goto``
and an ``on_failure`` name an existing position, a branch stands alone at its position, a
flow's name is unique, and the last step at a position another step goes to cannot be
removed.
Forms and HTTP handlers call ``validate_flow_row``/``validate_step_row`` directly;
``check`` re-judges a run's snapshot and names the first broken row in a sentence.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from flowrunner import binding as binding_mod
from flowrunner import errors, query
from flowrunner.flows import loops, rows, snapshot, spelling
from flowrunner.foundations import shapes

Row = shapes.Row
# A problem and the row (by identity) it belongs to.
Problem = tuple[Row, errors.FieldError]


# Every code a FieldError about a flow or step row can carry, and what it means.
CODES = {
    "type_invalid": "a value of the wrong type (a position that is not a whole number)",
    "column_unknown": "a column the table does not have (or a resource column that is unknown)",
    "column_required": "a column the row or its kind needs is empty",
    "column_not_read": "a column the kind does not read is filled",
    "kind_unknown": "the kind is neither built in nor the binding's",
    "position_invalid": "a negative position",
    "goto_invalid": "a negative goto",
    "goto_unknown": "a goto names a position the flow does not have",
    "goto_target_in_use": (
        "removing or moving the last step at a position a goto or an on_failure names"
    ),
    "on_failure_invalid": "a negative on_failure",
    "on_failure_unknown": "an on_failure names a position the flow does not have",
    "branch_not_alone": "a branch shares its position with another step",
    "duration_invalid": "a duration that cannot be read",
    "duration_not_positive": "a duration of nothing, or negative where it cannot be",
    "calendar_missing": "business time where no calendar applies to the flow",
    "calendar_unknown": "a flow names a calendar the binding does not have",
    "field_not_settable": "a set step's field is not one of the binding's set columns",
    "field_not_date": "an until step's field is not a date or timestamp column",
    "value_invalid": "a set step's value does not fit its field",
    "value_required": "a set step writes null into a column that always has a value",
    "value_not_whole": "a set step writes a fraction into a column of whole numbers",
    "value_out_of_range": "a set step's number is beyond what its column holds",
    "value_too_precise": "a set step's number has more digits after the point than its column",
    "value_too_long": "a set step's text is longer than its column holds",
    "condition_invalid": "a condition that cannot be read against the record's columns",
    "event_unknown": "a waitFor step's event is not one of the binding's",
    "event_field_unknown": "a condition reads an event field its event's shape does not have",
    "audience_unknown": "a notify step's audience has no notify rule",
    "message_too_long": "a notify message over 500 characters",
    "message_invalid": "a notify message with a placeholder that is not a plain {column}",
    "message_unknown_column": "a notify message names a column the record does not have",
    "message_secret_column": "a notify message names a column that holds a secret",
    "mode_invalid": "a mode other than any, all, a count or a share",
    "remind_unavailable": "remind on a kind that has no remind command",
    "start_invalid": "a flow's start other than created, updated, manual or schedule",
    "changes_without_update": "changes on a flow that does not start on updated",
    "schedule_invalid": "a schedule that is not cron fields and a time zone",
    "schedule_without_start": "a schedule on a flow that does not start on schedule",
    "name_too_long": "a flow name over 200 characters",
    "name_taken": "another flow (of the same tenant) has the name, whatever its case",
    "changes_key": "changes names the record's key column, which an update never changes",
    "loop_without_wait": (
        "a goto or on_failure can come back to its position without passing a step that waits"
    ),
    "flow_unknown": "the step's flow, or the flow being updated, does not exist",
    "step_unknown": "the step being updated does not exist",
    "flow_has_steps": "an ORM flush deletes a flow but not its steps",
    "tenant_mismatch": "a step's tenant is not its flow's",
    "field_unknown": "a subflow's field is not a column of the resource (or is its key)",
    "subflow_unknown": "a subflow names a flow that does not exist",
    "subflow_not_manual": "a subflow names a flow that does not start manually",
    "subflow_cycle": "a subflow would start its own flow again, directly or through others",
    "subflow_in_use": "renaming, starting otherwise or deleting a flow another runs as a subflow",
}


class RowsInvalid(errors.RowInvalid):
    """Several rows refused together (an import, a flush), each named with its problems."""

    def __init__(self, problems: Sequence[tuple[str, Sequence[errors.FieldError]]]) -> None:
        self.rows = [(label, list(found)) for label, found in problems]
        flat = [e for _, found in self.rows for e in found]
        super().__init__(flat)
        self.args = ("\n".join(f"{label}: {_joined(found)}" for label, found in self.rows),)

    def __str__(self) -> str:
        return str(self.args[0])

    def to_dict(self) -> shapes.JsonDict:
        return {
            "detail": [
                e.to_dict(loc_prefix=("body", label)) for label, found in self.rows for e in found
            ]
        }


def _joined(found: Sequence[errors.FieldError]) -> str:
    return "; ".join(f"{e.field}: {e.message}" for e in found)


# -- labels ------------------------------------------------------------------------


def flow_label(flow: Row) -> str:
    name = flow.get("name")
    return f"flow '{name}'" if name else "a flow without a name"


def step_label(step: Row, flow: Row | None = None) -> str:
    """``flow 'Big orders', step 'Manager approval' (approval, position 2)``."""
    title = step.get("title")
    kind = step.get("kind") or "no kind"
    head = f"{flow_label(flow)}, " if flow is not None else ""
    name = f"step '{title}'" if title else "step"
    return f"{head}{name} ({kind}, position {step.get('position')})"


# -- flows -------------------------------------------------------------------------


def errors_for_flow_row(
    binding: binding_mod.FlowBinding,
    row: Row,
    columns: Mapping[str, query.ColumnType],
    *,
    existing: Iterable[Row] = (),
    extra: Collection[str] = (),
) -> list[errors.FieldError]:
    """Every problem of a flow row; ``existing`` are the table's other flow rows."""
    found = rows.flow_errors(binding, row, columns, extra=extra)
    taken = name_taken(binding, row, existing)
    if taken is not None:
        found.append(taken)
    return found


def name_taken(
    binding: binding_mod.FlowBinding, row: Row, existing: Iterable[Row]
) -> errors.FieldError | None:
    """The problem of a flow name another flow (of the same tenant) has, whatever its case."""
    key = spelling.name_key(row.get("name"))
    if key is None:
        return None
    for other in existing:
        if _same_row(other, row) or not _same_tenant(binding, other, row):
            continue
        if spelling.name_key(other.get("name")) == key:
            theirs = _strip(other.get("name"))
            message = f"there is already a flow named '{theirs}'"
            if theirs != _strip(row.get("name")):
                message += " (names are the same whatever their case)"
            return errors.FieldError("name", message, "name_taken")
    return None


def validate_flow_row(
    binding: binding_mod.FlowBinding,
    row: Row,
    columns: Mapping[str, query.ColumnType],
    *,
    existing: Iterable[Row] = (),
    extra: Collection[str] = (),
) -> None:
    """Raise ``RowInvalid`` listing every problem of the flow row, or return None."""
    found = errors_for_flow_row(binding, row, columns, existing=existing, extra=extra)
    if found:
        raise errors.RowInvalid(found, row=flow_label(row))


# -- steps -------------------------------------------------------------------------


def state_problems(
    binding: binding_mod.FlowBinding,
    columns: Mapping[str, query.ColumnType],
    steps: Sequence[Row],
    *,
    changed: Collection[int] | None = None,
    removed: Sequence[Row] = (),
    need_flow: bool = True,
    extra: Collection[str] = (),
    flow: Row | None = None,
) -> list[Problem]:
    """The problems of a flow's steps as they would stand after a change.

    ``steps`` is the whole final state; ``changed`` the indexes of the rows being
    written (None: all); ``removed`` the rows deleted, or the old versions of rows
    moved to another position. A goto left pointing nowhere by a removal is the
    removed row's problem. ``flow`` is the steps' flow row, when known (the calendar
    its business time counts on).
    """
    todo = range(len(steps)) if changed is None else changed
    found: list[Problem] = []
    for i in todo:
        found.extend(
            (steps[i], e)
            for e in rows.step_errors(binding, steps[i], columns, need_flow=need_flow, extra=extra)
        )
        found.extend((steps[i], e) for e in rows.business_problems(binding, steps[i], flow))
    at: dict[int, list[int]] = {}
    for i, step in enumerate(steps):
        position = _whole(step.get("position"))
        if position is not None:
            at.setdefault(position, []).append(i)
    for i in todo:
        step = steps[i]
        goto = _whole(step.get("goto"))
        if goto is not None and goto >= 0 and goto not in at and _kind(step) == "branch":
            found.append(
                (
                    step,
                    errors.FieldError(
                        "goto",
                        f"there is no step at position {goto} in this flow",
                        "goto_unknown",
                    ),
                )
            )
        fault = _on_failure(binding, step)
        if fault is not None and fault >= 0 and fault not in at:
            message = f"there is no step at position {fault} in this flow to go to if it fails"
            found.append((step, errors.FieldError("on_failure", message, "on_failure_unknown")))
        position = _whole(step.get("position"))
        if position is None or len(at.get(position, ())) < 2:
            continue
        others = [steps[j] for j in at[position] if j != i]
        if _kind(step) == "branch":
            names = ", ".join(_short(o) for o in others)
            message = (
                f"a branch stands alone at its position, but position {position} also has {names}"
            )
            found.append((step, errors.FieldError("position", message, "branch_not_alone")))
        elif any(_kind(o) == "branch" for o in others):
            message = (
                f"position {position} holds a branch, which stands alone — choose another position"
            )
            found.append((step, errors.FieldError("position", message, "branch_not_alone")))
    for old in removed:
        position = _whole(old.get("position"))
        if position is None or position in at:
            continue
        for step in steps:
            if _whole(step.get("goto")) == position and _kind(step) == "branch":
                message = (
                    f"{_short(step)} at position {step.get('position')} goes to position "
                    f"{position}, so its last step cannot be removed"
                )
                found.append((old, errors.FieldError("position", message, "goto_target_in_use")))
                break
            if _on_failure(binding, step) == position:
                message = (
                    f"{_short(step)} at position {step.get('position')} goes to position "
                    f"{position} if it fails, so its last step cannot be removed"
                )
                found.append((old, errors.FieldError("position", message, "goto_target_in_use")))
                break
    found.extend(loop_problems(binding, steps, changed=changed, removed=removed))
    return found


def flow_loops(binding: binding_mod.FlowBinding, steps: Sequence[Row]) -> list[loops.Loop]:
    """The loops of a flow's step rows that pass no step that waits (``loops.find``)."""
    points: dict[int, loops.Point] = {}
    for step in steps:
        position = _whole(step.get("position"))
        if position is None:
            continue
        point = points.get(position, loops.Point())
        goto = _whole(step.get("goto")) if _kind(step) == "branch" else None
        fault = _on_failure(binding, step)
        points[position] = loops.Point(
            waits=point.waits or loops.waits(binding, _kind(step)),
            goto=point.goto if goto is None else goto,
            faults=point.faults if fault is None else (*point.faults, fault),
        )
    return loops.find(points)


def loop_problems(
    binding: binding_mod.FlowBinding,
    steps: Sequence[Row],
    *,
    changed: Collection[int] | None = None,
    removed: Sequence[Row] = (),
) -> list[Problem]:
    """The loops of a flow's steps that never wait (``flowrunner.flows.loops``), as row problems.

    ``steps``, ``changed`` and ``removed`` as for ``state_problems``. Judging a whole
    flow (``changed`` None), each loop is the problem of the branches whose goto jumps
    back inside it. Judging a change, it is the problem of the changed rows that close
    it (else of the changed rows in it, else of each removed row whose position lay
    within it) — so a flow that loops already is refused only an edit of its loop.
    """
    found: list[Problem] = []
    order = sorted({p for p in (_whole(s.get("position")) for s in steps) if p is not None})
    todo = range(len(steps)) if changed is None else changed
    for loop in flow_loops(binding, steps):
        said = loop.sentence(order)

        def closes(step: Row, loop: loops.Loop = loop) -> str | None:
            """The column whose jump closes the loop at this step (goto, on_failure)."""
            position = _whole(step.get("position"))
            if position is None:
                return None
            goto = _whole(step.get("goto")) if _kind(step) == "branch" else None
            if loop.closes(position, goto):
                return "goto"
            if loop.closes(position, _on_failure(binding, step)):
                return "on_failure"
            return None

        culprits: list[tuple[int, str | None]] = [
            (i, jump) for i in todo if (jump := closes(steps[i])) is not None
        ]
        if not culprits and changed is not None:
            culprits = [
                (i, None) for i in todo if _whole(steps[i].get("position")) in loop.positions
            ]
        for i, jump in culprits:
            step = steps[i]
            if len(loop.positions) == 1:
                message = f"{said}: name another position in {jump or 'goto'}, or leave it empty"
            else:
                message = f"{said}: add a wait inside the loop"
            field = jump or ("goto" if _kind(step) == "branch" else "kind")
            found.append((step, errors.FieldError(field, message, "loop_without_wait")))
        for old in [] if culprits else removed:
            position = _whole(old.get("position"))
            if position is not None and loop.spans(position):
                message = (
                    f"without this step at position {position}, {said}: keep a wait inside the loop"
                )
                found.append((old, errors.FieldError("position", message, "loop_without_wait")))
    return found


def subflow_problems(
    binding: binding_mod.FlowBinding,
    flow: Row,
    steps: Sequence[Row],
    flows: Iterable[Row],
    subflows: Iterable[Row],
    *,
    changed: Collection[int] | None = None,
) -> list[Problem]:
    """The problems of a flow's subflow steps among the other flows of its resource.

    ``flow`` and ``steps`` are the flow judged and its steps as they would stand;
    ``changed`` the indexes of the steps being written (None: all). ``flows`` are the
    stored flows (the judged one's stored row, by id, is left out) and ``subflows`` their
    subflow steps, each with its ``flow_id``. The flow a subflow names in ``value`` must
    exist (of the same tenant) and start manually, and no chain of subflows may lead
    back to the flow judged: the sentence names the chain.
    """
    todo = range(len(steps)) if changed is None else changed
    mine = [i for i in todo if _kind(steps[i]) == rows.SUBFLOW and _strip(steps[i].get("value"))]
    if not mine:
        return []
    others = [f for f in flows if not _same_row(f, flow) and _same_tenant(binding, f, flow)]
    own = spelling.name_key(flow.get("name"))
    by_name: dict[str | None, Row] = {spelling.name_key(f.get("name")): f for f in others}
    if own is not None:
        by_name[own] = flow
    key_of_id = {str(f.get("id")): spelling.name_key(f.get("name")) for f in others}
    ways: dict[str | None, list[str | None]] = {}
    for step in subflows:
        source = key_of_id.get(str(step.get("flow_id")))
        if source is not None and source != own and _kind(step) == rows.SUBFLOW:
            ways.setdefault(source, []).append(spelling.name_key(step.get("value")))
    ways[own] = [spelling.name_key(s.get("value")) for s in steps if _kind(s) == rows.SUBFLOW]
    found: list[Problem] = []
    for i in mine:
        step = steps[i]
        name = str(_strip(step.get("value")))
        target = by_name.get(spelling.name_key(name))
        if target is None:
            manual = sorted(
                str(f.get("name")) for f in by_name.values() if f.get("start") == "manual"
            )
            message = (
                f"there is no flow named '{name}' to run as a subflow"
                f" (manual flows: {', '.join(manual) or 'none'})"
            )
            message += spelling.did_you_mean(name, manual, joint="; ")
            found.append((step, errors.FieldError("value", message, "subflow_unknown")))
            continue
        if target.get("start") != "manual":
            message = (
                f"flow '{target.get('name')}' starts when a record is {target.get('start')}; "
                "a subflow runs only a flow that starts manually"
            )
            found.append((step, errors.FieldError("value", message, "subflow_not_manual")))
            continue
        chain = _chain_back(ways, spelling.name_key(name), own)
        if chain is not None:
            names = {k: str(by_name[k].get("name")) for k in by_name}
            said = " → ".join(names.get(k, str(k)) for k in [own, *chain])
            message = (
                f"a subflow may not start its own flow again, directly or through others: {said}"
            )
            found.append((step, errors.FieldError("value", message, "subflow_cycle")))
    return found


def subflow_users(
    binding: binding_mod.FlowBinding,
    stored: Row,
    row: Row | None,
    flows: Iterable[Row],
    subflows: Iterable[Row],
) -> list[errors.FieldError]:
    """Why the stored flow ``stored`` may not become ``row`` (None: be deleted): other
    flows' subflow steps run it by its name, and need it to keep that name and start
    manually."""
    name = spelling.name_key(stored.get("name"))
    if stored.get("start") != "manual" or name is None:
        return []
    kept = (
        row is not None
        and spelling.name_key(row.get("name")) == name
        and row.get("start") == "manual"
    )
    if kept:
        return []
    by_id = {
        str(f.get("id")): f
        for f in flows
        if not _same_row(f, stored) and _same_tenant(binding, f, stored)
    }
    users = [
        f"flow '{by_id[str(s.get('flow_id'))].get('name')}' ({_short(s)})"
        for s in subflows
        if str(s.get("flow_id")) in by_id
        and _kind(s) == rows.SUBFLOW
        and spelling.name_key(s.get("value")) == name
    ]
    if not users:
        return []
    listed = users[0] if len(users) == 1 else f"{', '.join(users[:-1])} and {users[-1]}"
    runs = "runs" if len(users) == 1 else "run"
    if row is None:
        message = f"{listed} {runs} this flow as a subflow; remove that step first"
        return [errors.FieldError("id", message, "subflow_in_use")]
    field = "name" if spelling.name_key(row.get("name")) != name else "start"
    message = (
        f"{listed} {runs} '{stored.get('name')}' as a subflow: it keeps its name and starts "
        "manually while it does"
    )
    return [errors.FieldError(field, message, "subflow_in_use")]


def _chain_back(
    ways: Mapping[str | None, Sequence[str | None]], start: str | None, goal: str | None
) -> list[str | None] | None:
    """The flows from ``start`` along subflows that reach ``goal`` (both included), or None."""
    seen: set[str | None] = set()
    path: list[str | None] = []

    def walk(at: str | None) -> bool:
        path.append(at)
        if at == goal:
            return True
        if at not in seen:
            seen.add(at)
            for nxt in ways.get(at, ()):
                if walk(nxt):
                    return True
        path.pop()
        return False

    return path if walk(start) else None


def errors_for_step_row(
    binding: binding_mod.FlowBinding,
    row: Row,
    columns: Mapping[str, query.ColumnType],
    *,
    siblings: Iterable[Row] = (),
    flow: Row | None = None,
    extra: Collection[str] = (),
) -> list[errors.FieldError]:
    """Every problem of a step row among its flow's stored steps (``siblings``).

    A sibling with the row's ``id`` is the row's stored version (an update).
    """
    stored = [s for s in siblings]
    old = next((s for s in stored if _same_row(s, row)), None)
    steps = [s for s in stored if s is not old] + [row]
    moved = (
        [old]
        if old is not None and _whole(old.get("position")) != _whole(row.get("position"))
        else []
    )
    found = [
        e
        for _, e in state_problems(
            binding,
            columns,
            steps,
            changed=[len(steps) - 1],
            removed=moved,
            extra=extra,
            flow=flow,
        )
    ]
    tenant = binding.tenant
    if flow is not None and tenant is not None and row.get(tenant) != flow.get(tenant):
        message = "a step belongs to its flow's tenant"
        found.append(errors.FieldError(tenant, message, "tenant_mismatch"))
    return found


def validate_step_row(
    binding: binding_mod.FlowBinding,
    row: Row,
    columns: Mapping[str, query.ColumnType],
    *,
    siblings: Iterable[Row] = (),
    flow: Row | None = None,
    extra: Collection[str] = (),
) -> None:
    """Raise ``RowInvalid`` listing every problem of the step row, or return None."""
    found = errors_for_step_row(binding, row, columns, siblings=siblings, flow=flow, extra=extra)
    if found:
        raise errors.RowInvalid(found, row=step_label(row, flow))


def errors_for_step_delete(
    binding: binding_mod.FlowBinding, row: Row, *, siblings: Iterable[Row] = ()
) -> list[errors.FieldError]:
    """Why deleting the step ``row`` is refused (a goto still needs its position), if it is."""
    steps = [s for s in siblings if not _same_row(s, row)]
    return [e for _, e in state_problems(binding, {}, steps, changed=(), removed=[row])]


# -- a whole flow ------------------------------------------------------------------


def errors_for_flow(
    binding: binding_mod.FlowBinding,
    flow: Row,
    steps: Sequence[Row],
    columns: Mapping[str, query.ColumnType],
    *,
    existing: Iterable[Row] = (),
    need_flow: bool = False,
    extra: Collection[str] = (),
) -> list[tuple[str, list[errors.FieldError]]]:
    """Every problem of a flow and its steps, by row label; empty when all is sound."""
    found: list[tuple[str, list[errors.FieldError]]] = []
    flow_errors = errors_for_flow_row(binding, flow, columns, existing=existing, extra=extra)
    if flow_errors:
        found.append((flow_label(flow), flow_errors))
    by_row: dict[int, list[errors.FieldError]] = {}
    for row, error in state_problems(
        binding, columns, steps, need_flow=need_flow, extra=extra, flow=flow
    ):
        by_row.setdefault(id(row), []).append(error)
    found.extend((step_label(s, flow), by_row[id(s)]) for s in steps if id(s) in by_row)
    return found


def check(
    snap: snapshot.FlowSnapshot,
    binding: binding_mod.FlowBinding,
    columns: Mapping[str, query.ColumnType],
) -> str | None:
    """One sentence naming the first row of the snapshot that no longer fits, or None.

    e.g. ``flow 'Big orders', step 'Manager approval' (approval, position 2): kind
    'approval' is not in the binding — use one of set, wait, ...``
    """
    found = sentences(snap, binding, columns)
    return found[0] if found else None


def sentences(
    snap: snapshot.FlowSnapshot,
    binding: binding_mod.FlowBinding,
    columns: Mapping[str, query.ColumnType],
) -> list[str]:
    """A sentence for every problem of every row of the snapshot; empty when it is sound."""
    steps = step_rows(snap)
    # Every column in a snapshot is one its table has: the application's own columns
    # are not flowrunner's business, and a removed kind's inputs are named by its kind.
    extra = {column for step in steps for column in step}
    found = errors_for_flow(binding, flow_row(snap, binding), steps, columns, extra=extra)
    return [f"{label}: {e.message}" for label, errs in found for e in errs]


def flow_row(snap: snapshot.FlowSnapshot, binding: binding_mod.FlowBinding) -> shapes.RowDict:
    """The snapshot's flow as a row again."""
    row: shapes.RowDict = {
        "id": snap.flow.id,
        "name": snap.flow.name,
        "start": snap.flow.start,
        "condition": snap.flow.condition,
        "changes": snap.flow.changes,
        "active": snap.flow.active,
    }
    if snap.flow.calendar is not None:
        row["calendar"] = snap.flow.calendar
    if snap.flow.schedule is not None:
        row["schedule"] = snap.flow.schedule
    if binding.tenant is not None:
        row[binding.tenant] = snap.flow.tenant
    return row


def step_rows(snap: snapshot.FlowSnapshot) -> list[shapes.RowDict]:
    """The snapshot's steps as rows again (without ``flow_id`` or the tenant)."""
    return [
        {"id": s.id, "position": s.position, "kind": s.kind, "title": s.title, **s.columns}
        for s in snap.steps
    ]


# -- small helpers -----------------------------------------------------------------


def _short(step: Row) -> str:
    title = step.get("title")
    return f"'{title}'" if title else f"the {step.get('kind') or 'untitled'} step"


def _kind(step: Row) -> str | None:
    """The step's kind in its canonical spelling (``WAIT`` is ``wait``)."""
    kind = step.get("kind")
    return spelling.canonical_kind(kind) if isinstance(kind, str) else None


def _on_failure(binding: binding_mod.FlowBinding, step: Row) -> int | None:
    """Where a step that runs a command goes if it fails for good (None: nowhere)."""
    kind = _kind(step)
    if kind is None or (kind not in binding.kinds and kind != rows.SUBFLOW):
        return None  # a built-in kind runs no command: its on_failure is refused alone
    return _whole(step.get("on_failure"))


def _strip(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _whole(value: object) -> int | None:
    try:
        return rows.whole(value)
    except ValueError:
        return None


def _same_row(a: Row, b: Row) -> bool:
    return a.get("id") is not None and a.get("id") == b.get("id")


def _same_tenant(binding: binding_mod.FlowBinding, a: Row, b: Row) -> bool:
    return binding.tenant is None or a.get(binding.tenant) == b.get(binding.tenant)
