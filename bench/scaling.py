"""Scale-out: N runs of the 5-step flow drained by 1, 2, 3, 4 ``flowrunner worker``
processes on one PostgreSQL, next to a bare ``FOR UPDATE SKIP LOCKED`` claim loop.

    python bench/scaling.py [--runs 1500] [--workers 1 2 3 4] [--repeat 3] [--postgres URL]
                            [--profile DIR]

For each worker count, a fresh schema gets ``--runs`` records of ``bench/engine.py``'s
item table, each with its run of the 5-step flow (set, notify, branch, set, end) started
and held back (due tomorrow); a round makes all its schemas first, so that its drains
follow each other within seconds. Then, for each count in turn, that many ``flowrunner
worker`` processes start with their defaults (one run per claim and per transaction,
``--poll 1``), the runs are made due in one statement that wakes them (as a start does),
and the workers drain them. The rate is taken from the runs' own times (the moment each
run's step began, ``updated_at``): runs over the span from the first to the last, so
process start-up is not counted.

The baseline is the database's own ceiling for the same pattern, with no engine: the
same number of processes, each looping over a bare claim — ``SELECT … ORDER BY id LIMIT 1
FOR UPDATE SKIP LOCKED`` on a jobs table, marked taken, committed — then the job's work
in a second transaction (the record's row updated, the job marked done, five history
rows inserted), as a worker commits its claim and then the run's step.

Worker counts and the baseline take turns in each round (1, 2, 3, 4 workers, then the
baseline at 1, 2, 3, 4; every other round in the reverse order), so the machine's noise
falls on all of them; the script prints each round's runs/s and the ratio to one
process, then the medians over the rounds and each round's ratio. Before and after each
round it measures what the machine can give a second process right then: two CPU-bound
processes against one (2.00x on two free cores; on a machine shared with other work it
drops, and so does every second worker's gain, the bare loop's included).
``--before DIR`` drains with the workers of another copy of flowrunner too (say an older
commit: ``git archive COMMIT flowrunner grammar | tar -x -C DIR``), at each count right
after ours. ``--profile DIR`` runs the workers under cProfile and leaves one ``.pstats``
file per worker there.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import BINDING, FLOW, app_tables  # bench/engine.py

from flowrunner import flow_runner, tables
from flowrunner.flows import files
from flowrunner.runner import FlowRunner
from flowrunner.store import engine_tables, migrate

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHUNK = 500  # records inserted and started per statement batch


def runner(url: str) -> FlowRunner:
    """The workers' app: ``flowrunner worker --app scaling:runner --database URL``."""
    return flow_runner(BINDING, sa.create_engine(url))


@contextmanager
def schema(pg_url: str) -> Iterator[str]:
    """A scratch schema, dropped afterwards; yields the URL whose search_path is it."""
    name = f"scale_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    try:
        url = sa.make_url(pg_url).update_query_dict({"options": f"-csearch_path={name}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def held_runs(url: str, runs: int) -> None:
    """``runs`` records, each with its run started and held back until tomorrow."""
    engine = sa.create_engine(url)
    metadata = sa.MetaData()
    item = app_tables(metadata)
    tables.for_binding(metadata, BINDING)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    starter = flow_runner(BINDING, engine)
    with engine.begin() as conn:
        files.import_flows(
            conn, BINDING, starter.tables, files.loads_yaml(FLOW), columns=starter.columns
        )
    for start in range(0, runs, CHUNK):
        with engine.begin() as conn:
            rows = [
                {"id": n, "status": "new", "priority": "low", "owner": f"u{n}"}
                for n in range(start + 1, min(runs, start + CHUNK) + 1)
            ]
            conn.execute(sa.insert(item), rows)
            for row in rows:
                starter.record_created(conn, row)
    with engine.begin() as conn:
        conn.execute(
            sa.update(engine_tables.due).values(due_at=datetime.now(UTC) + timedelta(days=1))
        )
        conn.execute(sa.text("ANALYZE"))
    engine.dispose()


def release(url: str) -> None:
    """Make every held run due now, in one statement that wakes the workers as the store's
    own writes do (workers that cannot listen find the runs at their next poll)."""
    # Imported here: the workers import this module as their app, and a --before copy of
    # flowrunner may have no wake-ups.
    from flowrunner.store import wakeups

    engine = sa.create_engine(url)
    due = engine_tables.due
    with engine.begin() as conn:
        made_due = sa.update(due).values(due_at=datetime.now(UTC))
        woken_by = wakeups.wake(conn.dialect, due.c.resource)
        conn.execute(made_due if woken_by is None else made_due.returning(woken_by))
    engine.dispose()


def wait_until(engine: sa.Engine, query: sa.Select[tuple[int]], target: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while True:
        with engine.connect() as conn:
            if conn.execute(query).scalar_one() >= target:
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"not drained within {limit:.0f} s")
        time.sleep(0.1)


def rate(engine: sa.Engine, column: sa.ColumnElement[datetime], table: sa.Table) -> float:
    """Rows per second over the span of ``column``'s times (first to last)."""
    with engine.connect() as conn:
        first, last, count = conn.execute(
            sa.select(sa.func.min(column), sa.func.max(column), sa.func.count()).select_from(table)
        ).one()
    return (count - 1) / (last - first).total_seconds()


def engine_drain(
    url: str, runs: int, workers: int, profile: Path | None, code: Path = ROOT
) -> float:
    """Runs per second of ``workers`` ``flowrunner worker`` processes (of the flowrunner in
    ``code``) draining the ``runs`` held runs in ``url``'s schema."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    procs = []
    for n in range(workers):
        command = [sys.executable]
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            command += ["-m", "cProfile", "-o", str(profile / f"worker-{workers}-{n}.pstats")]
        command += ["-m", "flowrunner", "worker", "--app", "scaling:runner", "--database", url]
        procs.append(
            subprocess.Popen(
                command, cwd=HERE, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
            )
        )
    try:
        for proc in procs:  # each says so once it serves
            assert proc.stderr is not None
            line = proc.stderr.readline().decode()
            if "serving" not in line:
                raise SystemExit(f"a worker did not start: {line}{proc.stderr.read().decode()}")
            # Its log (a line per claim) is read and dropped: a pipe nobody reads fills up
            # and stops the worker at its next line.
            threading.Thread(target=proc.stderr.read, daemon=True).start()
        release(url)
        engine = sa.create_engine(url)
        runs_t = engine_tables.runs
        done = sa.select(sa.func.count()).where(runs_t.c.status == "done")
        wait_until(engine, done, runs, limit=600)
        measured = rate(engine, runs_t.c.updated_at, runs_t)
        engine.dispose()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
    return measured


BARE_SETUP = """
CREATE TABLE job (id int PRIMARY KEY, state text NOT NULL, claimed_at timestamptz,
                  done_at timestamptz);
CREATE INDEX ON job (state, id);
CREATE TABLE job_record (id int PRIMARY KEY, status text, priority text);
CREATE TABLE job_log (id bigserial PRIMARY KEY, job_id int NOT NULL, what text NOT NULL,
                      at timestamptz NOT NULL);
"""

BARE_LOOP = """
import sys, psycopg
conn = psycopg.connect(sys.argv[1])
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
while True:
    with conn.transaction():
        row = conn.execute(
            "SELECT id FROM job WHERE state = 'due' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
        ).fetchone()
        if row is None:
            break
        conn.execute(
            "UPDATE job SET state = 'taken', claimed_at = clock_timestamp() WHERE id = %s", row
        )
    with conn.transaction():
        conn.execute(
            "UPDATE job_record SET status = 'working', priority = 'high' WHERE id = %s", row
        )
        conn.execute(
            "INSERT INTO job_log (job_id, what, at) SELECT %s, w, clock_timestamp() "
            "FROM unnest(array['started','set','notified','set','done']) AS w",
            row,
        )
        conn.execute(
            "UPDATE job SET state = 'done', done_at = clock_timestamp() WHERE id = %s", row
        )
"""


def bare_jobs(url: str, runs: int) -> None:
    """The baseline's tables in ``url``'s schema, with ``runs`` jobs due."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in BARE_SETUP.split(";"):
            if statement.strip():
                conn.execute(sa.text(statement))
        numbers = "generate_series(1, :n) n"
        conn.execute(sa.text(f"INSERT INTO job SELECT n, 'due' FROM {numbers}"), {"n": runs})
        records = f"INSERT INTO job_record SELECT n, 'new', 'low' FROM {numbers}"
        conn.execute(sa.text(records), {"n": runs})
        conn.execute(sa.text("ANALYZE"))
    engine.dispose()


def bare_drain(url: str, workers: int) -> float:
    """Jobs per second of ``workers`` bare SKIP LOCKED claim loops draining ``url``'s jobs."""
    engine = sa.create_engine(url)
    dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARE_LOOP, dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.readline()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    for proc in procs:
        proc.wait(timeout=600)
    job = sa.table("job", sa.column("done_at", sa.DateTime(timezone=True)))
    measured = rate(engine, job.c.done_at, job)
    engine.dispose()
    return measured


SPIN = """
import time
began = time.perf_counter()
for _ in range(5_000_000):
    pass
print(time.perf_counter() - began)
"""


def parallelism() -> float:
    """How much faster two CPU-bound processes get through twice the work than one does
    (2.0: two free cores). On a shared machine this is what a second worker can gain."""

    def spin(count: int) -> float:
        procs = [
            subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True)
            for _ in range(count)
        ]
        return max(float(proc.communicate()[0]) for proc in procs)

    return 2 * spin(1) / spin(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (medians)")
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--no-bare", action="store_true", help="skip the bare claim loop")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        metavar="DIR",
        help="also drain with the workers of another copy of flowrunner (an older commit "
        "unpacked in DIR), side by side",
    )
    parser.add_argument("--profile", type=Path, default=None, help="cProfile the workers into DIR")
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("name a PostgreSQL server: --postgres URL or FLOWRUNNER_TEST_POSTGRES_URL")
    counts = sorted(set(args.workers))
    code = {"flowrunner": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    names = [*code, *([] if args.no_bare else ["bare SKIP LOCKED loop"])]
    rates: dict[str, dict[int, list[float]]] = {n: {k: [] for k in counts} for n in names}
    for round_ in range(1, args.repeat + 1):
        # Every other round backwards, so a load that grows or fades falls on all alike.
        order = counts if round_ % 2 else counts[::-1]
        with ExitStack() as schemas:
            # Every drain's runs are made first, so the drains follow each other closely.
            made = {}
            for name in names:
                for k in order:
                    made[name, k] = url = schemas.enter_context(schema(args.postgres))
                    if name in code:
                        held_runs(url, args.runs)
                    else:
                        bare_jobs(url, args.runs)
            cores = parallelism()
            for k in order:  # at each count, the variants one after the other
                for name in names:
                    url = made[name, k]
                    if name in code:
                        measured = engine_drain(url, args.runs, k, args.profile, code[name])
                    else:
                        measured = bare_drain(url, k)
                    rates[name][k].append(measured)
        report(
            f"round {round_} (two processes ran {cores:.2f}x one before it, "
            f"{parallelism():.2f}x after)",
            counts,
            {n: {k: v[-1] for k, v in by.items()} for n, by in rates.items()},
        )
    if args.repeat > 1:
        report(
            f"median of {args.repeat} rounds",
            counts,
            {n: {k: statistics.median(v) for k, v in by.items()} for n, by in rates.items()},
        )
        print(f"\n== each round's ratio to {counts[0]} process (median) ==")
        for name, by in rates.items():
            for k in counts[1:]:
                ratios = [a / b for a, b in zip(by[k], by[counts[0]], strict=True)]
                print(
                    f"  {name}, {k} over {counts[0]}: "
                    + ", ".join(f"{r:.2f}x" for r in ratios)
                    + f"  ({statistics.median(ratios):.2f}x)"
                )


def report(title: str, counts: list[int], rates: dict[str, dict[int, float]]) -> None:
    print(f"\n== {title}: runs/s (ratio to {counts[0]} process) ==", flush=True)
    for k in counts:
        cells = [f"{n} {by[k]:7.1f} ({by[k] / by[counts[0]]:.2f}x)" for n, by in rates.items()]
        print(f"  {k} worker(s): " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    main()
