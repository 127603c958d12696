"""The Operations room's Deliveries page in a real browser (headless Debian chromium,
driven by Playwright), served by ``flowrunner console`` over a SQLite file, which answers
the payment processor's callbacks too: one payment received, forged callbacks refused;
at 1280 px and at 390 px (a phone) an operator finds the refusals, keeps to one endpoint,
and reads each with its key, answer and reason. At 390 px nothing scrolls sideways.

Screenshots: ``artifacts/deliveries/``. Needs chromium and Playwright (skipped in one line
without them, failing in CI).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from browser import artifacts, launched, need_browser, no_sideways_scroll
from paying import SECRET, SECRET_ENV, body, mount, post, signed
from serving import served, sign_in

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("deliveries")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The shop's console on a SQLite file, after the processor called it back: one
    payment received, two forged callbacks refused, one to a name no inbound has."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    runner = mount(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO shop_order (id, number, amount) VALUES (7, 'PO-7', 120)"))
        runner.record_created(conn, {"id": 7, "number": "PO-7", "amount": 120})
    engine.dispose()
    with served("tests.paying:runner", url, env={SECRET_ENV: SECRET}) as base:
        inbound = f"{base}/inbound/payment_settled"
        now = time.time()
        paid = body("evt_1001", 7)
        assert post(inbound, paid, signed(paid, _at(now))) == 204
        for guess in ("a guess", "another guess"):
            forged = body("evt_1002", 7)
            assert post(inbound, forged, signed(forged, _at(now), secret=guess)) == 401
        assert post(f"{base}/inbound/wp-login.php", b"{}", {}) == 404
        yield base


def _at(seconds: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC)


@pytest.mark.parametrize("width", [1280, 390])
def test_an_operator_reads_the_callbacks_refused(browser: Browser, shop: str, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    sign_in(page, shop, "/ops/notices")
    page.get_by_role("link", name="Deliveries").first.click()
    rows = page.locator("tr[data-callback]")
    expect(page.locator("tr[data-callback]", has_text="401 refused")).not_to_have_count(0)
    received = page.locator('tr[data-answer="received"]')
    expect(received).to_contain_text("evt_1001")
    expect(received).to_contain_text("204 received")
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"all-{width}.png"), full_page=True)

    page.get_by_role("link", name="refused", exact=True).click()
    expect(page.locator('tr[data-answer="received"]')).to_have_count(0)
    expect(page.locator("tr[data-callback]", has_text="404 refused")).to_have_count(1)
    page.get_by_label("Endpoint").select_option("payment_settled")
    page.get_by_role("button", name="Show").click()
    # Both forged callbacks came within one minute of the server's clock: one row, counted
    # (two rows, in the rare case that a minute ended between them).
    forged = rows.first
    expect(forged).to_contain_text("401 refused")
    expect(forged).to_contain_text("the signature does not match")
    expect(forged).to_contain_text("not read")
    if rows.count() == 1:
        expect(forged).to_contain_text("2 times")
    else:
        expect(rows).to_have_count(2)
    expect(page.get_by_role("link", name="refused", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    no_sideways_scroll(page)
    page.screenshot(path=str(SHOTS / f"refused-{width}.png"), full_page=True)
    page.close()
