"""The console as its tests use it: a browser-like client that keeps the session's cookies
and sends each form with the CSRF token of the page it came from, and ways to read what
a page says (the sentences beside fields, the banner, the rows of a table)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import Any

from starlette.testclient import TestClient

from flowrunner import testing
from flowrunner.web.console import Principal

EDITOR = Principal("ann", roles=frozenset({"editor"}))
OPERATOR = Principal("olga", roles=frozenset({"operator"}))
BOTH = Principal("ada", roles=frozenset({"editor", "operator"}))
READER = Principal("rita")


def as_(principal: Principal | None) -> Callable[[Any], Principal | None]:
    """The application's function from a request to its reader: always ``principal``."""
    return lambda _request: principal


class Session:
    """One browser session on a console: its cookies, and the CSRF token of its pages."""

    def __init__(self, app: Any, *, root: str = "") -> None:
        self.client = TestClient(app, follow_redirects=False)
        self.root = root
        self.token = ""

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(self.root + path, params=params or None)
        found = re.search(r'name="csrf-token" content="([^"]+)"', response.text)
        if found:
            self.token = found.group(1)
        return response

    def post(self, path: str, data: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """POST a form from a page of this session (its CSRF token added)."""
        if not self.token:
            self.get("/")
        return self.client.post(
            self.root + path, data={"csrf": self.token, **(data or {})}, **kwargs
        )

    def follow(self, response: Any) -> Any:
        """The page a 303 sends the browser to."""
        assert response.status_code == 303, (response.status_code, response.text[:2000])
        location = response.headers["location"]
        assert location.startswith(self.root or "/")
        return self.get(location.removeprefix(self.root))


def console(
    driver: testing.FlowDriver, principal: Principal | None = BOTH, **options: Any
) -> Session:
    """A session on the console of the driver's runner, read by ``principal``."""
    return Session(driver.runner.console(principal=as_(principal), **options))


def text(fragment: str) -> str:
    """A fragment of HTML as the text a person reads: tags gone, entities read, spaces one."""
    plain = re.sub(r"<[^>]+>", " ", fragment)
    return re.sub(r"\s+", " ", html.unescape(plain)).strip()


def errors_beside(page: str, form: str, field: str) -> list[str]:
    """The sentences shown beside ``field`` of the form ``form``."""
    return [
        text(m)
        for m in re.findall(
            rf'<p class="error" id="{re.escape(form)}-{re.escape(field)}-error">(.*?)</p>',
            page,
            re.S,
        )
    ]


def said(page: str) -> str | None:
    """The banner that says what was just done."""
    found = re.search(r'<p class="said" role="status">(.*?)</p>', page, re.S)
    return None if found is None else text(found.group(1))


def refusal(page: str) -> str | None:
    found = re.search(r'class="refusal"[^>]*>(.*?)</p>', page, re.S)
    return None if found is None else text(found.group(1))


def field_value(page: str, form: str, field: str) -> str | None:
    found = re.search(
        rf'id="{re.escape(form)}-{re.escape(field)}" name="[^"]+" value="([^"]*)"', page
    )
    return None if found is None else html.unescape(found.group(1))


def rows(page: str, attribute: str) -> list[str]:
    """The values of ``data-ATTRIBUTE`` on the page's table rows, in order."""
    return re.findall(rf'<tr data-{attribute}="([^"]+)"', page)


def diagram_titles(page: str) -> list[str]:
    """The titles of the step boxes the page's diagrams draw, in order."""
    return [text(t) for t in re.findall(r'<h4 class="frd-title">(.*?)</h4>', page, re.S)]


def in_order(page: str, needles: Iterable[str]) -> bool:
    at = -1
    for needle in needles:
        found = page.find(needle, at + 1)
        if found < 0:
            return False
        at = found
    return True
