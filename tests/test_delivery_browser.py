"""The console's notices page in a real browser (headless Debian chromium, driven by
Playwright), served by ``flowrunner console`` over a SQLite file: the desk's chat refused
a requester's notice, so it failed for good; at 1280 px and at 390 px (a phone) an
operator finds it under "failed" with its error, presses "Send again", is told so, and
the notice waits to be sent again, journaled under the console's operator. At 390 px
nothing scrolls sideways.

Screenshots: ``artifacts/notices/``. Needs chromium and Playwright (skipped in one line
without them, failing in CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import telling_desk
from browser import ROOT, artifacts, launched, need_browser, no_sideways_scroll
from running import mount
from serving import served, sign_in

from flowrunner import testing

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("notices")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, int, str]]:
    """The desk on a SQLite file, one notice failed for good, and its console's URL."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "tickets", flows=telling_desk.TELL, binding=telling_desk.binding)
    driver.create({"id": 1, "title": "Printer jams", "requester_id": "ann", "status": "open"})
    driver.runner.deliver_due()
    [failed] = driver.notices()
    assert failed.state == "failed"
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    with served("telling_desk:runner", url, env={"PYTHONPATH": path}) as base:
        yield driver, failed.id, base
    engine.dispose()


@pytest.mark.parametrize("width", [1280, 390])
def test_an_operator_sends_a_failed_notice_again(
    browser: Browser, desk: tuple[testing.FlowDriver, int, str], width: int
) -> None:
    driver, notice_id, base = desk
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, base, "/ops/notices")
    page.get_by_role("link", name="failed", exact=True).click()
    row = page.locator(f'tr[data-notice="{notice_id}"]')
    expect(row).to_have_attribute("data-state", "failed")
    expect(row).to_contain_text("the application refused it: the chat has no user ann")
    expect(row).to_contain_text("through chat")
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"failed-{width}.png"), full_page=True)

    row.get_by_role("button", name="Send again").click()
    expect(page.locator("body")).to_contain_text(
        f"Notice {notice_id} will be sent again through chat."
    )
    # It waits among the notices to send, with the error its last attempt met.
    expect(row).to_have_attribute("data-state", "pending")
    expect(row).to_contain_text("waiting")
    expect(row.get_by_role("button", name="Send again")).to_have_count(0)
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"sent-again-{width}.png"), full_page=True)
    again = driver.runner.operations.get_notice(notice_id)
    assert (again.state, again.attempts, again.failed_at) == ("pending", 0, None)
    [entry] = driver.runner.journal().rows
    assert entry.action == "notice_retry" and entry.run_id == again.run_id
    page.close()
