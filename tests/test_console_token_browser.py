"""The console's token stays a secret when the console is used as its guide says: served
by ``flowrunner console`` (uvicorn, its access log on) with the token in
``FLOWRUNNER_CONSOLE_TOKEN``, signed in once in a real browser (headless Debian
chromium), a few pages browsed. Then the token is in no line the server wrote, in no
address the browser asked for, in no ``Referer`` it sent, and not readable by the
pages' scripts. Needs chromium and Playwright (skipped in one line without them, failing
in CI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from browser import ARGS, CHROMIUM, need_browser
from running import decide, mount, order
from serving import TOKEN, served

need_browser()

from playwright.sync_api import Request, expect, sync_playwright  # noqa: E402

pytestmark = pytest.mark.slow

APP = "fixtures.purchase_orders.app:runner"
ON_HOLD = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    """The purchase-order app on a SQLite file: a waiting run, a done one, a failed one."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "purchase_orders")
    driver.create(order(1))
    driver.create(order(2))
    decide(driver, 2, "manager@example.com", "rejected")
    driver.create(ON_HOLD)
    yield url
    engine.dispose()


def test_the_token_is_in_no_log_line_no_address_and_no_referer(database: str) -> None:
    log: list[str] = []
    asked: list[tuple[str, dict[str, str]]] = []

    def seen(request: Request) -> None:
        asked.append((request.url, request.headers))

    with served(APP, database, log=log) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", seen)
            visited: list[str] = []
            page.on("framenavigated", lambda frame: visited.append(frame.url))

            # Asked for a page, the console asks for its token first, then goes on there.
            page.goto(f"{base}/ops?status=failed")
            expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
            page.locator("#signin-token").fill(TOKEN)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"{base}/ops?status=failed")
            expect(page.locator("tr[data-run]")).to_have_count(1)

            # A few pages, by their links, as a person goes.
            page.get_by_role("link", name="Flows", exact=True).click()
            page.get_by_role("link", name="Big orders", exact=True).click()
            expect(page.get_by_role("heading", level=1)).to_have_text("Big orders")
            page.get_by_role("link", name="Operations", exact=True).click()
            page.locator("tr[data-run] a").first.click()
            expect(page.get_by_role("heading", level=1)).to_contain_text("Run")
            page.goto(f"{base}/ops/journal")
            page.goto(f"{base}/record/1")
            cookies: Any = page.evaluate("() => document.cookie")
            history = list(visited)

            # Signing out forgets it: the next page asks again.
            page.get_by_role("button", name="Sign out").click()
            expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
            page.goto(f"{base}/ops")
            expect(page.locator("#signin-token")).to_be_visible()
        finally:
            browser.close()

    # The server did log each request: the check below looks at real lines.
    requests = [line for line in log if '"GET /' in line or '"POST /' in line]
    assert any('"GET /ops?status=failed HTTP/1.1" 401' in line for line in requests), log
    assert any('"POST /signin HTTP/1.1" 303' in line for line in requests), log
    assert any('"GET /ops/journal HTTP/1.1" 200' in line for line in requests), log
    assert [line for line in log if TOKEN in line] == []

    assert len(asked) >= 10 and len(history) >= 6
    assert [url for url, _ in asked if TOKEN in url] == []
    assert [url for url in history if TOKEN in url] == []
    referers = [headers.get("referer", "") for _, headers in asked]
    assert any(referers) and [r for r in referers if TOKEN in r] == []
    # The cookie is HttpOnly: no script of a page can read it.
    assert "flowrunner_console" not in cookies
