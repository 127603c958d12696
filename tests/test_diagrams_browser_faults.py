"""Fault paths and escalations in a real browser (headless Debian chromium, Playwright).

At 1280 px a fault path runs below the columns from its step's column to its
``on_failure`` column, in red and labelled "if it fails → 40", beside a branch's other
way on a track of its own; at 390 px the same diagram runs down the page with the ways
on the right, nothing wider than the screen. A run drawn over it shows the path taken and
the failed step; a waiting approval shows that it told the manager. The standalone SVG
and Mermaid draw them too.

Screenshots: ``artifacts/diagrams-faults/`` (git ignores it), or under
``FLOWRUNNER_TEST_ARTIFACTS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from browser import artifacts, launched, mermaid_bundle, need_browser
from running import mount
from test_runs_faults import BINDING, FLOWS, order, supplier

from flowrunner import diagrams

need_browser()

from playwright.sync_api import Browser, Page  # noqa: E402
from test_diagrams_browser import (  # noqa: E402
    PARSE,
    RENDER,
    assert_narrow,
    assert_wide,
    layout,
)

pytestmark = pytest.mark.slow

WIDE, NARROW = 1280, 390
SHOTS = artifacts("diagrams-faults")
RED = "rgb(185, 28, 28)"

# Each fault way: where its dashed line and its label are, and their colours.
FAULTS = """() => [...document.querySelectorAll('.frd-fault')].map(o => {
  const box = o.getBoundingClientRect(), span = o.querySelector('span');
  return {from: +o.dataset.from, to: +o.dataset.to, taken: +o.dataset.taken,
          line: getComputedStyle(o, '::before').borderBottomColor,
          right: getComputedStyle(o, '::before').borderRightColor,
          ink: getComputedStyle(span).color, label: span.textContent,
          visible: box.width > 0 && box.height > 0};
})"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture(scope="module")
def drawings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, diagrams.Diagram]]:
    """The flow with a fault path, a run that took it, and an approval that escalated."""
    folder = tmp_path_factory.mktemp("drawn")
    engine = sa.create_engine(f"sqlite:///{folder}/faults.db")
    driver = mount(
        engine,
        "purchase_orders",
        flows=FLOWS,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )
    driver.create(order(2, priority="hold"))
    driver.create(order(6, amount=25000, approver="mia@example.com"))
    driver.advance("2 days 1 hour")
    with engine.connect() as conn:
        found = {
            "flow": driver.runner.diagram(conn, "Send or say why"),
            "refused": driver.runner.diagram(conn, "Send or say why", run=driver.runs(2)[0].id),
            "escalated": driver.runner.diagram(conn, "Big orders", run=driver.runs(6)[0].id),
        }
    yield found
    engine.dispose()


def opened(browser: Browser, width: int, html: str) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_content(html)
    return page


@pytest.mark.parametrize("which", ["flow", "refused"])
def test_a_fault_path_runs_below_the_columns_at_1280_and_beside_them_at_390(
    browser: Browser, drawings: dict[str, diagrams.Diagram], which: str
) -> None:
    page_html = drawings[which].html()
    wide = opened(browser, WIDE, page_html)
    assert_wide(layout(wide))  # ways from centre to centre, below the columns, on screen
    [fault] = wide.evaluate(FAULTS)
    assert (fault["from"], fault["to"], fault["label"]) == (0, 3, "if it fails → 40")
    assert fault["visible"] and fault["line"] == RED and fault["ink"] == RED
    assert fault["taken"] == (1 if which == "refused" else 0)
    wide.screenshot(path=str(SHOTS / f"{which}-{WIDE}.png"), full_page=True)
    narrow = opened(browser, NARROW, page_html)
    assert_narrow(layout(narrow))  # down the page, the ways on the right, nothing wider
    [fault] = narrow.evaluate(FAULTS)
    assert fault["visible"] and fault["right"] == RED
    narrow.screenshot(path=str(SHOTS / f"{which}-{NARROW}.png"), full_page=True)


def test_the_failed_step_says_where_the_run_went_on(
    browser: Browser, drawings: dict[str, diagrams.Diagram]
) -> None:
    for width in (WIDE, NARROW):
        page = opened(browser, width, drawings["refused"].html())
        failed = page.locator('.frd-step[data-state="failed"]')
        assert failed.count() == 1 and failed.is_visible()
        assert "went on at position 40" in failed.inner_text()
        skipped = page.locator('.frd-col[data-state="skipped"]')
        assert skipped.count() == 2


def test_an_escalated_approval_says_it_told_the_manager_at_both_widths(
    browser: Browser, drawings: dict[str, diagrams.Diagram]
) -> None:
    for width, check in ((WIDE, assert_wide), (NARROW, assert_narrow)):
        page = opened(browser, width, drawings["escalated"].html())
        check(layout(page))
        waiting = page.locator('.frd-step[data-state="waiting"]')
        assert waiting.is_visible()
        said = waiting.inner_text()
        assert "escalates" in said and "to manager after 2 days" in said
        assert "told manager" in said
        page.screenshot(path=str(SHOTS / f"escalated-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_the_svg_draws_the_fault_path_wide_or_down_the_page(
    browser: Browser, drawings: dict[str, diagrams.Diagram], tmp_path: Path, width: int
) -> None:
    path = tmp_path / "refused.svg"
    path.write_text(drawings["refused"].svg(), encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.as_uri())
    shown = page.evaluate(
        """() => [...document.querySelectorAll('text')]
          .filter(t => t.textContent === 'if it fails → 40' && t.getBoundingClientRect().width > 0)
          .map(t => { const b = t.getBoundingClientRect();
                      return {left: b.left, right: b.right, fill: t.getAttribute('fill')}; })"""
    )
    assert len(shown) == 1, "one drawing shows, with its fault path's label"
    assert shown[0]["fill"] == "#b91c1c"
    assert shown[0]["left"] >= 0 and shown[0]["right"] <= width
    page.screenshot(path=str(SHOTS / f"refused-svg-{width}.png"))


def test_the_mermaid_texts_parse_and_render(
    browser: Browser, drawings: dict[str, diagrams.Diagram]
) -> None:
    bundle = mermaid_bundle()
    page = browser.new_page()
    page.set_content("<!DOCTYPE html><html><body></body></html>")
    page.add_script_tag(path=str(bundle))
    page.evaluate("mermaid.initialize({startOnLoad: false, securityLevel: 'strict'})")
    for number, (name, drawing) in enumerate(sorted(drawings.items())):
        text = drawing.mermaid()
        assert page.evaluate(PARSE, text) is None, name
        found = page.evaluate(RENDER, [f"f{number}", text])
        assert found["nodes"] >= text.count("\n    s"), name
        if name != "escalated":
            assert "if it fails" in found["text"], name
    page.close()
