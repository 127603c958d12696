"""An ``APIRouter`` for a runner's flow and step rows: the screens business users edit
flows with talk to it.

    GET    /flows                           the flows (of the request's tenant)
    POST   /flows                           create a flow                       201
    POST   /flows/validate                  judge a flow row, save nothing
    GET    /flows/{flow_id}                 a flow with its steps
    PATCH  /flows/{flow_id}                 change some of a flow's columns
    DELETE /flows/{flow_id}                 delete a flow and its steps         204
    POST   /flows/{flow_id}/steps           add a step                          201
    POST   /flows/{flow_id}/steps/validate  judge a step row, save nothing
    PATCH  /flows/{flow_id}/steps/{step_id} change some of a step's columns
    DELETE /flows/{flow_id}/steps/{step_id} delete a step                       204

Every write goes through the runner's own saves, so it is judged as any other: a bad
row answers 422 with every field error (``RowInvalid``), a step another step's goto
still needs cannot be deleted. A flow or step that does not exist — or is another
tenant's — answers 404. A change (PATCH) is laid over the stored row and the whole row
is judged. ``validate`` runs the same save in a transaction that is rolled back, so it
judges exactly as a save would, and answers ``{"valid": ..., "detail": [...]}`` with
the same field errors a save's 422 has.

With a tenant binding the application says whose request it is: ``tenant`` is a
FastAPI dependency (it may itself depend on the logged-in user) returning the tenant.
Who may edit at all is the application's too: pass its dependencies
(``dependencies=[Depends(require_editor)]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sqlalchemy as sa
from fastapi import APIRouter, Body, Depends, Path, Response, params

from flowrunner import binding as binding_mod
from flowrunner import errors
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import shapes
from flowrunner.runner import FlowRunner
from flowrunner.store import flow_rows

TenantOf = Callable[..., binding_mod.Tenant]
"""A FastAPI dependency returning the request's tenant (it may take its own
dependencies: the request, the logged-in user)."""

# An id past what its column holds names no row (404), never reaches the database.
FlowId = Path(description="the flow's id")
StepId = Path(description="the step's id")
Row = Body(
    ...,
    description="the row's columns, as the flows or steps table has them",
    examples=[{"name": "Big orders", "start": "created", "condition": "amount > 10000"}],
)


def _no_tenant() -> None:
    return None


def tenant_marker(
    bound: binding_mod.FlowBinding, tenant: TenantOf | None, what: str
) -> binding_mod.Tenant:
    """The request's tenant as a FastAPI marker (as ``Body`` and ``Path`` are): ``tenant``
    is required exactly when the binding has tenants (``BindingError`` otherwise)."""
    if bound.tenant is not None and tenant is None:
        raise errors.BindingError(
            f"{bound.resource} records belong to tenants: give {what}(..., "
            "tenant=...) a dependency that returns the request's tenant"
        )
    if bound.tenant is None and tenant is not None:
        raise errors.BindingError(
            f"{bound.resource} records belong to no tenant: leave {what}(..., tenant=...) out"
        )
    marker: binding_mod.Tenant = Depends(tenant or _no_tenant)
    return marker


def router(
    runner: FlowRunner,
    *,
    tenant: TenantOf | None = None,
    prefix: str = "/flows",
    dependencies: Sequence[params.Depends] = (),
    tags: Sequence[str] = ("flows",),
) -> APIRouter:
    """The routes of ``runner``'s flow and step rows, under ``prefix``.

    ``tenant`` is required exactly when the binding has tenants. ``dependencies`` run
    before every route (authentication, authorization).
    """
    Tenant = tenant_marker(runner.binding, tenant, "router")
    api = APIRouter(prefix=prefix, tags=list(tags), dependencies=list(dependencies))
    rows_of = TenantRows(runner.mounted)

    @api.get("", summary="The flows")
    def list_flows(owner: binding_mod.Tenant = Tenant) -> list[shapes.RowDict]:
        with runner.engine.connect() as conn:
            return rows_of.flows(conn, rows_of.owner(owner))

    @api.post("", status_code=201, summary="Create a flow")
    def create_flow(
        row: shapes.RowDict = Row, owner: binding_mod.Tenant = Tenant
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        _no_id(row, "flow")
        with rows_of.writing() as conn:
            flow_id = runner.editor.save_flow(conn, row, tenant=owner)
            return rows_of.flow(conn, flow_id, owner)

    @api.post("/validate", summary="Judge a flow row; nothing is saved")
    def validate_flow(
        row: shapes.RowDict = Row, owner: binding_mod.Tenant = Tenant
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)

        def save(conn: sa.Connection) -> None:
            whole = row
            if row.get("id") is not None:
                whole = {**rows_of.flow(conn, row["id"], owner), **row}
            runner.editor.save_flow(conn, whole, tenant=owner)

        return rows_of.judge(save)

    @api.get("/{flow_id}", summary="A flow with its steps")
    def read_flow(flow_id: int = FlowId, owner: binding_mod.Tenant = Tenant) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        with runner.engine.connect() as conn:
            flow = rows_of.flow(conn, flow_id, owner)
            return {**flow, "steps": flow_rows.steps_of_flow(conn, runner.tables, flow_id)}

    @api.patch("/{flow_id}", summary="Change a flow; the whole row is judged")
    def update_flow(
        flow_id: int = FlowId, changes: shapes.RowDict = Row, owner: binding_mod.Tenant = Tenant
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        _same(changes, "id", flow_id, "the flow's id is the one in the address")
        with rows_of.writing() as conn:
            stored = rows_of.flow(conn, flow_id, owner)
            runner.editor.save_flow(conn, {**stored, **changes, "id": flow_id}, tenant=owner)
            return rows_of.flow(conn, flow_id, owner)

    @api.delete("/{flow_id}", status_code=204, summary="Delete a flow and its steps")
    def delete_flow(flow_id: int = FlowId, owner: binding_mod.Tenant = Tenant) -> Response:
        owner = rows_of.owner(owner)
        with rows_of.writing() as conn:
            runner.editor.delete_flow(conn, flow_id, tenant=owner)
        return Response(status_code=204)

    @api.post("/{flow_id}/steps", status_code=201, summary="Add a step to a flow")
    def create_step(
        flow_id: int = FlowId, row: shapes.RowDict = Row, owner: binding_mod.Tenant = Tenant
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        _no_id(row, "step")
        _same(row, "flow_id", flow_id, "the step's flow is the one in the address")
        with rows_of.writing() as conn:
            rows_of.flow(conn, flow_id, owner)
            step_id = runner.editor.save_step(conn, {**row, "flow_id": flow_id}, tenant=owner)
            return rows_of.step(conn, flow_id, step_id, owner)

    @api.post("/{flow_id}/steps/validate", summary="Judge a step row; nothing is saved")
    def validate_step(
        flow_id: int = FlowId, row: shapes.RowDict = Row, owner: binding_mod.Tenant = Tenant
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        _same(row, "flow_id", flow_id, "the step's flow is the one in the address")

        def save(conn: sa.Connection) -> None:
            rows_of.flow(conn, flow_id, owner)
            whole = {**row, "flow_id": flow_id}
            if row.get("id") is not None:
                whole = {**rows_of.step(conn, flow_id, row["id"], owner), **whole}
            runner.editor.save_step(conn, whole, tenant=owner)

        return rows_of.judge(save)

    @api.patch("/{flow_id}/steps/{step_id}", summary="Change a step; the whole row is judged")
    def update_step(
        flow_id: int = FlowId,
        step_id: int = StepId,
        changes: shapes.RowDict = Row,
        owner: binding_mod.Tenant = Tenant,
    ) -> shapes.RowDict:
        owner = rows_of.owner(owner)
        _same(changes, "id", step_id, "the step's id is the one in the address")
        with rows_of.writing() as conn:
            stored = rows_of.step(conn, flow_id, step_id, owner)
            # A flow_id among the changes moves the step to that flow (of the tenant):
            # judged as any save, a goto still naming its position refuses it.
            runner.editor.save_step(conn, {**stored, **changes, "id": step_id}, tenant=owner)
            moved_to = flow_rows.step_by_id(conn, runner.tables, step_id)
            assert moved_to is not None
            return rows_of.step(conn, moved_to["flow_id"], step_id, owner)

    @api.delete("/{flow_id}/steps/{step_id}", status_code=204, summary="Delete a step")
    def delete_step(
        flow_id: int = FlowId, step_id: int = StepId, owner: binding_mod.Tenant = Tenant
    ) -> Response:
        owner = rows_of.owner(owner)
        with rows_of.writing() as conn:
            rows_of.step(conn, flow_id, step_id, owner)
            runner.editor.delete_step(conn, step_id, tenant=owner)
        return Response(status_code=204)

    return api


def _no_id(row: shapes.Row, what: str) -> None:
    if row.get("id") is not None:
        message = f"a new {what} gets its id when it is saved: leave id out"
        raise errors.RowInvalid([errors.FieldError("id", message, "column_not_read")])


def _same(row: shapes.Row, field: str, expected: int, message: str) -> None:
    if row.get(field) is not None and str(row[field]).strip() != str(expected):
        raise errors.RowInvalid([errors.FieldError(field, message, "column_not_read")])


__all__ = ["TenantOf", "TenantRows", "router", "tenant_marker"]
