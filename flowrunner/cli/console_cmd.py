"""``flowrunner console`` serves the web console alone (uvicorn), on 127.0.0.1 by default.

It refuses to start without a reader it can name: either the application's function
from a request to a ``Principal`` (``--principal MODULE:ATTR``), or a bearer token
(``--token``, or the ``FLOWRUNNER_CONSOLE_TOKEN`` environment variable) that a browser
types once into the console's sign-in page (never in an address, which logs keep).
"""

from __future__ import annotations

import contextlib
import ipaddress
import pkgutil
from typing import Any

import click

from flowrunner import cli as cli_mod
from flowrunner.foundations import logs


def _principal(spec: str | None) -> Any:
    if spec is None:
        return None
    try:
        found = pkgutil.resolve_name(spec)
    except (ValueError, ImportError, AttributeError) as exc:
        raise cli_mod.InputError(f"--principal {spec}: cannot find it ({exc})") from exc
    if not callable(found):
        raise cli_mod.InputError(
            f"--principal {spec} is not a function from a request to a Principal"
        )
    return found


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(epilog=cli_mod.EXIT_STATUSES)
@cli_mod.app_option()
@cli_mod.database_option()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="The port."
)
@click.option(
    "--token",
    envvar="FLOWRUNNER_CONSOLE_TOKEN",
    default=None,
    help="The bearer token readers must show (or set FLOWRUNNER_CONSOLE_TOKEN, which no "
    "process list shows). A browser signs in with it once and keeps a cookie.",
)
@click.option(
    "--principal",
    "principal_spec",
    default=None,
    metavar="MODULE:ATTR",
    help="Instead of a token: the application's function from a request to a Principal.",
)
@click.option(
    "--operator",
    default="console",
    show_default=True,
    help="The token reader's name, journaled with every action they take.",
)
@click.option("--tenant", default=None, help="The token reader's tenant (a tenant binding).")
@click.option(
    "--root-path", default="", help="The path the console is served under behind a proxy."
)
@cli_mod.log_format_option()
def console(
    app_spec: str,
    database: str | None,
    host: str,
    port: int,
    token: str | None,
    principal_spec: str | None,
    operator: str,
    tenant: str | None,
    root_path: str,
    log_format: str,
) -> None:
    """Serve the web console of the app's runner: flows, records' runs, Operations."""
    from flowrunner.foundations import extras

    # The console's whole stack, before anything is loaded: without it, exit 2 and the
    # extra to install.
    try:
        import uvicorn

        import flowrunner.web.console  # noqa: F401
    except ModuleNotFoundError as exc:
        raise extras.explained(exc, what="flowrunner console") from None

    if not token and principal_spec is None:
        raise cli_mod.InputError(
            "the console must know who reads it: give --token (or set "
            "FLOWRUNNER_CONSOLE_TOKEN), or --principal MODULE:ATTR, the application's "
            "function from a request to a Principal"
        )
    if token and principal_spec is not None:
        raise cli_mod.InputError("give --token or --principal, not both")
    if token is not None and len(token) < 16:
        raise cli_mod.InputError("a token has at least 16 characters: it is the only lock")
    principal = _principal(principal_spec)
    if log_format == "text":  # uvicorn's own lines, as it writes them
        logged: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        served: dict[str, Any] = {"log_level": "info"}
    else:  # every logger's, uvicorn's too, as JSON lines
        logged, served = logs.to_stderr("INFO", log_format), {"log_config": None}
    say = cli_mod.teller(log_format)
    with logged:
        runner = cli_mod.load_runner(app_spec, database)
        options: dict[str, Any] = (
            {"principal": principal}
            if principal is not None
            else {"token": token, "operator": operator, "tenant": tenant}
        )
        app = runner.console(**options)
        where = f"http://{host}:{port}{root_path}/"
        say(f"The console of {runner.binding.resource} on {where}")
        if token:
            say(f"Open it in a browser and sign in with the token: {where}signin")
        if not _loopback(host):
            say(f"Listening on {host}, beyond this machine, over plain HTTP: put it behind TLS.")
        uvicorn.run(app, host=host, port=port, root_path=root_path, **served)
