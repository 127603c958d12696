"""Crash injection by killing a worker process at a named point, then a fresh worker
taking over once the lease has run out: the scenarios of tests/test_crash.py, whose
end state must equal the reference — nothing lost, nothing repeated."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import forked
import pytest
import sqlalchemy as sa
from running import T0
from test_crash import (
    Action,
    at,
    decided,
    fresh_driver,
    observe,
    order,
    play,
    recovery,
    ticket,
)

HERE = Path(__file__).parent


def spawn_worker(engine: sa.Engine, name: str, now: Any, point: str) -> int:
    """Run a worker process that kills itself (os._exit) at ``point``; its exit code."""
    url = engine.url.render_as_string(hide_password=False)
    schema = getattr(engine, "info_schema", None)
    options = f"-csearch_path={schema}" if schema else ""
    env = {**os.environ, "CRASH_DB": url, "CRASH_OPTIONS": options or ""}
    result = forked.run(
        [sys.executable, str(HERE / "crashing_worker.py"), name, now.isoformat(), point],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode in (0, 3), result.stderr
    return result.returncode


KILLED = {
    "purchase_orders": (
        [
            Action("create", (order(5),)),
            Action("run"),
            Action("update", (5, {"status": "withdrawn"})),  # its approvals are cancelled
            Action("create", (order(1),)),
            Action("create", (order(3, 500),)),
        ],
        T0,
        [
            Action("run"),
            Action("until", (at(25),)),
            decided(1, "manager@example.com"),
            decided(1, "cfo@example.com"),
            decided(1, "controller@example.com"),
            Action("run"),
        ],
    ),
    "tickets": (
        [Action("create", (ticket(1),)), Action("create", (ticket(2),)), Action("run")],
        at(4),
        [Action("until", (at(9),))],
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("name", "point"),
    [
        ("purchase_orders", "claimed"),
        ("purchase_orders", "after-set"),
        ("purchase_orders", "after-command:request_approval"),
        ("purchase_orders", "after-command:send_purchase_order"),
        ("purchase_orders", "after-command:close_approval_requests"),
        ("purchase_orders", "before-save"),
        ("purchase_orders", "before-commit"),
        ("purchase_orders", "committed"),
        ("tickets", "after-notify"),
    ],
)
def test_a_killed_worker_process_loses_and_repeats_nothing(
    engines: Callable[[], sa.Engine], name: str, point: str
) -> None:
    prefix, moment, rest = KILLED[name]
    ref = fresh_driver(engines(), name)
    play(ref, [*prefix, Action("until", (moment,)), *rest], recovery(ref))
    expected = observe(ref, name)

    engine = engines()
    driver = fresh_driver(engine, name)
    play(driver, prefix, recovery(driver))
    driver.now = moment
    engine.dispose()
    code = spawn_worker(engine, name, moment, point)
    assert code == 3, f"the worker process never reached {point}"
    recovery(driver)()
    play(driver, rest, recovery(driver))
    assert observe(driver, name) == expected
