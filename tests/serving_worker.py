"""A worker process for tests/test_two_workers.py: serves until no run is left to finish.

    python serving_worker.py APP DEADLINE_SECONDS   (SERVE_DB, SERVE_OPTIONS in the environment)

Prints how many runs it advanced and how many late writes were refused.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

from running import app

from flowrunner import worker
from flowrunner.runner import flow_runner
from flowrunner.store import engine_tables


def unfinished(engine: sa.Engine) -> int:
    runs = engine_tables.runs
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).where(runs.c.status.in_(("running", "waiting")))
        return int(conn.execute(query).scalar_one())


def main() -> None:
    name, deadline_text = sys.argv[1:3]
    options = os.environ.get("SERVE_OPTIONS")
    engine = sa.create_engine(
        os.environ["SERVE_DB"], connect_args={"options": options} if options else {}
    )
    module = app(name)
    runner = flow_runner(module.binding, engine, commands=module.COMMANDS)
    serving = worker.Worker(runner, lease_ttl=timedelta(seconds=30))
    deadline = time.monotonic() + float(deadline_text)
    while time.monotonic() < deadline:
        if serving.run_due(limit=20) == 0:
            if unfinished(engine) == 0:
                break
            time.sleep(0.02)  # idle: the events that wake the waiting runs are on their way
    print(f"advanced={serving.stats.advanced} refused={serving.stats.refused}")


if __name__ == "__main__":
    main()
