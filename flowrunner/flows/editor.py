"""Editing flows through a runner: each row validated on save, on a tenant binding each
row the tenant's, each write in a savepoint of the caller's transaction.

``FlowRunner.save_flow`` and friends are these; the rules of a row and of a flow are
``rows`` and ``validation``, the writes ``edits``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.binding import Tenant
from flowrunner.engine.mounted import Mounted
from flowrunner.flows import edits, rows, scheduled, snapshot, starts
from flowrunner.foundations import ids, payloads, shapes
from flowrunner.store import app_tables, dialects, flow_rows


class FlowEditor:
    """Validated writes of one runner's flow and step rows."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    def save_flow(
        self, conn: sa.Connection, row: Mapping[str, Any], *, tenant: Tenant = None
    ) -> object:
        """Insert or update a flow row after validating it (``RowInvalid``); its id.

        On a tenant binding the row is the ``tenant``'s (or names its tenant). It is
        written in a savepoint of ``conn``'s transaction: a refusal leaves that usable.
        """
        m = self.mounted
        row = m.owned(row, tenant, "flow")
        with conn.begin_nested():
            flow_id = edits.save_flow(conn, m.binding, m.tables, row, columns=m.columns)
        program = scheduled.of(m)
        if program is not None:  # a flow that starts on a schedule: its run from now on
            program.saved(conn, flow_id)
        return flow_id

    def save_step(
        self, conn: sa.Connection, row: Mapping[str, Any], *, tenant: Tenant = None
    ) -> object:
        """Insert or update a step row after validating it (``RowInvalid``); its id.

        On a tenant binding the step is the ``tenant``'s, and its flow must be too. It is
        written in a savepoint of ``conn``'s transaction: a refusal leaves that usable.
        """
        m = self.mounted
        row = m.owned(row, tenant, "step")
        if row.get("id") is not None:
            row = {**row, "id": step_id_of(row["id"])}
        with conn.begin_nested():
            return edits.save_step(conn, m.binding, m.tables, row, columns=m.columns)

    def delete_step(self, conn: sa.Connection, step_id: object, *, tenant: Tenant = None) -> None:
        """Delete a step, unless a goto still needs it (``RowInvalid``).

        On a tenant binding the step must be the ``tenant``'s.
        """
        key = step_id_of(step_id)
        with conn.begin_nested():
            self._step_of_tenant(conn, key, tenant)
            edits.delete_step(conn, self.mounted.binding, self.mounted.tables, key)

    def move_step(
        self, conn: sa.Connection, step_id: object, by: int, *, tenant: Tenant = None
    ) -> list[Any]:
        """Move a step one place up (``by=-1``) or down (``+1``) in its flow; the ids of
        the steps whose position, goto or on_failure changed (none when it is first or
        last).

        A step alone at its position trades places with the steps beside it; one sharing
        its position moves to a position of its own; gotos and fault paths follow the
        steps they named. The flow as it would be is judged whole, as an import is:
        ``RowInvalid`` listing every problem, and nothing written. On a tenant binding the
        step must be the ``tenant``'s. Written in a savepoint of ``conn``'s transaction.
        """
        m = self.mounted
        key = step_id_of(step_id)
        with conn.begin_nested():
            self._step_of_tenant(conn, key, tenant)
            return edits.move_step(conn, m.binding, m.tables, key, by, columns=m.columns)

    def delete_flow(self, conn: sa.Connection, flow_id: object, *, tenant: Tenant = None) -> None:
        """Delete a flow and its steps; runs already started keep their snapshot.

        A flow that does not exist (or, on a tenant binding, is not the ``tenant``'s) is
        refused with ``OperatorError`` (404; 422 for what is not an id at all). Written in
        a savepoint of ``conn``'s transaction.
        """
        m = self.mounted
        key = _address_id(flow_id, m.tables.flows.c.id, "flow")
        column = m.binding.tenant
        owner = None if column is None else m.need_tenant(tenant)
        with conn.begin_nested():
            found = None if key is None else flow_rows.flow_by_id(conn, m.tables, key)
            if found is None or (column is not None and str(found[column]) != owner):
                raise errors.OperatorError(
                    f"there is no flow {flow_id!r}", status_code=404, code="flow_unknown"
                )
            edits.delete_flow(conn, m.binding, m.tables, key)

    def snapshot(
        self, conn: sa.Connection, flow_id: object, *, tenant: Tenant = None
    ) -> snapshot.FlowSnapshot:
        """The flow and its steps as a run would keep them."""
        m = self.mounted
        if m.binding.tenant is not None:
            flow = flow_rows.flow_by_name_or_id(conn, m.tables, flow_id, m.need_tenant(tenant))
            if flow is None or str(flow["id"]) != str(flow_id):
                raise errors.OperatorError(
                    f"there is no flow {flow_id!r}", status_code=404, code="flow_unknown"
                )
        return starts.stored_snapshot(conn, m.tables, flow_id)

    def _step_of_tenant(self, conn: sa.Connection, step_id: object, tenant: Tenant) -> None:
        """On a tenant binding, ``OperatorError`` (404) unless the step is the tenant's."""
        m = self.mounted
        if m.binding.tenant is None:
            return
        step = flow_rows.step_by_id(conn, m.tables, step_id)
        owner = None if step is None else step[m.binding.tenant]
        if owner is None or str(owner) != str(m.need_tenant(tenant)):
            raise errors.OperatorError(
                f"there is no step {step_id!r}", status_code=404, code="step_unknown"
            )


def step_id_of(step_id: object) -> int | None:
    """A step's id as given to ``save_step``/``delete_step`` (``rows.whole``), else
    ``RowInvalid``: an id its column cannot hold is never sent to the database."""
    try:
        return rows.whole(step_id)
    except ValueError:
        raise errors.RowInvalid(
            [
                errors.FieldError(
                    "id", f"there is no step with id {payloads.quote(step_id)}", "step_unknown"
                )
            ]
        ) from None


class TenantRows:
    """Reading a runner's flow and step rows as one tenant sees them."""

    def __init__(self, mounted: Mounted) -> None:
        self.runner = mounted
        self.column = mounted.binding.tenant

    def owner(self, tenant: Tenant) -> Tenant:
        """The request's tenant; on a tenant binding a dependency answering None is refused."""
        if self.column is not None and tenant is None:
            raise errors.OperatorError(
                "the request names no tenant, and every flow belongs to one",
                status_code=403,
                code="tenant_required",
            )
        return tenant

    def writing(self) -> AbstractContextManager[sa.Connection]:
        """A transaction that commits when the route returns, and rolls back if it raises."""
        return dialects.begin(self.runner.engine)

    def _mine(self, row: shapes.Row, owner: Tenant) -> bool:
        return self.column is None or str(row[self.column]) == str(owner)

    def flows(self, conn: sa.Connection, owner: Tenant) -> list[shapes.RowDict]:
        every = flow_rows.all_flows(conn, self.runner.tables)
        return [flow for flow in every if self._mine(flow, owner)]

    def flow(self, conn: sa.Connection, flow_id: object, owner: Tenant) -> shapes.RowDict:
        """The tenant's flow ``flow_id``; else ``OperatorError``: 404, or 422 for what is
        not an id at all (``ids.read``)."""
        key = _address_id(flow_id, self.runner.tables.flows.c.id, "flow")
        found = None if key is None else flow_rows.flow_by_id(conn, self.runner.tables, key)
        if found is None or not self._mine(found, owner):
            raise errors.OperatorError(
                f"there is no flow {flow_id!r}", status_code=404, code="flow_unknown"
            )
        return found

    def step(
        self, conn: sa.Connection, flow_id: object, step_id: object, owner: Tenant
    ) -> shapes.RowDict:
        """The step ``step_id`` of the tenant's flow ``flow_id``; else ``OperatorError``:
        404, or 422 for what is not an id at all."""
        flow = self.flow(conn, flow_id, owner)
        key = _address_id(step_id, self.runner.tables.steps.c.id, "step")
        found = None if key is None else flow_rows.step_by_id(conn, self.runner.tables, key)
        if found is None or found["flow_id"] != flow["id"]:
            raise errors.OperatorError(
                f"there is no step {step_id!r} in flow {flow_id!r}",
                status_code=404,
                code="step_unknown",
            )
        return found

    def judge(self, save: Callable[[sa.Connection], None]) -> shapes.RowDict:
        """Run ``save`` in a transaction that is always rolled back; its field errors."""
        try:
            with self.writing() as conn:
                save(conn)
                raise _Judged
        except _Judged:
            return {"valid": True, "detail": []}
        except errors.RowInvalid as refused:
            return {"valid": False, **refused.to_dict()}


class _Judged(Exception):
    """Raised to roll back a save that was only judged."""


def _address_id(value: object, column: sa.Column[Any], what: str) -> object:
    """An id an address or a person gives, for an integer id ``column``: ``ids.read``'s
    rule (else ``OperatorError`` 422), then None past what the column holds (no row)."""
    if app_tables.id_limit(column) is not None:
        try:
            ids.read(value, what)
        except ids.NotAnId as exc:
            raise errors.OperatorError(str(exc), status_code=422, code="id_invalid") from None
    return edits.read_id(value, column)
