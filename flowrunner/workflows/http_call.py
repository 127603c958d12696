"""The HTTP call of a workflow's ``call`` step: one attempt, and what its answer means.

An attempt sends the step's request to its connection with an ``Idempotency-Key`` that
is the same on every attempt of the step (``run-<id>/<step name>``, percent-encoded
where the name is not printable ASCII), so the service can
do it once however often it is sent. Its answer is ``Answered`` (2xx, its JSON body
kept), ``Refused`` (another 4xx: the workflow gets ``StepRefused``) or ``Failed`` (a
5xx, 408, 429, a timeout or no connection: tried again with backoff). When the
application traces (``engine.tracing``), the request carries the W3C ``traceparent`` of
the call's span.

httpx is imported when the first call is made: ``pip install 'flowrunner[workflows]'``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from flowrunner.engine import tracing
from flowrunner.foundations import extras, sanitize, shapes, tls
from flowrunner.workflows import definitions

# Answers that are tried again: the service was busy, slow or broken, not the request.
RETRIED = frozenset({408, 429})
# How much of a refused answer's body its sentence quotes.
QUOTED = 200


@dataclass(frozen=True)
class Answered:
    status: int
    body: shapes.Json


@dataclass(frozen=True)
class Refused:
    status: int
    message: str


@dataclass(frozen=True)
class Failed:
    message: str


Outcome = Answered | Refused | Failed


def attempt(connection: definitions.Connection, request: shapes.Payload, *, key: str) -> Outcome:
    """Send ``request`` once to ``connection`` with ``key`` as its ``Idempotency-Key``."""
    try:
        import httpx
    except ModuleNotFoundError as exc:
        raise extras.explained(exc, what="w.call") from None
    headers = {**dict(connection.headers), **dict(request.get("headers") or {})}
    # The trace context of the call's span, unless the workflow sets its own.
    given = {name.lower() for name in headers}
    headers |= {k: v for k, v in tracing.headers().items() if k.lower() not in given}
    # A step's name may be any text; a header carries ASCII: the rest percent-encoded.
    sendable = key.isascii() and key.isprintable()
    headers["Idempotency-Key"] = key if sendable else quote(key, safe="/-._~:+@ ")
    body = request.get("body")
    try:
        with httpx.Client(
            base_url=connection.base_url, timeout=connection.timeout, verify=tls.for_http()
        ) as client:
            answer = client.request(
                str(request.get("method", "GET")),
                str(request.get("path", "/")),
                params=dict(request.get("query") or {}),
                headers=headers,
                json=body if body is not None else None,
            )
    except httpx.TimeoutException:
        return Failed(f"no answer within {connection.timeout:g} s")
    except httpx.HTTPError as exc:
        return Failed(sanitize.sanitize_text(f"{type(exc).__name__}: {exc}"))
    status = answer.status_code
    if 200 <= status < 300:
        return Answered(status, _body(answer.content))
    said = f"{request.get('method')} {request.get('path')} answered {status}"
    text = sanitize.sanitize_text(answer.text[:QUOTED]) if answer.content else ""
    if status >= 500 or status in RETRIED:
        return Failed(said)
    return Refused(status, f"{said}: {text}" if text else said)


def _body(content: bytes) -> shapes.Json:
    """The answer's body as JSON; a body that is not JSON as its text; none as None."""
    if not content:
        return None
    text = content.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def traced(outcome: Outcome) -> tuple[str, dict[str, object] | None]:
    """An attempt's outcome as its span tells it: ``ok``, ``refused`` or ``failed``, and
    the error (its sentence is sanitized already)."""
    if isinstance(outcome, Answered):
        return "ok", None
    if isinstance(outcome, Refused):
        return "refused", {"code": "call_refused", "message": outcome.message}
    return "failed", {"code": "call_failed", "message": outcome.message}
