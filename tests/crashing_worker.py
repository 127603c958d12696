"""A worker process that kills itself at a named point: used by tests/test_crash.py,
tests/test_workflows_crash_killed.py and tests/test_workflows_children_crash.py (and,
killed inside a call rather than at a point, by tests/test_checkpoints.py).

    python crashing_worker.py APP NOW POINT     (CRASH_DB, CRASH_OPTIONS in the environment)

Exits with code 3 at the point (os._exit: no cleanup, no rollback message, as a killed
process), or 0 if the work finished without reaching it.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

import five_calls
import ordering
import workflow_desk
from running import app

from flowrunner.engine import worker
from flowrunner.runner import flow_runner


def main() -> None:
    name, now_text, point = sys.argv[1:4]
    now = datetime.fromisoformat(now_text)
    options = os.environ.get("CRASH_OPTIONS")
    engine = sa.create_engine(
        os.environ["CRASH_DB"], connect_args={"options": options} if options else {}
    )
    if name in ("five-flow", "five-workflow"):  # five calls (tests/test_checkpoints.py)
        module = app("tickets")
        five = five_calls.commands(
            Path(os.environ["FIVE_OUTSIDE"]), crash_in=int(os.environ["FIVE_CRASH_IN"])
        )
        runner = flow_runner(
            module.binding,
            engine,
            commands={**module.COMMANDS, **five},
            clock=lambda: now,
            workflows=five_calls.workflows() if name == "five-workflow" else None,
        )
    elif name == "workflows":  # the desk's code workflow (tests/test_workflows_crash.py)
        module = app("tickets")
        runner = flow_runner(
            module.binding,
            engine,
            commands={**module.COMMANDS, **workflow_desk.COMMANDS},
            clock=lambda: now,
            workflows=workflow_desk.workflows(os.environ["CRASH_CHECKS"]),
        )
    elif name == "ordering":  # orders and their credit checks (test_workflows_children_crash)
        module = app("purchase_orders")
        ordering.BUREAU.update(json.loads(os.environ["CRASH_BUREAU"]))
        runner = flow_runner(
            module.binding,
            engine,
            commands={**module.COMMANDS, **ordering.COMMANDS},
            clock=lambda: now,
            workflows=ordering.workflows(),
        )
    else:
        module = app(name)
        runner = flow_runner(module.binding, engine, commands=module.COMMANDS, clock=lambda: now)

    def hook(reached: str) -> None:
        if reached == point:
            os._exit(3)

    serving = worker.Worker(runner, lease_ttl=timedelta(seconds=1), crash_at=hook)
    while serving.run_due():
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
