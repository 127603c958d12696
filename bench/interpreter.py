"""The pure interpreter's CPU on the peers' job: five-step runs of application commands.

Drives ``interpret.start`` and ``interpret.advance`` the way the worker does for
``bench/peers.py``'s flowrunner job (one advance per command answer, six calls per
run, the state saved with ``to_dict`` at the end), without a database in the timed
part: the flow, binding and config are mounted once, untimed, on an in-memory SQLite.

    python bench/interpreter.py                # process time per run, median of 7
    python bench/interpreter.py --profile      # cProfile of the runs, by own time

CPU time (``time.process_time``) rather than wall time: the figure stays put on a
machine shared with other work.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from datetime import UTC, datetime
from typing import Any

# Beside this script: the peers' job (it puts the repository on the path).
import peer_jobs
import sqlalchemy as sa

from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.flows.interpreter import effects, happened, interpret
from flowrunner.store import engine_tables

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def mounted(flow: str) -> tuple[snapshot.FlowSnapshot, config_mod.InterpreterConfig]:
    """The job's flow as a run's snapshot, and the runner's interpreter config."""
    engine = sa.create_engine("sqlite://")
    runner, item = peer_jobs.mount(engine, flow)
    peer_jobs.start_runs(runner, item, range(1, 2))
    with engine.connect() as conn:
        stored = conn.execute(sa.select(engine_tables.runs.c.snapshot)).scalar_one()
    snap = runner.load_snapshot(stored)
    engine.dispose()
    return snap, runner.config


def one_run(snap: snapshot.FlowSnapshot, cfg: config_mod.InterpreterConfig, n: int) -> Any:
    """One run to its end, as the worker's advance drives it; its saved state."""
    record = {"id": n, "status": "new", "owner": f"user{n}"}
    seen = happened.Happened(record=record, latest_event_id=0)
    step = interpret.start(snap, seen, NOW, cfg, started_at=NOW, event_floor=0)
    while True:
        results = tuple(
            happened.CommandResult(key=e.key, ok=True, answer={"x": n})
            for e in step.effects
            if isinstance(e, effects.RunCommand)
        )
        if not results:
            return step.state.to_dict()
        answered = happened.Happened(record=record, latest_event_id=0, results=results)
        step = interpret.advance(snap, step.state, answered, NOW, cfg)


def timed(snap: snapshot.FlowSnapshot, cfg: config_mod.InterpreterConfig, runs: int) -> float:
    began = time.process_time()
    for n in range(runs):
        one_run(snap, cfg, n)
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--flow", choices=sorted(peer_jobs.FLOWS), default="commands")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    snap, cfg = mounted(args.flow)
    final = one_run(snap, cfg, 0)
    if final["status"] != "done":
        raise RuntimeError(f"the run ended {final['status']}: {final['reason']}")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(timed, snap, cfg, args.runs)
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        return
    times = [timed(snap, cfg, args.runs) for _ in range(args.repeat)]
    per_run = statistics.median(times) / args.runs * 1e6
    spread = ", ".join(f"{t:.3f}" for t in times)
    print(f"{args.flow}: {per_run:.1f} µs CPU per run (median of {args.repeat}: {spread} s)")


if __name__ == "__main__":
    main()
