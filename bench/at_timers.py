"""Timers on a record's date (``at``) at scale: a million records with dates, a thousand due.

    python bench/at_timers.py [--records 1000000] [--due 1000] [--repeat 5] [--postgres URL]

Two databases side by side, each with ``--records`` records whose run waits and
``--due`` of them due now:

- **timers**: tickets with a ``warn_at`` each and the SLA timer
  ``At(column="warn_at", command="warn", when="status = open")``; every ticket's timer
  armed, ``--due`` of them at an instant already past;
- **runs**: items with an ordinary run each of a one-step flow that runs the same
  ``warn`` command; ``--due`` of them due now, the rest due next month.

The rows are written in bulk with the shape the engine writes (a run row and its due
row per record): arming a million one by one would only measure the inserts. The script
checks the shape by arming the due tickets again through ``runner.arm_timers``, which
must arm nothing new.

It then measures claiming the ``--due`` due runs with ``claim_due`` while the rest wait,
on both, and the same claims with only a thousand more records than are due (the
due-work index makes the cost follow what is due, not what waits): the four claims take
turns, ``--repeat`` rounds, each claim undone for the next, medians printed. Then one
worker drains the due runs of each million — each timer fired (the record read, ``when``
evaluated, the command run, the run saved) or each run's step advanced — in runs per
second. It prints the figures side by side, with the ratios timers / runs and million /
thousand.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowrunner import At, FlowBinding, Kind, tables
from flowrunner.engine import commands, worker
from flowrunner.flows import files, starts
from flowrunner.runner import FlowRunner, flow_runner
from flowrunner.store import engine_tables, migrate
from flowrunner.store import operations as ops
from flowrunner.timers import rules

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CHUNK = 20_000

TIMERS = FlowBinding(
    resource="sla_ticket",
    flows_table="sla_flow",
    steps_table="sla_flow_step",
    at=[At(column="warn_at", command="warn", when="status = open")],
)
RUNS = FlowBinding(
    resource="sla_item",
    flows_table="item_flow",
    steps_table="item_flow_step",
    kinds={"warning": Kind(command="warn")},
)
FLOW = """
- name: Warn
  start: manual
  steps:
    - {position: 1, kind: warning, title: Warn}
"""


def warner(table: sa.Table) -> commands.Command:
    """The command both sides run: one write to the record, as a warning would."""

    def warn(ctx: commands.CommandContext) -> None:
        ctx.conn.execute(
            sa.update(table).where(table.c.id == ctx.record["id"]).values(status="warned")
        )

    return warn


@contextmanager
def database(kind: str, pg_url: str | None) -> Iterator[sa.Engine]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            engine = sa.create_engine(f"sqlite:///{folder}/bench.db")
            try:
                yield engine
            finally:
                engine.dispose()
        return
    assert pg_url is not None
    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    engine = sa.create_engine(pg_url, connect_args={"options": f"-csearch_path={name}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def mount(engine: sa.Engine, bound: FlowBinding) -> tuple[FlowRunner, sa.Table]:
    metadata = sa.MetaData()
    table = sa.Table(
        bound.resource,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(32)),
        sa.Column("warn_at", sa.DateTime(timezone=True)),
    )
    tables.for_binding(metadata, bound)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(bound, engine, commands={"warn": warner(table)}, clock=lambda: NOW)
    return runner, table


def instant(n: int, due: int) -> datetime:
    """Record ``n``'s date: the first ``due`` records' has passed, the others' is to come."""
    if n <= due:
        return NOW - timedelta(minutes=n)
    return NOW + timedelta(days=30, seconds=n)


def fill(
    engine: sa.Engine, table: sa.Table, rows: Callable[[int], dict[str, Any]], total: int
) -> None:
    with engine.begin() as conn:
        for start in range(1, total + 1, CHUNK):
            conn.execute(
                sa.insert(table), [rows(n) for n in range(start, min(total, start + CHUNK - 1) + 1)]
            )


def fill_timers(engine: sa.Engine, records: int, due: int) -> FlowRunner:
    runner, table = mount(engine, TIMERS)
    timer = TIMERS.at[0]
    fill(engine, table, lambda n: {"id": n, "status": "open", "warn_at": instant(n, due)}, records)

    def run(n: int) -> dict[str, Any]:
        arming = rules.Arming(timer, instant(n, due))
        return {
            "id": n,
            "tenant": None,
            "resource": TIMERS.resource,
            "record_id": str(n),
            "flow_id": arming.flow_id,
            "flow_name": arming.flow_name,
            "start_key": arming.start_key(str(n), None),
            "snapshot": arming.snapshot(),
            "digest": rules.PROGRAM,
            "status": "waiting",
            "state": {},
            "version": 1,
            "started_at": NOW,
            "updated_at": NOW,
            "started_by": runner.run_as,
            "event_floor": 0,
        }

    fill(engine, engine_tables.runs, run, records)
    fill(engine, engine_tables.due, lambda n: _due(n, instant(n, due), TIMERS.resource), records)
    analyze(engine)
    # The bulk rows are the ones arming writes: arming the due tickets again arms nothing.
    assert runner.arm_timers(where=f"id <= {due}") == 0
    return runner


def fill_runs(engine: sa.Engine, records: int, due: int) -> FlowRunner:
    runner, table = mount(engine, RUNS)
    with engine.begin() as conn:
        files.import_flows(
            conn, RUNS, runner.tables, files.loads_yaml(FLOW), columns=runner.columns
        )
    fill(engine, table, lambda n: {"id": n, "status": "open", "warn_at": None}, records)
    with engine.begin() as conn:
        snap = starts.stored_snapshot(conn, runner.tables, 1)
    stored = snap.to_dict()

    def run(n: int) -> dict[str, Any]:
        return {
            "id": n,
            "tenant": None,
            "resource": RUNS.resource,
            "record_id": str(n),
            "flow_id": "1",
            "flow_name": "Warn",
            "start_key": f"manual:{n}",
            "snapshot": stored,
            "digest": snap.digest,
            "status": "running",
            "state": {},
            "version": 1,
            "started_at": NOW,
            "updated_at": NOW,
            "started_by": "bench",
            "event_floor": 0,
        }

    fill(engine, engine_tables.runs, run, records)
    fill(engine, engine_tables.due, lambda n: _due(n, instant(n, due), RUNS.resource), records)
    analyze(engine)
    return runner


def _due(n: int, at: datetime, resource: str) -> dict[str, Any]:
    return {"run_id": n, "tenant": None, "due_at": at, "wakes": 0, "resource": resource}


def analyze(engine: sa.Engine) -> None:
    """Fresh statistics, and (PostgreSQL) the runs' id sequence past the ids written."""
    if engine.dialect.name == "postgresql":
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "SELECT setval(pg_get_serial_sequence('flowrunner_runs', 'id'), "
                    "(SELECT max(id) FROM flowrunner_runs))"
                )
            )
            for name in ("flowrunner_due", "flowrunner_runs"):
                conn.execute(sa.text(f"ANALYZE {name}"))
    else:
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))


def claim_once(runner: FlowRunner, due: int) -> float:
    """Seconds to claim the ``due`` due runs of the runner's resource (then undone)."""
    engine, resource = runner.engine, runner.binding.resource
    table = engine_tables.due
    with engine.connect() as conn:
        held = conn.execute(
            sa.select(table.c.run_id, table.c.due_at).where(table.c.due_at <= NOW)
        ).all()
    began = time.perf_counter()
    claims = ops.claim_due(
        engine, now=NOW, owner="bench", limit=due, ttl=60, resource=resource, fair=False
    )
    took = time.perf_counter() - began
    assert len(claims) == due, (len(claims), due)
    with engine.begin() as conn:  # the same runs due again for the next claim
        conn.execute(sa.delete(engine_tables.leases))
        for run_id, at in held:
            conn.execute(sa.update(table).where(table.c.run_id == run_id).values(due_at=at))
    return took


def drain_per_s(runner: FlowRunner, due: int) -> float:
    """Runs per second one worker takes the due runs through (each fired or advanced)."""
    serving = worker.Worker(runner, batch=1)
    began = time.perf_counter()
    done = 0
    while claimed := serving.run_due(limit=100):
        done += claimed
    elapsed = time.perf_counter() - began
    table = runner.tables.resource
    with runner.engine.connect() as conn:
        warned = conn.execute(
            sa.select(sa.func.count()).where(table.c.status == "warned")
        ).scalar_one()
    assert warned == due == done, f"{warned} of {due} warned, {done} claimed"
    return done / elapsed


def measure(kind: str, pg_url: str | None, records: int, due: int, repeat: int) -> None:
    small = min(records, due + 1000)
    print(f"\n== {kind}: {records:,} records with dates, {due:,} due ==", flush=True)
    cases = [(name, size) for size in (small, records) for name in ("timers", "runs")]
    fillers = {"timers": fill_timers, "runs": fill_runs}
    with ExitStack() as stack:
        runners = {}
        for name, size in cases:
            engine = stack.enter_context(database(kind, pg_url))
            began = time.perf_counter()
            runners[(name, size)] = fillers[name](engine, size, due)
            took = time.perf_counter() - began
            print(f"  {name:6} {size:>9,} records: filled in {took:6.1f} s", flush=True)
        # The four claims take turns, so the machine's noise falls on all of them alike.
        timings: dict[tuple[str, int], list[float]] = {case: [] for case in cases}
        for round_ in range(repeat):
            for case in cases if round_ % 2 == 0 else reversed(cases):
                timings[case].append(claim_once(runners[case], due))
        ms = {case: statistics.median(t) * 1000 for case, t in timings.items()}
        rates = {name: drain_per_s(runners[(name, records)], due) for name in ("timers", "runs")}
    print(f"claim {due:,} due (median of {repeat})  {'timers':>9} {'runs':>9} {'timers/runs':>12}")
    for size in (small, records):
        t, r = ms[("timers", size)], ms[("runs", size)]
        print(f"  with {size:>9,} records      {t:6.1f} ms {r:6.1f} ms {t / r:11.2f}x")
    t_ratio = ms[("timers", records)] / ms[("timers", small)]
    r_ratio = ms[("runs", records)] / ms[("runs", small)]
    print(f"  {records:,} / {small:,}     {t_ratio:8.2f}x {r_ratio:8.2f}x")
    t, r = rates["timers"], rates["runs"]
    print(f"fire / advance the {due:,} due  {t:6.0f}/s  {r:6.0f}/s {t / r:11.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--only", choices=["sqlite", "postgresql"], default=None)
    args = parser.parse_args()
    for kind in ["sqlite"] + (["postgresql"] if args.postgres else []):
        if args.only is None or args.only == kind:
            measure(kind, args.postgres, args.records, args.due, args.repeat)


if __name__ == "__main__":
    main()
