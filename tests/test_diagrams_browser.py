"""The diagrams in a real browser (headless Debian chromium, driven by Playwright).

At 1280 px the positions stand side by side as columns, lanes stacked in each, and a
branch's other way runs from its column's centre to its target's; at 390 px (a phone) the
same diagram runs down the page, nothing wider than the screen; in a narrow side panel of
a wide page it runs down the panel. The standalone SVG does the same by itself. Every
Mermaid text parses and renders with Mermaid's own code, any title at all included.

Screenshots: ``artifacts/diagrams/`` at the repository's root (git ignores it), or under
``FLOWRUNNER_TEST_ARTIFACTS``. Needs chromium and Playwright (skipped in one line
without them, failing in CI), and Mermaid's bundle for the Mermaid checks.
"""

from __future__ import annotations

import itertools
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import ROOT, artifacts, launched, mermaid_bundle, need_browser
from drawn import config, drawn_run, fixture_snapshots
from hypothesis import given, settings
from hypothesis import strategies as st

from flowrunner import diagrams
from flowrunner.diagrams import svg
from flowrunner.flows import snapshot

need_browser()

from playwright.sync_api import Browser, Page  # noqa: E402

pytestmark = pytest.mark.slow

WIDE, NARROW = 1280, 390
SHOTS = artifacts("diagrams")
ALL = config("purchase_orders", "tickets")
FLOWS = {**fixture_snapshots("purchase_orders"), **fixture_snapshots("tickets")}

# Where each column, step, way and mark of the page's diagram is (CSS pixels).
LAYOUT = """() => {
  const r = e => { const b = e.getBoundingClientRect();
    return {l: b.left, r: b.right, t: b.top, b: b.bottom, cx: b.left + b.width / 2,
            cy: b.top + b.height / 2}; };
  const cols = [...document.querySelectorAll('.frd-col')].map(c => ({
    index: +c.dataset.index, box: r(c), steps: [...c.querySelectorAll('.frd-step')].map(r)}));
  const end = document.querySelector('.frd-end span');
  return {
    cols, end: end && r(end),
    others: [...document.querySelectorAll('.frd-other')].map(o => ({
      from: +o.dataset.from, to: +o.dataset.to, dir: o.dataset.dir, box: r(o)})),
    scrollWidth: document.documentElement.scrollWidth, width: innerWidth};
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


def opened(browser: Browser, width: int, html: str) -> Page:
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_content(html)
    return page


def layout(page: Page) -> dict[str, Any]:
    found: dict[str, Any] = page.evaluate(LAYOUT)
    return found


def shot(page: Page, name: str) -> Path:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def centre_of(found: dict[str, Any], index: int, axis: str) -> float:
    if index == len(found["cols"]):
        return float(found["end"][axis])
    return float(found["cols"][index]["box"][axis])


def assert_wide(found: dict[str, Any]) -> None:
    """Columns side by side, lanes stacked, ways from centre to centre, all on the screen."""
    cols = found["cols"]
    assert [c["index"] for c in cols] == list(range(len(cols)))
    for before, after in itertools.pairwise(cols):
        assert after["box"]["l"] > before["box"]["r"], "columns overlap or wrap"
        assert abs(after["box"]["t"] - before["box"]["t"]) < 1, "columns not side by side"
    for col in cols:
        for upper, lower in itertools.pairwise(col["steps"]):
            assert lower["t"] >= upper["b"] and abs(lower["l"] - upper["l"]) < 1
    for way in found["others"]:
        low, high = sorted((way["from"], way["to"]))
        assert abs(way["box"]["l"] - centre_of(found, low, "cx")) < 2
        assert abs(way["box"]["r"] - centre_of(found, high, "cx")) < 2
        assert way["box"]["t"] >= max(c["box"]["b"] for c in cols) - 1  # below the columns
    assert_on_screen(found)


def assert_narrow(found: dict[str, Any]) -> None:
    """Positions down the page, one under the other, nothing wider than the screen."""
    cols = found["cols"]
    for before, after in itertools.pairwise(cols):
        assert after["box"]["t"] > before["box"]["b"], "positions not one under the other"
        assert abs(after["box"]["l"] - before["box"]["l"]) < 1
    for way in found["others"]:
        low, high = sorted((way["from"], way["to"]))
        assert abs(way["box"]["t"] - centre_of(found, low, "cy")) < 3
        assert abs(way["box"]["b"] - centre_of(found, high, "cy")) < 3
        assert way["box"]["l"] >= max(c["box"]["r"] for c in cols) - 1  # beside the columns
    assert_on_screen(found)


def assert_on_screen(found: dict[str, Any]) -> None:
    assert found["scrollWidth"] <= found["width"], "the page scrolls sideways"
    for col in found["cols"]:
        for step in col["steps"]:
            assert step["l"] >= 0 and step["r"] <= found["width"], "a step leaves the screen"
    for way in found["others"]:
        assert way["box"]["l"] >= 0 and way["box"]["r"] <= found["width"]


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_each_fixture_flow_is_wide_at_1280_and_runs_down_the_page_at_390(
    browser: Browser, name: str
) -> None:
    page_html = diagrams.flow_diagram(FLOWS[name], config=ALL).html()
    slug = name.lower().replace(" ", "-")
    wide = opened(browser, WIDE, page_html)
    assert_wide(layout(wide))
    shot(wide, f"{slug}-{WIDE}")
    narrow = opened(browser, NARROW, page_html)
    assert_narrow(layout(narrow))
    shot(narrow, f"{slug}-{NARROW}")


@pytest.fixture(scope="module")
def runs() -> dict[str, diagrams.Diagram]:
    """Big orders waiting at its approvals, and a follow-up that went back, as drawn."""
    return {
        "waiting": drawn_run("purchase_orders", "Big orders", "waiting"),
        "looped": drawn_run("tickets", "Follow up", "nudged"),
    }


@pytest.mark.parametrize("which", ["waiting", "looped"])
def test_a_run_diagram_is_laid_out_the_same_way(
    browser: Browser, runs: dict[str, diagrams.Diagram], which: str
) -> None:
    page_html = runs[which].html()
    wide = opened(browser, WIDE, page_html)
    assert_wide(layout(wide))
    current = wide.locator('.frd-col[data-state="current"]')
    assert current.count() == 1 and current.is_visible()
    shot(wide, f"run-{which}-{WIDE}")
    narrow = opened(browser, NARROW, page_html)
    assert_narrow(layout(narrow))
    waiting = narrow.locator('.frd-step[data-state="waiting"]').first
    assert waiting.is_visible() and "Waiting" in waiting.inner_text()
    shot(narrow, f"run-{which}-{NARROW}")


def test_in_a_narrow_side_panel_of_a_wide_page_the_diagram_runs_down_the_panel(
    browser: Browser,
) -> None:
    figure = diagrams.flow_diagram(FLOWS["Big orders"], config=ALL).html(document=False)
    page_html = (
        '<!DOCTYPE html><html><body style="margin:0;display:flex">'
        '<main style="flex:1">The record</main>'
        f'<aside style="width:360px;flex:none">{figure}</aside></body></html>'
    )
    page = opened(browser, WIDE, page_html)
    found = layout(page)
    assert_narrow(found)
    panel = page.locator("aside").bounding_box()
    assert panel is not None
    for col in found["cols"]:
        assert col["box"]["l"] >= panel["x"] - 1
        assert col["box"]["r"] <= panel["x"] + panel["width"] + 1
    shot(page, "side-panel-1280")


@pytest.mark.parametrize("which", ["waiting", "looped"])
@pytest.mark.parametrize("width", [WIDE, NARROW])
def test_the_svg_draws_wide_or_down_the_page_by_itself(
    browser: Browser, runs: dict[str, diagrams.Diagram], tmp_path: Path, width: int, which: str
) -> None:
    text = runs[which].svg()
    path = tmp_path / "run.svg"
    path.write_text(text, encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.as_uri())
    shown = page.evaluate(
        """() => ({
          wide: getComputedStyle(document.querySelector('.frs-wide')).display,
          narrow: getComputedStyle(document.querySelector('.frs-narrow')).display,
          width: document.documentElement.getBoundingClientRect().width,
          steps: [...document.querySelectorAll('.frs-step')]
            .filter(g => g.getBoundingClientRect().width > 0)
            .map(g => [g.getBoundingClientRect().left, g.getBoundingClientRect().right])})"""
    )
    # The wide drawing, shrunk to fit, while it keeps SHRINK of its size; else the narrow one.
    natural = int(ET.fromstring(text.encode()).get("width", "0"))
    visible = "wide" if width > natural * svg.SHRINK else "narrow"
    hidden = "wide" if visible == "narrow" else "narrow"
    assert shown[visible] == "inline" and shown[hidden] == "none"
    assert shown["width"] <= width
    assert shown["steps"] and all(left >= 0 and right <= width for left, right in shown["steps"])
    page.screenshot(path=str(SHOTS / f"run-{which}-svg-{width}.png"))


DOC_IMAGES = ROOT / "docs" / "images"


def test_the_docs_screenshots(browser: Browser, runs: dict[str, diagrams.Diagram]) -> None:
    """The screenshots docs/diagrams.md shows, taken again (into the artifacts; into
    docs/images too with FLOWRUNNER_WRITE_DOC_IMAGES=1)."""
    pictures = [
        ("big-orders-run", runs["waiting"], WIDE),
        ("big-orders-run", runs["waiting"], NARROW),
        ("follow-up-run", runs["looped"], WIDE),
    ]
    for name, drawn, width in pictures:
        page = opened(browser, width, drawn.html())
        path = SHOTS / f"docs-{name}-{width}.png"
        page.locator("figure").screenshot(path=str(path))
        assert (DOC_IMAGES / f"{name}-{width}.png").is_file()
        if os.environ.get("FLOWRUNNER_WRITE_DOC_IMAGES") == "1":
            shutil.copyfile(path, DOC_IMAGES / f"{name}-{width}.png")
        page.close()


# -- Mermaid -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mermaid(browser: Browser) -> Iterator[Page]:
    """A blank page with Mermaid's own bundle loaded (from disk: nothing is fetched)."""
    bundle = mermaid_bundle()
    page = browser.new_page()
    page.set_content("<!DOCTYPE html><html><body></body></html>")
    page.add_script_tag(path=str(bundle))
    page.evaluate("mermaid.initialize({startOnLoad: false, securityLevel: 'strict'})")
    yield page
    page.close()


PARSE = """async (text) => {
  try { await mermaid.parse(text); return null; } catch (e) { return String(e.message || e); }
}"""
RENDER = """async ([id, text]) => {
  const {svg} = await mermaid.render(id, text);
  const box = document.createElement('div'); box.innerHTML = svg; document.body.append(box);
  const found = {scripts: box.querySelectorAll('script').length,
                 nodes: box.querySelectorAll('.node').length, text: box.textContent};
  box.remove();
  return found;
}"""


def parses(page: Page, text: str) -> None:
    error = page.evaluate(PARSE, text)
    assert error is None, f"Mermaid cannot parse it: {error}\n{text}"


def test_every_mermaid_text_parses_and_renders(
    mermaid: Page, runs: dict[str, diagrams.Diagram]
) -> None:
    texts = {name: diagrams.flow_diagram(s, config=ALL).mermaid() for name, s in FLOWS.items()}
    texts |= {f"run {name}": drawn.mermaid() for name, drawn in runs.items()}
    hidden = diagrams.flow_diagram(
        FLOWS["Big orders"], config=ALL, can_read=lambda row: row["position"] != 40
    )
    texts["a position nobody may read"] = hidden.mermaid()
    texts["no steps"] = diagrams.flow_diagram(snapshot.FlowSnapshot.build({"id": 1}, [])).mermaid()
    for number, (name, text) in enumerate(sorted(texts.items())):
        parses(mermaid, text)
        found = mermaid.evaluate(RENDER, [f"m{number}", text])
        steps = text.count("\n    s")
        assert found["nodes"] >= steps, name


def test_a_title_with_a_script_is_text_in_mermaid_too(mermaid: Page) -> None:
    title = '<script>alert("x")</script> "]} end %% #1'
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "Tricky", "start": "manual"},
        [{"id": 1, "position": 1, "kind": "wait", "title": title, "duration": "1 day"}],
    )
    text = diagrams.flow_diagram(snap).mermaid()
    parses(mermaid, text)
    found = mermaid.evaluate(RENDER, ["tricky", text])
    assert found["scripts"] == 0
    assert title in found["text"]


@settings(max_examples=40, deadline=None)
@given(title=st.text(min_size=1, max_size=40), condition=st.text(max_size=40))
def test_any_title_gives_mermaid_that_parses(mermaid: Page, title: str, condition: str) -> None:
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": title, "start": "manual", "condition": condition},
        [
            {"id": 1, "position": 1, "kind": "branch", "title": title, "condition": condition},
            {"id": 2, "position": 2, "kind": "approval", "title": title, "approver": title},
        ],
    )
    parses(mermaid, diagrams.flow_diagram(snap).mermaid())
