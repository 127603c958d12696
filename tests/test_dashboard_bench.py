"""``bench/dashboard.py`` at a moderate size (its 200,000 runs in a long run): on many
runs copied from real ones, the dashboard's figures are still those counted in plain SQL
— runs started in its days, by status, the passes that gave up."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import forked
import pytest
from sizes import sized

BENCH = Path(__file__).resolve().parent.parent / "bench" / "dashboard.py"
RUNS = sized(2_000, 200_000)

pytestmark = pytest.mark.slow


def bench(*args: str) -> dict[str, Any]:
    done = forked.run(
        [sys.executable, str(BENCH), "--runs", str(RUNS), "--repeat", "1", "--json", *args],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def agree(found: dict[str, Any]) -> None:
    assert found["shown"] == found["counted"]
    assert found["counted"]["started"] >= RUNS * 0.45  # about half fall in its 30 days
    assert found["counted"]["gave_up"] > 0
    assert set(found["timed_ms"]) >= {"the whole page", "time at each step"}


def test_on_sqlite_the_figures_of_many_runs_are_those_counted_in_sql() -> None:
    agree(bench("--only", "sqlite")["sqlite"])


def test_on_postgresql_the_figures_of_many_runs_are_those_counted_in_sql(pg_url: str) -> None:
    agree(bench("--only", "postgresql", "--postgres", pg_url)["postgresql"])
