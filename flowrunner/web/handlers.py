"""Every ``FlowrunnerError`` answered with its HTTP status and ``to_dict()`` body.

``RowInvalid`` answers 422 with every field error in FastAPI's own shape
(``{"detail": [{"loc": ["body", "duration"], "msg": ..., "type": ...}]}``); the others
``{"detail": sentence, "code": ...}`` with their status (``flowrunner.errors`` lists
them). An error of the server's (5xx: a binding that does not fit, tables that need
migrating) is logged as one line and answered without its sentence, which is for the
server's operators, not the client.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from flowrunner import errors
from flowrunner.foundations import logs, shapes

log = logs.logger("flowrunner.web")

SERVER_SIDE = "the workflow engine cannot answer this request now; the server's log says why"


def answer(error: errors.FlowrunnerError) -> JSONResponse:
    """The HTTP answer to ``error``: its status, and its ``to_dict()`` as the body."""
    if error.status_code >= 500:
        log.error("answered %s (%s): %s", error.status_code, error.code, error)
        body: shapes.JsonDict = {"detail": SERVER_SIDE, "code": error.code}
    else:
        body = error.to_dict()
    return JSONResponse(body, status_code=error.status_code)


async def _handle(_request: Request, exc: Exception) -> Response:
    if not isinstance(exc, errors.FlowrunnerError):  # pragma: no cover - registered for it
        raise exc
    return answer(exc)


Handler = Callable[[Request, Exception], Coroutine[object, object, Response]]

EXCEPTION_HANDLERS: dict[int | type[Exception], Handler] = {errors.FlowrunnerError: _handle}
"""For ``FastAPI(exception_handlers=web.EXCEPTION_HANDLERS)``."""


def install(app: FastAPI) -> FastAPI:
    """Answer every ``FlowrunnerError`` that reaches ``app`` with its status and body."""
    for kind, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(kind, handler)
    return app


__all__ = ["EXCEPTION_HANDLERS", "SERVER_SIDE", "answer", "install"]
