"""The console's ASGI application: its routes, templates, static files and headers.

``console(runner, ...)`` builds it; an application mounts it
(``app.mount("/flows", runner.console(principal=...))``) or ``flowrunner console``
serves it alone. Each area's pages live in their own module (``flows_pages``,
``record_pages``, ``runs_pages``, ``ops_pages``); this module only wires them. It
serves the runner's signed callbacks too (``POST /inbound/NAME``,
``flowrunner.inbound.asgi``) and the pages of its answer links (``GET|POST /answer/TOKEN``,
``flowrunner.web.link_pages``), which need no reader: their signature is the credential.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowrunner.web import link_pages
from flowrunner.web.console import access, page
from flowrunner.web.console.page import Console

if TYPE_CHECKING:
    from flowrunner.web.console.runner_view import ConsoleRunner

HERE = page.HERE

# No script or style from elsewhere; a diagram's own inline style is allowed.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'self'"
)


class _Headers:
    """Every answer says: no sniffing, no referrer beyond the origin, the content policy."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", POLICY.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"cache-control", b"no-store"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def build(
    runner: ConsoleRunner,
    *,
    principal: access.PrincipalOf | None = None,
    can_read: access.CanRead | None = None,
    can_edit: access.CanEdit | None = None,
    can_operate: access.CanOperate | None = None,
    token: str | None = None,
    operator: str = "console",
    tenant: str | None = None,
    secret: bytes | str | None = None,
    title: str | None = None,
) -> Starlette:
    """The console of ``runner`` as an ASGI application (see ``flowrunner.web.console``)."""
    from flowrunner.web.console import (
        dashboard_pages,
        deliveries_pages,
        flows_pages,
        jobs_pages,
        ops_pages,
        record_pages,
        runs_pages,
        sign_in,
        versions_pages,
    )

    hooks: dict[str, Any] = {
        name: hook
        for name, hook in (
            ("can_read", can_read),
            ("can_edit", can_edit),
            ("can_operate", can_operate),
        )
        if hook is not None
    }
    rules = access.Access(
        principal=principal,
        token=token,
        operator=operator,
        tenant=tenant,
        authority=runner.mounted.authority,
        **hooks,
    )
    if isinstance(secret, str):
        secret = secret.encode()
    console = Console(
        runner,
        rules,
        secret=secret or secrets.token_bytes(32),
        title=title or f"{runner.binding.resource_label} flows",
    )
    routes: list[BaseRoute] = [
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        # The runner's signed callbacks, before sign-in: the signature is the credential.
        Mount("/inbound", app=runner.inbound_app(), name="inbound"),
        # Answer links, likewise: the signed token is the credential.
        Mount("/answer", app=link_pages.answer_pages(runner), name="answer"),
    ]
    # Signing in needs no reader: it is how a token's reader comes to be one.
    show, post = sign_in.endpoints(console)
    routes += [Route("/signin", show, methods=["GET"]), Route("/signin", post, methods=["POST"])]
    for module in (
        flows_pages,
        versions_pages,
        dashboard_pages,
        record_pages,
        runs_pages,
        ops_pages,
        jobs_pages,
        deliveries_pages,
        sign_in,
    ):
        for method, path, handler in module.ROUTES:
            routes.append(Route(path, page.endpoint(console, handler), methods=[method]))
    app = Starlette(routes=routes, middleware=[Middleware(_Headers)])
    app.state.console = console
    return app
