"""Crash injection for code workflows by killing a worker process at a named point: the
script of tests/test_workflows_crash.py, resumed by a fresh worker once the lease has
run out. Every command's write once; the checks service asked again, with its key,
when the killed worker's answer was lost with it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from provider import Provider, serving
from test_crash import LEASE
from test_workflows_crash import SCRIPT, desk, observe, play

from flowrunner.engine import worker

HERE = Path(__file__).parent


# -- a worker process killed -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize(
    "point", ["after-command:mark", "after-call:check", "before-commit", "committed"]
)
def test_a_killed_worker_process_runs_each_command_once_and_calls_again_with_its_key(
    engines: Callable[[], sa.Engine], point: str
) -> None:
    with serving() as provider:
        reference = desk(engines(), provider)
        play(reference, SCRIPT)
        expected = observe(reference, provider)
    with serving() as provider:
        engine = engines()
        driver = desk(engine, provider)
        play(driver, SCRIPT[:5])
        engine.dispose()
        assert kill_at(engine, provider, driver.now, point) == 3, f"never reached {point}"
        driver.worker = worker.Worker(driver.runner, lease_ttl=LEASE)
        driver.now = driver.now + LEASE + timedelta(seconds=1)
        play(driver, SCRIPT[5:])
        assert observe(driver, provider) == expected
        if point == "after-call:check":
            # The killed worker's answer was lost with it: the call was made again.
            assert len(provider.sent_keys("/checks")) > len(set(provider.sent_keys("/checks")))


def kill_at(engine: sa.Engine, provider: Provider, now: datetime, point: str) -> int:
    """A worker process that kills itself (os._exit) at ``point``; its exit code."""
    url = engine.url.render_as_string(hide_password=False)
    schema = getattr(engine, "info_schema", None)
    env = {
        **os.environ,
        "CRASH_DB": url,
        "CRASH_OPTIONS": f"-csearch_path={schema}" if schema else "",
        "CRASH_CHECKS": provider.url,
    }
    done = forked.run(
        [sys.executable, str(HERE / "crashing_worker.py"), "workflows", now.isoformat(), point],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 3), done.stderr
    return done.returncode
