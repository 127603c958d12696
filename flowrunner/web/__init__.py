"""FastAPI glue: flowrunner's errors answered over HTTP, and an ``APIRouter`` for the flow
and step rows, each write validated as every write is.

    from flowrunner import web

    app = FastAPI()
    web.install(app)                          # every FlowrunnerError -> its status and body
    app.include_router(web.router(runner))    # /flows: list, read, create, update, delete…

Only applications that import it need FastAPI (``pip install 'flowrunner[web]'``); the
rest of flowrunner never imports it. ``docs/web.md`` shows a whole app.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401  (the check that it is there; the modules below use it)
except ImportError as missing:  # pragma: no cover - the test runs it in a subprocess
    raise ImportError(
        "flowrunner.web needs FastAPI, which is not installed: pip install 'flowrunner[web]'"
    ) from missing

from flowrunner.web.flows_api import router
from flowrunner.web.handlers import EXCEPTION_HANDLERS, answer, install

__all__ = ["EXCEPTION_HANDLERS", "answer", "install", "router"]
