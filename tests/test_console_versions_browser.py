"""A flow's versions in a real browser (headless Debian chromium, driven by Playwright),
served by ``flowrunner console`` over a real database, at 1280 and 390 px: the flow's
page names the draft's change, the editor publishes it with a note, compares the two
versions side by side, moves the waiting run after its dry run, and rolls back.

Screenshots: ``artifacts/console/versions-*.png``. Needs chromium and Playwright (skipped
in one line without them, failing in CI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from browser import launched, need_browser, no_sideways_scroll
from running import mount, order
from serving import served
from test_console_browser import NARROW, WIDE, opened, shot
from test_versions import kinder_words

from flowrunner import testing

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow
APP = "fixtures.purchase_orders.app:runner"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, str, int]]:
    """Order 1 waits on version 1 of "Big orders"; the draft's rejection notice has been
    reworded since. The console served on it, and the flow's id."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = mount(engine, "purchase_orders")
    driver.create(order(1))
    flow = kinder_words(driver)
    with served(APP, url) as base:
        yield driver, base, flow
    engine.dispose()


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_an_editor_publishes_compares_moves_the_waiting_run_and_rolls_back(
    browser: Browser, shop: tuple[testing.FlowDriver, str, int], width: int
) -> None:
    driver, base, flow = shop
    page = opened(browser, base, f"/flow/{flow}", width)
    banner = page.locator("#flow-version")
    expect(banner).to_contain_text("1 change since version 1")
    no_sideways_scroll(page)
    banner.get_by_role("link", name="Versions and publish").click()

    expect(page.locator(".changes li")).to_have_text(
        [
            "Step 50 'Tell the requester it was rejected': message Your order was rejected. "
            "→ Sorry: your order was rejected."
        ]
    )
    no_sideways_scroll(page)
    shot(page, f"versions-draft-{width}")
    page.locator("#note").fill("kinder words")
    page.get_by_role("button", name="Publish as version 2").click()
    expect(page.locator(".said")).to_have_text("Published version 2.")
    expect(page.locator("#draft-status")).to_have_text("The rows are version 2.")
    expect(page.locator("tr[data-version]")).to_have_count(2)

    # The two versions side by side (one above the other on a phone).
    page.locator("tr[data-version='2']").get_by_role("link", name="Changes").click()
    expect(page.locator("#changes li")).to_have_count(1)
    boxes = page.locator(".side-by-side > .diagram").evaluate_all(
        "ds => ds.map(d => { const b = d.getBoundingClientRect(); return {l: b.left, t: b.top}; })"
    )
    assert len(boxes) == 2
    if width == WIDE:
        assert boxes[1]["l"] > boxes[0]["l"] and abs(boxes[1]["t"] - boxes[0]["t"]) < 1
    else:
        assert boxes[1]["t"] > boxes[0]["t"]
    no_sideways_scroll(page)
    shot(page, f"versions-compare-{width}")

    # The waiting order moves to version 2 after its dry run.
    page.go_back()
    page.locator("tr[data-version='1']").get_by_role("link", name="Move its runs").click()
    expect(page.locator("#move-summary")).to_have_text("1 run would move, 0 stay as they are.")
    no_sideways_scroll(page)
    shot(page, f"versions-move-{width}")
    page.get_by_role("button", name="Move 1 run").click()
    expect(page.locator("#move-summary")).to_have_text("1 run moved, 0 stay as they are.")
    [run] = driver.runs(1)
    assert (
        "moved the run from version 1 to version 2"
        in [line.sentence for line in driver.runner.history(run.id)][-1]
    )

    # And back to version 1's words, confirmed first.
    page.goto(f"{base}/flow/{flow}/versions")
    page.locator("tr[data-version='1']").get_by_role("link", name="Roll back to it").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Roll back Big orders to version 1?")
    no_sideways_scroll(page)
    page.get_by_role("button", name="Roll back to version 1").click()
    expect(page.locator(".said")).to_have_text("Published version 3: the rows of version 1.")
    expect(page.locator("tr[data-version]")).to_have_count(3)
    shot(page, f"versions-list-{width}")
