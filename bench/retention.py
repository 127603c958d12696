"""History that does not slow the engine: claim and advance cost with and without
1,000,000 ended runs in the tables, side by side in one process, and the time to prune them.

    python bench/retention.py [--ended 1000000] [--repeat 5] [--postgres URL] [--only KIND]

Two databases of each kind: one with an empty history, one filled in bulk with ``--ended``
ended runs copied from a real finished run of the 5-step flow of ``bench/engine.py`` —
its snapshot, state, every history line and its (delivered) notice — plus one old event
about each run's record. In interleaved rounds, each database gets 100 new records whose
runs fall due; we time claiming the 100 (``claim_due``, then undone) and a worker claiming
and advancing them to their end (one run per transaction). Medians are printed side by
side with their ratio, then the time ``runner.prune(older_than="90 days")`` takes to delete
the whole filled history, and the claim and advance cost once it is gone.

PostgreSQL is measured when ``--postgres`` or FLOWRUNNER_TEST_POSTGRES_URL names a
server (a scratch schema is created and dropped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine import BINDING, FLOW, NOW, app_tables, database  # bench/engine.py

from flowrunner import flow_runner, tables
from flowrunner.engine import worker
from flowrunner.flows import files
from flowrunner.foundations import sqltypes
from flowrunner.store import dialects, engine_tables, migrate
from flowrunner.store import operations as ops

DUE = 100  # runs claimed and advanced per measurement
CHUNK = 100_000  # ended runs inserted per statement
OLD = NOW - timedelta(days=200)  # when the filled runs ended
EVENTS = BINDING.model_copy(update={"events": {"item.touched": "id"}})


class Desk:
    """One database with the engine's tables, the flow and a runner on the flow's clock."""

    def __init__(self, engine: sa.Engine) -> None:
        metadata = sa.MetaData()
        self.item = app_tables(metadata)
        tables.for_binding(metadata, EVENTS)
        metadata.create_all(engine)
        migrate.upgrade(engine)
        self.engine = engine
        self.runner = flow_runner(EVENTS, engine, clock=lambda: NOW)
        with engine.begin() as conn:
            files.import_flows(
                conn,
                EVENTS,
                self.runner.tables,
                files.loads_yaml(FLOW),
                columns=self.runner.columns,
            )
        self.next_record = 1

    def start(self, count: int) -> list[int]:
        """``count`` new records, each starting a run due now; the run ids."""
        first, self.next_record = self.next_record, self.next_record + count
        rows = [
            {"id": n, "status": "new", "priority": "low", "owner": f"u{n}"}
            for n in range(first, first + count)
        ]
        started: list[int] = []
        with dialects.begin(self.engine) as conn:
            conn.execute(sa.insert(self.item), rows)
            for row in rows:
                started += self.runner.record_created(conn, row)
        return started

    def claim(self, runs: list[int]) -> float:
        """Seconds to claim the due ``runs``; the claim is undone afterwards."""
        began = time.perf_counter()
        claims = ops.claim_due(
            self.engine, now=NOW, owner="bench", limit=DUE, ttl=60, resource=EVENTS.resource
        )
        elapsed = time.perf_counter() - began
        assert sorted(c.run_id for c in claims) == sorted(runs), "claimed other runs"
        leases, due = engine_tables.leases, engine_tables.due
        with dialects.begin(self.engine) as conn:
            conn.execute(sa.delete(leases).where(leases.c.name.in_([f"run:{r}" for r in runs])))
            conn.execute(sa.update(due).where(due.c.run_id.in_(runs)).values(due_at=NOW))
        return elapsed

    def advance(self, runs: list[int]) -> float:
        """Seconds for a worker to claim the due ``runs`` and take each to its end."""
        serving = worker.Worker(self.runner)
        began = time.perf_counter()
        claimed = serving.run_due(limit=DUE)
        elapsed = time.perf_counter() - began
        assert claimed == len(runs) == serving.stats.advanced, "not every run advanced"
        return elapsed

    def fill(self, ended: int, say: Callable[[str], None]) -> dict[str, int]:
        """Copy one real finished run ``ended`` times, ended long ago, with its history."""
        [template] = self.start(1)
        worker.Worker(self.runner).run_due(limit=1)
        base = self.next_record + 1_000_000  # records of the copies exist nowhere: fine
        began = time.perf_counter()
        with self.engine.connect() as conn:
            first = int(conn.execute(sa.select(sa.func.max(engine_tables.runs.c.id))).scalar_one())
        for start in range(0, ended, CHUNK):
            size = min(CHUNK, ended - start)
            with dialects.begin(self.engine) as conn:
                self._copy(conn, template, base + start, size)
            spent = time.perf_counter() - began
            say(f"  filled {start + size:,} of {ended:,} ended runs ({spent:.0f} s)")
        self.vacuum("VACUUM ANALYZE")  # what autovacuum would do, before we measure
        counts = {}
        with self.engine.connect() as conn:
            for name, table in (
                ("runs", engine_tables.runs),
                ("history", engine_tables.step_log),
                ("notices", engine_tables.notices),
                ("events", engine_tables.events),
            ):
                counts[name] = int(
                    conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                )
        assert counts["runs"] >= first + ended
        counts["seconds"] = round(time.perf_counter() - began)
        return counts

    def vacuum(self, command: str) -> float:
        """Seconds to run ``command`` (VACUUM ...) on the engine's big tables (PostgreSQL).

        Run here rather than left to autovacuum, so that it does not run in the background
        of the measurements.
        """
        if self.engine.dialect.name != "postgresql":
            return 0.0
        began = time.perf_counter()
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in ("runs", "step_log", "notices", "events"):
                conn.execute(sa.text(f"{command} flowrunner_{table}"))
        return time.perf_counter() - began

    def _copy(self, conn: sa.Connection, template: int, offset: int, size: int) -> None:
        """Insert ``size`` copies of run ``template`` on records ``offset + 1`` onwards, with
        its history lines and notices, and an event about each record."""
        stamp = sa.bindparam("old", OLD, type_=sqltypes.UTCDateTime())
        series = (
            "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < :size) "
            if conn.dialect.name == "sqlite"
            else ""
        )
        source = "n" if conn.dialect.name == "sqlite" else "generate_series(1, :size) AS n(x)"
        low = int(conn.execute(sa.select(sa.func.max(engine_tables.runs.c.id))).scalar_one())
        conn.execute(
            sa.text(
                series + "INSERT INTO flowrunner_runs (tenant, resource, record_id, flow_id, "
                "flow_name, start_key, snapshot, digest, status, state, version, started_at, "
                "updated_at, ended_at, error, reason, started_by, event_floor) "
                "SELECT t.tenant, t.resource, CAST(n.x + :offset AS TEXT), t.flow_id, "
                "t.flow_name, 'created:' || CAST(n.x + :offset AS TEXT), t.snapshot, t.digest, "
                "t.status, t.state, t.version, :old, :old, :old, t.error, t.reason, "
                f"t.started_by, 0 FROM {source}, flowrunner_runs t "
                "WHERE t.id = :template ORDER BY n.x"
            ).bindparams(stamp),
            {"size": size, "offset": offset, "template": template},
        )
        copies = {"low": low, "high": low + size, "template": template}
        conn.execute(
            sa.text(
                "INSERT INTO flowrunner_step_log (run_id, tenant, at, position, step_id, title, "
                'kind, "pass", what, detail, due_at) SELECT r.id, l.tenant, :old, l.position, '
                'l.step_id, l.title, l.kind, l."pass", l.what, l.detail, :old '
                "FROM flowrunner_runs r, flowrunner_step_log l WHERE l.run_id = :template "
                "AND r.id > :low AND r.id <= :high ORDER BY r.id, l.id"
            ).bindparams(stamp),
            copies,
        )
        conn.execute(
            sa.text(
                'INSERT INTO flowrunner_notices (tenant, run_id, step_id, "pass", audience, '
                "recipient, title, message, email, at, delivered_at) SELECT o.tenant, r.id, "
                'o.step_id, o."pass", o.audience, o.recipient, o.title, o.message, o.email, '
                ":old, :old FROM flowrunner_runs r, flowrunner_notices o WHERE o.run_id = "
                ":template AND r.id > :low AND r.id <= :high ORDER BY r.id"
            ).bindparams(stamp),
            copies,
        )
        conn.execute(
            sa.text(
                "INSERT INTO flowrunner_events (tenant, resource, record_id, name, payload, at) "
                "SELECT r.tenant, r.resource, r.record_id, 'item.touched', :payload, :old "
                "FROM flowrunner_runs r WHERE r.id > :low AND r.id <= :high ORDER BY r.id"
            ).bindparams(stamp, sa.bindparam("payload", {"id": 0}, type_=dialects.json_type())),
            {"low": low, "high": low + size},
        )


def round_of(desk: Desk) -> tuple[float, float]:
    """One measurement: claim 100 due runs (undone), then claim and advance them."""
    runs = desk.start(DUE)
    return desk.claim(runs), desk.advance(runs)


@contextmanager
def desks(kind: str, pg_url: str | None) -> Iterator[tuple[Desk, Desk]]:
    with ExitStack() as stack:
        empty = Desk(stack.enter_context(database(kind, pg_url)))
        full = Desk(stack.enter_context(database(kind, pg_url)))
        yield empty, full


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(
    kind: str, pg_url: str | None, ended: int, repeat: int, say: Callable[[str], None]
) -> None:
    say(f"\n== {kind} ==")
    with desks(kind, pg_url) as (empty, full):
        filled = full.fill(ended, say)
        say(
            f"filled in {filled['seconds']} s: {filled['runs']:,} runs, {filled['history']:,} "
            f"history lines, {filled['notices']:,} notices, {filled['events']:,} events"
        )
        for desk in (empty, full):  # a first round warms each up (statements, caches)
            round_of(desk)
        timings: dict[str, list[tuple[float, float]]] = {"empty": [], "full": []}
        for _ in range(repeat):
            timings["empty"].append(round_of(empty))
            timings["full"].append(round_of(full))
        claim = {k: median_ms([c for c, _ in v]) for k, v in timings.items()}
        advance = {k: median_ms([a for _, a in v]) for k, v in timings.items()}
        say(
            f"claim 100 due:           empty history {claim['empty']:8.1f} ms; with "
            f"{ended:,} ended runs {claim['full']:8.1f} ms; ratio "
            f"{claim['full'] / claim['empty']:.2f}x"
        )
        say(
            f"claim + advance 100 runs: empty history {advance['empty']:7.1f} ms; with "
            f"{ended:,} ended runs {advance['full']:7.1f} ms; ratio "
            f"{advance['full'] / advance['empty']:.2f}x"
        )
        began = time.perf_counter()
        pruned = full.runner.prune(older_than="90 days")
        seconds = time.perf_counter() - began
        say(
            f"prune: {seconds:.1f} s for {pruned.runs:,} runs, {pruned.history:,} history lines, "
            f"{pruned.notices:,} notices, {pruned.events:,} events "
            f"({pruned.runs / seconds:,.0f} runs/s, batches of 1,000)"
        )
        assert pruned.runs == ended, pruned
        if kind == "postgresql":
            say(f"VACUUM of the pruned tables (as autovacuum would): {full.vacuum('VACUUM'):.1f} s")
        later: dict[str, list[tuple[float, float]]] = {"empty": [], "full": []}
        for _ in range(repeat):
            later["empty"].append(round_of(empty))
            later["full"].append(round_of(full))
        claim = {k: median_ms([c for c, _ in v]) for k, v in later.items()}
        advance = {k: median_ms([a for _, a in v]) for k, v in later.items()}
        say(
            f"after the prune: claim {claim['empty']:.1f} ms / {claim['full']:.1f} ms "
            f"({claim['full'] / claim['empty']:.2f}x); claim + advance {advance['empty']:.1f} ms "
            f"/ {advance['full']:.1f} ms ({advance['full'] / advance['empty']:.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--ended", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (medians)")
    parser.add_argument("--postgres", default=os.environ.get("FLOWRUNNER_TEST_POSTGRES_URL"))
    parser.add_argument("--only", choices=["sqlite", "postgresql"], default=None)
    args = parser.parse_args()
    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    for kind in kinds:
        if args.only is None or args.only == kind:
            measure(kind, args.postgres, args.ended, args.repeat, lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
