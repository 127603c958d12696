"""The Operations room's action over a whole filter in a real browser (headless Debian
chromium, driven by Playwright), served by ``flowrunner console`` over a SQLite file: the
gateway was down and 300 runs failed for it; at 1280 px and at 390 px (a phone) an
operator sees them as one line of the failures grouped by error, presses "Retry all
300…", is asked "Retry 300 runs?", confirms, and all 300 are retried in that one action,
each journaled once under the console's operator — another error's runs, and another
tenant's, untouched. At 390 px nothing scrolls sideways.

Screenshots: ``artifacts/console-bulk/``. Needs chromium and Playwright (skipped in one
line without them, failing in CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gateway
import pytest
import sqlalchemy as sa
from browser import ROOT, artifacts, launched, need_browser, no_sideways_scroll
from serving import served, sign_in
from sizes import sized

from flowrunner import testing

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow

DOWN = sized(300, 300)
SHOTS = artifacts("console-bulk")
DOC_IMAGES = ROOT / "docs" / "images"
WIDE = 1280


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[testing.FlowDriver, str]]:
    """The shop on a SQLite file, DOWN of acme's runs failed on the gateway, and the URL
    of its console served for acme by ``flowrunner console``."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    driver = gateway.shop(engine, down=DOWN)
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    with served("gateway:app", url, "--tenant", "acme", env={"PYTHONPATH": path}) as base:
        yield driver, base
    engine.dispose()


def shot(page: Any, name: str, width: int) -> None:
    """A screenshot into the artifacts; at 1280 px the top of the page for docs/console.md
    too (copied to docs/images with ``FLOWRUNNER_WRITE_DOC_IMAGES=1``)."""
    path = SHOTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    if width != WIDE:
        return
    doc = DOC_IMAGES / f"console-bulk-{name}.png"
    if os.environ.get("FLOWRUNNER_WRITE_DOC_IMAGES") == "1":
        page.screenshot(path=str(doc), clip={"x": 0, "y": 0, "width": WIDE, "height": 560})
    assert doc.is_file(), f"docs/console.md shows {doc.name}"


@pytest.mark.parametrize("width", [WIDE, 390])
def test_an_operator_retries_every_run_of_one_error_in_one_confirmed_action(
    browser: Browser, shop: tuple[testing.FlowDriver, str], width: int
) -> None:
    driver, base = shop
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, base, "/ops")
    groups = page.locator("tr[data-group]")
    expect(groups).to_have_count(2)
    first = groups.first
    expect(first).to_have_attribute("data-count", str(DOWN))
    expect(first).to_contain_text(f"{DOWN} failed")
    expect(first).to_contain_text(gateway.DOWN)
    no_sideways_scroll(page)
    # The runs list's menu chooses nothing by itself.
    expect(page.locator("#many-action")).to_have_value("")
    shot(page, "groups", width)

    first.get_by_role("button", name=f"Retry all {DOWN}…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Retry {DOWN} runs?")
    no_sideways_scroll(page)
    shot(page, "confirm", width)
    assert driver.runner.journal(tenant="acme").rows == ()
    confirmation: dict[str, str | float | bool] = page.evaluate(
        "() => Object.fromEntries(new FormData(document.querySelector('form.stack')))"
    )

    page.get_by_role("button", name=f"Retry {DOWN} runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Retry: {DOWN} done, 0 refused")
    no_sideways_scroll(page)
    shot(page, "retried", width)

    entries = driver.runner.journal(tenant="acme", limit=500).rows
    assert sorted(e.run_id or 0 for e in entries) == list(range(1, DOWN + 1))
    assert len({e.operator for e in entries}) == 1
    # The same confirmation posted again (a second click, a reload) retries none again.
    again = page.request.post(base + "/ops/act-all", form=confirmation)
    assert again.ok
    assert f"Retry: 0 done, 0 refused, {DOWN} no longer matched" in again.text()
    assert len(driver.runner.journal(tenant="acme", limit=500)) == DOWN
    counts = driver.runner.count_runs(tenant="acme")
    assert counts["failed"] == 2  # the ledger's runs, untouched
    assert driver.runner.count_runs(tenant="globex")["failed"] == 3
    page.close()
