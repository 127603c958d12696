"""A real browser for the diagram tests: Debian's chromium, driven by Playwright.

Where the browser, Playwright or Mermaid's bundle is missing, tests that need them skip
with one line saying what to install; with ``FLOWRUNNER_TEST_BROWSER=required`` (as
``.ci/run`` sets) they fail instead, so CI never passes without having looked.

Screenshots go to ``FLOWRUNNER_TEST_ARTIFACTS`` (default: ``artifacts/`` at the
repository's root, which git ignores), one folder per test module.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("FLOWRUNNER_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
REQUIRED = os.environ.get("FLOWRUNNER_TEST_BROWSER") == "required"
# Mermaid's browser bundle (node_modules/mermaid/dist/mermaid.min.js), installed by .ci/run.
MERMAID_JS = os.environ.get("FLOWRUNNER_TEST_MERMAID_JS", "")


def missing() -> str | None:
    """What is missing for the browser tests, in words; None when all is there."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (pip install 'flowrunner[browser]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"there is no chromium at {CHROMIUM} (apt-get install chromium)"
    return None


def need_browser() -> None:
    """Skip the calling module, in one line, when the browser cannot run (fail in CI)."""
    why = missing()
    if why is None:
        return
    message = f"browser tests skipped: {why}"
    if REQUIRED:
        pytest.fail(message.replace("skipped", "cannot run"), pytrace=False)
    pytest.skip(message, allow_module_level=True)


def mermaid_bundle() -> Path:
    """Mermaid's bundle, or a one-line skip (a failure in CI) when it is not installed."""
    path = Path(MERMAID_JS) if MERMAID_JS else None
    if path is not None and path.is_file():
        return path
    message = (
        "Mermaid checks skipped: set FLOWRUNNER_TEST_MERMAID_JS to mermaid.min.js "
        "(npm install mermaid@11; .ci/run does)"
    )
    if REQUIRED:
        pytest.fail(message.replace("skipped", "cannot run"), pytrace=False)
    pytest.skip(message)


def artifacts(name: str) -> Path:
    """The folder where a test module keeps its screenshots."""
    base = Path(os.environ.get("FLOWRUNNER_TEST_ARTIFACTS") or ROOT / "artifacts")
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# The elements that reach past the window's right edge, for the sentence of a failure.
_PAST_THE_EDGE = """() => [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > innerWidth + 0.5)
  .slice(0, 8)
  .map((el) => `<${el.tagName.toLowerCase()} class="${el.className}"> ends at `
    + `${Math.round(el.getBoundingClientRect().right)} px: `
    + el.textContent.trim().slice(0, 60))"""


def no_sideways_scroll(page: Any) -> None:
    """The page fits its window's width: nothing makes it scroll sideways (a failure
    names the elements that reach past the edge). Measured once the page has loaded,
    its style sheet with it: a page measured while it is still arriving (just after a
    click that navigates) is laid out unstyled."""
    page.wait_for_load_state("load")
    width: dict[str, Any] = page.evaluate(
        "() => ({scroll: document.documentElement.scrollWidth, inner: innerWidth})"
    )
    if width["scroll"] > width["inner"]:
        past = page.evaluate(_PAST_THE_EDGE)
        raise AssertionError(f"the page scrolls sideways: {width}; past the edge: {past}")


@contextmanager
def launched() -> Iterator[Any]:
    """Debian's chromium, launched headless by Playwright for as long as the block lasts."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield found
        finally:
            found.close()
