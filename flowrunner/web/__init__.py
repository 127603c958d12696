"""FastAPI glue: flowrunner's errors answered over HTTP, and an ``APIRouter`` for the flow
and step rows, each write validated as every write is.

    from flowrunner import web

    app = FastAPI()
    web.install(app)                          # every FlowrunnerError -> its status and body
    app.include_router(web.router(runner))    # /flows: list, read, create, update, delete…
    app.mount("/answer", web.answer_pages(runner))   # the pages of answer links
    app.include_router(web.events_router(runner))   # /events: the event feed, page by page

Only applications that use it need FastAPI (``pip install 'flowrunner[web]'``): its
names are imported when first used, and without FastAPI that use fails with the extra to
install (``errors.ExtraMissing``); the console (``flowrunner.web.console``, which needs
the ``console`` extra) does not need them. The rest of flowrunner never imports FastAPI.
``docs/web.md`` shows a whole app.
"""

from __future__ import annotations

import importlib
import typing

from flowrunner.foundations import extras

if typing.TYPE_CHECKING:
    from flowrunner.web.events_api import events_router
    from flowrunner.web.flows_api import router
    from flowrunner.web.handlers import EXCEPTION_HANDLERS, answer, install
    from flowrunner.web.link_pages import answer_pages

__all__ = ["EXCEPTION_HANDLERS", "answer", "answer_pages", "events_router", "install", "router"]

# name -> the module it lives in, imported on first use (FastAPI checked first).
_EXPORTS = {
    "router": "flowrunner.web.flows_api",
    "answer_pages": "flowrunner.web.link_pages",
    "events_router": "flowrunner.web.events_api",
    "EXCEPTION_HANDLERS": "flowrunner.web.handlers",
    "answer": "flowrunner.web.handlers",
    "install": "flowrunner.web.handlers",
}


def __getattr__(name: str) -> typing.Any:
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    extras.require("fastapi", what="flowrunner.web")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
