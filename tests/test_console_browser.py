"""The console in a real browser (headless Debian chromium, driven by Playwright), served
by ``flowrunner console`` (uvicorn on 127.0.0.1) over a real database, as people use it:

- an editor adds a step with a bad duration, sees the sentence under the field as she
  types it and beside it once she saves, fixes it, saves, and the diagram shows the step;
- an operator filters the failed runs, retries one, and sees it move on once a worker
  takes it;
- at 390 px (a phone) no page scrolls sideways, and the flow's diagram runs down the page.

Screenshots: ``artifacts/console/`` (or under ``FLOWRUNNER_TEST_ARTIFACTS``); the ones
docs/console.md shows are copied to docs/images with ``FLOWRUNNER_WRITE_DOC_IMAGES=1``.
Needs chromium and Playwright (skipped in one line without them, failing in CI).
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from browser import ROOT, artifacts, launched, need_browser, no_sideways_scroll
from running import decide, mount, order
from serving import served, sign_in

from fixtures.purchase_orders import app as po
from flowrunner import testing

need_browser()

from playwright.sync_api import Browser, Page, expect  # noqa: E402

pytestmark = pytest.mark.slow

WIDE, NARROW = 1280, 390
SHOTS = artifacts("console")
DOC_IMAGES = ROOT / "docs" / "images"
APP = "fixtures.purchase_orders.app:runner"
ON_HOLD = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, str]]:
    """The purchase-order app on a SQLite file with runs in every state, and the URL of
    its console served by ``flowrunner console``."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "purchase_orders")
    driver.create(order(1))  # waits for its approvals
    driver.create(order(2))
    decide(driver, 2, "manager@example.com", "rejected")  # rejected: done
    driver.create(ON_HOLD)  # a small order on hold: sending it fails
    with served(APP, url) as base:
        yield driver, base
    engine.dispose()


def opened(browser: Browser, base: str, path: str, width: int = WIDE) -> Page:
    """A new page at ``path``, its session signed in with the token once."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, base, path)
    return page


def shot(page: Page, name: str, *, doc: bool = False, part: str | None = None) -> Path:
    """A screenshot into the artifacts (the whole page, or the ``part`` a selector names);
    with ``doc`` one for docs/console.md too."""
    path = SHOTS / f"{name}.png"
    if part is not None:
        page.locator(part).screenshot(path=str(path))
    elif doc:  # the top of the page, as a reader first sees it
        width = page.viewport_size["width"] if page.viewport_size else WIDE
        page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": width, "height": 720})
    else:
        page.screenshot(path=str(path), full_page=True)
    if doc:
        assert (DOC_IMAGES / f"console-{name}.png").is_file(), f"docs/console.md shows {name}"
        if os.environ.get("FLOWRUNNER_WRITE_DOC_IMAGES") == "1":
            shutil.copyfile(path, DOC_IMAGES / f"console-{name}.png")
    return path


def flow_link(page: Page, name: str) -> str:
    href = page.get_by_role("link", name=name, exact=True).get_attribute("href")
    assert href is not None
    return href


def test_an_editor_fixes_a_bad_duration_and_the_diagram_shows_the_new_step(
    browser: Browser, shop: tuple[testing.FlowDriver, str]
) -> None:
    _driver, base = shop
    page = opened(browser, base, "/")
    shot(page, "flows", doc=True)
    page.get_by_role("link", name="Small orders", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Small orders")

    form = page.locator("#new-step")
    form.locator("#new-step-position").fill("3")
    form.locator("#new-step-kind").select_option("wait")
    # The kind's columns only: a wait reads a duration, not a field or a message.
    expect(form.locator("#new-step-duration")).to_be_visible()
    expect(form.locator("#new-step-field")).to_be_hidden()
    form.locator("#new-step-title").fill("Cool off")
    form.locator("#new-step-duration").press_sequentially("2 dayz")
    # Judged as it is typed: the sentence a save would give, a caret under the place.
    check = form.locator("#new-step-duration-check")
    expect(check).to_contain_text("'2 dayz' is not a duration — write e.g. '2 days'")
    expect(check.locator("pre")).to_have_text("2 dayz\n  ^")
    shot(page, "typed-bad-duration", part="section:has(#new-step)")

    form.get_by_role("button", name="Add the step").click()
    error = page.locator("#new-step-duration-error")
    expect(error).to_have_text("'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'")
    expect(page.locator(".frd-title", has_text="Cool off")).to_have_count(0)
    shot(page, "refused-bad-duration", doc=True, part="section:has(#new-step)")

    duration = page.locator("#new-step-duration")
    duration.fill("2 days")
    expect(page.locator("#new-step-duration-check")).to_be_hidden()
    page.get_by_role("button", name="Add the step").click()
    expect(page.locator(".said")).to_have_text("Step added.")
    expect(page.locator(".diagram .frd-title")).to_have_text(
        ["Approve", "Send to supplier", "Cool off"]
    )
    shot(page, "flow", doc=True)


def test_an_operator_filters_failed_runs_retries_one_and_sees_it_move_on(
    browser: Browser, shop: tuple[testing.FlowDriver, str]
) -> None:
    driver, base = shop
    [failed] = driver.runs(9)
    assert failed.status == "failed"
    page = opened(browser, base, "/ops")
    shot(page, "ops", doc=True)
    page.locator("#filter-status").select_option("failed")
    page.get_by_role("button", name="Show").click()
    rows = page.locator("tr[data-run]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-status", "failed")
    shot(page, "ops-failed")

    # The order is released from hold; the operator retries its run.
    driver.update(9, priority="normal")
    rows.first.get_by_role("checkbox").check()
    page.locator("#many-action").select_option("retry")
    page.get_by_role("button", name="Go on…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Retry 1 run?")
    shot(page, "confirm-retry", doc=True)
    page.get_by_role("button", name="Retry 1 run").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Retry: 1 done, 0 refused")

    # A worker (on the wall clock, as the console's) takes it: the run goes on to the end.
    worker = po.runner(str(driver.runner.engine.url))
    assert worker.run_due() >= 1
    worker.engine.dispose()
    page.get_by_role("link", name=f"run {failed.id} retried: its failed step runs again").click()
    expect(page.locator(f"article[data-run='{failed.id}']")).to_have_attribute(
        "data-status", "done"
    )
    shot(page, "run-done", doc=True)
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Operations").click()
    page.get_by_role("link", name="Journal").click()
    expect(page.locator("ol.journal li").first).to_contain_text(f"console retried run {failed.id}")
    shot(page, "journal", doc=True)
    page.get_by_role("link", name="Notices").click()
    shot(page, "notices", doc=True)


def test_at_390_px_nothing_scrolls_sideways_and_the_diagram_runs_down_the_page(
    browser: Browser, shop: tuple[testing.FlowDriver, str]
) -> None:
    _driver, base = shop
    page = opened(browser, base, "/", NARROW)
    no_sideways_scroll(page)
    big = flow_link(page, "Big orders")
    page.goto(base + big)
    expect(page.get_by_role("heading", level=1)).to_have_text("Big orders")
    no_sideways_scroll(page)
    columns: list[dict[str, float]] = page.locator(".diagram .frd-col").evaluate_all(
        "cols => cols.map(c => { const b = c.getBoundingClientRect();"
        " return {t: b.top, b: b.bottom, l: b.left, r: b.right}; })"
    )
    assert len(columns) == 8
    for upper, lower in itertools.pairwise(columns):
        assert lower["t"] > upper["b"], "the positions do not run down the page"
        assert abs(lower["l"] - upper["l"]) < 1
    assert all(c["r"] <= NARROW for c in columns)
    shot(page, "flow-390", doc=True)
    for path in ("/record/1", "/ops", "/run/1", "/ops/journal", "/ops/notices"):
        page.goto(base + path)
        no_sideways_scroll(page)
    page.goto(base + "/ops")
    shot(page, "ops-390", doc=True)
    page.goto(base + "/record/1")
    shot(page, "record-390")


def test_a_records_page_with_its_runs_drawn(
    browser: Browser, shop: tuple[testing.FlowDriver, str]
) -> None:
    _driver, base = shop
    page = opened(browser, base, "/record/1")
    expect(page.locator("article.run")).to_have_count(1)
    expect(page.locator("article.run .waits li")).to_have_count(2)
    expect(page.locator("article.run figure.frd")).to_have_attribute("data-status", "waiting")
    shot(page, "record", doc=True)
