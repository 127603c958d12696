"""A flow that starts on a schedule, over many records, served by two worker processes.

    python bench/scheduled_flows.py [--records 100000] [--workers 2] [--postgres URL]
                                    [--stepped] [--json]

On PostgreSQL, in a schema of its own (dropped after): ``--records`` items, nine in ten
``open``, and one flow that starts on a schedule (``M H * * * UTC``, the next minute)
with the condition ``status = open`` and one step that waits thirty days. ``--workers``
worker processes serve the runner; their clock (and this script's) is moved on so the
slot falls due a few seconds after they start, rather than a minute of real waiting.

At the slot the schedule's run starts one run per open item, a page of records per
transaction (``flows.scheduled.BATCH``), the workers taking the pages (and the new
runs' first steps) as they come. The script waits until the slot is done (with
``--stepped``, until every started run has taken its first step too), then checks from
the runs table that each open item was started exactly once by the slot and no closed
one at all, and prints:

- **started**: the slot to the last run started (the schedule's whole slot), runs/s;
- **stepped** (``--stepped``): the slot to the last started run's first step, runs/s;
- **baseline**: a bare ``INSERT … SELECT`` of the same rows (record, start key, the
  snapshot's JSON, the time) into a plain table: what the starts cost at the least.

``--json`` prints the same as one JSON document (the tests run a small one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowrunner import FlowBinding, tables
from flowrunner.engine import worker
from flowrunner.runner import FlowRunner, flow_runner
from flowrunner.store import engine_tables, migrate

BINDING = FlowBinding(
    resource="sched_item",
    flows_table="sched_flow",
    steps_table="sched_flow_step",
    set_columns=["status"],
)
FLOW = "Monthly check"
LEAD = timedelta(seconds=4)  # how soon after the workers start the slot falls due
STALL = 600.0  # seconds without progress before the script gives up


def metadata() -> tuple[sa.MetaData, sa.Table]:
    found = sa.MetaData()
    table = sa.Table(
        BINDING.resource,
        found,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(16), nullable=False),
    )
    tables.for_binding(found, BINDING)
    return found, table


def runner_on(engine: sa.Engine, offset: timedelta) -> FlowRunner:
    """The runner, on a clock ``offset`` ahead of the real one."""
    return flow_runner(BINDING, engine, clock=lambda: datetime.now(UTC) + offset)


def engine_for(url: str, schema: str) -> sa.Engine:
    return sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})


# -- a worker process ------------------------------------------------------------------


def serve(url: str, schema: str, offset: timedelta, seconds: float, stepped: bool) -> None:
    """Serve the runner until the slot is done (and with ``stepped`` nothing is due), or
    ``seconds`` pass."""
    engine = engine_for(url, schema)
    runner = runner_on(engine, offset)
    serving = worker.Worker(runner, batch=50, claim=50)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if serving.run_due() == 0 or not stepped:
            if _slot_done(engine) and (not stepped or _due_now(engine, runner.clock()) == 0):
                break
            time.sleep(0.05)
    print(json.dumps({"advanced": serving.stats.advanced, "refused": serving.stats.refused}))


def _slot_done(engine: sa.Engine) -> bool:
    log = engine_tables.step_log
    with engine.connect() as conn:
        found = conn.execute(sa.select(sa.func.count()).where(log.c.what == "schedule_slot"))
        return int(found.scalar_one()) > 0


def _due_now(engine: sa.Engine, now: datetime) -> int:
    due = engine_tables.due
    with engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(due).where(due.c.due_at <= now)
        return int(conn.execute(query).scalar_one())


# -- the bench -------------------------------------------------------------------------


def fill(engine: sa.Engine, table: sa.Table, records: int) -> int:
    """``records`` items, nine in ten open; how many are open."""
    rows = [{"id": n, "status": "closed" if n % 10 == 0 else "open"} for n in range(1, records + 1)]
    with engine.begin() as conn:
        for start in range(0, len(rows), 20_000):
            conn.execute(sa.insert(table), rows[start : start + 20_000])
    return sum(1 for row in rows if row["status"] == "open")


def measure(url: str, records: int, workers: int, stepped: bool) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    engine = engine_for(url, schema)
    try:
        return _measure(url, schema, engine, records, workers, stepped)
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def _measure(
    url: str, schema: str, engine: sa.Engine, records: int, workers: int, stepped: bool
) -> dict[str, Any]:
    found, table = metadata()
    found.create_all(engine)
    migrate.upgrade(engine)
    matching = fill(engine, table, records)
    # The slot: the next whole minute at least a little ahead; every clock here is moved
    # on so that it falls due ``LEAD`` after the workers start.
    real = datetime.now(UTC)
    slot = (real + timedelta(minutes=1)).replace(second=0, microsecond=0)
    offset = slot - real - LEAD - timedelta(seconds=2)
    runner = runner_on(engine, offset)
    with engine.begin() as conn:
        flow_id = runner.save_flow(
            conn,
            {
                "name": FLOW,
                "start": "schedule",
                "schedule": f"{slot.minute} {slot.hour} * * * UTC",
                "condition": "status = open",
            },
        )
        runner.save_step(
            conn, {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "30 days"}
        )
    env = {**os.environ, "BENCH_SERVE": "1"}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                url,
                schema,
                str(offset.total_seconds()),
                str(STALL),
                "stepped" if stepped else "started",
            ],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    served = [json.loads((p.communicate()[0] or "{}").strip().splitlines()[-1]) for p in processes]
    if any(p.returncode for p in processes):
        raise SystemExit(f"a worker failed: {[p.returncode for p in processes]}")
    runs = engine_tables.runs
    with engine.connect() as conn:
        started = conn.execute(
            sa.select(
                sa.func.count(),
                sa.func.count(sa.distinct(runs.c.record_id)),
                sa.func.max(runs.c.started_at),
                sa.func.max(runs.c.updated_at),
            ).where(runs.c.start_key.like("schedule:%"))
        ).one()
        closed = conn.execute(
            sa.select(sa.func.count())
            .select_from(runs.join(table, runs.c.record_id == sa.cast(table.c.id, sa.Text)))
            .where(runs.c.start_key.like("schedule:%"), table.c.status == "closed")
        ).scalar_one()
        snapshot = conn.execute(
            sa.select(runs.c.snapshot).where(runs.c.start_key.like("schedule:%")).limit(1)
        ).scalar_one()
    count, distinct, last_started, last_stepped = started
    started_s = (last_started - slot).total_seconds()
    stepped_s = (last_stepped - slot).total_seconds() if stepped else None
    baseline_s = baseline(engine, json.dumps(snapshot))
    return {
        "records": records,
        "matching": matching,
        "workers": workers,
        "started": int(count),
        "records_started": int(distinct),
        "started_twice": int(count) - int(distinct),
        "closed_started": int(closed),
        "started_s": round(started_s, 2),
        "stepped_s": None if stepped_s is None else round(stepped_s, 2),
        "baseline_s": round(baseline_s, 3),
        "refused": sum(int(s.get("refused", 0)) for s in served),
        "advanced_per_worker": [int(s.get("advanced", 0)) for s in served],
    }


def baseline(engine: sa.Engine, snapshot: str) -> float:
    """A bare ``INSERT … SELECT`` of the same rows into a plain table, in seconds."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE bench_baseline (id bigserial PRIMARY KEY, record_id text, "
                "start_key text UNIQUE, snapshot jsonb, started_at timestamptz)"
            )
        )
    began = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO bench_baseline (record_id, start_key, snapshot, started_at) "
                "SELECT CAST(id AS text), 'schedule:' || CAST(id AS text), "
                "CAST(:snapshot AS jsonb), now() FROM sched_item WHERE status = 'open'"
            ),
            {"snapshot": snapshot},
        )
    return time.perf_counter() - began


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        url, schema, offset, seconds, until = sys.argv[2:7]
        serve(url, schema, timedelta(seconds=float(offset)), float(seconds), until == "stepped")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "FLOWRUNNER_TEST_POSTGRES_URL", "postgresql+psycopg://root@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument(
        "--stepped",
        action="store_true",
        help="Also wait until every started run has taken its first step, and time that.",
    )
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args()
    found = measure(args.postgres, args.records, args.workers, args.stepped)
    if args.json:
        print(json.dumps(found))
        return
    matching = found["matching"]
    print(
        f"{found['records']:,} records, {matching:,} matching, {found['workers']} workers: "
        f"{found['started']:,} runs started for {found['records_started']:,} records "
        f"({found['started_twice']} twice, {found['closed_started']} not matching)"
    )
    rows = [("scheduled flow: all started", found["started_s"])]
    if found["stepped_s"] is not None:
        rows.append(("scheduled flow: all stepped once", found["stepped_s"]))
    rows.append(("baseline INSERT ... SELECT", found["baseline_s"]))
    for name, seconds in rows:
        rate = matching / seconds if seconds > 0 else float("inf")
        print(f"{name:34} {seconds:9.2f} s  {rate:12,.0f} runs/s")
    print(
        f"late writes refused: {found['refused']}; steps per worker: {found['advanced_per_worker']}"
    )


if __name__ == "__main__":
    main()
