"""An ``APIRouter`` for a runner's event feed: a program that reads the events itself
pages through them over HTTP.

    GET /events?after=CURSOR&limit=100&name=po.decided

answers ``{"events": [{"id", "name", "record_id", "tenant", "payload", "at"}, ...],
"cursor": "..."}``: the events after ``after`` (none: from the first) in the feed's
order (``engine.feed``), and the cursor to ask for the next page with. ``name`` may be
given more than once. A cursor the feed did not hand out, or a limit outside 1 to
1,000, answers 422; an unknown event name 404.

It is the application's to say who may read (``dependencies=[Depends(require_reader)]``)
and, with a tenant binding, whose events the request reads (``tenant``, a dependency
returning the request's tenant, as the flows router takes).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Query, params

from flowrunner import binding as binding_mod
from flowrunner.foundations import payloads, shapes
from flowrunner.runner import FlowRunner
from flowrunner.web.flows_api import TenantOf, tenant_marker

After = Query(None, description="the cursor a page gave; none: from the first event")
Limit = Query(100, description="at most this many events (1 to 1,000)")
Names = Query(None, alias="name", description="only events of this name (may repeat)")


def events_router(
    runner: FlowRunner,
    *,
    tenant: TenantOf | None = None,
    prefix: str = "/events",
    dependencies: Sequence[params.Depends] = (),
    tags: Sequence[str] = ("events",),
) -> APIRouter:
    """The event feed of ``runner`` under ``prefix``. ``tenant`` is required exactly when
    the binding has tenants; ``dependencies`` run first (authentication, authorization)."""
    Tenant = tenant_marker(runner.binding, tenant, "events_router")
    api = APIRouter(prefix=prefix, tags=list(tags), dependencies=list(dependencies))

    @api.get("", summary="The events after a cursor, in order, and the cursor to go on from")
    def read_events(
        after: str | None = After,
        limit: int = Limit,
        names: list[str] | None = Names,
        owner: binding_mod.Tenant = Tenant,
    ) -> shapes.JsonDict:
        page = runner.events(after, limit, names, tenant=owner)
        return {
            "events": [
                {
                    "id": event.id,
                    "name": event.name,
                    "record_id": event.record_id,
                    "tenant": event.tenant,
                    "payload": event.payload,
                    "at": payloads.plain({"at": event.at})["at"],
                }
                for event in page.events
            ],
            "cursor": page.cursor,
        }

    return api


__all__ = ["events_router"]
