"""Forms the console did not hand out are refused: a CSRF token per browser session.

The session's token is a random nonce kept in a signed, HttpOnly, SameSite=Strict
cookie; every form carries it in a hidden field, and every POST must send both, the
cookie's signature good and the two equal (compared in constant time). A page from
another site can neither read the cookie nor forge its signature.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request

COOKIE = "flowrunner_csrf"
FIELD = "csrf"
HEADER = "x-csrf-token"


class Forged(Exception):
    """A POST without the session's token (403)."""


class Csrf:
    """Signs and checks the session's token with the console's secret."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()

    def session_token(self, request: Request) -> str | None:
        """The nonce of the request's cookie, if its signature is good."""
        nonce, _, signature = request.cookies.get(COOKIE, "").partition(".")
        if nonce and hmac.compare_digest(signature.encode(), self._sign(nonce).encode()):
            return nonce
        return None

    def new_token(self) -> tuple[str, str]:
        """A new nonce and the cookie value carrying it."""
        nonce = secrets.token_urlsafe(24)
        return nonce, f"{nonce}.{self._sign(nonce)}"

    def check(self, request: Request, field: str) -> None:
        """``Forged`` unless the form's ``field`` (or the header) is the cookie's token."""
        expected = self.session_token(request)
        given = field or request.headers.get(HEADER) or ""
        if expected is None or not hmac.compare_digest(given.encode(), expected.encode()):
            raise Forged(
                "this form was not sent from the console's own page, or the page is out of "
                "date: reload the page and try again"
            )
