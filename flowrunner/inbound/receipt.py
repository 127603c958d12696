"""Receiving a signed callback: judged, read, then applied once, in one transaction.

``receive(runner, name, headers, body)`` is the whole handling, whatever serves the
HTTP (``flowrunner.inbound.asgi`` for ASGI; another framework calls ``runner.receive``).
Its answer is a status alone:

- 404: no inbound of that name; 413: a body past 256 KB;
- 401: the secret's environment variable is not set (read now, at each request), or
  the signature over the raw bytes or the time fails (``signing.check``);
- 400: only then is the body read (``inbound.read``) — not JSON, JSON the database
  could not keep (``\\u0000``, a lone surrogate, a number past 64 bits, nesting past
  32 levels: ``inbound.storable``), or the inbound's functions cannot use it; or the
  event it would emit is refused (no such record);
- then, in one transaction: the receipt (the engine's idempotency record, under
  ``inbound:RESOURCE:NAME:KEY`` with the body's fingerprint), the command as
  ``run_as``, the event, the receipt completed — 204. A receipt already there answers
  as it did for the same bytes (nothing runs again) and 409 for other bytes;
- 409: the command refused (``CommandRefused``), or answered what cannot be kept: its
  writes are undone and the receipt keeps the refusal, so the same bytes sent again
  are answered 409 without running the command;
- 503: the command failed, or the database did: nothing is kept, and the sender,
  which sends again on such an answer, is served then (500: a fault of flowrunner's
  own, logged).

Each callback is one log line (``flowrunner.inbound``), which never holds the secret,
the signature or the body, and one answer kept for the Deliveries page
(``inbound.answers``), which holds none of them either.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import commands, worker
from flowrunner.engine.changes import Changes
from flowrunner.foundations import logs, payloads, sanitize
from flowrunner.inbound import answers, signing
from flowrunner.inbound import endpoints as inbound_mod
from flowrunner.store import dialects
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

log = logs.logger("flowrunner.inbound")

# Every status ``receive`` answers with (500 only for a fault of flowrunner's own).
STATUSES = (204, 400, 401, 404, 409, 413, 500, 503)


@dataclass(frozen=True)
class Received:
    """How a callback was answered: the status sent, and why (for logs and tests only)."""

    status: int
    reason: str
    said: str | None = None
    """The sentence answered to the sender with the status (a mail inbound's refusals),
    or None for the status alone."""
    key: str | None = None
    """The sender's delivery key, once the body was read."""
    tenant: str | None = None
    event: int | None = None
    """The event the callback emitted."""

    @property
    def applied(self) -> bool:
        return self.status == HTTPStatus.NO_CONTENT


class _Failed(Exception):
    """The command or the database failed: nothing was kept, the sender may try again."""


def receive(mounted: Mounted, name: str, headers: signing.Headers, body: bytes) -> Received:
    """Judge and apply one callback to inbound ``name``; never raises (see the module)."""
    inbound = mounted.inbound.get(name) if isinstance(name, str) else None
    if inbound is None:
        received = Received(HTTPStatus.NOT_FOUND, "there is no inbound of that name")
        refused_unread(name, received.status, received.reason)
        answers.keep(mounted, endpoint=None, status=received.status, reason=received.reason)
        return received
    try:
        received = _receive(mounted, inbound, headers, bytes(body))
    except errors.CallbackRejected as rejected:
        received = Received(rejected.status_code, str(rejected))
    except _Failed as failed:
        received = Received(HTTPStatus.SERVICE_UNAVAILABLE, str(failed))
    except Exception as exc:  # flowrunner's own fault: said, never raised at the server
        received = Received(HTTPStatus.INTERNAL_SERVER_ERROR, "the callback could not be handled")
        log.error(
            "inbound %s: %s: %s", inbound.name, received.reason, sanitize.describe_exception(exc)
        )
        log.debug("inbound %s: raised at %s", inbound.name, logs.where(exc))
        _keep(mounted, inbound, received)
        return received
    _keep(mounted, inbound, received)
    if received.applied:
        log.info("inbound %s: %s", inbound.name, received.reason)
    else:
        log.warning(
            "inbound %s: refused a callback (%d): %s",
            inbound.name,
            received.status,
            received.reason,
        )
    return received


def _keep(mounted: Mounted, inbound: inbound_mod.Inbound, received: Received) -> None:
    answers.keep(
        mounted,
        endpoint=inbound.name,
        status=received.status,
        reason=received.reason,
        key=received.key,
        tenant=received.tenant,
        event_id=received.event,
    )


def refused_unread(name: str, status: int, reason: str) -> None:
    """The log line of a callback the HTTP side refused before reading it (404, 405, 413);
    a name that is no inbound's is quoted as it came."""
    shown = repr(name) if status == HTTPStatus.NOT_FOUND else name
    log.warning("inbound %s: refused a callback (%d): %s", shown, status, reason)


def receipt_key(mounted: Mounted, inbound: inbound_mod.Inbound, key: str) -> str:
    """The idempotency record's key of a delivery: ``inbound:RESOURCE:NAME:KEY``."""
    return f"inbound:{mounted.binding.resource}:{inbound.name}:{key}"


def _receive(
    mounted: Mounted, inbound: inbound_mod.Inbound, headers: signing.Headers, body: bytes
) -> Received:
    if signing.too_large(len(body)):
        raise _rejected(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the body is past 256 KB")
    spec = inbound.verify
    secret = os.environ.get(spec.secret_env)
    if not secret:
        raise _rejected(
            HTTPStatus.UNAUTHORIZED, f"the environment variable {spec.secret_env} is not set"
        )
    why = signing.check(spec, secret.encode("utf-8"), headers, body, mounted.clock())
    if why is not None:
        raise _rejected(HTTPStatus.UNAUTHORIZED, why)
    delivery = inbound_mod.read(inbound, body)
    tenant: str | None = None
    try:
        tenant = _tenant(mounted, delivery)
        event = _event(mounted, inbound, delivery, tenant)
        return _apply(mounted, inbound, delivery, tenant, event)
    except errors.CallbackRejected as rejected:  # read: its key (and tenant) are known
        return Received(rejected.status_code, str(rejected), key=delivery.key, tenant=tenant)
    except _Failed as failed:
        return Received(
            HTTPStatus.SERVICE_UNAVAILABLE, str(failed), key=delivery.key, tenant=tenant
        )


def _apply(
    mounted: Mounted,
    inbound: inbound_mod.Inbound,
    delivery: inbound_mod.Delivery,
    tenant: str | None,
    event: Mapping[str, Any] | None,
) -> Received:
    """The receipt, the command, the event and the receipt completed: one transaction.

    A command that refuses leaves nothing of its own (its savepoint is rolled back), and
    the receipt is completed with the refusal: the same bytes sent again are answered
    the same 409 from it, without running the command again.
    """
    key = receipt_key(mounted, inbound, delivery.key)
    refused: str | None = None
    try:
        with dialects.begin(mounted.engine) as conn:
            now = mounted.clock()
            receipt = ops.begin_idempotent(conn, key=key, tenant=tenant, now=now)
            if not receipt.created:
                return _replayed(receipt, delivery, tenant)
            answer = None
            if inbound.command is not None:
                try:
                    with dialects.Savepoint(conn, "flowrunner_inbound_command"):
                        answer = _command(mounted, conn, inbound, delivery, key, tenant, now)
                except _Refused as refusal:
                    refused = str(refusal)
            event_id = None
            if event is not None and refused is None:
                event_id = _emit(mounted, conn, inbound, event)
            result: dict[str, Any] = {
                "inbound": inbound.name,
                "body": delivery.fingerprint,
                "answer": answer,
                "event": event_id,
            }
            if refused is not None:
                result["refused"] = refused
            ops.complete_idempotent(conn, key=key, result=result, now=now)
    except (errors.CallbackRejected, _Failed):
        raise
    except Exception as exc:
        if not worker.database_failed(exc) and not isinstance(exc, sa.exc.DBAPIError):
            raise
        raise _Failed(f"the database failed: {sanitize.describe_exception(exc)}") from exc
    if refused is not None:
        return Received(HTTPStatus.CONFLICT, refused, key=delivery.key, tenant=tenant)
    done = f" (event {event_id})" if event_id is not None else ""
    return Received(
        HTTPStatus.NO_CONTENT,
        f"delivery {delivery.key!r} applied{done}",
        key=delivery.key,
        tenant=tenant,
        event=event_id,
    )


def _replayed(receipt: ops.IdemRow, delivery: inbound_mod.Delivery, tenant: str | None) -> Received:
    """The answer a receipt already there gives: the one it gave, for the same bytes."""
    kept = receipt.result if isinstance(receipt.result, Mapping) else {}
    if receipt.completed and kept.get("body") == delivery.fingerprint:
        refused = kept.get("refused")
        if refused is not None:
            return Received(
                HTTPStatus.CONFLICT,
                f"delivery {delivery.key!r} replayed: refused before ({refused})",
                key=delivery.key,
                tenant=tenant,
            )
        return Received(
            HTTPStatus.NO_CONTENT,
            f"delivery {delivery.key!r} replayed: the same body again",
            key=delivery.key,
            tenant=tenant,
        )
    raise _rejected(
        HTTPStatus.CONFLICT, f"delivery {delivery.key!r} was received before with another body"
    )


class _Refused(Exception):
    """The command refused the callback for good (409): kept with its receipt."""


def _command(
    mounted: Mounted,
    conn: sa.Connection,
    inbound: inbound_mod.Inbound,
    delivery: inbound_mod.Delivery,
    key: str,
    tenant: str | None,
    now: datetime,
) -> dict[str, Any]:
    """Run the inbound's command as its principal, in the callback's transaction;
    ``_Refused`` when it refuses (or answers what cannot be kept), ``_Failed`` when it
    fails."""
    name = inbound.command
    assert name is not None
    context = commands.CommandContext(
        record={},
        inputs=delivery.inputs,
        conn=conn,
        principal=inbound.run_as,
        idempotency_key=key,
        tenant=tenant,
        now=now,
        clock=mounted.clock,
        inbound=inbound.name,
    )
    try:
        mounted.authorize_command(name, principal=inbound.run_as)
        answer = mounted.commands[name](context)
        if answer is not None and not isinstance(answer, Mapping):
            raise TypeError(f"command {name!r} answered {type(answer).__name__}")
    except errors.CommandRefused as refused:
        raise _Refused(f"command {name!r} refused: {sanitize.exception_text(refused)}") from None
    except Exception as exc:
        raise _Failed(f"command {name!r} failed: {sanitize.describe_exception(exc)}") from exc
    try:
        plain: dict[str, Any] = payloads.plain(dict(answer or {}))
    except payloads.NotPlain as exc:
        raise _Refused(f"command {name!r} answered what cannot be kept: {exc}") from None
    return plain


def _tenant(mounted: Mounted, delivery: inbound_mod.Delivery) -> str | None:
    """The delivery's tenant as the tenant column holds it; 400 when it cannot be one."""
    if mounted.binding.tenant is None:
        return None
    try:
        return str(mounted.tables.tenant_value(delivery.tenant))
    except errors.RecordRejected as exc:
        raise _rejected(
            HTTPStatus.BAD_REQUEST, f"tenant(body) named no tenant the column can hold: {exc}"
        ) from None


def _event(
    mounted: Mounted,
    inbound: inbound_mod.Inbound,
    delivery: inbound_mod.Delivery,
    tenant: str | None,
) -> dict[str, Any] | None:
    """The payload to emit: on a tenant binding, in the delivery's tenant and no other."""
    if delivery.event is None:
        return None
    payload = dict(delivery.event)
    column = mounted.binding.tenant
    if column is not None:
        named = payload.get(column)
        if named is not None and str(named) != tenant:
            raise _rejected(
                HTTPStatus.BAD_REQUEST,
                f"payload(body) names another tenant in {column!r} than tenant(body) does",
            )
        payload[column] = tenant
    assert inbound.emit is not None
    try:
        # Before the command runs: an event that cannot be is the body's fault (400).
        Changes(mounted).check_event(inbound.emit, payload)
    except errors.EventRejected as exc:
        raise _rejected(HTTPStatus.BAD_REQUEST, f"the event was refused: {exc}") from None
    return payload


def _emit(
    mounted: Mounted, conn: sa.Connection, inbound: inbound_mod.Inbound, event: Mapping[str, Any]
) -> int:
    assert inbound.emit is not None
    try:
        return Changes(mounted).emit(conn, inbound.emit, event)
    except errors.EventRejected as exc:
        raise _rejected(HTTPStatus.BAD_REQUEST, f"the event was refused: {exc}") from None


def _rejected(status: HTTPStatus, reason: str) -> errors.CallbackRejected:
    return errors.CallbackRejected(reason, status_code=int(status), code=_CODES[status])


_CODES = {
    HTTPStatus.BAD_REQUEST: "callback_unreadable",
    HTTPStatus.UNAUTHORIZED: "callback_unsigned",
    HTTPStatus.CONFLICT: "callback_conflict",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "callback_too_large",
}


__all__ = ["STATUSES", "Received", "receipt_key", "receive", "refused_unread"]
