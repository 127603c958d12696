"""The Operations room by each reader's areas in a real browser (headless Debian chromium,
driven by Playwright), served by ``flowrunner console --principal`` over a SQLite file:
at 1280 px and at 390 px, olga (workflows and deliveries) sees the Runs, Journal and
Notices tabs and the flow's run, no Jobs tab and no job's run, and is refused the Jobs
page with a sentence; jo (jobs) opens the Jobs tab, pauses the nightly job and sees it
paused. At 390 px nothing scrolls sideways.

Screenshots: ``artifacts/principals/``. Needs chromium and Playwright (skipped in one line
without them, failing in CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import authorities
import pytest
import sqlalchemy as sa
from browser import artifacts, launched, need_browser, no_sideways_scroll
from serving import served

from flowrunner import Jobs, testing
from flowrunner.store import migrate

need_browser()

from playwright.sync_api import Browser, expect  # noqa: E402

pytestmark = pytest.mark.slow

SHOTS = artifacts("principals")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """The desk on a SQLite file — a flow's run waiting on ticket 7, the nightly job's own
    run — and the URL of its console, whose readers the application names."""
    url = f"sqlite:///{tmp_path / 'desk.db'}"
    engine = sa.create_engine(url)
    migrate.upgrade(engine)
    driver = testing.FlowDriver(authorities.build(engine), start=datetime.now(UTC))
    runner = driver.runner
    with engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Triage", "start": "created"})
        wait = {"flow_id": flow, "position": 1, "kind": "wait", "duration": "2 days"}
        runner.save_step(conn, wait)
    driver.create({"id": 7, "status": "open"})
    jobs = runner.jobs
    assert isinstance(jobs, Jobs)
    jobs.prepare()
    [flow_run] = [r.id for r in driver.runs(7)]
    options = ("--principal", "tests.authorities:reader")
    with served(
        "tests.authorities:runner", url, *options, env={"FLOWRUNNER_CONSOLE_TOKEN": ""}
    ) as base:
        yield flow_run, base
    engine.dispose()


def as_reader(browser: Browser, name: str, width: int) -> Any:
    context = browser.new_context(
        viewport={"width": width, "height": 900}, extra_http_headers={"x-desk-user": name}
    )
    return context.new_page()


@pytest.mark.parametrize("width", [1280, 390])
def test_each_operator_sees_and_acts_on_their_areas_alone(
    browser: Browser, desk: tuple[int, str], width: int
) -> None:
    flow_run, base = desk
    olga = as_reader(browser, "olga", width)
    olga.goto(base + "/ops")
    tabs = olga.get_by_role("navigation", name="Operations room")
    expect(tabs.get_by_role("link")).to_have_text(["Runs", "Journal", "Notices", "Deliveries"])
    expect(olga.locator("tr[data-run]")).to_have_count(1)
    expect(olga.locator(f'tr[data-run="{flow_run}"]')).to_be_visible()
    if width == 390:
        no_sideways_scroll(olga)
    olga.screenshot(path=str(SHOTS / f"olga-runs-{width}.png"), full_page=True)
    olga.goto(base + "/ops/jobs")
    expect(
        olga.get_by_text("none of their roles opens the Operations room's jobs area")
    ).to_be_visible()
    olga.context.close()

    jo = as_reader(browser, "jo", width)
    jo.goto(base + "/ops")
    tabs = jo.get_by_role("navigation", name="Operations room")
    expect(tabs.get_by_role("link")).to_have_text(["Runs", "Journal", "Jobs"])
    expect(jo.locator(f'tr[data-run="{flow_run}"]')).to_have_count(0)
    tabs.get_by_role("link", name="Jobs").click()
    jo.locator('tr[data-job="nightly"]').get_by_role("button", name="Pause").click()
    expect(jo.locator('tr[data-job="nightly"]')).to_contain_text("paused by jo")
    if width == 390:
        no_sideways_scroll(jo)
    jo.screenshot(path=str(SHOTS / f"jo-jobs-{width}.png"), full_page=True)
    jo.context.close()
