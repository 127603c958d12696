"""A scheduled flow over many records, served by two worker processes on PostgreSQL
(``bench/scheduled_flows.py`` at a moderate size): at the slot each matching record is
started exactly once, none twice, and no other record at all."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import forked
from sizes import sized

BENCH = Path(__file__).resolve().parent.parent / "bench" / "scheduled_flows.py"
# A few pages of a thousand records by default; the bench's hundred thousand in a long run.
RECORDS = sized(3_000, 100_000)


def test_two_worker_processes_start_each_matching_record_once_at_the_slot(pg_url: str) -> None:
    done = forked.run(
        [sys.executable, str(BENCH), "--records", str(RECORDS), "--postgres", pg_url, "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    matching = RECORDS - RECORDS // 10  # nine in ten are open
    assert found["matching"] == matching
    assert (found["started"], found["records_started"]) == (matching, matching)
    assert found["started_twice"] == found["closed_started"] == 0
    # The slot's pages of a thousand records, each a step of the schedule's run.
    assert sum(found["advanced_per_worker"]) >= -(-matching // 1000)
