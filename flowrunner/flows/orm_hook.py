"""The ORM flush hook: every flow and step row a SQLAlchemy ``Session`` would write, judged first.

``validate_on_flush(Session, binding)`` refuses a flush with ``RowInvalid`` when a new,
changed or deleted flow or step row would leave a flow unsound, judging each flow as it
will stand after the flush (so a flow and its steps may be added together). The stored
rows it compares with are read through ``store.flow_rows``; Core writes are
``flowrunner.flows.edits``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict

import sqlalchemy as sa
from sqlalchemy import orm

from flowrunner import binding as binding_mod
from flowrunner import errors, query
from flowrunner.flows import edits, rows, spelling, validation
from flowrunner.foundations import shapes
from flowrunner.store import app_tables, flow_rows

Columns = Mapping[str, query.ColumnType] | None


def validate_on_flush(
    target: object, binding: binding_mod.FlowBinding, *, columns: Columns = None
) -> None:
    """Judge every flow and step row an ORM flush would write; refuse with ``RowInvalid``.

    ``target`` is a Session, a sessionmaker or a Session class. Mapped classes over
    the binding's flows and steps tables are checked as they will stand after the
    flush, so a flow and its steps may be added together. The tables are read from the
    database at the first flush that writes flow or step rows, and kept.
    """
    kept: list[app_tables.AppTables] = []

    def tables_of(conn: sa.Connection) -> app_tables.AppTables:
        if not kept:
            kept.append(app_tables.reflect(conn, binding))
        return kept[0]

    def before_flush(session: orm.Session, context: object, instances: object) -> None:
        _check(session, binding, columns, tables_of)

    sa.event.listen(target, "before_flush", before_flush)


def check_session(
    session: orm.Session,
    binding: binding_mod.FlowBinding,
    *,
    columns: Columns = None,
    tables: app_tables.AppTables | None = None,
) -> None:
    """Raise ``RowInvalid`` if the session's pending flow or step rows are not all sound.

    ``tables`` as ``flowrunner.tables.reflect`` read them; without it they are read now.
    """

    def tables_of(conn: sa.Connection) -> app_tables.AppTables:
        return tables if tables is not None else app_tables.reflect(conn, binding)

    _check(session, binding, columns, tables_of)


def _check(
    session: orm.Session,
    binding: binding_mod.FlowBinding,
    columns: Columns,
    tables_of: Callable[[sa.Connection], app_tables.AppTables],
) -> None:
    changed = [o for o in session.new] + [o for o in session.dirty if session.is_modified(o)]
    flows_new = [o for o in changed if _table_name(o) == binding.flows_table]
    steps_new = [o for o in changed if _table_name(o) == binding.steps_table]
    flows_gone = [o for o in session.deleted if _table_name(o) == binding.flows_table]
    steps_gone = [o for o in session.deleted if _table_name(o) == binding.steps_table]
    if not (flows_new or steps_new or flows_gone or steps_gone):
        return
    conn = session.connection()
    tables = tables_of(conn)
    flush = _Flush(binding, conn, tables, edits.resource_columns(binding, tables, columns))
    flush.flows(flows_new, flows_gone)
    flush.steps(steps_new, steps_gone)
    for obj in flows_gone:
        flush.flow_gone(obj)
    flush.raise_problems()
    flush.normalize(flows_new, steps_new)


def _table_name(obj: object) -> str | None:
    table = orm.object_mapper(obj).local_table
    return table.name if isinstance(table, sa.Table) else None


def _orm_row(obj: object) -> shapes.RowDict:
    mapper = orm.object_mapper(obj)
    return {prop.columns[0].name: getattr(obj, prop.key) for prop in mapper.column_attrs}


def _subflow(step: shapes.Row) -> bool:
    kind = step.get("kind")
    return isinstance(kind, str) and spelling.canonical_kind(kind) == rows.SUBFLOW


def _assign(obj: object, values: shapes.Row, keep: set[str | None]) -> None:
    """Set the object's columns to ``values`` where they differ, except those in ``keep``."""
    for prop in orm.object_mapper(obj).column_attrs:
        name = prop.columns[0].name
        if name in values and name not in keep and getattr(obj, prop.key) != values[name]:
            setattr(obj, prop.key, values[name])


def _related_flow(obj: object, flows_name: str) -> object:
    """The flow object a new step is attached to by a relationship, if any."""
    for rel in orm.object_mapper(obj).relationships:
        target = rel.mapper.local_table
        if isinstance(target, sa.Table) and target.name == flows_name and not rel.uselist:
            return getattr(obj, rel.key)
    return None


class _Group(TypedDict):
    """The steps of one flow as they will stand after the flush, keyed in ``_Flush.groups``
    by the flow's id (or ``("pending", id(obj))`` for a flow the flush adds)."""

    flow: shapes.Row | None
    steps: list[shapes.RowDict]
    """The stored steps the flush leaves where they are."""
    changed: list[tuple[object, shapes.RowDict]]
    """The steps the flush adds or changes: each object and its row."""
    removed: list[tuple[object, shapes.RowDict]]
    """The stored steps the flush deletes or moves away: each object and its row."""


class _Flush:
    """The flows and steps of one flush, as they will stand after it."""

    def __init__(
        self,
        binding: binding_mod.FlowBinding,
        conn: sa.Connection,
        tables: app_tables.AppTables,
        columns: Mapping[str, query.ColumnType],
    ) -> None:
        self.binding = binding
        self.conn = conn
        self.tables = tables
        self.columns = columns
        self.flow_extra = tables.flow_extra
        self.step_extra = tables.step_extra
        self.problems: dict[int, tuple[str, list[errors.FieldError]]] = {}
        self.final_flows: dict[object, shapes.RowDict] = {}
        self.pending: dict[int, shapes.RowDict] = {}
        self.groups: dict[object, _Group] = {}

    def add(self, obj: object, label: str, found: Sequence[errors.FieldError]) -> None:
        if found:
            self.problems.setdefault(id(obj), (label, []))[1].extend(found)

    def flows(self, new: Sequence[object], gone: Sequence[object]) -> None:
        stored = {f["id"]: f for f in flow_rows.all_flows(self.conn, self.tables)}
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
            found = validation.errors_for_flow_row(
                self.binding, row, self.columns, existing=others, extra=self.flow_extra
            )
            self.add(obj, validation.flow_label(row), found)

    def group(self, key: object, flow: shapes.Row | None) -> _Group:
        if key not in self.groups:
            stored = (
                []
                if isinstance(key, tuple)
                else flow_rows.steps_of_flow(self.conn, self.tables, key)
            )
            self.groups[key] = _Group(flow=flow, steps=stored, changed=[], removed=[])
        return self.groups[key]

    def _remove(self, obj: object, stored: shapes.RowDict, *, moved: bool = True) -> None:
        entry = self.group(stored["flow_id"], self.final_flows.get(stored["flow_id"]))
        entry["steps"] = [s for s in entry["steps"] if s["id"] != stored["id"]]
        if moved:
            entry["removed"].append((obj, stored))

    def _flow_key(self, obj: object, row: shapes.Row) -> tuple[object, shapes.Row | None]:
        parent = _related_flow(obj, self.binding.flows_table)
        if parent is not None:
            parent_row = self.pending.get(id(parent)) or _orm_row(parent)
            if parent_row["id"] is None:
                return ("pending", id(parent)), parent_row
            return parent_row["id"], self.final_flows.get(parent_row["id"])
        return row["flow_id"], self.final_flows.get(row["flow_id"])

    def steps(self, new: Sequence[object], gone: Sequence[object]) -> None:
        for obj in gone:
            stored = flow_rows.step_by_id(self.conn, self.tables, _orm_row(obj)["id"])
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
                self.add(obj, validation.step_label(row), [found])
                continue
            stored = (
                None
                if row["id"] is None
                else flow_rows.step_by_id(self.conn, self.tables, row["id"])
            )
            if stored is not None:
                moved = stored["position"] != row["position"] or stored["flow_id"] != key
                self._remove(obj, stored, moved=moved)
            self.group(key, flow)["changed"].append((obj, row))
            tenant = self.binding.tenant
            if tenant is not None and row.get(tenant) != flow.get(tenant):
                message = "a step belongs to its flow's tenant"
                found_t = errors.FieldError(tenant, message, "tenant_mismatch")
                self.add(obj, validation.step_label(row, flow), [found_t])
        for entry in self.groups.values():
            self._judge(entry)

    def _judge(self, entry: _Group) -> None:
        steps = [*entry["steps"], *(row for _, row in entry["changed"])]
        owners = {id(row): obj for obj, row in (*entry["changed"], *entry["removed"])}
        found = validation.state_problems(
            self.binding,
            self.columns,
            steps,
            changed=range(len(entry["steps"]), len(steps)),
            removed=[row for _, row in entry["removed"]],
            need_flow=False,
            extra=self.step_extra,
            flow=entry["flow"],
        )
        flow = entry["flow"]
        changed = range(len(entry["steps"]), len(steps))
        if flow is not None and any(_subflow(steps[i]) for i in changed):
            # The flows a subflow names, as this flush leaves them.
            flows = [*self.final_flows.values(), *self.pending.values()]
            ways = flow_rows.subflow_steps(self.conn, self.tables)
            found += validation.subflow_problems(
                self.binding, flow, steps, flows, ways, changed=changed
            )
        for row, error in found:
            obj = owners.get(id(row))
            if obj is not None:
                self.add(obj, validation.step_label(row, entry["flow"]), [error])

    def flow_gone(self, obj: object) -> None:
        row = _orm_row(obj)
        left = self.group(row["id"], row)["steps"]
        if left:
            message = f"the flow still has {len(left)} step(s); delete them with it"
            found = errors.FieldError("id", message, "flow_has_steps")
            self.add(obj, validation.flow_label(row), [found])

    def normalize(self, flows: Sequence[object], steps: Sequence[object]) -> None:
        """Store what the Core path stores: each row trimmed and canonically spelled.

        ``saving.flow_values`` and ``saving.step_values`` say what that is; the ids, the
        tenant and the application's own columns are left as the objects hold them.
        """
        keep = {"id", "flow_id", self.binding.tenant}
        for obj in flows:
            values = edits.flow_values(self.binding, _orm_row(obj), self.flow_extra)
            _assign(obj, values, keep | set(self.flow_extra))
        for obj in steps:
            values = edits.step_values(self.binding, _orm_row(obj), {}, self.step_extra)
            _assign(obj, values, keep | set(self.step_extra))

    def raise_problems(self) -> None:
        if len(self.problems) == 1:
            label, found = next(iter(self.problems.values()))
            raise errors.RowInvalid(found, row=label)
        if self.problems:
            raise validation.RowsInvalid(list(self.problems.values()))
