"""A worker process for tests/test_jobs_two_workers.py: serves the tickets app's runner,
with a job at times running every minute, on a clock read from a file the test moves.

    python timed_worker.py NAME   (SERVE_DB, SERVE_OPTIONS, CLOCK_FILE, STOP_FILE and
                                   MOVE_UNTIL in the environment)

The job's command writes one ``slot_ran`` row per slot it runs, in the job's own
transaction, naming the slot and this worker; then, for a slot before ``MOVE_UNTIL``,
it moves the shared clock on to five seconds past the next minute — time passes while
the slot runs, so the next slot is due the moment this one is saved, to whichever
worker claims it first. The process serves until ``STOP_FILE`` exists, then prints how
many runs it advanced.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))

from running import app

from flowrunner import Job, Jobs
from flowrunner.engine import commands, worker
from flowrunner.runner import flow_runner

metadata = sa.MetaData()

# One row per slot a worker ran: the test counts them.
slot_ran = sa.Table(
    "slot_ran",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("slot", sa.Text, nullable=False),
    sa.Column("worker", sa.Text, nullable=False),
)

EVERY_MINUTE = "* * * * *"


def set_clock(path: Path, moment: datetime) -> None:
    """Move the shared clock: written whole, then renamed, so a reader never sees half."""
    part = path.with_suffix(".part")
    part.write_text(moment.isoformat(), encoding="utf-8")
    os.replace(part, path)


def file_clock(path: Path) -> datetime:
    return datetime.fromisoformat(path.read_text(encoding="utf-8"))


def main() -> None:
    name = sys.argv[1]
    options = os.environ.get("SERVE_OPTIONS")
    engine = sa.create_engine(
        os.environ["SERVE_DB"], connect_args={"options": options} if options else {}
    )
    clock_path, stop = Path(os.environ["CLOCK_FILE"]), Path(os.environ["STOP_FILE"])

    until = datetime.fromisoformat(os.environ["MOVE_UNTIL"])

    def tick(ctx: commands.CommandContext) -> None:
        slot = datetime.fromisoformat(str(ctx.inputs["slot"]))
        ctx.conn.execute(sa.insert(slot_ran).values(slot=slot.isoformat(), worker=name))
        if slot < until:
            set_clock(clock_path, slot + timedelta(minutes=1, seconds=5))

    runner = flow_runner(
        app("tickets").binding,
        engine,
        commands={**app("tickets").COMMANDS, "tick": tick},
        clock=lambda: file_clock(clock_path),
    )
    Jobs(runner, {"every_minute": Job(every=EVERY_MINUTE, command="tick", run_as="automation")})
    serving = worker.Worker(runner)
    while not stop.exists():
        if serving.run_due() == 0:
            time.sleep(0.001)  # idle: the test moves the clock to the next slot
    print(f"advanced={serving.stats.advanced} refused={serving.stats.refused}")


if __name__ == "__main__":
    main()
