"""The validated Core writes of flow and step rows.

Every write here is judged first (``flowrunner.flows.validation``) and refused with
``RowInvalid`` before anything is stored; the statements (``store.flow_rows``) run on
the caller's connection, inside the caller's transaction. ``tables`` is what
``flowrunner.tables.reflect`` read once; ``FlowRunner.save_flow`` and its siblings pass
the runner's::

    tables = flowrunner.tables.reflect(engine, binding)
    with engine.begin() as conn:
        flow_id = saving.save_flow(conn, binding, tables, {"name": "Big", "start": "created"})

The ORM's writes are judged by ``flowrunner.flows.orm_hook`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from flowrunner import binding as binding_mod
from flowrunner import errors, query
from flowrunner.flows import rows, spelling, validation
from flowrunner.foundations import shapes, sqltypes
from flowrunner.store import app_tables, flow_rows

Columns = Mapping[str, query.ColumnType] | None


def resource_columns(
    binding: binding_mod.FlowBinding, tables: app_tables.AppTables, columns: Columns = None
) -> Mapping[str, query.ColumnType]:
    """``columns`` if given, else the resource's column types as ``tables`` read them."""
    return columns if columns is not None else binding.check(tables.metadata).resource_columns


# -- ids -------------------------------------------------------------------------


def _with_ids(
    row: shapes.Row,
    columns: Mapping[str, sqltypes.TableColumn],
    label: Callable[[shapes.Row], str],
) -> shapes.Row:
    """``row`` with its ids as integers (``"7"`` from a form is 7); ``RowInvalid`` if not.

    Each id is bounded by its column's integer size, so no id reaches the database as a
    number the column cannot hold. An id column of another type is left to the database.
    """
    limits = {name: app_tables.id_limit(column) for name, column in columns.items()}
    found, problems = rows.read_ids(row, {k: v for k, v in limits.items() if v is not None})
    if problems:
        raise errors.RowInvalid(problems, row=label(row))
    return found


def read_id(value: object, column: sqltypes.TableColumn) -> object:
    """An id as ``column`` holds it (``"7"`` is 7), or None when it cannot be one (text
    that is no number, a number past the column's size): such an id names no row."""
    limit = app_tables.id_limit(column)
    if limit is None:
        return value
    try:
        return rows.whole(value, limit=limit)
    except ValueError:
        return None


def _one_id(value: object, column: sqltypes.TableColumn) -> object:
    return _with_ids({"id": value}, {"id": column}, lambda _: "")["id"]


# -- flows -------------------------------------------------------------------------


def flow_values(
    binding: binding_mod.FlowBinding, row: shapes.Row, extra: Collection[str] = ()
) -> shapes.RowDict:
    """The flow row as it is stored: trimmed, its words in their canonical spelling
    (``start: Created`` is ``created``), ``active`` true unless said. The ORM hook stores
    the same."""
    flow, _ = rows.read_flow(binding, row, extra)
    values = flow.model_dump(exclude={"id"})
    values.update({k: row[k] for k in extra if k in row})
    if values["active"] is None:
        values["active"] = True
    if binding.tenant is not None:
        values[binding.tenant] = row.get(binding.tenant)
    return values


def save_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    row: shapes.Row,
    *,
    columns: Columns = None,
) -> Any:
    """Insert the flow row (or update it, when it has an ``id``); return its id."""
    row = _with_ids(row, {"id": tables.flows.c.id}, validation.flow_label)
    existing = flow_rows.all_flows(conn, tables)
    flow_id = row.get("id")
    if flow_id is not None and not any(
        f["id"] == flow_id and _same_owner(binding, f, row) for f in existing
    ):
        # Another tenant's flow is unknown to this one: never overwritten by its id.
        raise _unknown("flow", flow_id, validation.flow_label(row))
    extra = tables.flow_extra
    cols = resource_columns(binding, tables, columns)
    validation.validate_flow_row(binding, row, cols, existing=existing, extra=extra)
    values = flow_values(binding, row, extra)
    stored = next((f for f in existing if flow_id is not None and f["id"] == flow_id), None)
    if stored is not None:
        _refuse_subflow_change(conn, binding, tables, stored, values, existing)
    return flow_rows.store_flow(conn, tables, flow_id, values)


def _refuse_subflow_change(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    stored: shapes.Row,
    row: shapes.Row | None,
    existing: Sequence[shapes.Row],
) -> None:
    """``RowInvalid`` when other flows run ``stored`` as a subflow and ``row`` would
    rename it, make it start otherwise, or (None) delete it."""
    if stored.get("start") != "manual":
        return
    found = validation.subflow_users(
        binding, stored, row, existing, flow_rows.subflow_steps(conn, tables)
    )
    if found:
        raise errors.RowInvalid(found, row=validation.flow_label(stored))


def update_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    flow_id: object,
    changes: shapes.Row,
    *,
    columns: Columns = None,
) -> None:
    """Change some columns of a stored flow row, validated as a whole row."""
    flow_id = _one_id(flow_id, tables.flows.c.id)
    stored = flow_rows.flow_by_id(conn, tables, flow_id)
    if stored is None:
        raise _unknown("flow", flow_id)
    save_flow(conn, binding, tables, {**stored, **changes, "id": flow_id}, columns=columns)


def delete_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    flow_id: object,
) -> None:
    """Delete a flow and its steps, unless another flow runs it as a subflow. Runs
    already started keep their snapshot."""
    flow_id = _one_id(flow_id, tables.flows.c.id)
    existing = flow_rows.all_flows(conn, tables)
    stored = next((f for f in existing if f["id"] == flow_id), None)
    if stored is not None:
        _refuse_subflow_change(conn, binding, tables, stored, None, existing)
    flow_rows.delete_flow(conn, tables, flow_id)


# -- steps -------------------------------------------------------------------------


def step_values(
    binding: binding_mod.FlowBinding,
    row: shapes.Row,
    flow: shapes.Row,
    extra: Collection[str] = (),
) -> shapes.RowDict:
    """The step row as it is stored: trimmed, positions as numbers, the built-in kinds
    and modes in their canonical spelling (``WAITFOR`` is ``waitFor``, ``All`` is
    ``all``). The ORM hook stores the same."""
    step, _ = rows.read_step(binding, row, extra)
    values = step.model_dump(exclude={"id"})
    values.update({k: row[k] for k in extra if k in row})
    if binding.tenant is not None:
        values[binding.tenant] = row.get(binding.tenant, flow.get(binding.tenant))
    return values


def _flow_of(conn: sa.Connection, tables: app_tables.AppTables, row: shapes.Row) -> shapes.RowDict:
    flow_id = row.get("flow_id")
    try:
        flow_key = rows.whole(flow_id)
    except ValueError:
        flow_key = None
    flow = None if flow_key is None else flow_rows.flow_by_id(conn, tables, flow_key)
    if flow is None:
        label = validation.step_label(row)
        if flow_id is not None:
            raise _unknown("flow", flow_id, label, field="flow_id")
        message = "a step belongs to a flow; name its flow"
        raise errors.RowInvalid(
            [errors.FieldError("flow_id", message, "column_required")], row=label
        )
    return flow


def _same_owner(binding: binding_mod.FlowBinding, stored: shapes.Row, row: shapes.Row) -> bool:
    """Whether a stored row is of the tenant the row written over it names (no tenants:
    always)."""
    column = binding.tenant
    if column is None:
        return True
    owner, claimed = stored.get(column), row.get(column)
    return owner is not None and claimed is not None and str(owner) == str(claimed)


def _unknown(
    what: str, row_id: object, row: str | None = None, *, field: str = "id"
) -> errors.RowInvalid:
    """The refusal of a row naming a flow or step (``what``) that is not stored."""
    message = f"there is no {what} with id {row_id!r}"
    return errors.RowInvalid([errors.FieldError(field, message, f"{what}_unknown")], row=row)


def save_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    row: shapes.Row,
    *,
    columns: Columns = None,
) -> Any:
    """Insert the step row (or update it, when it has an ``id``); return its id."""
    steps = tables.steps
    row = _with_ids(row, {"id": steps.c.id, "flow_id": steps.c.flow_id}, validation.step_label)
    flow = _flow_of(conn, tables, row)
    siblings = flow_rows.steps_of_flow(conn, tables, flow["id"])
    step_id = row.get("id")
    stored = None
    if step_id is not None:
        stored = flow_rows.step_by_id(conn, tables, step_id)
        if stored is None:
            raise _unknown("step", step_id, validation.step_label(row, flow))
    if binding.tenant is not None and binding.tenant not in row:
        row = {**row, binding.tenant: flow.get(binding.tenant)}
    if stored is not None and not _same_owner(binding, stored, row):
        # Another tenant's step is unknown to this one: never overwritten by its id.
        raise _unknown("step", step_id, validation.step_label(row))
    extra = tables.step_extra
    cols = resource_columns(binding, tables, columns)
    validation.validate_step_row(binding, row, cols, siblings=siblings, flow=flow, extra=extra)
    _refuse_subflow(conn, binding, tables, flow, row)
    if stored is not None and stored["flow_id"] != flow["id"]:
        # Moving a step to another flow removes it from its old one.
        _refuse_removal(conn, binding, tables, stored)
    return flow_rows.store_step(conn, tables, step_id, step_values(binding, row, flow, extra))


def _refuse_subflow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    flow: shapes.Row,
    row: shapes.Row,
) -> None:
    """``RowInvalid`` when the step is a subflow naming a flow it may not start: one
    that does not exist, is not manual, or would start ``flow`` again."""
    if spelling.canonical_kind(str(row.get("kind") or "")) != rows.SUBFLOW:
        return
    siblings = [
        s
        for s in flow_rows.steps_of_flow(conn, tables, flow["id"])
        if str(s["id"]) != str(row.get("id"))
    ]
    steps = [*siblings, row]
    found = validation.subflow_problems(
        binding,
        flow,
        steps,
        flow_rows.all_flows(conn, tables),
        flow_rows.subflow_steps(conn, tables),
        changed=[len(steps) - 1],
    )
    if found:
        raise errors.RowInvalid([e for _, e in found], row=validation.step_label(row, flow))


def update_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    step_id: object,
    changes: shapes.Row,
    *,
    columns: Columns = None,
) -> None:
    """Change some columns of a stored step row, validated as a whole row."""
    step_id = _one_id(step_id, tables.steps.c.id)
    stored = flow_rows.step_by_id(conn, tables, step_id)
    if stored is None:
        raise _unknown("step", step_id)
    save_step(conn, binding, tables, {**stored, **changes, "id": step_id}, columns=columns)


def delete_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    step_id: object,
) -> None:
    """Delete a step, unless it is the last at a position another step's goto names, or
    the wait a loop needs; a step that does not exist is refused too."""
    step_id = _one_id(step_id, tables.steps.c.id)
    stored = flow_rows.step_by_id(conn, tables, step_id)
    if stored is None:
        raise _unknown("step", step_id)
    _refuse_removal(conn, binding, tables, stored)
    flow_rows.delete_step(conn, tables, step_id)


def _refuse_removal(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    stored: shapes.Row,
) -> None:
    siblings = flow_rows.steps_of_flow(conn, tables, stored["flow_id"])
    found = validation.errors_for_step_delete(binding, stored, siblings=siblings)
    if found:
        flow = flow_rows.flow_by_id(conn, tables, stored["flow_id"])
        raise errors.RowInvalid(found, row=validation.step_label(stored, flow))


def moved(steps: Sequence[shapes.Row], step_id: object, by: int) -> list[shapes.RowDict]:
    """The flow's steps after the step ``step_id`` moves ``by`` places (-1 up, +1 down).

    Positions are groups of steps that start together. A step alone at its position
    trades places with the group beside it; a step sharing its position leaves the group
    for a position of its own, before it (up) or after it (down). The groups keep their
    numbers when their count does not change; otherwise they are numbered 10, 20, ....
    Every goto and on_failure follows the group it named. Only the steps whose position,
    goto or on_failure changed are returned; none when the step is already first (or last).

    >>> steps = [{"id": 1, "position": 10, "kind": "wait"},
    ...          {"id": 2, "position": 20, "kind": "branch", "goto": 30},
    ...          {"id": 3, "position": 30, "kind": "wait"}]
    >>> [(s["id"], s["position"], s.get("goto")) for s in moved(steps, 3, -1)]
    [(2, 30, 20), (3, 20, None)]
    """
    if by not in (-1, 1):
        raise ValueError("a step moves one place up (-1) or down (+1)")
    ordered = sorted(steps, key=lambda s: (int(s["position"]), str(s["id"])))
    groups: list[list[shapes.Row]] = []
    for step in ordered:
        if groups and int(groups[-1][0]["position"]) == int(step["position"]):
            groups[-1].append(step)
        else:
            groups.append([step])
    where = next(
        (i for i, group in enumerate(groups) for s in group if str(s["id"]) == str(step_id)), None
    )
    if where is None:
        raise _unknown("step", step_id)
    group = groups[where]
    step = next(s for s in group if str(s["id"]) == str(step_id))
    # Each group as it stood, by its old position (the goto it answers to).
    was = [(int(g[0]["position"]), g) for g in groups]
    left = len(group) > 1
    if left:
        group.remove(step)
        groups.insert(where if by < 0 else where + 1, [step])
    elif 0 <= where + by < len(groups):
        groups[where], groups[where + by] = groups[where + by], groups[where]
    else:
        return []
    numbers = [position for position, _ in was]
    if len(groups) != len(was):
        numbers = [10 * (i + 1) for i in range(len(groups))]
    number_of = {id(g): numbers[i] for i, g in enumerate(groups)}
    new = {id(s): number_of[id(g)] for g in groups for s in g}
    # A goto names a position: it follows the group that stood there (a step leaving
    # its group leaves the goto with the group).
    goto_of = {position: number_of[id(g)] for position, g in was}
    changed = []
    for s in ordered:
        row = dict(s)
        row["position"] = new[id(s)]
        for jump in ("goto", rows.ON_FAILURE):  # a fault path names a position too
            target = rows.whole(s.get(jump)) if s.get(jump) not in (None, "") else None
            if target is not None and target in goto_of:
                row[jump] = goto_of[target]
        if (
            row["position"] != int(s["position"])
            or row.get("goto") != s.get("goto")
            or row.get(rows.ON_FAILURE) != s.get(rows.ON_FAILURE)
        ):
            changed.append(row)
    return changed


def move_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    step_id: object,
    by: int,
    *,
    columns: Columns = None,
) -> list[object]:
    """Move a step one place up (``by=-1``) or down (``+1``) in its flow (see ``moved``).

    The flow as it would be is judged as a whole, as an import is (``RowsInvalid``
    listing every problem; nothing is written), then the steps that changed are
    stored. Returns their ids.
    """
    step_id = _one_id(step_id, tables.steps.c.id)
    stored = flow_rows.step_by_id(conn, tables, step_id)
    if stored is None:
        raise _unknown("step", step_id)
    flow = flow_rows.flow_by_id(conn, tables, stored["flow_id"])
    assert flow is not None
    siblings = flow_rows.steps_of_flow(conn, tables, flow["id"])
    changed = {s["id"]: s for s in moved(siblings, step_id, by)}
    if not changed:
        return []
    after = [changed.get(s["id"], s) for s in siblings]
    cols = resource_columns(binding, tables, columns)
    found = validation.errors_for_flow(
        binding,
        flow,
        after,
        cols,
        existing=flow_rows.all_flows(conn, tables),
        extra=tables.step_extra | tables.flow_extra,
    )
    if found:
        raise validation.RowsInvalid(found)
    for key, row in changed.items():
        flow_rows.store_step(conn, tables, key, step_values(binding, row, flow, tables.step_extra))
    return list(changed)


# -- a whole flow at once ----------------------------------------------------------


def write_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    flow: shapes.Row,
    steps: Sequence[shapes.Row],
) -> Any:
    """Insert an already validated flow and its steps; return the flow's id.

    For callers that judged the whole flow first (an import); others use
    ``save_flow`` and ``save_step``.
    """
    flow_id = flow_rows.store_flow(conn, tables, None, flow_values(binding, flow))
    stored = {**flow, "id": flow_id}
    for step in steps:
        values = step_values(binding, {**step, "flow_id": flow_id}, stored)
        flow_rows.store_step(conn, tables, None, values)
    return flow_id


def replace_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    tables: app_tables.AppTables,
    flow_id: object,
    flow: shapes.Row,
    steps: Sequence[shapes.Row],
) -> None:
    """Write an already validated flow and its steps over the stored flow ``flow_id``,
    which keeps its id (and so its versions). A step whose title is the title of one
    step of the stored flow keeps that step's id — so the runs waiting at it can move to
    a version published from these rows; the others get new ids."""
    old = flow_rows.steps_of_flow(conn, tables, flow_id)
    titles: dict[str | None, list[object]] = {}
    for kept in old:
        titles.setdefault(spelling.name_key(kept.get("title")), []).append(kept["id"])
    flow_rows.delete_steps_of_flow(conn, tables, flow_id)
    written: shapes.RowDict = {**flow, "id": flow_id}
    flow_rows.store_flow(conn, tables, flow_id, flow_values(binding, flow))
    for step in steps:
        row = step_values(binding, {**step, "flow_id": flow_id}, written)
        same = titles.get(spelling.name_key(step.get("title")), [])
        if step.get("title") and len(same) == 1:
            row = {**row, "id": same[0]}
        flow_rows.insert_step(conn, tables, row)
