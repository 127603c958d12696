"""A worker process for tests/test_two_workers.py and tests/test_two_runners.py: serves
its app's runner until none of that resource's runs is left to finish.

    python serving_worker.py APP DEADLINE_SECONDS   (SERVE_DB, SERVE_OPTIONS in the environment)

Prints how many runs it advanced and how many late writes were refused, then the ids of
the runs it claimed.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

from running import app

from flowrunner.engine import worker
from flowrunner.runner import flow_runner
from flowrunner.store import engine_tables
from flowrunner.store import operations as ops


def unfinished(engine: sa.Engine, resource: str) -> int:
    runs = engine_tables.runs
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).where(
            runs.c.resource == resource, runs.c.status.in_(("running", "waiting"))
        )
        return int(conn.execute(query).scalar_one())


def recording_claims(claimed: set[int]) -> None:
    """Note the id of every run this process's worker claims (what the test checks)."""
    claim_due = ops.claim_due

    def claim_and_note(*args: Any, **kwargs: Any) -> list[ops.Claim]:
        claims = claim_due(*args, **kwargs)
        claimed.update(c.run_id for c in claims)
        return claims

    ops.claim_due = claim_and_note


def main() -> None:
    name, deadline_text = sys.argv[1:3]
    options = os.environ.get("SERVE_OPTIONS")
    engine = sa.create_engine(
        os.environ["SERVE_DB"], connect_args={"options": options} if options else {}
    )
    module = app(name)
    runner = flow_runner(module.binding, engine, commands=module.COMMANDS)
    claimed: set[int] = set()
    recording_claims(claimed)
    serving = worker.Worker(runner, lease_ttl=timedelta(seconds=30))
    deadline = time.monotonic() + float(deadline_text)
    while time.monotonic() < deadline:
        if serving.run_due(limit=20) == 0:
            if unfinished(engine, runner.binding.resource) == 0:
                break
            time.sleep(0.02)  # idle: the events that wake the waiting runs are on their way
    print(f"advanced={serving.stats.advanced} refused={serving.stats.refused}")
    print("claimed=" + ",".join(str(run_id) for run_id in sorted(claimed)))


if __name__ == "__main__":
    main()
