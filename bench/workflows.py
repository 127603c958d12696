"""A five-step code workflow beside DBOS Transact's five-step workflow, on one SQLite file.

    python bench/workflows.py [--runs 400] [--repeat 5] [--quick]

Each variant starts N workflows of five durable steps and drives every one to its end
in one process, its state on a fresh SQLite file with the same durability (WAL,
``synchronous=FULL``, set by ``bench/peer_jobs.py``'s ``durable_connection``; DBOS is
also measured as shipped). The flowrunner workflow is an ``async def`` of five
``w.run`` steps, each running an application command (as DBOS's ``@DBOS.step`` runs a
function) whose answer is recorded; a run starts as an application starts one: the
record inserted and the starting event emitted in one transaction. Each measurement
runs in a fresh child process, the variants taking turns, so the machine's noise falls
on all alike; the script prints steps per second per variant (median) and flowrunner's
speed over DBOS's (median of the side-by-side ratios).

DBOS is optional: ``pip install -e '.[bench]'``; without it only flowrunner is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

# Beside this script: the peers' jobs and the durable SQLite settings they share.
import peer_jobs
import peers
import sqlalchemy as sa

from flowrunner import FlowBinding, OnEvent, Workflows, flow_runner, tables
from flowrunner.engine import worker
from flowrunner.store import dialects, engine_tables, migrate

STEPS = peer_jobs.STEPS

BINDING = FlowBinding(
    resource="item",
    flows_table="item_flow",
    steps_table="item_flow_step",
    events={"item.created": "item"},
)


def add_one(context: Any) -> Mapping[str, object]:
    return {"x": int(context.inputs["x"]) + 1}


def five_steps() -> Workflows:
    workflows = Workflows()

    @workflows.define(start=OnEvent("item.created"))
    async def five(w: Any, start: Mapping[str, Any]) -> int:
        x = int(start["x"])
        for n in range(STEPS):
            x = int((await w.run(f"step-{n + 1}", "add_one", input={"x": x}))["x"])
        return x

    return workflows


def workflow_job(folder: Path, runs: int, *, batch: int) -> peer_jobs.Measured:
    engine = peer_jobs.durable_engine(folder / "flowrunner.db")
    metadata = sa.MetaData()
    item = sa.Table(
        "item",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(32)),
    )
    tables.for_binding(metadata, BINDING)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(BINDING, engine, commands={"add_one": add_one}, workflows=five_steps())
    serving = worker.Worker(runner, batch=batch)
    insert = sa.insert(item)

    def start(ids: range) -> None:
        for first in range(ids.start, ids.stop, batch):
            with dialects.begin(engine) as conn:
                for n in range(first, min(first + batch, ids.stop)):
                    conn.execute(insert, {"id": n, "status": "new"})
                    runner.emit(conn, "item.created", {"item": n, "x": n})

    # Before the clock, as every variant of bench/peers.py does (DBOS here too).
    start(range(runs + 1, runs + 1 + peer_jobs.WARMUP))
    peer_jobs.drive(serving)
    peer_jobs.settle()
    began = time.perf_counter()
    start(range(1, runs + 1))
    started = time.perf_counter()
    peer_jobs.drive(serving)
    ended = time.perf_counter()
    with engine.connect() as conn:
        done = conn.execute(
            sa.select(sa.func.count()).where(engine_tables.runs.c.status == "done")
        ).scalar_one()
        journal, level = peer_jobs.settings_of(conn.connection.dbapi_connection)  # type: ignore[arg-type]
    engine.dispose()
    if done != runs + peer_jobs.WARMUP:
        raise RuntimeError(f"flowrunner: only {done - peer_jobs.WARMUP} of {runs} workflows ended")
    return peer_jobs.Measured(runs, ended - began, journal, level, start_seconds=started - began)


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    job: Callable[[Path, int], peer_jobs.Measured]
    peer: bool = False


VARIANTS = [
    Variant("workflow", "flowrunner workflow, 1 run/tx", partial(workflow_job, batch=1)),
    Variant("workflow-50", "flowrunner workflow, 50 runs/tx", partial(workflow_job, batch=50)),
    Variant("dbos", "DBOS Transact (WAL, FULL)", partial(peer_jobs.dbos_job, durable=True), True),
    Variant(
        "dbos-shipped", "DBOS Transact as shipped", partial(peer_jobs.dbos_job, durable=False), True
    ),
]
BY_KEY = {variant.key: variant for variant in VARIANTS}


def measure_once(variant: Variant, runs: int) -> peer_jobs.Measured:
    """One measurement of ``variant``, in a fresh child process."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "measured.json"
        done = subprocess.run(
            [sys.executable, __file__, "--child", variant.key, "--runs", str(runs)],
            env={**os.environ, "PEERS_BENCH_OUT": str(out)},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{variant.title} failed:\n{done.stderr[-3000:]}")
        return peer_jobs.Measured(**json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="workflows per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--quick", action="store_true", help="a small check: 30 runs, once")
    parser.add_argument("--child", choices=list(BY_KEY), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as folder:
            measured = BY_KEY[args.child].job(Path(folder), args.runs)
        Path(os.environ["PEERS_BENCH_OUT"]).write_text(json.dumps(asdict(measured)))
        return
    if args.quick:
        args.runs, args.repeat = 30, 1
    chosen = [v for v in VARIANTS if not v.peer or peers.DBOS.installed]
    if not peers.DBOS.installed:
        needed = peers.DBOS.requirement
        print(f"DBOS Transact is not installed, so not measured: pip install '{needed}'")
    print(
        f"{args.runs} workflows of {STEPS} durable steps per measurement, {args.repeat} "
        f"interleaved repetitions, each in a fresh process; {os.cpu_count()} cores, "
        f"load average {peers.load()}"
    )
    results: dict[str, list[peer_jobs.Measured]] = {v.key: [] for v in chosen}
    for repetition in range(1, args.repeat + 1):
        line = []
        for variant in chosen:
            measured = measure_once(variant, args.runs)
            results[variant.key].append(measured)
            line.append(f"{variant.key} {measured.steps_per_second:.0f}")
        print(f"repetition {repetition}: " + ", ".join(line) + " steps/s")
    print()
    print(f"{'variant':36} {'steps/s':>8} {'(min-max)':>13} {'workflows/s':>12}  journal, sync")
    for key, measured in results.items():
        rates = [m.steps_per_second for m in measured]
        print(
            f"{BY_KEY[key].title:36} {statistics.median(rates):8.0f} "
            f"{f'({min(rates):.0f}-{max(rates):.0f})':>13} "
            f"{statistics.median(rates) / STEPS:12.0f}  "
            f"{measured[0].journal_mode}, {measured[0].synchronous}"
        )
    peers_measured = [key for key in results if BY_KEY[key].peer]
    if peers_measured:
        print("\nflowrunner's steps/s over DBOS's (median of the repetitions' ratios):")
        for ours in (key for key in results if not BY_KEY[key].peer):
            cells = []
            for peer in peers_measured:
                ratios = [
                    mine.steps_per_second / theirs.steps_per_second
                    for mine, theirs in zip(results[ours], results[peer], strict=True)
                ]
                cells.append(f"{BY_KEY[peer].title}: {statistics.median(ratios):.2f}x")
            print(f"  {BY_KEY[ours].title:34} " + "; ".join(cells))
    print(f"\nload average after: {peers.load()}")


if __name__ == "__main__":
    main()
