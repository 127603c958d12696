"""The CPU time of ``bench/peers.py``'s flowrunner job with the disk taken out, per tree.

    python bench/store_cpu.py [--runs 1000] [--repeat 5] [--profile] [TREE ...]

Each measurement runs the command flow of ``bench/peer_jobs.py`` (five steps, one run
per transaction) in a fresh process on a fresh SQLite file in WAL with
``synchronous=OFF``, so no fsync is waited for and what is left is the process's own
work: the ``process_time`` of starting the runs and of driving them, per run, and of
the part spent inside the store's calls (``timed_store``: what the rest of flowrunner
calls of ``flowrunner.store``, each outermost call timed once; the two clock readings
around each, about a microsecond, are in that figure too, alike for every tree). Given
several TREEs (checkouts of this repository, e.g. one before a change and one after),
their processes take turns, so a busy machine slows all of them alike, and each
tree's median of ``--repeat`` is printed side by side. ``--profile`` prints, per tree,
the number of calls of the store's hot functions over one profiled job.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import inspect
import json
import pstats
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# The functions whose calls ``--profile`` counts: by file name's end and function name.
COUNTED = [
    ("store/runs.py", "append_logs"),
    ("store/runs.py", "save_run"),
    ("store/runs.py", "load_run"),
    ("store/ledger.py", "record_completed"),
    ("store/prepared.py", "execute"),
    ("store/prepared.py", "execute_many"),
    ("store/prepared.py", "_converted"),
    ("store/dialects.py", "driver_execute"),
    ("store/dialects.py", "_control"),
    ("flowrunner/sanitize.py", "sanitize_value"),
    ("flowrunner/sanitize.py", "sanitize_text"),
    ("flowrunner/sqltypes.py", "process_bind_param"),
    ("json/encoder.py", "encode"),
    ("sqlalchemy/event/attr.py", "__iter__"),
]


class StoreClock:
    """The CPU time spent inside the store's calls, the outermost of nested ones only."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.depth = 0

    def timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return function(*args, **kwargs)
            self.depth = 1
            began = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - began
                self.depth = 0

        return timed_call


def timed_store(clock: StoreClock) -> None:
    """Time every call the rest of flowrunner makes into the store: the public functions
    of the modules it calls through (``ops.save_step``, ``records.load_record``, ...)
    and savepoints. Of a context manager (``dialects.begin``) only the making is timed:
    its block is the caller's own work."""
    from flowrunner.store import dialects, flow_rows, operations, records, wakeups

    for module in (operations, dialects, records, flow_rows, wakeups):
        for name, value in vars(module).items():
            if (
                inspect.isfunction(value)
                and not name.startswith("_")  # listeners are known by identity
                and not hasattr(value, "__wrapped__")
                and value.__module__.startswith("flowrunner.store")
            ):
                setattr(module, name, clock.timed(value))
    for name in ("__init__", "release", "rollback"):
        setattr(dialects.Savepoint, name, clock.timed(getattr(dialects.Savepoint, name)))


def job(tree: Path, runs: int, profiled: bool) -> dict[str, Any]:
    """One job on ``tree``'s flowrunner: CPU seconds of the start and the drive."""
    sys.path.insert(0, str(tree / "bench"))
    import peer_jobs
    import sqlalchemy as sa

    import flowrunner
    from flowrunner.engine import worker

    assert Path(peer_jobs.__file__).resolve().parent == (tree / "bench").resolve()
    assert Path(flowrunner.__file__).resolve().parent == (tree / "flowrunner").resolve()
    with tempfile.TemporaryDirectory() as folder:
        engine = peer_jobs.durable_engine(Path(folder) / "cpu.db")

        @sa.event.listens_for(engine, "connect")
        def _no_fsync(dbapi_connection: sqlite3.Connection, _record: object) -> None:
            dbapi_connection.execute("PRAGMA synchronous = OFF")

        runner, item = peer_jobs.mount(engine, "commands")
        clock = StoreClock()
        if not profiled:
            timed_store(clock)
        serving = worker.Worker(runner, batch=1)
        profile = cProfile.Profile() if profiled else None
        if profile:
            profile.enable()
        began = time.process_time()
        peer_jobs.start_runs(runner, item, range(1, runs + 1))
        started = time.process_time()
        peer_jobs.drive(serving)
        ended = time.process_time()
        if profile:
            profile.disable()
        engine.dispose()
    measured: dict[str, Any] = {
        "start": started - began,
        "drive": ended - started,
        "store": clock.seconds,
    }
    if profile:
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        measured["calls"] = {
            f"{end}:{name}": sum(
                calls
                for (file, _line, function), (_cc, calls, *_rest) in stats.items()
                if file.endswith(end) and function == name
            )
            for end, name in COUNTED
        }
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("trees", nargs="*", type=Path, default=[HERE.parent])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(job(args.child, args.runs, args.profile)))
        return
    seen: dict[Path, list[dict[str, Any]]] = {tree: [] for tree in args.trees}
    for _ in range(args.repeat):
        for tree in args.trees:
            seen[tree].append(_child(tree, args.runs, profiled=False))
    for tree, measured in seen.items():
        start = statistics.median(m["start"] for m in measured) / args.runs * 1e3
        drive = statistics.median(m["drive"] for m in measured) / args.runs * 1e3
        total = statistics.median(m["start"] + m["drive"] for m in measured) / args.runs * 1e3
        store = statistics.median(m["store"] for m in measured) / args.runs * 1e3
        print(
            f"{tree}: per run {total:.3f} ms CPU (start {start:.3f}, drive {drive:.3f}; "
            f"in the store's calls {store:.3f}), median of {args.repeat}"
        )
    if args.profile:
        counts = {tree: _child(tree, args.runs, profiled=True)["calls"] for tree in args.trees}
        print(f"calls over {args.runs} runs, per tree: " + " | ".join(map(str, args.trees)))
        for end, name in COUNTED:
            key = f"{end}:{name}"
            print(f"  {key:45} " + "  ".join(f"{counts[t][key]:>8}" for t in args.trees))


def _child(tree: Path, runs: int, *, profiled: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(tree), "--runs", str(runs)]
    if profiled:
        command.append("--profile")
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=tree)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    main()
