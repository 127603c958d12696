"""A worker process for the limits' tests and bench: serves the tasks app
(``limited.py``) until none of its runs is left to finish, or the deadline passes.

    python limited_worker.py DEADLINE_SECONDS
        (LIMITED_DB, LIMITED_OPTIONS, LIMITED_LIMITS — the kind's limits as JSON — in
         the environment)

Prints how many runs it advanced and how many times a run was put back to wait for
its turn.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

import limited

from flowrunner.engine import worker
from flowrunner.runner import flow_runner
from flowrunner.store import engine_tables


def unfinished(engine: sa.Engine) -> int:
    runs = engine_tables.runs
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).where(runs.c.status.in_(("running", "waiting")))
        return int(conn.execute(query).scalar_one())


def main() -> None:
    seconds = float(sys.argv[1])
    options = os.environ.get("LIMITED_OPTIONS")
    engine = sa.create_engine(
        os.environ["LIMITED_DB"], connect_args={"options": options} if options else {}
    )
    limits = json.loads(os.environ["LIMITED_LIMITS"])
    runner = flow_runner(limited.binding(**limits), engine, commands=limited.COMMANDS)
    serving = worker.Worker(runner, lease_ttl=timedelta(seconds=30))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if serving.run_due(limit=1) == 0:
            if unfinished(engine) == 0:
                break
            time.sleep(0.01)  # idle: a waiting run is due when its turn comes
    stats = serving.stats
    print(f"advanced={stats.advanced} deferred={stats.deferred} errors={stats.errors}")


if __name__ == "__main__":
    main()
