"""A flow's versions at size: ``compare`` and ``move_runs`` on a flow of 50 steps with
10,000 runs waiting on its first version.

    python bench/versions.py [--steps 50] [--runs 10000] [--database URL]

The flow waits for a reply at its first step, then runs 49 built-in steps. N tickets
start runs on version 1 (each inserted and started as an application does, then
advanced by a worker, 50 runs per transaction, to where they wait). Version 2 changes
ten steps' values and adds one; then the script times, each side by side with what
it rests on:

- ``compare(flow, 1, 2)`` against building the two snapshots it compares;
- ``move_runs`` as a dry run and for real, against ``versions(flow)``, which reads the
  same open runs (and so is the floor of anything that looks at each of them).

SQLite in a temporary file by default; ``--database postgresql+psycopg://...`` runs it
on a PostgreSQL database (its own schema, dropped after).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import peer_jobs  # noqa: F401 - puts the repository on the path
import sqlalchemy as sa

from flowrunner import FlowBinding, NotifyRule, flow_runner, tables
from flowrunner.engine import worker
from flowrunner.flows.snapshot import FlowSnapshot
from flowrunner.store import dialects, migrate


def timed(what: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """The best of ``repeat`` runs of ``what`` in seconds, and what it gave last."""
    best, result = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        result = what()
        best = min(best, time.perf_counter() - began)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--database", default=None, help="a PostgreSQL URL (default: SQLite)")
    args = parser.parse_args()

    schema = None
    if args.database:
        admin = sa.create_engine(args.database)
        schema = f"bench_{uuid.uuid4().hex[:8]}"
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        engine = sa.create_engine(
            args.database, connect_args={"options": f"-csearch_path={schema}"}
        )
    else:
        folder = Path(tempfile.mkdtemp())
        engine = sa.create_engine(f"sqlite:///{folder / 'versions.db'}")
    try:
        run(engine, args.steps, args.runs)
    finally:
        engine.dispose()
        if schema is not None:
            with admin.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


def run(engine: sa.Engine, steps: int, runs: int) -> None:
    metadata = sa.MetaData()
    ticket = sa.Table(
        "ticket",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("owner", sa.String(64)),
        sa.Column("status", sa.String(32)),
    )
    binding = FlowBinding(
        resource="ticket",
        flows_table="ticket_flow",
        steps_table="ticket_flow_step",
        events={"ticket.replied": "ticket"},
        set_columns=["status"],
        notify=[NotifyRule(audience="owner", to="owner")],
        publish="explicit",
    )
    tables.for_binding(metadata, binding)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(binding, engine)
    with engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Long", "start": "created"})
        runner.save_step(
            conn,
            {
                "flow_id": flow,
                "position": 1,
                "kind": "waitFor",
                "title": "Reply",
                "event": "ticket.replied",
                "duration": "30 days",
            },
        )
        for n in range(2, steps + 1):
            runner.save_step(
                conn,
                {
                    "flow_id": flow,
                    "position": n,
                    "kind": "set",
                    "title": f"Step {n}",
                    "field": "status",
                    "value": f"s{n}",
                },
            )
        runner.publish(conn, "Long", by="bench")

    began = time.perf_counter()
    insert = sa.insert(ticket)
    for first in range(1, runs + 1, 500):
        with dialects.begin(engine) as conn:
            for n in range(first, min(first + 500, runs + 1)):
                record = {"id": n, "owner": f"u{n}", "status": "new"}
                conn.execute(insert, record)
                runner.record_created(conn, record)
    serving = worker.Worker(runner, batch=50)
    while serving.run_due(limit=500):
        pass
    print(
        f"{runs} runs of a {steps}-step flow started and waiting in "
        f"{time.perf_counter() - began:.1f} s ({engine.dialect.name})"
    )

    with engine.begin() as conn:
        stored = runner.snapshot(conn, flow)
        for step in stored.steps[1:11]:
            row = {
                "id": step.id,
                "flow_id": flow,
                "position": step.position,
                "kind": step.kind,
                "title": step.title,
                **step.columns,
                "value": "changed",
            }
            runner.save_step(conn, row)
        runner.save_step(
            conn,
            {
                "flow_id": flow,
                "position": steps + 1,
                "kind": "set",
                "title": "One more",
                "field": "status",
                "value": "done",
            },
        )
        runner.publish(conn, "Long", by="bench", note="ten steps changed, one added")

    versions = runner.versions("Long")
    one, two = (FlowSnapshot.from_dict(v.snapshot) for v in versions)
    base, _ = timed(
        lambda: (FlowSnapshot.from_dict(one.to_dict()), FlowSnapshot.from_dict(two.to_dict())),
        repeat=20,
    )
    took, comparison = timed(lambda: runner.compare("Long", 1, 2), repeat=20)
    print(
        f"compare 1 → 2: {len(comparison.changes)} changes in {took * 1000:.2f} ms "
        f"(the two snapshots alone: {base * 1000:.2f} ms; {took / base:.1f}x)"
    )

    listed, _ = timed(lambda: runner.versions("Long"))
    dry, outcomes = timed(lambda: runner.move_runs("Long", from_version=1, by="bench"))
    moved_ok = sum(o.moved for o in outcomes)
    print(f"versions(): {listed * 1000:.0f} ms reading {runs} open runs")
    print(
        f"move_runs dry run: {moved_ok} of {len(outcomes)} would move in {dry:.2f} s "
        f"({dry / listed:.1f}x versions(), {dry / max(1, len(outcomes)) * 1e6:.0f} µs a run)"
    )
    real, outcomes = timed(
        lambda: runner.move_runs("Long", from_version=1, by="bench", dry_run=False), repeat=1
    )
    moved = sum(o.moved for o in outcomes)
    print(f"move_runs: {moved} moved in {real:.2f} s ({real / max(1, moved) * 1e6:.0f} µs a run)")
    assert [v.waiting for v in runner.versions("Long")] == [0, runs]


if __name__ == "__main__":
    main()
