"""The console over PostgreSQL with two worker processes serving it (``flowrunner
console`` and two ``flowrunner worker``, each its own process): what an operator does in
the browser — retry a failed run, cancel a waiting one, start a manual flow — the
workers see and carry out, each step once.

Needs PostgreSQL (``FLOWRUNNER_TEST_POSTGRES_URL``), chromium and Playwright.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import forked
import pytest
import sqlalchemy as sa
from browser import ARGS, CHROMIUM, ROOT, artifacts, need_browser
from running import done_twice, mount, order
from serving import served, sign_in

from fixtures.purchase_orders import app as po
from flowrunner.runner import utc_now

need_browser()

from playwright.sync_api import expect, sync_playwright  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

APP = "fixtures.purchase_orders.app:runner"
SHOTS = artifacts("console-postgres")
ON_HOLD = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}


def schema_url(engine: sa.Engine) -> str:
    """The engine's database as a URL another process opens: its schema in the URL."""
    with engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar_one()
    url = engine.url.update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


@contextmanager
def workers(database: str, count: int) -> Iterator[list[subprocess.Popen[str]]]:
    """``count`` worker processes serving the database until the block ends."""
    started = [
        forked.popen(
            [
                sys.executable,
                "-m",
                "flowrunner",
                "worker",
                "--app",
                APP,
                "--database",
                database,
                "--poll",
                "0.05",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            _, errors = process.communicate(timeout=30)
            assert process.returncode == 0, errors


def eventually(holds: Callable[[], bool], what: str, seconds: float = 60) -> None:
    """Wait until the workers (other processes) have made ``holds`` true."""
    deadline = time.monotonic() + seconds
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"the workers did not {what} within {seconds} seconds")
        time.sleep(0.05)


def test_what_an_operator_does_in_the_browser_the_workers_carry_out_once(
    pg_engine: sa.Engine,
) -> None:
    driver = mount(pg_engine, "purchase_orders")
    driver.runner.clock = utc_now  # the console's and the workers' clock
    driver.create(ON_HOLD)  # sending it is refused: failed
    driver.create(order(1))  # waits for its approvals
    [failed] = driver.runs(9)
    [waiting] = driver.runs(1)
    assert (failed.status, waiting.status) == ("failed", "waiting")
    database = schema_url(pg_engine)
    look = po.runner(database)

    def status(run_id: int) -> str:
        return str(look.get_run(run_id).status)

    with (
        served(APP, database) as base,
        workers(database, 2) as serving,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        sign_in(page, base)

        # Released from hold, the failed run is retried: a worker sends the order.
        with pg_engine.begin() as conn:
            conn.execute(
                sa.update(po.purchase_order)
                .where(po.purchase_order.c.id == 9)
                .values(priority="normal")
            )
        page.goto(f"{base}/run/{failed.id}")
        page.get_by_role("button", name="Retry…").click()
        page.get_by_role("button", name="Retry 1 run").click()
        expect(page.locator(".said")).to_contain_text(f"Run {failed.id} retried")
        eventually(lambda: status(failed.id) == "done", "finish the retried run")
        page.reload()
        expect(page.locator(f"article[data-run='{failed.id}']")).to_have_attribute(
            "data-status", "done"
        )

        # The waiting run is cancelled: a worker withdraws the approvals it asked.
        page.goto(f"{base}/run/{waiting.id}")
        page.get_by_role("button", name="Cancel…").click()
        page.locator("#reason").fill("ordered twice")
        page.get_by_role("button", name="Cancel 1 run").click()
        expect(page.locator(".said")).to_contain_text(f"Run {waiting.id} cancelled")
        requests = po.approval_request

        def withdrawn() -> bool:
            with pg_engine.connect() as conn:
                rows = conn.execute(sa.select(requests.c.withdrawn_at)).all()
            return len(rows) == 3 and all(row.withdrawn_at is not None for row in rows)

        eventually(withdrawn, "withdraw the cancelled run's approvals")

        # A manual flow started on the record page: a worker sends the order again.
        page.goto(f"{base}/record/9")
        page.locator("#start-flow").select_option(label="Resend")
        page.get_by_role("button", name="Start").click()
        expect(page.locator(".said")).to_contain_text("Started run")
        [resent, *_] = look.runs(9)
        assert resent.flow_name == "Resend"
        eventually(lambda: status(resent.id) == "done", "finish the started run")
        page.reload()
        expect(page.locator(f"article[data-run='{resent.id}']")).to_have_attribute(
            "data-status", "done"
        )
        page.screenshot(path=str(SHOTS / "record-after.png"), full_page=True)
        browser.close()
        assert all(process.poll() is None for process in serving)  # both still serving

    with pg_engine.connect() as conn:
        assert done_twice(conn) == []  # each step once, whichever worker took it
    journal = [(e.operator, e.action) for e in look.journal()]
    look.engine.dispose()
    assert journal == [("console", "start"), ("console", "cancel"), ("console", "retry")]
    assert urllib.parse.urlparse(base).hostname == "127.0.0.1"
