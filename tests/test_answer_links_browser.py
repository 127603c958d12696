"""Answer links in a real browser (headless Debian chromium, driven by Playwright) at
1280 and at 390 px, served by ``flowrunner console`` over a real database: ann opens the
Approve link from her mail and sees one question and one button; nothing is answered
until she presses it; then the run goes on and its history says "ann approved". The same
link opened again, an expired one and a forged one each get a page that says so.

Screenshots: ``artifacts/answer-links/``. Needs chromium and Playwright (skipped in one
line without them, failing in CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from browser import artifacts, launched, need_browser
from running import mount, order
from serving import served, sign_in

from flowrunner import testing
from flowrunner.store import engine_tables

need_browser()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("answer-links")
APP = "fixtures.purchase_orders.app:runner"
SECRET = "answer-links-browser-secret-32by"
APPROVE = """
- name: Approve
  start: created
  steps:
    - {position: 1, kind: approval, title: Manager approval, approver: ann}
    - {position: 2, kind: set, title: Approved, field: status, value: approved}
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, str]]:
    """The purchase-order app on a SQLite file, PO-7 waiting for ann's approval, and the
    address of its console (which serves the answer links under ``/answer``)."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "purchase_orders", flows=APPROVE, links_secret=SECRET)
    driver.create(order(7))
    with served(APP, url, env={"PURCHASE_ORDERS_LINKS_SECRET": SECRET}) as base:
        yield driver, base
    engine.dispose()


def events(driver: testing.FlowDriver) -> int:
    with driver.runner.engine.connect() as conn:
        return len(conn.execute(sa.select(engine_tables.events.c.id)).all())


def fits(page: Page, width: int) -> None:
    """Nothing wider than the window; the button in view, as wide as the card allows."""
    page.wait_for_load_state("load")  # measured with its style sheet, not while arriving
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width, f"the page is {wide} px wide in a {width} px window"
    button = page.get_by_role("button").bounding_box()
    assert button is not None and button["x"] >= 0 and button["x"] + button["width"] <= width
    if width < 500:
        assert button["width"] >= width * 0.7


@pytest.mark.parametrize("width", [1280, 390])
def test_ann_approves_from_her_link_once(
    browser: Browser, shop: tuple[testing.FlowDriver, str], width: int
) -> None:
    driver, base = shop
    runner = driver.runner
    [run] = driver.runs(7)
    week = datetime.now(UTC) + timedelta(days=7)
    approve = runner.answer_link(
        run.id, "approved", person="ann", expires=week, base_url=f"{base}/answer"
    )
    # Made while the flow's clock stood at its start; it ended an hour later, long ago.
    expired = runner.answer_link(
        run.id,
        "approved",
        person="ann",
        expires=driver.now + timedelta(hours=1),
        base_url=f"{base}/answer",
    )
    payload, signature = approve.rsplit("/", 1)[1].split(".")
    forged = f"{base}/answer/{payload[:-2]}xy.{signature}"

    page = browser.new_page(viewport={"width": width, "height": 800})
    try:
        page.goto(approve)
        heading = page.get_by_role("heading", level=1)
        expect(heading).to_have_text("Approve PO-7 as ann?")
        expect(page.get_by_text("Purchase orders · PO-7 · Manager approval")).to_be_visible()
        fits(page, width)
        page.screenshot(path=SHOTS / f"asked-{width}.png", full_page=True)
        assert events(driver) == 0  # opening it answered nothing

        page.get_by_role("button", name="Approve").click()
        expect(heading).to_have_text("Thank you: ann approved PO-7.")
        page.screenshot(path=SHOTS / f"answered-{width}.png", full_page=True)
        assert events(driver) == 1
        driver.now = datetime.now(UTC)  # the server answered on the wall clock: catch up
        driver.run_until_idle()
        [done] = driver.runs(7)
        assert done.status == "done"
        sign_in(page, base, f"/run/{run.id}")
        page.get_by_text("History (", exact=False).click()  # the run's history, opened
        expect(page.get_by_text("ann approved").first).to_be_visible()

        for address, said, shot in (
            (approve, "This link has already been used.", "used"),
            (expired, "This link expired on Mon 2 Mar 10:00 UTC.", "expired"),
            (forged, "This link is not valid.", "forged"),
        ):
            page.goto(address)
            expect(heading).to_have_text(said)
            expect(page.get_by_role("button")).to_have_count(0)
            page.screenshot(path=SHOTS / f"{shot}-{width}.png", full_page=True)
        assert events(driver) == 1
    finally:
        page.close()
