"""The Operations room's questions over many runs: a page of runs by status (stuck too),
by flow and by age, a deep page, the header's counts — each timed side by side with a
plain baseline, the newest page of the runs table read by id, and each timed twice:
without the indexes of migration 0005 (before) and with them (after).

    python bench/operations_room.py [--runs 200000] [--repeat 7] [--postgres URL]

A support desk's runs are copied in bulk from real ones, started over a year: mostly
done, some waiting for a reply (due in a year), a few failed, and 50 stuck (due an hour
ago, no worker). Each
question is asked ``--repeat`` times; the medians are printed with their ratio to the
baseline. PostgreSQL is measured when ``--postgres`` or FLOWRUNNER_TEST_POSTGRES_URL names
a server (a scratch schema is created and dropped).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import room  # tests/room.py: the desk whose runs are in every state

from flowrunner import testing
from flowrunner.store import engine_tables

NOW = datetime(2026, 3, 6, 10, 0, tzinfo=UTC)
CHUNK = 20_000


def fill(driver: testing.FlowDriver, total: int) -> None:
    """Copy the desk's five runs into ``total`` runs, each state in proportion."""
    engine = driver.runner.engine
    runs, due = engine_tables.runs, engine_tables.due
    with engine.connect() as conn:
        model = {row.status: dict(row._mapping) for row in conn.execute(sa.select(runs))}
    shares = [("done", 0.90), ("waiting", 0.085), ("failed", 0.015)]
    plan = [status for status, share in shares for _ in range(int(total * share))]
    plan += ["running"] * 50  # stuck
    random.Random(24).shuffle(plan)  # each status spread over the year, as it happens
    started = NOW - timedelta(days=365)
    step = timedelta(days=365) / len(plan)
    with engine.begin() as conn:
        for start in range(0, len(plan), CHUNK):
            rows = []
            for n, status in enumerate(plan[start : start + CHUNK], start):
                row = {k: v for k, v in model[status].items() if k != "id"}
                row.update(
                    record_id=str(1000 + n),
                    start_key=f"bench:{n}",
                    started_at=started + n * step,
                    updated_at=started + n * step,
                )
                rows.append(row)
            conn.execute(sa.insert(runs), rows)
        open_runs = conn.execute(
            sa.select(runs.c.id, runs.c.status).where(runs.c.status.in_(["waiting", "running"]))
        ).all()
        conn.execute(sa.delete(due))
        conn.execute(
            sa.insert(due),
            [
                {
                    "run_id": run_id,
                    "due_at": NOW + timedelta(days=365)
                    if status == "waiting"
                    else NOW - timedelta(hours=1),
                    "resource": "ticket",
                    "wakes": 0,
                }
                for run_id, status in open_runs
            ],
        )
    settle(engine)


# The indexes migration 0005 adds for the room (flowrunner.store.engine_tables).
ROOM_INDEXES = (
    "ix_flowrunner_runs_resource_status_started_at",
    "ix_flowrunner_runs_resource_tenant_status_started_at",
)


def room_indexes(engine: sa.Engine, present: bool) -> None:
    """Drop the room's indexes (``present=False``: the schema before 0005), or make them."""
    by_name = {index.name: index for index in engine_tables.runs.indexes}
    with engine.begin() as conn:
        for name in ROOM_INDEXES:
            if present:
                by_name[name].create(conn, checkfirst=True)
            else:
                conn.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
    settle(engine)


def settle(engine: sa.Engine) -> None:
    """What a live database has done by itself long before: its statistics gathered
    (and on PostgreSQL its visibility map written, as autovacuum does)."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))


def median_ms(ask: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        ask()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def measure(engine: sa.Engine, total: int, repeat: int) -> None:
    driver = room.desk(engine, start=NOW - timedelta(days=4, hours=1))
    runner = driver.runner
    began = time.perf_counter()
    fill(driver, total)
    print(f"  filled {total:,} runs in {time.perf_counter() - began:.1f} s")
    runs = engine_tables.runs

    def baseline() -> object:
        with engine.connect() as conn:
            return conn.execute(sa.select(runs).order_by(runs.c.id.desc()).limit(50)).all()

    with engine.connect() as conn:
        lowest = conn.execute(sa.select(sa.func.min(runs.c.id))).scalar_one()
    questions: list[tuple[str, Callable[[], object]]] = [
        ("newest page, any status", lambda: runner.list_runs()),
        ("failed", lambda: runner.list_runs(status="failed")),
        ("stuck", lambda: runner.list_runs(status="stuck")),
        (
            "waiting, flow 'listen' (in any case)",
            lambda: runner.list_runs(status="waiting", flow="listen"),
        ),
        ("older than 300 days", lambda: runner.list_runs(older_than="300 days")),
        (
            "failed, older than 300 days",
            lambda: runner.list_runs(status="failed", older_than="300d"),
        ),
        ("a deep page (the oldest runs)", lambda: runner.list_runs(before_id=lowest + 60)),
        ("the header's counts (6 numbers)", lambda: runner.count_runs()),
        ("the counts, newer than 30 days", lambda: runner.count_runs(newer_than="30 days")),
        ("the counts, older than 300 days", lambda: runner.count_runs(older_than="300 days")),
    ]
    timed: dict[bool, dict[str, float]] = {}
    for present in (False, True):
        room_indexes(engine, present)
        timed[present] = {name: median_ms(ask, repeat) for name, ask in questions}
        timed[present]["baseline"] = median_ms(baseline, repeat)
    base = timed[True]["baseline"]
    print(f"  {'':<40} {'before':>10} {'after':>10}   after/baseline")
    print(
        f"  {'baseline: newest 50 rows by id':<40} {timed[False]['baseline']:7.2f} ms "
        f"{base:7.2f} ms"
    )
    for name, ask in questions:
        found = ask()
        size = len(found) if hasattr(found, "__len__") else "-"
        before, after = timed[False][name], timed[True][name]
        print(
            f"  {name:<40} {before:7.2f} ms {after:7.2f} ms  {after / base:6.1f}×   ({size} rows)"
        )


@contextmanager
def sqlite() -> Iterator[sa.Engine]:
    with tempfile.TemporaryDirectory() as folder:
        engine = sa.create_engine(f"sqlite:///{folder}/room.db")
        try:
            yield engine
        finally:
            engine.dispose()


@contextmanager
def postgres(url: str) -> Iterator[sa.Engine]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    engine = sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    args: Any = parser.parse_args(argv)
    print("SQLite:")
    with sqlite() as engine:
        measure(engine, args.runs, args.repeat)
    if args.postgres:
        print("PostgreSQL:")
        with postgres(args.postgres) as engine:
            measure(engine, args.runs, args.repeat)


if __name__ == "__main__":
    main()
