"""A flow's dashboard in a real browser (headless Debian chromium, driven by Playwright),
served by ``flowrunner console`` over a review desk's runs: at 1280 and at 390 px its
charts are drawn — one bar per day with runs started — and at 390 px nothing scrolls
sideways. Screenshots: ``artifacts/console-dashboard/``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from browser import ROOT, artifacts, launched, need_browser, no_sideways_scroll
from reviews import reviewed
from serving import served, sign_in
from sizes import sized

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("console-dashboard")
DOC_IMAGES = ROOT / "docs" / "images"
APP = "fixtures.tickets.app:runner"
DAYS = sized(6, 24)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[str]:
    """The review desk's runs over the last days (the console reads the real clock)."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    reviewed(engine, DAYS, start=datetime.now(UTC) - timedelta(days=DAYS + 4))
    engine.dispose()
    with served(APP, url) as base:
        yield base


@pytest.mark.parametrize("width", [1280, 390])
def test_the_dashboard_draws_its_charts_and_fits_the_window(
    browser: Browser, desk: str, width: int
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, desk, "/")
    page.get_by_role("link", name="Dashboard of Review").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Dashboard of Review")
    chart = page.locator('svg.chart[data-chart="per-day"]')
    expect(chart).to_be_visible()
    days_with_runs = page.locator('#per-day-table tr[data-started]:not([data-started="0"])')
    assert days_with_runs.count() > 0
    expect(chart.locator("rect.bar.started")).to_have_count(days_with_runs.count())
    expect(page.locator('svg.chart[data-chart="step-times"]')).to_be_visible()
    expect(page.locator('svg.chart[data-chart="breaches"]')).to_be_visible()
    # Drawn to the window's width: no wider than the page's main column.
    box = chart.bounding_box()
    assert box is not None and box["width"] <= width
    # The flow's diagram with its counts on the steps.
    expect(page.locator('.frd-step[data-step="2"] .frd-state')).to_contain_text("waiting")
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"dashboard-{width}.png"), full_page=True)
    if width == 1280:  # the picture docs/console.md shows: the top of the page
        top = SHOTS / "dashboard.png"
        page.screenshot(path=str(top), clip={"x": 0, "y": 0, "width": width, "height": 1100})
        assert (DOC_IMAGES / "console-dashboard.png").is_file(), "docs/console.md shows it"
        if os.environ.get("FLOWRUNNER_WRITE_DOC_IMAGES") == "1":
            shutil.copyfile(top, DOC_IMAGES / "console-dashboard.png")
    page.close()
