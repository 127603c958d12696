"""A server-only module beside the app (``--jobs MODULE:ATTR``): the shop's refund
callback and nightly job live in ``tests.shop_server``, which its workers load and its
web app never imports. On SQLite and on PostgreSQL; the command line as a real process."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from paying import SECRET, SECRET_ENV, Shop
from shop_server import REFUND_ISSUED, SERVER

from flowrunner import BindingError, Jobs, ServerParts
from flowrunner.cli import cli
from flowrunner.store import engine_tables

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
APP = "tests.paying:runner"


@pytest.fixture
def shop(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> Shop:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    shop = Shop(engine, START)
    shop.order(7)
    return shop


def test_the_server_parts_answer_the_refund_and_run_the_nightly_job(shop: Shop) -> None:
    runner = shop.runner
    content = b'{"id": "rf_1", "order": 7}'
    assert runner.receive("refund_issued", {}, content).status == 404  # not mounted yet

    runner.mount_server(SERVER)

    headers = REFUND_ISSUED.verify.sign(SECRET, content, shop.driver.now)
    assert runner.receive("refund_issued", headers, content).status == 204
    received, unknown = runner.operations.deliveries()
    assert (received.endpoint, received.key, received.status) == ("refund_issued", "rf_1", 204)
    assert (unknown.endpoint, unknown.status) == (None, 404)
    assert sorted(runner.inbound) == ["payment_settled", "refund_issued"]
    jobs = runner.jobs
    assert isinstance(jobs, Jobs) and list(jobs.jobs) == ["nightly_count"]


def test_what_cannot_be_mounted_is_said(shop: Shop) -> None:
    runner = shop.runner
    again = ServerParts(commands={"settle_payment": lambda ctx: None})
    with pytest.raises(BindingError, match="command 'settle_payment' is given twice"):
        runner.mount_server(again)
    twice = ServerParts(inbound=[dataclasses.replace(REFUND_ISSUED, name="payment_settled")])
    with pytest.raises(BindingError, match="inbound 'payment_settled' is declared twice"):
        runner.mount_server(twice)
    with pytest.raises(BindingError, match="gives ServerParts"):
        runner.mount_server({"jobs": {}})  # type: ignore[arg-type]
    with pytest.raises(BindingError, match="inbound is a list of Inbound"):
        ServerParts(inbound=REFUND_ISSUED)  # type: ignore[arg-type]


def flowrunner(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), SECRET_ENV: SECRET}
    return forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("jobs", ["tests.shop_server:SERVER", "tests.shop_server:server"])
def test_a_worker_loads_the_module_beside_the_app(database_url: str, jobs: str) -> None:
    done = flowrunner(
        "worker", "--once", "--json", "--app", APP, "--jobs", jobs, "--database", database_url
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resource"] == "shop_order"
    # Before its first claim the worker made the nightly job's own run, due at 02:00.
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        keys = conn.execute(sa.select(engine_tables.runs.c.start_key)).scalars().all()
    engine.dispose()
    assert "every:nightly_count" in keys


def test_the_console_of_the_app_never_imports_the_module(database_url: str) -> None:
    script = f"""
import sys
from starlette.testclient import TestClient
from flowrunner.cli import app_loader
from flowrunner.web.console import Principal

runner = app_loader.load_app({APP!r}, database_url={database_url!r})
console = runner.console(principal=lambda request: Principal("olga"))
page = TestClient(console).get("/ops/deliveries")
assert page.status_code == 200, page.text
print("tests.shop_server" in sys.modules, "tests.paying" in sys.modules)
runner.engine.dispose()
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), SECRET_ENV: SECRET}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_jobs_module_that_is_not_one_is_refused_in_one_line(sqlite_engine: sa.Engine) -> None:
    url = sqlite_engine.url.render_as_string(hide_password=False)
    for spec, said in (
        ("tests.shop_server:nothing", "module 'tests.shop_server' has no attribute 'nothing'"),
        ("tests.shop_server:REFUND_ISSUED", "is neither ServerParts(...) nor a function"),
        ("tests.shop_server", "--jobs must look like MODULE:ATTR"),
    ):
        result = CliRunner(env={SECRET_ENV: SECRET}).invoke(
            cli, ["worker", "--once", "--app", APP, "--jobs", spec, "--database", url]
        )
        assert result.exit_code == 2, result.output
        assert said in result.stderr


def test_the_authority_lock_covers_the_server_parts(
    sqlite_engine: sa.Engine, tmp_path: Path
) -> None:
    url = sqlite_engine.url.render_as_string(hide_password=False)
    lock = tmp_path / "authority.lock"
    base = ["--app", APP, "--database", url, "--lock", str(lock)]
    runner = CliRunner(env={SECRET_ENV: SECRET})
    done = runner.invoke(cli, ["authority", "lock", *base, "--jobs", "tests.shop_server:SERVER"])
    assert done.exit_code == 0, done.output
    written = lock.read_text(encoding="utf-8")
    assert "refund_issued" in written and "nightly_count" in written
    # Checked without the module, the lock lists parts the app alone does not have.
    assert runner.invoke(cli, ["authority", "check", *base]).exit_code == 1
    again = runner.invoke(cli, ["authority", "check", *base, "--jobs", "tests.shop_server:SERVER"])
    assert again.exit_code == 0, again.output
