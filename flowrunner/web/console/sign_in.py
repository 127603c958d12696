"""Signing in to a token console: a page that POSTs the token once, and the HttpOnly,
SameSite=Strict cookie it leaves (a value derived from the token, never the token).

The token travels only in a form's body or an ``Authorization: Bearer`` header, never
in an address: servers log addresses, proxies keep them, browsers remember them and
send them on as ``Referer``. The sign-in form carries no CSRF token: there is no session
before it, and a page elsewhere that posted a token it knew would gain nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from flowrunner.web.console import access
from flowrunner.web.console.page import Console, Page, bare, next_path

WRONG = "that is not this console's token"


Endpoint = Callable[[Request], Awaitable[Response]]


def endpoints(console: Console) -> tuple[Endpoint, Endpoint]:
    """The sign-in page (GET) and its form (POST), as Starlette endpoints."""

    async def show(request: Request) -> Response:
        if not console.access.token:
            return _signed_in(request, "")
        wanted = next_path(request, request.query_params.get("next", ""))
        if console.access.token_in(request):
            return RedirectResponse(wanted, status_code=303)
        return bare(console, request, "signin.html", status=200, message="", next=wanted)

    async def sign_in(request: Request) -> Response:
        async with request.form(max_files=0, max_fields=8) as form:
            given = form.get("token")
            wanted = next_path(request, str(form.get("next") or ""))
        if not console.access.token:
            return _signed_in(request, "")
        if not isinstance(given, str) or not console.access.is_token(given):
            return bare(console, request, "signin.html", status=401, message=WRONG, next=wanted)
        response = RedirectResponse(wanted, status_code=303)
        response.set_cookie(
            access.TOKEN_COOKIE,
            console.access.cookie_value(),
            path=request.scope.get("root_path", "") or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    return show, sign_in


def _signed_in(request: Request, wanted: str) -> Response:
    """A console that reads the application's own login has no sign-in of its own."""
    return RedirectResponse(next_path(request, wanted), status_code=303)


def sign_out(page: Page) -> Response:
    """Forget the token's cookie (a form of the console's, so CSRF-checked)."""
    response = page.redirect("/signin")
    response.delete_cookie(
        access.TOKEN_COOKIE,
        path=page.request.scope.get("root_path", "") or "/",
        httponly=True,
        samesite="strict",
        secure=page.request.url.scheme == "https",
    )
    return response


ROUTES = [("POST", "/signout", sign_out)]
