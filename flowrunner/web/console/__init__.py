"""The console: flows edited in a browser, a record's runs, and the Operations room.

An ASGI application (Starlette, pages rendered on the server with Jinja2, a few lines
of JavaScript, nothing fetched from elsewhere) that an application mounts in one line::

    app.mount("/flows", runner.console(principal=current_user))

``principal`` takes the request and returns a ``Principal`` (name, tenant, roles), or
None for a stranger; the hooks ``can_read(principal, step_row)``,
``can_edit(principal, flow_row)`` and ``can_operate(principal, action, run)`` say what
they may read, edit and do. ``flowrunner console --app MODULE:ATTR --token …`` serves
it alone. ``docs/console.md`` shows it all.
"""

from __future__ import annotations

from flowrunner.foundations import extras

# What the modules below use (and Starlette's forms), checked first: without one of
# them, one line naming the extra.
extras.require("starlette", what="the console")
extras.require("jinja2", what="the console")
extras.require("python_multipart", what="the console")

from flowrunner.web.console.access import ACTIONS, Principal  # noqa: E402 (checked first)
from flowrunner.web.console.app import build as console  # noqa: E402

__all__ = ["ACTIONS", "Principal", "console"]
