"""Wake-up latency: from an event's commit to the commit of the step it wakes, with two
idle workers on one PostgreSQL — woken by ``LISTEN``/``NOTIFY``, next to polling only.

    python bench/wakeup.py [--events 50] [--poll 1.0] [--postgres URL]

A fresh schema holds records of ``bench/engine.py``'s item table whose runs wait for an
event (``waitFor item.touched``, then a ``set``). Two worker processes serve it, each a
``Worker.serve`` loop as ``flowrunner worker`` runs it, with the default poll interval
(1 s). Once both are idle the script emits one event at a time in its own transaction,
about a record whose run waits, and takes the time when the commit returns; each worker
takes the time when a step's commit returns (its commit-boundary hook). The latency is
the difference (both clocks are this machine's). Between events the script rests a
random 50 ms to the poll interval and 50 ms, so events fall anywhere in a polling
worker's interval, and both workers are idle again.

The two modes take turns in rounds of ``--events / 2`` events each (wake-ups, polling,
wake-ups, polling), each round with two fresh worker processes; the script prints each
mode's median, 95th percentile and worst latency over all its events.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import BINDING, app_tables  # bench/engine.py
from scaling import schema  # bench/scaling.py: a scratch schema, dropped afterwards

from flowrunner import flow_runner, tables
from flowrunner.engine import worker
from flowrunner.flows import files
from flowrunner.runner import FlowRunner, utc_now
from flowrunner.store import engine_tables, migrate

EVENTS = BINDING.model_copy(update={"events": {"item.touched": "id"}})
FLOW = """
- name: Wait for a touch
  start: created
  steps:
    - {position: 1, kind: waitFor, title: Touched, event: item.touched, duration: 1 day}
    - {position: 2, kind: set, title: Go, field: status, value: working}
"""


def runner(url: str) -> FlowRunner:
    return flow_runner(EVENTS, sa.create_engine(url), clock=utc_now)


def waiting_runs(url: str, count: int) -> FlowRunner:
    """``count`` records whose runs wait for ``item.touched``; the runner that started them."""
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    item = app_tables(metadata)
    tables.for_binding(metadata, EVENTS)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    engine.dispose()
    started = runner(url)
    engine = started.engine
    with engine.begin() as conn:
        files.import_flows(
            conn, EVENTS, started.tables, files.loads_yaml(FLOW), columns=started.columns
        )
        rows = [
            {"id": n, "status": "new", "priority": "low", "owner": f"u{n}"}
            for n in range(1, count + 1)
        ]
        conn.execute(sa.insert(item), rows)
        for row in rows:
            started.record_created(conn, row)
    drain = worker.Worker(started)
    while drain.run_due(limit=100):
        pass
    with engine.connect() as conn:
        runs = engine_tables.runs
        waiting = conn.execute(
            sa.select(sa.func.count()).where(runs.c.status == "waiting")
        ).scalar_one()
    assert waiting == count, f"{waiting} of {count} runs wait"
    return started


def serve(url: str, listen: bool, poll: float) -> None:
    """A child: serve until stdin closes; print ``ready`` once idle, then the time each
    step's commit returned."""
    say = threading.Lock()
    idle = threading.Event()

    def passed(point: str) -> None:
        if point == "committed":
            at = time.time()
            with say:
                print(f"committed {at:.6f}", flush=True)
        elif point == "claimed" and not idle.is_set():
            idle.set()
            with say:
                print("ready", flush=True)

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    serving = worker.Worker(runner(url), crash_at=passed)
    serving.serve(stop, poll=poll, listen=listen)


def measure(url: str, first: int, events: int, listen: bool, poll: float) -> list[float]:
    """Latencies (seconds) of ``events`` events about records ``first``…, two workers."""
    emitter = runner(url)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    mode = "--listen" if listen else "--no-listen"
    command = [sys.executable, __file__, "--serve", url, mode, "--poll", str(poll)]
    children = [
        subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    commits: queue.Queue[float] = queue.Queue()

    def read(child: subprocess.Popen[str], ready: threading.Event) -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith("ready"):
                ready.set()
            elif line.startswith("committed"):
                commits.put(float(line.split()[1]))

    readies = []
    for child in children:
        ready = threading.Event()
        threading.Thread(target=read, args=(child, ready), daemon=True).start()
        readies.append(ready)
    latencies = []
    try:
        for ready in readies:
            if not ready.wait(60):
                raise SystemExit("a worker did not start")
        for record in range(first, first + events):
            # Anywhere in a polling worker's interval, which began at its last look.
            time.sleep(random.uniform(0.05, 0.05 + poll))
            with emitter.engine.begin() as conn:
                emitter.emit(conn, "item.touched", {"id": record})
            committed = time.time()
            stepped = commits.get(timeout=30)
            latencies.append(stepped - committed)
    finally:
        for child in children:
            assert child.stdin is not None
            child.stdin.close()
        for child in children:
            child.wait(timeout=30)
        emitter.engine.dispose()
    if not commits.empty():
        raise SystemExit("a step committed that no event woke")
    return latencies


def summary(name: str, latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return (
        f"{name:28s} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   "
        f"best {ms[0]:6.1f} ms   worst {ms[-1]:7.1f} ms   ({len(ms)} events)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50, help="events per mode")
    parser.add_argument("--rounds", type=int, default=2, help="turns per mode")
    parser.add_argument("--poll", type=float, default=1.0, help="the workers' poll interval")
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--listen", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.listen, args.poll)
        return
    if not args.postgres:
        raise SystemExit("name a PostgreSQL server: --postgres URL or FLOWRUNNER_TEST_POSTGRES_URL")
    per_round = max(1, args.events // args.rounds)
    results: dict[bool, list[float]] = {True: [], False: []}
    with schema(args.postgres) as url:
        waiting_runs(url, 2 * per_round * args.rounds).engine.dispose()
        first = 1
        for round_ in range(args.rounds):
            for listen in (True, False):
                got = measure(url, first, per_round, listen, args.poll)
                first += per_round
                results[listen] += got
                print(
                    f"round {round_ + 1}, {'wake-ups' if listen else 'polling'}: median "
                    f"{statistics.median(got) * 1000:.1f} ms",
                    flush=True,
                )
    started = datetime.now(UTC).strftime("%Y-%m-%d")
    print(f"\n== event commit -> woken step's commit, two idle workers ({started}) ==")
    print(summary("LISTEN/NOTIFY wake-ups", results[True]))
    print(summary(f"polling only (every {args.poll:g} s)", results[False]))


if __name__ == "__main__":
    main()
