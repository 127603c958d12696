"""A record's page, the search by what people know a record by, and a refused save, in a
real browser (headless Debian chromium, driven by Playwright) at 1280 and at 390 px,
served by ``flowrunner console`` over a real database:

- a buyer types the order's number (``po-9``) in the header's search and lands on its
  page, which shows the order — its number, amount, status — and its runs;
- an editor's save is refused: the page comes back at the refused field, focused and in
  view, its sentence beside it, the address naming it.

Screenshots: ``artifacts/console-record/``. Needs chromium and Playwright (skipped in one
line without them, failing in CI).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from browser import artifacts, launched, need_browser, no_sideways_scroll
from running import mount, order
from serving import served, sign_in

from flowrunner import testing

need_browser()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("console-record")
APP = "fixtures.purchase_orders.app:runner"
ON_HOLD = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}
WIDTHS = [1280, 390]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, str]]:
    """The purchase-order app on a SQLite file, a big order waiting and a small one on
    hold (its sending failed), and the URL of its console."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "purchase_orders")
    driver.create(order(1))
    driver.create(ON_HOLD)
    with served(APP, url) as base:
        yield driver, base
    engine.dispose()


def opened(browser: Browser, base: str, path: str, width: int) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, base, path)
    return page


def in_view(page: Page, selector: str) -> bool:
    box: dict[str, Any] = page.locator(selector).evaluate(
        "e => { const b = e.getBoundingClientRect();"
        " return {top: b.top, bottom: b.bottom, left: b.left, right: b.right}; }"
    )
    size = page.viewport_size
    assert size is not None
    return bool(
        box["top"] >= 0
        and box["bottom"] <= size["height"]
        and box["left"] >= 0
        and box["right"] <= size["width"]
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_a_buyer_finds_an_order_by_its_number_and_its_page_shows_the_order(
    browser: Browser, shop: tuple[testing.FlowDriver, str], width: int
) -> None:
    _driver, base = shop
    page = opened(browser, base, "/", width)
    search = page.get_by_role("search").get_by_label("Record")
    expect(search).to_have_attribute("placeholder", "its id or number")
    search.fill("po-9")
    search.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("PO-9")  # the binding's record_label
    expect(page).to_have_url(re.compile(r"/record/9$"))
    values = page.locator(".record-values")
    expect(values).to_be_visible()
    expect(values.locator('[data-column="number"] dd')).to_have_text("PO-9")
    expect(values.locator('[data-column="amount"] dd')).to_have_text("50.00")
    expect(values.locator('[data-column="priority"] dd')).to_have_text("hold")
    # Its run, failed sending it; and what its steps took in and answered.
    expect(page.locator("article.run")).to_have_attribute("data-status", "failed")
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"record-9-{width}.png"), full_page=True)

    # The Operations room's record filter takes the number too.
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Operations").click()
    page.locator("#filter-record").fill("PO-9")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**record=PO-9**")  # the filtered page, not the one it was on
    rows = page.locator("tr[data-run]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-status", "failed")
    no_sideways_scroll(page)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_refused_save_comes_back_at_its_field_focused_and_in_view(
    browser: Browser, shop: tuple[testing.FlowDriver, str], width: int
) -> None:
    _driver, base = shop
    page = opened(browser, base, "/", width)
    page.get_by_role("link", name="Small orders", exact=True).click()
    form = page.locator("#new-step")
    form.locator("#new-step-position").fill("3")
    form.locator("#new-step-kind").select_option("wait")
    form.locator("#new-step-title").fill("Cool off")
    form.locator("#new-step-duration").fill("2 dayz")
    form.get_by_role("button", name="Add the step").click()

    error = page.locator("#new-step-duration-error")
    expect(error).to_have_text("'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'")
    field = page.locator("#new-step-duration")
    expect(field).to_be_focused()
    expect(field).to_have_attribute("aria-describedby", "new-step-duration-error")
    expect(page).to_have_url(re.compile(r"#new-step-duration$"))  # waits: set as it loads
    assert in_view(page, "#new-step-duration"), "the refused field is out of view"
    assert in_view(page, "#new-step-duration-error"), "its sentence is out of view"
    page.screenshot(path=str(SHOTS / f"refused-in-view-{width}.png"))

    # Fixed where it stands, the save goes through.
    field.fill("2 days")
    page.get_by_role("button", name="Add the step").click()
    expect(page.locator(".said")).to_have_text("Step added.")
