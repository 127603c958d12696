"""A flow's dashboard over many runs: each of its queries, and the whole page, timed.

    python bench/dashboard.py [--runs 200000] [--repeat 5] [--postgres URL] [--only DB] [--json]

A review desk's real runs of one flow (``tests/reviews.py``: answered, given up, handed
over, failed, waiting, late) are copied in bulk, their history lines with them, into
``--runs`` runs started over 60 days (so the dashboard's 30 days hold half): 85 % done,
10 % waiting, 5 % failed. Each query is asked ``--repeat`` times and its median printed,
then the whole page (``GET /flow/1/dashboard``, rendered), each beside a plain baseline:
a count of the flow's runs started in the 30 days. PostgreSQL is measured when
``--postgres`` or FLOWRUNNER_TEST_POSTGRES_URL names a server (a scratch schema is
created and dropped). ``--json`` prints, last, one line: the figures the page showed and
those counted here in SQL, for a test to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import reviews  # tests/reviews.py: a review desk whose runs stand everywhere
from console import OPERATOR, console

from flowrunner import testing
from flowrunner.store import dashboard, engine_tables
from flowrunner.web.console import dashboard_pages

CHUNK = 10_000
SHARES = (("done", 0.85), ("waiting", 0.10), ("failed", 0.05))


def fill(driver: testing.FlowDriver, total: int) -> None:
    """Copy the desk's runs of each status, with their history, into ``total`` runs."""
    engine = driver.runner.engine
    runs, log = engine_tables.runs, engine_tables.step_log
    with engine.connect() as conn:
        models: dict[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
        for row in conn.execute(sa.select(runs).order_by(runs.c.id)):
            run = dict(row._mapping)
            history = [
                dict(line._mapping)
                for line in conn.execute(
                    sa.select(log).where(log.c.run_id == run["id"]).order_by(log.c.id)
                )
            ]
            models.setdefault(run["status"], []).append((run, history))
    plan = [status for status, share in SHARES for _ in range(int(total * share))]
    random.Random(29).shuffle(plan)
    now = driver.now
    first = now - timedelta(days=60)
    step = timedelta(days=60) / max(len(plan), 1)
    picker = random.Random(7)
    with engine.begin() as conn:
        for start in range(0, len(plan), CHUNK):
            batch: list[dict[str, Any]] = []
            lines: list[list[dict[str, Any]]] = []
            for n, status in enumerate(plan[start : start + CHUNK], start):
                run, history = picker.choice(models[status])
                shift = first + n * step - run["started_at"]
                copied = {k: v for k, v in run.items() if k != "id"}
                copied.update(
                    record_id=str(100_000 + n),
                    start_key=f"bench:{n}",
                    started_at=run["started_at"] + shift,
                    updated_at=run["updated_at"] + shift,
                    ended_at=None if run["ended_at"] is None else run["ended_at"] + shift,
                )
                batch.append(copied)
                lines.append(history)
            ids = conn.execute(sa.insert(runs).returning(runs.c.id), batch).scalars().all()
            if len(ids) != len(batch):  # SQLite's executemany returns no ids: read them
                ids = (
                    conn.execute(
                        sa.select(runs.c.id)
                        .where(runs.c.start_key.like("bench:%"))
                        .order_by(runs.c.id.desc())
                        .limit(len(batch))
                    )
                    .scalars()
                    .all()[::-1]
                )
            copies = []
            for run_id, copied, history in zip(ids, batch, lines, strict=True):
                for line in history:
                    shift = copied["started_at"] - history[0]["at"] if history else timedelta()
                    copies.append(
                        {
                            **{k: v for k, v in line.items() if k != "id"},
                            "run_id": run_id,
                            "at": line["at"] + shift,
                            "due_at": None if line["due_at"] is None else line["due_at"] + shift,
                        }
                    )
            conn.execute(sa.insert(log), copies)
        open_ids = conn.execute(
            sa.select(runs.c.id).where(runs.c.status == "waiting", runs.c.start_key.like("bench:%"))
        ).scalars()
        conn.execute(
            sa.insert(engine_tables.due),
            [
                {"run_id": i, "due_at": now + timedelta(days=2), "resource": "ticket", "wakes": 0}
                for i in open_ids
            ],
        )
    settle(engine)


def settle(engine: sa.Engine) -> None:
    """Statistics gathered, as a live database has long done by itself."""
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text("VACUUM ANALYZE"))
    else:
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))


def median_ms(ask: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        ask()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def counted(engine: sa.Engine, since: Any) -> dict[str, Any]:
    """The figures counted here, in plain SQL: runs started in the window, and by status."""
    runs = engine_tables.runs
    with engine.connect() as conn:
        where = [runs.c.flow_id == "1", runs.c.started_at >= since]
        started = conn.execute(sa.select(sa.func.count()).where(*where)).scalar_one()
        statuses: dict[str, int] = dict(
            conn.execute(
                sa.select(runs.c.status, sa.func.count()).where(*where).group_by(runs.c.status)
            ).all()
        )
        # The passes that gave up, of the newest runs the dashboard reads them from.
        newest = (
            sa.select(runs.c.id)
            .where(*where)
            .order_by(runs.c.id.desc())
            .limit(dashboard.RUNS)
            .subquery()
        )
        log = engine_tables.step_log
        gave_up = conn.execute(
            sa.select(sa.func.count())
            .select_from(log.join(newest, newest.c.id == log.c.run_id))
            .where(log.c.what == "timed_out")
        ).scalar_one()
    return {"started": int(started), "statuses": statuses, "gave_up": int(gave_up)}


def measure(engine: sa.Engine, total: int, repeat: int) -> dict[str, Any]:
    driver = reviews.reviewed(engine, 4)
    began = time.perf_counter()
    fill(driver, total)
    print(f"  filled {total:,} runs in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    runner = driver.runner
    tz = runner.config.timezone
    now = runner.clock()
    days = dashboard_pages.day_bounds(now.date(), tz)
    scope = dashboard.Scope(runner.binding.resource, "1")

    def ask(query: Callable[[sa.Connection], object]) -> Callable[[], object]:
        def asked() -> object:
            with engine.connect() as conn:
                return query(conn)

        return asked

    runs = engine_tables.runs
    plain = sa.select(sa.func.count()).where(
        runs.c.resource == scope.resource,
        runs.c.flow_id == scope.flow_id,
        runs.c.started_at >= days.since,
    )
    questions: list[tuple[str, Callable[[], object]]] = [
        ("baseline: count the runs of the days", ask(lambda c: c.execute(plain).scalar_one())),
        ("runs started and ended per day", ask(lambda c: dashboard.per_day(c, scope, days))),
        ("runs by status", ask(lambda c: dashboard.by_status(c, scope, days.since))),
        ("time to finish", ask(lambda c: dashboard.finish_times(c, scope, days.since))),
        ("time at each step", ask(lambda c: dashboard.step_times(c, scope, days.since))),
        ("where runs are now", ask(lambda c: dashboard.where_now(c, scope, now))),
    ]
    ui = console(driver, OPERATOR)
    questions.append(("the whole page", lambda: ui.get("/flow/1/dashboard")))
    timed: dict[str, float] = {}
    for name, question in questions:
        timed[name] = median_ms(question, repeat)
        base = timed[questions[0][0]]
        print(f"  {name:<38} {timed[name]:9.1f} ms {timed[name] / base:6.1f}×", file=sys.stderr)
    page = ui.get("/flow/1/dashboard").text
    shown = {
        "started": sum(int(n) for n in re.findall(r'data-started="(\d+)"', page)),
        "statuses": {
            k: int(v)
            for k, v in re.findall(r'data-status="(\w+)" data-count="(\d+)"', page)
            if v != "0"
        },
        "gave_up": sum(
            int(n) for n in re.findall(r'<tr data-step="\d+" data-gave-up="(\d+)"', page)
        ),
    }
    return {"timed_ms": timed, "shown": shown, "counted": counted(engine, days.since)}


@contextmanager
def sqlite() -> Iterator[sa.Engine]:
    with tempfile.TemporaryDirectory() as folder:
        engine = sa.create_engine(f"sqlite:///{folder}/dashboard.db")
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON, last")
    parser.add_argument(
        "--only", choices=("sqlite", "postgresql"), help="measure this database alone"
    )
    args: Any = parser.parse_args(argv)
    found: dict[str, Any] = {}
    if args.only != "postgresql":
        print("SQLite:", file=sys.stderr)
        with sqlite() as engine:
            found["sqlite"] = measure(engine, args.runs, args.repeat)
    if args.postgres and args.only != "sqlite":
        print("PostgreSQL:", file=sys.stderr)
        with postgres(args.postgres) as engine:
            found["postgresql"] = measure(engine, args.runs, args.repeat)
    if args.json:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
