"""Each callback's answer, kept for the Operations room's Deliveries page.

``keep`` records one answer — receipt or refusal — after it is decided, in its own short
transaction (``store.callbacks``: answers alike in one minute share a row). What is kept
is the inbound's name (None for a name no inbound has: a stranger's path is not kept),
the sender's delivery key once the body was read, the status, the reason sentence
(sanitized), the event emitted and the tenant: never the body, a header, the signature
or the secret. Keeping it never changes the answer: when the database fails here, the
log line says so and the sender is answered all the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrunner.foundations import logs, sanitize
from flowrunner.store import dialects
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

log = logs.logger("flowrunner.inbound")


def keep(
    mounted: Mounted,
    *,
    endpoint: str | None,
    status: int,
    reason: str,
    key: str | None = None,
    tenant: str | None = None,
    event_id: int | None = None,
) -> None:
    """Record one answer of ``endpoint`` (an inbound's name, or None); never raises."""
    try:
        with dialects.begin(mounted.engine) as conn:
            ops.record_callback(
                conn,
                resource=mounted.binding.resource,
                endpoint=endpoint,
                key=key,
                status=status,
                reason=reason,
                event_id=event_id,
                tenant=tenant,
                now=mounted.clock(),
            )
    except Exception as exc:  # the answer stands: only its record is missing
        log.warning(
            "inbound %s: the answer %d was not recorded: %s",
            endpoint if endpoint is not None else "(no such inbound)",
            status,
            sanitize.describe_exception(exc),
        )


__all__ = ["keep"]
