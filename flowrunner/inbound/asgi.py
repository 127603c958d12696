"""The inbound endpoints as a plain ASGI application: ``POST /NAME`` answered by a status.

No web framework is needed: the application is the ASGI callable itself, mounted where
the application's own app wants its callbacks::

    app.mount("/inbound", runner.inbound_app())       # Starlette, FastAPI
    uvicorn.run(runner.inbound_app(), port=8001)      # or served alone

and ``runner.console(...)`` serves it too, under ``…/inbound/NAME``. It reads the body
under the limit — a Content-Length past 256 KB is refused (413) before a byte is read,
and reading stops as soon as more than that has come — then hands the bytes to
``runner.receive`` on a worker thread (the runner's database calls block) and answers
with its status and an empty body. A name it does not serve: 404; another method: 405.
It needs an asyncio server (uvicorn, hypercorn), as Starlette's test client is.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from flowrunner.inbound import answers, receipt, signing

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

Message = MutableMapping[str, Any]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TOO_LARGE = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
# A Content-Length: ASCII digits ("²" is a digit to str.isdigit, and no length).
_LENGTH = re.compile(r"[0-9]{1,18}")


class InboundApp:
    """Serves a runner's inbound endpoints (``runner.inbound``) at ``POST /NAME``."""

    def __init__(
        self,
        mounted: Mounted,
        handle: Callable[[str, signing.Headers, bytes], receipt.Received] | None = None,
    ) -> None:
        mounted.require_secrets()  # startup refuses while a secret's variable is unset
        self.mounted = mounted
        # What answers a post (the runner's ``receive``, which knows its mail inbounds).
        self.handle = handle or functools.partial(receipt.receive, mounted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return
        name = _name(scope)
        if name is None or (name not in self.mounted.inbound and name not in self.mounted.mail):
            await _refuse(
                self.mounted, send, name, HTTPStatus.NOT_FOUND, "there is no inbound of that name"
            )
            return
        if scope["method"] != "POST":
            await _refuse(
                self.mounted,
                send,
                name,
                HTTPStatus.METHOD_NOT_ALLOWED,
                f"{scope['method']} is not POST",
            )
            return
        headers = list(scope.get("headers") or [])
        declared = signing.values(headers, "content-length")
        if len(declared) > 1 or (declared and not _LENGTH.fullmatch(declared[0].strip())):
            await _refuse(
                self.mounted, send, name, HTTPStatus.BAD_REQUEST, "its Content-Length is no length"
            )
            return
        if declared and signing.too_large(int(declared[0])):
            await _refuse(self.mounted, send, name, TOO_LARGE, "its Content-Length is past 256 KB")
            return
        try:
            body = await _read(receive)
        except _Gone:
            return  # the sender left before its body was whole: nothing is done
        if body is None:
            await _refuse(self.mounted, send, name, TOO_LARGE, "its body is past 256 KB")
            return
        received = await asyncio.to_thread(self.handle, name, headers, body)
        await _answer(send, HTTPStatus(received.status), said=received.said)


def _name(scope: Scope) -> str | None:
    """The inbound's name: the one segment of the path under where the app is mounted.

    Servers and routers differ on whether ``path`` still holds ``root_path`` (Starlette's
    ``Mount`` keeps it there; some servers take it off): either way is read.
    """
    path: str = scope.get("path") or ""
    root: str = scope.get("root_path") or ""
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("/", ""):
        path = path[len(root) :]
    parts = path.split("/")
    if len(parts) != 2 or parts[0] or not parts[1]:
        return None
    return parts[1]


class _Gone(Exception):
    """The client disconnected before the request's body was whole."""


async def _read(receive: Receive) -> bytes | None:
    """The request's body, or None once it is past the limit (the rest is left unread)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body") or b""
        size += len(chunk)
        if signing.too_large(size):
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _refuse(
    mounted: Mounted, send: Send, name: str | None, status: HTTPStatus, reason: str
) -> None:
    """Refused before the body was read (or read whole): said in one line, kept for the
    Deliveries page, then answered. What a stranger chose (a path that is no inbound's,
    a method) is kept as a fixed sentence, so a flood of them folds into few rows."""
    receipt.refused_unread(str(name), int(status), reason)
    known = name if status != HTTPStatus.NOT_FOUND else None
    kept = "the method is not POST" if status == HTTPStatus.METHOD_NOT_ALLOWED else reason
    await asyncio.to_thread(answers.keep, mounted, endpoint=known, status=int(status), reason=kept)
    allow = [(b"allow", b"POST")] if status == HTTPStatus.METHOD_NOT_ALLOWED else []
    await _answer(send, status, allow)


async def _answer(
    send: Send,
    status: HTTPStatus,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    said: str | None = None,
) -> None:
    """The status alone: no body (a 204 has no Content-Length either); a mail inbound's
    refusal says why in one line of plain text."""
    sent = list(headers or [])
    body = b"" if said is None or status == HTTPStatus.NO_CONTENT else said.encode() + b"\n"
    if body:
        sent.append((b"content-type", b"text/plain; charset=utf-8"))
    if status != HTTPStatus.NO_CONTENT:
        sent.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": int(status), "headers": sent})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Served alone, the app has nothing to start or stop: it says so."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


__all__ = ["InboundApp"]
