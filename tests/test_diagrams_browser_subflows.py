"""Subflow steps in a real browser (headless Debian chromium, Playwright), on the lending
desk (``tests/lending.py``).

At 1280 px and at 390 px a subflow step's box names the flow it runs and, for a run, the
child run it waits for, with links where the page gives addresses — on the screen,
nothing wider than it. The Mermaid text parses and renders the box as a subroutine.

Screenshots: ``artifacts/diagrams-subflows/`` (git ignores it), or under
``FLOWRUNNER_TEST_ARTIFACTS``.
"""

from __future__ import annotations

from collections.abc import Iterator

import lending
import pytest
import sqlalchemy as sa
from browser import artifacts, launched, mermaid_bundle, need_browser

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
SHOTS = artifacts("diagrams-subflows")

# Each subflow box's link line: its text, its links, and where it is on the screen.
LINKS = """() => [...document.querySelectorAll('.frd-link')].map(p => {
  const box = p.getBoundingClientRect();
  return {text: p.textContent, hrefs: [...p.querySelectorAll('a')].map(a => a.getAttribute('href')),
          left: box.left, right: box.right, visible: box.width > 0 && box.height > 0};
})"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture(scope="module")
def drawings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, diagrams.Diagram]]:
    """The guaranteed account's flow, and a run of it waiting for its guarantor's check."""
    folder = tmp_path_factory.mktemp("drawn")
    engine = sa.create_engine(f"sqlite:///{folder}/subflows.db")
    driver = lending.mount(engine)
    driver.create(lending.applicant(1, "Gus"))
    driver.create(lending.applicant(2, "Ann", guarantor=1))
    [account] = driver.runs(2)
    with engine.connect() as conn:
        found = {
            "flow": driver.runner.diagram(conn, "Open guaranteed account"),
            "run": driver.runner.diagram(conn, "Open guaranteed account", run=account.id),
        }
    yield found
    engine.dispose()


def opened(browser: Browser, width: int, html: str) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_content(html)
    return page


def href(what: str, key: object) -> str:
    return f"/console/{what}/{key}"


@pytest.mark.parametrize("which", ["flow", "run"])
def test_a_subflow_box_names_and_links_its_flow_at_1280_and_390(
    browser: Browser, drawings: dict[str, diagrams.Diagram], which: str
) -> None:
    page_html = drawings[which].html(href=href)
    for width, check in ((WIDE, assert_wide), (NARROW, assert_narrow)):
        page = opened(browser, width, page_html)
        check(layout(page))
        [link] = page.evaluate(LINKS)
        assert link["visible"] and link["left"] >= 0 and link["right"] <= width
        if which == "flow":
            assert link["text"] == "Runs Credit check"
            assert link["hrefs"] == ["/console/flow/Credit check"]
        else:
            assert link["text"] == "Runs Credit check · run 4"
            assert link["hrefs"] == ["/console/flow/Credit check", "/console/run/4"]
            waiting = page.locator('.frd-step[data-state="waiting"]')
            assert "Waiting for subflow Credit check (run 4)" in waiting.inner_text()
        page.screenshot(path=str(SHOTS / f"{which}-{width}.png"), full_page=True)
        page.close()


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
        assert "Credit check" in found["text"], name
    page.close()
