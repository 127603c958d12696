"""Limits per kind under several worker processes on one PostgreSQL, measured by the
command itself: "at most 3 in flight" under 4 workers, and "60 a minute" held for
three minutes.

    python bench/limits.py [--postgres URL] [--workers 4] [--minutes 3]
                           [--only concurrency|rate]

Both parts use the tasks app of the limits' tests (``tests/limited.py``): a flow that
scores each task once it is created, its ``score`` kind limited, the command counting
itself in flight (one committed statement on entry, one on exit, the most kept) and
writing down when each score began by the host's clock. Each part has a fresh schema,
its tasks created with their runs due at once, then ``--workers`` processes
(``tests/limited_worker.py``, one run per claim) serve until every run is done.

1. **Concurrency**: ``concurrency=3``, 120 tasks whose score works 0.2 s; then the same
   without the limit, to show the measure sees what 4 workers do unbounded.
2. **Rate**: ``rate="60/minute"``, ``60 × minutes + 20`` tasks whose score works 0.05 s,
   so the rate is all that holds them back. The starts are counted per minute from the
   first, and over every window of 60 s (each starting at a start); the 61st start after
   each comes how long after it — by the commands' own clock, and by the turns the engine
   gave them (each start token's time, which the command reads as it begins).

For both it prints how often a run was put back to wait (``deferred``): once per run
over the limit, and about once more, is a run waiting on the due index; a run claimed
over and over would show in hundreds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import limited  # noqa: E402 - the tests' app, on the path just above

from flowrunner.flows import files  # noqa: E402
from flowrunner.runner import flow_runner, utc_now  # noqa: E402
from flowrunner.store import engine_tables, migrate  # noqa: E402


@contextmanager
def fresh_schema(url: str) -> Iterator[sa.Engine]:
    name = f"limits_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    engine = sa.create_engine(url, connect_args={"options": f"-csearch_path={name}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def drain(
    engine: sa.Engine, tasks: int, workers: int, work: float, **limits: Any
) -> dict[str, Any]:
    """``tasks`` created, ``workers`` processes serving them until all are done."""
    limited.prepare(engine)
    migrate.upgrade(engine)
    runner = flow_runner(limited.binding(**limits), engine, commands=limited.COMMANDS)
    runner.clock = utc_now
    with engine.begin() as conn:
        docs = files.loads_yaml(limited.SCORE)
        files.import_flows(conn, runner.binding, runner.tables, docs, columns=runner.columns)
        for n in range(1, tasks + 1):
            task = {"id": n, "title": f"Task {n}"}
            conn.execute(sa.insert(limited.task).values(**task))
            runner.record_created(conn, task)
    with engine.connect() as conn:
        schema = conn.execute(sa.text("select current_schema()")).scalar()
    env = {
        **os.environ,
        "LIMITED_DB": engine.url.render_as_string(hide_password=False),
        "LIMITED_OPTIONS": f"-csearch_path={schema}",
        "LIMITED_LIMITS": json.dumps(limits),
        "LIMITED_WORK": str(work),
        "PYTHONPATH": str(ROOT),
    }
    script = str(ROOT / "tests" / "limited_worker.py")
    began = time.monotonic()
    processes = [
        subprocess.Popen(
            [sys.executable, script, "3600"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    said = []
    for process in processes:
        out, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(err)
        said.append({k: int(v) for k, v in (part.split("=") for part in out.split())})
    took = time.monotonic() - began
    runs = engine_tables.runs
    with engine.connect() as conn:
        counted = conn.execute(sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status))
        statuses: dict[str, int] = {str(status): int(n) for status, n in counted}
    starts = limited.starts(engine)
    once = Counter(s.task_id for s in starts)
    return {
        "seconds": took,
        "statuses": statuses,
        "each_once": len(once) == tasks and set(once.values()) == {1},
        "most_in_flight": limited.most_in_flight(engine),
        "deferred": sum(s["deferred"] for s in said),
        "per_worker": [s["advanced"] for s in said],
        "began": [s.began for s in starts],
        "turns": sorted(s.turn_until for s in starts if s.turn_until is not None),
    }


def concurrency(url: str, workers: int) -> None:
    for limits in ({"concurrency": 3}, {}):
        with fresh_schema(url) as engine:
            found = drain(engine, 120, workers, 0.2, **limits)
        began = found["began"]
        print(
            f"{json.dumps(limits) or 'no limit'} under {workers} workers: 120 runs in "
            f"{found['seconds']:.1f} s, most in flight {found['most_in_flight']}, "
            f"each once {found['each_once']}, {found['statuses']}, put back to wait "
            f"{found['deferred']} times ({found['deferred'] / 120:.2f} a run), scores/s "
            f"{len(began) / (began[-1] - began[0]):.1f}, per worker {found['per_worker']}"
        )


def rate(url: str, workers: int, minutes: int) -> None:
    tasks = 60 * minutes + 20
    with fresh_schema(url) as engine:
        found = drain(engine, tasks, workers, 0.05, rate="60/minute")
    began = found["began"]
    first = began[0]
    per_minute = Counter(int((moment - first) // 60) for moment in began)
    sixty_first = [b - a for a, b in zip(began, began[60:], strict=False)]
    print(
        f"rate 60/minute under {workers} workers: {tasks} runs in {found['seconds']:.1f} s, "
        f"each once {found['each_once']}, {found['statuses']}, put back to wait "
        f"{found['deferred']} times ({found['deferred'] / tasks:.2f} a run)"
    )
    print(f"  starts in minute 1, 2, 3…: {[per_minute[m] for m in sorted(per_minute)]}")
    turns = [until - 60.0 for until in found["turns"]]
    by_turn = Counter(int((moment - turns[0]) // 60) for moment in turns)
    print(f"  by the turns, in minute 1, 2, 3…: {[by_turn[m] for m in sorted(by_turn)]}")
    sixty_first_turn = [b - a for a, b in zip(turns, turns[60:], strict=False)]
    print(
        f"  by the turns (when each start was taken): most in any 60 s window "
        f"{limited.most_in_window(turns, 60.0)}; the 61st turn after each came "
        f"{min(sixty_first_turn):.3f} s to {max(sixty_first_turn):.3f} s later; a command "
        f"began {min(b - t for b, t in zip(sorted(began), turns, strict=False)) * 1000:.0f} "
        f"to {max(b - t for b, t in zip(sorted(began), turns, strict=False)) * 1000:.0f} ms "
        "after its turn (in the order of each)"
    )
    print(
        f"  most starts in any 60 s window: {limited.most_in_window(began, 60.0)}; "
        f"the 61st start after each came {min(sixty_first):.3f} s to "
        f"{max(sixty_first):.3f} s later (median "
        f"{sorted(sixty_first)[len(sixty_first) // 2]:.3f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--only", choices=("concurrency", "rate"))
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("name a PostgreSQL server: --postgres URL or FLOWRUNNER_TEST_POSTGRES_URL")
    if args.only != "rate":
        concurrency(args.postgres, args.workers)
    if args.only != "concurrency":
        rate(args.postgres, args.workers, args.minutes)


if __name__ == "__main__":
    main()
