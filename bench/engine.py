"""Engine throughput and due-work claim cost, measured side by side in one process.

    python bench/engine.py [--runs 1000] [--waiting 1000000] [--repeat 3] [--postgres URL]

1. Step transitions per second of N runs of a 5-step flow (set, notify, branch, set,
   end), with one run per transaction and with a worker batching 50 runs per
   transaction (each run in its own savepoint) — next to the raw storage limit measured
   in the same process: the same number of plain SQLAlchemy transactions, each updating
   one record row and one run row and inserting one log row.
2. The cost of claiming 100 due runs when 1,000 runs wait, and when 1,000,000 wait,
   as a worker claims them — its resource's, oldest first or shared among tenants:
   the due-work index makes it O(due), not O(waiting).

PostgreSQL is measured when ``--postgres`` or FLOWRUNNER_TEST_POSTGRES_URL names a
server (a scratch schema is created and dropped).
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
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowrunner import FlowBinding, NotifyRule, flow_runner, tables
from flowrunner.engine import worker
from flowrunner.flows import files
from flowrunner.store import dialects, engine_tables, migrate
from flowrunner.store import operations as ops

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STEPS_PER_RUN = 4  # set, notify, branch, set; then the run ends

FLOW = """
- name: Five steps
  start: created
  steps:
    - {position: 1, kind: set, title: Start, field: status, value: working}
    - {position: 2, kind: notify, title: Tell, audience: owner, message: started}
    - {position: 3, kind: branch, title: "Working?", condition: status = working}
    - {position: 4, kind: set, title: Raise, field: priority, value: high}
"""


def app_tables(metadata: sa.MetaData) -> sa.Table:
    return sa.Table(
        "item",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(32)),
        sa.Column("priority", sa.String(32)),
        sa.Column("owner", sa.String(64)),
    )


BINDING = FlowBinding(
    resource="item",
    flows_table="item_flow",
    steps_table="item_flow_step",
    set_columns=["status", "priority"],
    notify=[NotifyRule(audience="owner", to="owner", title="{id}: {message}")],
)


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


def engine_runs(engine: sa.Engine, runs: int, batch: int) -> float:
    """Seconds for workers to take ``runs`` fresh runs of the flow to their end."""
    metadata = sa.MetaData()
    item = app_tables(metadata)
    tables.for_binding(metadata, BINDING)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(BINDING, engine, clock=lambda: NOW)
    with engine.begin() as conn:
        files.import_flows(
            conn, BINDING, runner.tables, files.loads_yaml(FLOW), columns=runner.columns
        )
        for start in range(0, runs, 500):
            rows = [
                {"id": n, "status": "new", "priority": "low", "owner": f"u{n}"}
                for n in range(start + 1, min(runs, start + 500) + 1)
            ]
            conn.execute(sa.insert(item), rows)
            for row in rows:
                runner.record_created(conn, row)
    serving = worker.Worker(runner, batch=batch)
    began = time.perf_counter()
    while serving.run_due(limit=max(100, batch)):
        pass
    elapsed = time.perf_counter() - began
    with engine.connect() as conn:
        done = conn.execute(
            sa.select(sa.func.count()).where(engine_tables.runs.c.status == "done")
        ).scalar_one()
    assert done == runs, f"only {done} of {runs} runs finished"
    return elapsed


def storage_limit(engine: sa.Engine, transactions: int) -> float:
    """Seconds for plain transactions each updating a record and a run and logging a line."""
    metadata = sa.MetaData()
    record = sa.Table(
        "plain_record",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("status", sa.String(32)),
    )
    run = sa.Table(
        "plain_run",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("state", sa.Text),
        sa.Column("version", sa.Integer),
    )
    log = sa.Table(
        "plain_log",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer),
        sa.Column("what", sa.String(32)),
    )
    # The same connection setup as the engine's (on SQLite: WAL, the same sync level).
    dialects.prepare_engine(engine)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(record), [{"id": n, "status": "new"} for n in range(transactions)])
        conn.execute(
            sa.insert(run), [{"id": n, "state": "{}", "version": 0} for n in range(transactions)]
        )
    began = time.perf_counter()
    for n in range(transactions):
        with engine.begin() as conn:
            conn.execute(sa.update(record).where(record.c.id == n).values(status="working"))
            conn.execute(
                sa.update(run)
                .where(run.c.id == n)
                .values(state='{"position": 2}', version=run.c.version + 1)
            )
            conn.execute(sa.insert(log).values(run_id=n, what="done"))
    return time.perf_counter() - began


RESOURCE = "item"


def claim_cost(
    engine: sa.Engine, waiting: int, *, fair: bool, due: int = 100, repeat: int = 15
) -> float:
    """Median seconds to claim ``due`` due runs while ``waiting`` runs wait for later, as a
    worker of ``RESOURCE`` claims them (``fair``: shared among tenants)."""
    engine_tables.metadata.create_all(engine)
    table = engine_tables.due
    later = NOW + timedelta(days=30)
    with engine.begin() as conn:
        conn.execute(sa.delete(table))
        conn.execute(sa.delete(engine_tables.leases))
        for start in range(0, waiting, 50_000):
            conn.execute(
                sa.insert(table),
                [
                    {
                        "run_id": n,
                        "due_at": later + timedelta(seconds=n),
                        "wakes": 0,
                        "resource": RESOURCE,
                        "tenant": f"t{n % 5}",
                    }
                    for n in range(start, min(waiting, start + 50_000))
                ],
            )
        conn.execute(
            sa.insert(table),
            [
                {
                    "run_id": waiting + n,
                    "due_at": NOW,
                    "wakes": 0,
                    "resource": RESOURCE,
                    "tenant": f"t{n % 5}",
                }
                for n in range(due)
            ],
        )
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text("ANALYZE flowrunner_due"))
    timings = []
    for _ in range(repeat):
        began = time.perf_counter()
        claims = ops.claim_due(
            engine, now=NOW, owner="bench", limit=due, ttl=60, resource=RESOURCE, fair=fair
        )
        timings.append(time.perf_counter() - began)
        assert len(claims) == due
        with engine.begin() as conn:  # make the same runs due again for the next round
            conn.execute(sa.delete(engine_tables.leases))
            conn.execute(sa.update(table).where(table.c.run_id >= waiting).values(due_at=NOW))
    return statistics.median(timings)


def measure(
    kind: str, pg_url: str | None, runs: int, waiting: int, repeat: int, say: Callable[[str], None]
) -> None:
    say(f"\n== {kind} ==")
    # Interleaved and repeated, medians reported: the machine's own noise (other
    # processes, the disk) then falls on both sides alike.
    single_t, batched_t, plain_t = [], [], []
    for _ in range(repeat):
        with database(kind, pg_url) as engine:
            plain_t.append(storage_limit(engine, runs))
        with database(kind, pg_url) as engine:
            single_t.append(engine_runs(engine, runs, batch=1))
        with database(kind, pg_url) as engine:
            batched_t.append(engine_runs(engine, runs, batch=50))
    single, batched, plain = (statistics.median(t) for t in (single_t, batched_t, plain_t))
    limit = runs / plain
    one = runs * STEPS_PER_RUN / single
    many = runs * STEPS_PER_RUN / batched
    say(f"raw storage limit          {limit:10.0f} transactions/s (record + run + log row)")
    say(
        f"engine, 1 run/transaction  {one:10.0f} step transitions/s "
        f"({runs / single:.0f} runs/s)  ratio {one / limit:.2f}x  (target >= 0.5x)"
    )
    say(
        f"engine, 50 runs/transaction{many:10.0f} step transitions/s "
        f"({runs / batched:.0f} runs/s)  ratio {many / limit:.2f}x  (target >= 1x)"
    )
    for fair, how in ((False, "oldest first"), (True, "among tenants")):
        costs = {}
        for size in (1_000, waiting):
            with database(kind, pg_url) as engine:
                costs[size] = claim_cost(engine, size, fair=fair)
        say(
            f"claim 100 due ({how}) with {1_000:>9,} waiting: {costs[1_000] * 1000:7.2f} ms; "
            f"with {waiting:,} waiting: {costs[waiting] * 1000:7.2f} ms; "
            f"ratio {costs[waiting] / costs[1_000]:.2f}x  (target <= 2x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--waiting", type=int, default=1_000_000)
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--only", choices=["sqlite", "postgresql"], default=None)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (medians)")
    args = parser.parse_args()
    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    for kind in kinds:
        if args.only is None or args.only == kind:
            measure(kind, args.postgres, args.runs, args.waiting, args.repeat, print)


if __name__ == "__main__":
    main()
