"""The validated ways to write flow and step rows: Core helpers and an ORM flush hook.

Every write here is judged first (``flowrunner.validate``) and refused with
``RowInvalid`` before anything is stored; the writes run on the caller's
connection, inside the caller's transaction. ``FlowRunner`` exposes the same
functions as methods.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from flowrunner import binding as binding_mod
from flowrunner import errors, query, rows, tables, validate
from flowrunner import snapshot as snapshot_mod

Columns = Mapping[str, query.ColumnType] | None


def _columns(
    conn: sa.Connection, binding: binding_mod.FlowBinding, columns: Columns
) -> Mapping[str, query.ColumnType]:
    return columns if columns is not None else binding.resource_columns(conn)


# Reflected once per connection, as a save reads the tables several times. (A
# connection that alters these tables and then saves through them is not supported.)
_REFLECTED: weakref.WeakKeyDictionary[
    sa.Connection, dict[tuple[str, str], tuple[sa.Table, sa.Table]]
]
_REFLECTED = weakref.WeakKeyDictionary()


def _tables(conn: sa.Connection, binding: binding_mod.FlowBinding) -> tuple[sa.Table, sa.Table]:
    known = _REFLECTED.setdefault(conn, {})
    key = (binding.flows_table, binding.steps_table)
    if key not in known:
        known[key] = tables.reflect(conn, binding)
    return known[key]


def _dicts(result: sa.CursorResult[Any]) -> list[dict[str, Any]]:
    # Reflected names are quoted_name objects; plain str keys travel to YAML and JSON.
    return [{str(k): v for k, v in r.items()} for r in result.mappings()]


def _inserted(result: sa.CursorResult[Any]) -> Any:
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return key[0]


# -- reading -----------------------------------------------------------------------


def flow_rows(conn: sa.Connection, binding: binding_mod.FlowBinding) -> list[dict[str, Any]]:
    flows, _ = _tables(conn, binding)
    return _dicts(conn.execute(sa.select(flows).order_by(flows.c.id)))


def step_rows(
    conn: sa.Connection, binding: binding_mod.FlowBinding, flow_id: Any
) -> list[dict[str, Any]]:
    _, steps = _tables(conn, binding)
    query_ = sa.select(steps).where(steps.c.flow_id == flow_id)
    return _dicts(conn.execute(query_.order_by(steps.c.position, steps.c.id)))


def find_flow(
    conn: sa.Connection, binding: binding_mod.FlowBinding, flow_id: Any
) -> dict[str, Any] | None:
    flows, _ = _tables(conn, binding)
    found = _dicts(conn.execute(sa.select(flows).where(flows.c.id == flow_id)))
    return found[0] if found else None


def snapshot(
    conn: sa.Connection, binding: binding_mod.FlowBinding, flow_id: Any
) -> snapshot_mod.FlowSnapshot:
    """The flow row ``flow_id`` and its steps, as the immutable copy a run keeps."""
    flow = find_flow(conn, binding, flow_id)
    if flow is None:
        raise errors.SnapshotBroken(f"there is no flow with id {flow_id!r}")
    if binding.tenant is not None:
        flow["tenant"] = flow.pop(binding.tenant)
    return snapshot_mod.FlowSnapshot.build(flow, step_rows(conn, binding, flow_id))


# -- flows -------------------------------------------------------------------------


def extra_columns(table: sa.Table, binding: binding_mod.FlowBinding) -> frozenset[str]:
    """The application's own columns of a flows or steps table, beyond flowrunner's."""
    ours = {*binding_mod.FLOW_COLUMNS, *binding_mod.STEP_COLUMNS, *binding.input_columns}
    return frozenset(
        c.name for c in table.columns if c.name not in ours and c.name != binding.tenant
    )


def _flow_values(
    binding: binding_mod.FlowBinding, row: Mapping[str, Any], extra: Collection[str] = ()
) -> dict[str, Any]:
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
    row: Mapping[str, Any],
    *,
    columns: Columns = None,
) -> Any:
    """Insert the flow row (or update it, when it has an ``id``); return its id."""
    flows, _ = _tables(conn, binding)
    existing = flow_rows(conn, binding)
    flow_id = row.get("id")
    if flow_id is not None and not any(f["id"] == flow_id for f in existing):
        raise errors.RowInvalid(
            [errors.FieldError("id", f"there is no flow with id {flow_id!r}", "flow_unknown")],
            row=validate.flow_label(row),
        )
    extra = extra_columns(flows, binding)
    cols = _columns(conn, binding, columns)
    validate.validate_flow_row(binding, row, cols, existing=existing, extra=extra)
    values = _flow_values(binding, row, extra)
    if flow_id is None:
        return _inserted(conn.execute(sa.insert(flows).values(values)))
    conn.execute(sa.update(flows).where(flows.c.id == flow_id).values(values))
    return flow_id


def update_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    flow_id: Any,
    changes: Mapping[str, Any],
    *,
    columns: Columns = None,
) -> None:
    """Change some columns of a stored flow row, validated as a whole row."""
    stored = find_flow(conn, binding, flow_id)
    if stored is None:
        raise errors.RowInvalid(
            [errors.FieldError("id", f"there is no flow with id {flow_id!r}", "flow_unknown")]
        )
    save_flow(conn, binding, {**stored, **changes, "id": flow_id}, columns=columns)


def delete_flow(
    conn: sa.Connection, binding: binding_mod.FlowBinding, flow_id: Any, *, columns: Columns = None
) -> None:
    """Delete a flow and its steps. Runs already started keep their snapshot."""
    flows, steps = _tables(conn, binding)
    conn.execute(sa.delete(steps).where(steps.c.flow_id == flow_id))
    conn.execute(sa.delete(flows).where(flows.c.id == flow_id))


# -- steps -------------------------------------------------------------------------


def _step_values(
    binding: binding_mod.FlowBinding,
    row: Mapping[str, Any],
    flow: Mapping[str, Any],
    extra: Collection[str] = (),
) -> dict[str, Any]:
    step, _ = rows.read_step(binding, row, extra)
    values = step.model_dump(exclude={"id"})
    values.update({k: row[k] for k in extra if k in row})
    if binding.tenant is not None:
        values[binding.tenant] = row.get(binding.tenant, flow.get(binding.tenant))
    return values


def _flow_of(
    conn: sa.Connection, binding: binding_mod.FlowBinding, row: Mapping[str, Any]
) -> dict[str, Any]:
    flow_id = row.get("flow_id")
    try:
        flow_key = rows.whole(flow_id)
    except ValueError:
        flow_key = None
    flow = None if flow_key is None else find_flow(conn, binding, flow_key)
    if flow is None:
        found = (
            errors.FieldError(
                "flow_id", "a step belongs to a flow; name its flow", "column_required"
            )
            if flow_id is None
            else errors.FieldError(
                "flow_id", f"there is no flow with id {flow_id!r}", "flow_unknown"
            )
        )
        raise errors.RowInvalid([found], row=validate.step_label(row))
    return flow


def save_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    row: Mapping[str, Any],
    *,
    columns: Columns = None,
) -> Any:
    """Insert the step row (or update it, when it has an ``id``); return its id."""
    _, steps = _tables(conn, binding)
    flow = _flow_of(conn, binding, row)
    siblings = step_rows(conn, binding, flow["id"])
    step_id = row.get("id")
    stored = None
    if step_id is not None:
        found = _dicts(conn.execute(sa.select(steps).where(steps.c.id == step_id)))
        if not found:
            raise errors.RowInvalid(
                [errors.FieldError("id", f"there is no step with id {step_id!r}", "step_unknown")],
                row=validate.step_label(row, flow),
            )
        stored = found[0]
    if binding.tenant is not None and binding.tenant not in row:
        row = {**row, binding.tenant: flow.get(binding.tenant)}
    extra = extra_columns(steps, binding)
    cols = _columns(conn, binding, columns)
    validate.validate_step_row(binding, row, cols, siblings=siblings, flow=flow, extra=extra)
    if stored is not None and stored["flow_id"] != flow["id"]:
        # Moving a step to another flow removes it from its old one.
        _refuse_removal(conn, binding, stored)
    values = _step_values(binding, row, flow, extra)
    if step_id is None:
        return _inserted(conn.execute(sa.insert(steps).values(values)))
    conn.execute(sa.update(steps).where(steps.c.id == step_id).values(values))
    return step_id


def update_step(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    step_id: Any,
    changes: Mapping[str, Any],
    *,
    columns: Columns = None,
) -> None:
    """Change some columns of a stored step row, validated as a whole row."""
    _, steps = _tables(conn, binding)
    found = _dicts(conn.execute(sa.select(steps).where(steps.c.id == step_id)))
    if not found:
        raise errors.RowInvalid(
            [errors.FieldError("id", f"there is no step with id {step_id!r}", "step_unknown")]
        )
    save_step(conn, binding, {**found[0], **changes, "id": step_id}, columns=columns)


def delete_step(
    conn: sa.Connection, binding: binding_mod.FlowBinding, step_id: Any, *, columns: Columns = None
) -> None:
    """Delete a step, unless it is the last at a position another step's goto names."""
    _, steps = _tables(conn, binding)
    found = _dicts(conn.execute(sa.select(steps).where(steps.c.id == step_id)))
    if not found:
        return
    _refuse_removal(conn, binding, found[0])
    conn.execute(sa.delete(steps).where(steps.c.id == step_id))


def _refuse_removal(
    conn: sa.Connection, binding: binding_mod.FlowBinding, stored: Mapping[str, Any]
) -> None:
    siblings = step_rows(conn, binding, stored["flow_id"])
    found = validate.errors_for_step_delete(binding, stored, siblings=siblings)
    if found:
        flow = find_flow(conn, binding, stored["flow_id"])
        raise errors.RowInvalid(found, row=validate.step_label(stored, flow))


def write_flow(
    conn: sa.Connection,
    binding: binding_mod.FlowBinding,
    flow: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
) -> Any:
    """Insert an already validated flow and its steps; return the flow's id.

    For callers that judged the whole flow first (an import); others use
    ``save_flow`` and ``save_step``.
    """
    flows, steps_table = _tables(conn, binding)
    flow_id = _inserted(conn.execute(sa.insert(flows).values(_flow_values(binding, flow))))
    stored = {**flow, "id": flow_id}
    for step in steps:
        values = _step_values(binding, {**step, "flow_id": flow_id}, stored)
        conn.execute(sa.insert(steps_table).values(values))
    return flow_id


# -- the ORM flush hook ------------------------------------------------------------


def validate_on_flush(
    target: Any, binding: binding_mod.FlowBinding, *, columns: Columns = None
) -> None:
    """Judge every flow and step row an ORM flush would write; refuse with ``RowInvalid``.

    ``target`` is a Session, a sessionmaker or a Session class. Mapped classes over
    the binding's flows and steps tables are checked as they will stand after the
    flush, so a flow and its steps may be added together.
    """

    def before_flush(session: sa.orm.Session, context: Any, instances: Any) -> None:
        check_session(session, binding, columns=columns)

    sa.event.listen(target, "before_flush", before_flush)


def _table_name(obj: Any) -> str | None:
    mapper = sa.inspect(obj).mapper
    table = mapper.local_table
    return table.name if isinstance(table, sa.Table) else None


def _orm_row(obj: Any) -> dict[str, Any]:
    mapper = sa.inspect(obj).mapper
    return {prop.columns[0].name: getattr(obj, prop.key) for prop in mapper.column_attrs}


def _related_flow(obj: Any, flows_name: str) -> Any:
    """The flow object a new step is attached to by a relationship, if any."""
    for rel in sa.inspect(obj).mapper.relationships:
        target = rel.mapper.local_table
        if isinstance(target, sa.Table) and target.name == flows_name and not rel.uselist:
            return getattr(obj, rel.key)
    return None


def check_session(
    session: sa.orm.Session, binding: binding_mod.FlowBinding, *, columns: Columns = None
) -> None:
    """Raise ``RowInvalid`` if the session's pending flow or step rows are not all sound."""
    changed = [o for o in session.new] + [o for o in session.dirty if session.is_modified(o)]
    flows_new = [o for o in changed if _table_name(o) == binding.flows_table]
    steps_new = [o for o in changed if _table_name(o) == binding.steps_table]
    flows_gone = [o for o in session.deleted if _table_name(o) == binding.flows_table]
    steps_gone = [o for o in session.deleted if _table_name(o) == binding.steps_table]
    if not (flows_new or steps_new or flows_gone or steps_gone):
        return
    conn = session.connection()
    flush = _Flush(binding, conn, _columns(conn, binding, columns))
    flush.flows(flows_new, flows_gone)
    flush.steps(steps_new, steps_gone)
    for obj in flows_gone:
        flush.flow_gone(obj)
    flush.raise_problems()


class _Flush:
    """The flows and steps of one flush, as they will stand after it."""

    def __init__(
        self,
        binding: binding_mod.FlowBinding,
        conn: sa.Connection,
        columns: Mapping[str, query.ColumnType],
    ) -> None:
        self.binding = binding
        self.conn = conn
        self.columns = columns
        flows, steps = _tables(conn, binding)
        self.flow_extra = extra_columns(flows, binding)
        self.step_extra = extra_columns(steps, binding)
        self.problems: dict[int, tuple[str, list[errors.FieldError]]] = {}
        self.final_flows: dict[Any, dict[str, Any]] = {}
        self.pending: dict[int, dict[str, Any]] = {}
        # flow key -> {"flow", "steps" (final), "changed" [(obj,row)], "removed" [(obj,row)]}
        self.groups: dict[Any, dict[str, Any]] = {}

    def add(self, obj: Any, label: str, found: Sequence[errors.FieldError]) -> None:
        if found:
            self.problems.setdefault(id(obj), (label, []))[1].extend(found)

    def flows(self, new: Sequence[Any], gone: Sequence[Any]) -> None:
        stored = {f["id"]: f for f in flow_rows(self.conn, self.binding)}
        gone_ids = {_orm_row(o)["id"] for o in gone}
        self.final_flows = {k: v for k, v in stored.items() if k not in gone_ids}
        for obj in new:
            row = _orm_row(obj)
            if row["id"] is not None:
                self.final_flows[row["id"]] = row
            self.pending[id(obj)] = row
        for obj in new:
            row = self.pending[id(obj)]
            others = [f for f in self.final_flows.values() if f is not row]
            others += [f for f in self.pending.values() if f is not row and f["id"] is None]
            found = validate.errors_for_flow_row(
                self.binding, row, self.columns, existing=others, extra=self.flow_extra
            )
            self.add(obj, validate.flow_label(row), found)

    def group(self, key: Any, flow: Mapping[str, Any] | None) -> dict[str, Any]:
        if key not in self.groups:
            stored = step_rows(self.conn, self.binding, key) if not isinstance(key, tuple) else []
            self.groups[key] = {"flow": flow, "steps": stored, "changed": [], "removed": []}
        return self.groups[key]

    def _stored_step(self, step_id: Any) -> dict[str, Any] | None:
        _, steps = _tables(self.conn, self.binding)
        found = _dicts(self.conn.execute(sa.select(steps).where(steps.c.id == step_id)))
        return found[0] if found else None

    def _remove(self, obj: Any, stored: dict[str, Any], *, moved: bool = True) -> None:
        entry = self.group(stored["flow_id"], self.final_flows.get(stored["flow_id"]))
        entry["steps"] = [s for s in entry["steps"] if s["id"] != stored["id"]]
        if moved:
            entry["removed"].append((obj, stored))

    def _flow_key(self, obj: Any, row: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any] | None]:
        parent = _related_flow(obj, self.binding.flows_table)
        if parent is not None:
            parent_row = self.pending.get(id(parent)) or _orm_row(parent)
            if parent_row["id"] is None:
                return ("pending", id(parent)), parent_row
            return parent_row["id"], self.final_flows.get(parent_row["id"])
        return row["flow_id"], self.final_flows.get(row["flow_id"])

    def steps(self, new: Sequence[Any], gone: Sequence[Any]) -> None:
        for obj in gone:
            stored = self._stored_step(_orm_row(obj)["id"])
            if stored is not None:
                self._remove(obj, stored)
        for obj in new:
            row = _orm_row(obj)
            key, flow = self._flow_key(obj, row)
            if flow is None:
                found = (
                    errors.FieldError(
                        "flow_id", f"there is no flow with id {key!r}", "flow_unknown"
                    )
                    if key is not None
                    else errors.FieldError(
                        "flow_id", "a step belongs to a flow; name its flow", "column_required"
                    )
                )
                self.add(obj, validate.step_label(row), [found])
                continue
            stored = None if row["id"] is None else self._stored_step(row["id"])
            if stored is not None:
                moved = stored["position"] != row["position"] or stored["flow_id"] != key
                self._remove(obj, stored, moved=moved)
            self.group(key, flow)["changed"].append((obj, row))
            tenant = self.binding.tenant
            if tenant is not None and row.get(tenant) != flow.get(tenant):
                message = "a step belongs to its flow's tenant"
                found_t = errors.FieldError(tenant, message, "tenant_mismatch")
                self.add(obj, validate.step_label(row, flow), [found_t])
        for entry in self.groups.values():
            self._judge(entry)

    def _judge(self, entry: Mapping[str, Any]) -> None:
        steps = [*entry["steps"], *(row for _, row in entry["changed"])]
        owners = {id(row): obj for obj, row in (*entry["changed"], *entry["removed"])}
        found = validate.state_problems(
            self.binding,
            self.columns,
            steps,
            changed=range(len(entry["steps"]), len(steps)),
            removed=[row for _, row in entry["removed"]],
            need_flow=False,
            extra=self.step_extra,
        )
        for row, error in found:
            obj = owners.get(id(row))
            if obj is not None:
                self.add(obj, validate.step_label(row, entry["flow"]), [error])

    def flow_gone(self, obj: Any) -> None:
        row = _orm_row(obj)
        left = self.group(row["id"], row)["steps"]
        if left:
            message = f"the flow still has {len(left)} step(s); delete them with it"
            found = errors.FieldError("id", message, "flow_has_steps")
            self.add(obj, validate.flow_label(row), [found])

    def raise_problems(self) -> None:
        if len(self.problems) == 1:
            label, found = next(iter(self.problems.values()))
            raise errors.RowInvalid(found, row=label)
        if self.problems:
            raise validate.RowsInvalid(list(self.problems.values()))
