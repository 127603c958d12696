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

try:
    import jinja2  # noqa: F401  (the check that it is there; the modules below use it)
except ImportError as missing:  # pragma: no cover - the test runs it in a subprocess
    raise ImportError(
        "the console needs Jinja2, which is not installed: pip install 'flowrunner[console]'"
    ) from missing

from flowrunner.web.console.access import ACTIONS, Principal
from flowrunner.web.console.app import build as console

__all__ = ["ACTIONS", "Principal", "console"]
