"""The job each variant of ``bench/peers.py`` does: N workflows of five durable steps.

Every variant keeps its state in a fresh SQLite file with the same durability — WAL
and ``synchronous=FULL``, set by ``durable_connection`` — except DBOS as shipped,
which keeps its own defaults. Each job sets its engine up untimed and does the same
before its clock starts: ``WARMUP`` workflows run to their end (first statements
compiled, caches filled, files grown) and the set-up's garbage collected
(``settle``). Then it times starting the N workflows and driving each to its end in
this one process, checks that all of them ended, and returns a ``Measured``.
"""

from __future__ import annotations

import gc
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowrunner import FlowBinding, Kind, NotifyRule, flow_runner, tables
from flowrunner.engine import worker
from flowrunner.flows import files
from flowrunner.runner import FlowRunner
from flowrunner.store import dialects, engine_tables, migrate

STEPS = 5
# Workflows every variant runs to their end before its clock starts (their ids follow
# the timed ones').
WARMUP = 20
BPMN = Path(__file__).resolve().parent / "five_steps.bpmn"


@dataclass(frozen=True)
class Measured:
    """One variant's measurement: N workflows of ``STEPS`` steps in ``seconds``."""

    runs: int
    seconds: float
    journal_mode: str
    synchronous: str
    # flowrunner only: the part spent starting runs (record_created); the rest drives them.
    start_seconds: float | None = None
    # Commits to the SQLite file while the clock ran (None: not counted, DBOS as shipped).
    commits: int | None = None
    # flowrunner only: the CPU seconds this process spent while the clock ran.
    cpu_seconds: float | None = None

    @property
    def commits_per_workflow(self) -> float | None:
        return None if self.commits is None else self.commits / self.runs

    @property
    def steps_per_second(self) -> float:
        return self.runs * STEPS / self.seconds


SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


# Commits to SQLite counted on every durable connection of the process (each variant
# has a process of its own): SQLite tells each statement it runs, COMMIT among them.
_COMMITS = [0]


def _traced(sql: str) -> None:
    if sql.lstrip()[:6].upper() in ("COMMIT", "END"):
        _COMMITS[0] += 1


def commits() -> int:
    """The commits counted so far on this process's durable connections."""
    return _COMMITS[0]


def durable_connection(connection: sqlite3.Connection) -> sqlite3.Connection:
    """The durability every variant but DBOS-as-shipped gets: WAL, ``synchronous=FULL``;
    its commits counted (``commits``)."""
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.set_trace_callback(_traced)
    return connection


def settle() -> None:
    """Just before a variant's clock starts: collect the garbage its set-up left.

    A fresh process that has just imported its libraries, made its tables and run its
    warm-up owes the collector a full pass (tens of milliseconds over SQLAlchemy's
    objects) soon after; made now, it falls on no variant's timing — as ``timeit``
    keeps the collector out of what it times. Every variant settles the same way.
    """
    gc.collect()


def settings_of(connection: sqlite3.Connection) -> tuple[str, str]:
    """(journal mode, synchronous level) of a connection, as SQLite reports them."""
    journal = str(connection.execute("PRAGMA journal_mode").fetchone()[0])
    level = int(connection.execute("PRAGMA synchronous").fetchone()[0])
    return journal, SYNCHRONOUS.get(level, str(level))


# -- flowrunner --------------------------------------------------------------------------

# The closest flowrunner has to a peer's step: an application kind whose command (a
# function, as a DBOS step or a BPMN script task is) runs once and has its answer
# recorded. "sets" is the same length of flow in built-in steps, for comparison.
FLOWS = {
    "commands": "\n".join(
        ["- name: Five steps", "  start: created", "  steps:"]
        + [f"    - {{position: {n}, kind: add_one, title: Step {n}}}" for n in range(1, 6)]
    ),
    "sets": """
- name: Five steps
  start: created
  steps:
    - {position: 1, kind: set, title: One, field: status, value: one}
    - {position: 2, kind: set, title: Two, field: status, value: two}
    - {position: 3, kind: notify, title: Tell, audience: owner, message: halfway}
    - {position: 4, kind: set, title: Four, field: status, value: four}
    - {position: 5, kind: set, title: Five, field: status, value: five}
""",
}


def binding(*, outside: bool = True) -> FlowBinding:
    """The items' binding. ``outside``: the add_one kind's command may reach outside the
    database, as a DBOS step may (the default: a checkpoint per command); False declares
    it only writes through ``ctx.conn`` (the commands of a run share its commit)."""
    return FlowBinding(
        resource="item",
        flows_table="item_flow",
        steps_table="item_flow_step",
        set_columns=["status"],
        notify=[NotifyRule(audience="owner", to="owner")],
        kinds={"add_one": Kind(command="add_one", outside=outside)},
    )


BINDING = binding()


def add_one(context: Any) -> Mapping[str, object]:
    return {"x": context.position + 1}


def durable_engine(path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}")

    @sa.event.listens_for(engine, "connect")
    def _durable(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        durable_connection(dbapi_connection)

    return engine


def mount(engine: sa.Engine, flow: str, *, outside: bool = True) -> tuple[FlowRunner, sa.Table]:
    """The item table, the engine's tables and one flow; the runner mounted on them."""
    bound = binding(outside=outside)
    metadata = sa.MetaData()
    item = sa.Table(
        "item",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("status", sa.String(32)),
        sa.Column("owner", sa.String(64)),
    )
    tables.for_binding(metadata, bound)
    metadata.create_all(engine)
    migrate.upgrade(engine)
    runner = flow_runner(bound, engine, commands={"add_one": add_one})
    with engine.begin() as conn:
        files.import_flows(
            conn, bound, runner.tables, files.loads_yaml(FLOWS[flow]), columns=runner.columns
        )
    return runner, item


def start_runs(runner: FlowRunner, item: sa.Table, ids: range, *, per_transaction: int = 1) -> None:
    """Insert the records and start their runs, as an application does: the insert and
    ``record_created`` in one transaction (of ``per_transaction`` records)."""
    insert = sa.insert(item)
    for first in range(0, len(ids), per_transaction):
        with dialects.begin(runner.engine) as conn:
            for record_id in ids[first : first + per_transaction]:
                record = {"id": record_id, "status": "new", "owner": f"user{record_id}"}
                conn.execute(insert, record)
                runner.record_created(conn, record)


def drive(serving: worker.Worker) -> None:
    """Run the worker until nothing is due."""
    while serving.run_due(limit=max(100, serving.batch)):
        pass


def traced() -> Callable[[], int]:
    """Tracing on, as an application sets it: an SDK tracer provider exporting in batches
    from a thread of its own (to memory here: no collector's network in the figure). Gives
    what flushes the spans still queued, counts the spans exported and takes the provider
    away again (``bench/tracing.py`` turns tracing on and off in one process)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util._once import Once

    def forget() -> None:
        # OpenTelemetry takes a process's provider once; its own tests start afresh so.
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        trace._TRACER_PROVIDER = None

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    forget()
    trace.set_tracer_provider(provider)

    def flushed() -> int:
        provider.force_flush()
        exported = len(exporter.get_finished_spans())
        provider.shutdown()
        forget()
        return exported

    return flushed


def flowrunner_job(
    folder: Path,
    runs: int,
    *,
    batch: int,
    flow: str = "commands",
    outside: bool = True,
    tracing: bool = False,
) -> Measured:
    """flowrunner's job; with ``tracing``, every step and command attempt a span, exported
    (the flush of the last spans is timed too)."""
    flush = traced() if tracing else None
    engine = durable_engine(folder / "flowrunner.db")
    runner, item = mount(engine, flow, outside=outside)
    serving = worker.Worker(runner, batch=batch)
    start_runs(runner, item, range(runs + 1, runs + 1 + WARMUP), per_transaction=batch)
    drive(serving)
    settle()
    committed = commits()
    began, cpu = time.perf_counter(), time.process_time()
    start_runs(runner, item, range(1, runs + 1), per_transaction=batch)
    started = time.perf_counter()
    drive(serving)
    spans = flush() if flush is not None else 0
    ended, cpu = time.perf_counter(), time.process_time() - cpu
    committed = commits() - committed
    if flush is not None and spans < (runs + WARMUP) * STEPS:
        raise RuntimeError(f"flowrunner traced: only {spans} spans exported")
    with engine.connect() as conn:
        done = conn.execute(
            sa.select(sa.func.count()).where(engine_tables.runs.c.status == "done")
        ).scalar_one()
        journal, level = settings_of(conn.connection.dbapi_connection)  # type: ignore[arg-type]
    engine.dispose()
    if done != runs + WARMUP:
        raise RuntimeError(f"flowrunner: only {done - WARMUP} of {runs} runs ended")
    return Measured(
        runs,
        ended - began,
        journal,
        level,
        start_seconds=started - began,
        commits=committed,
        cpu_seconds=cpu,
    )


# What flowrunner's job sent: each statement with its parameters and whether it was an
# ``executemany``; a commit or a rollback as its own word.
Sent = tuple[str, Any, bool]


def recorded(engine: sa.Engine) -> list[Sent]:
    """Every statement ``engine``'s connections send from now on, in order, with the
    transactions' ends (``statements_job`` sends them again)."""
    sent: list[Sent] = []

    def statement(_c: object, _u: object, sql: str, params: Any, _x: object, many: bool) -> None:
        sent.append((sql, list(params) if many else params, many))

    sa.event.listen(engine, "before_cursor_execute", statement)
    sa.event.listen(engine, "commit", lambda _c: sent.append(("COMMIT", None, False)))
    sa.event.listen(engine, "rollback", lambda _c: sent.append(("ROLLBACK", None, False)))
    # A connection given back to the pool is rolled back there, without the event above.
    sa.event.listen(engine, "reset", lambda *_: sent.append(("ROLLBACK", None, False)))
    return sent


def statements_job(folder: Path, runs: int) -> Measured:
    """flowrunner's statements alone: flowrunner's job (one run per transaction, a
    checkpoint per command) recorded statement by statement, then the same statements,
    with the same parameters and commits, sent by stdlib ``sqlite3`` to a copy of the
    file as it was when the job's clock started, and timed. No Python of ours runs
    between them: the time an engine sending exactly these statements cannot go below.
    Checked: the copy ends with every run done and as many history lines as the job's.
    """
    engine = durable_engine(folder / "flowrunner.db")
    runner, item = mount(engine, "commands")
    serving = worker.Worker(runner, batch=1)
    start_runs(runner, item, range(runs + 1, runs + 1 + WARMUP))
    drive(serving)
    engine.dispose()  # the last connection closed folds the WAL into the file
    for suffix in ("", "-wal"):
        if (folder / f"flowrunner.db{suffix}").exists():
            shutil.copyfile(folder / f"flowrunner.db{suffix}", folder / f"replay.db{suffix}")
    sent = recorded(engine)
    start_runs(runner, item, range(1, runs + 1))
    drive(serving)
    with engine.connect() as conn:
        counted = sa.select(sa.func.count()).select_from(engine_tables.step_log)
        lines = conn.execute(counted).scalar_one()
    engine.dispose()
    db = durable_connection(
        sqlite3.connect(folder / "replay.db", isolation_level=None, cached_statements=1024)
    )
    settle()
    committed = commits()
    began = time.perf_counter()
    for sql, params, many in sent:
        if sql == "COMMIT":
            db.commit()
        elif sql == "ROLLBACK":
            db.rollback()  # nothing when no transaction is open
        elif many:
            db.executemany(sql, params)
        else:
            cursor = db.execute(sql, params or ())
            if cursor.description is not None:
                cursor.fetchall()
    elapsed = time.perf_counter() - began
    committed = commits() - committed
    done = db.execute("SELECT count(*) FROM flowrunner_runs WHERE status = 'done'").fetchone()[0]
    replayed = db.execute("SELECT count(*) FROM flowrunner_step_log").fetchone()[0]
    journal, level = settings_of(db)
    db.close()
    if done != runs + WARMUP or replayed != lines:
        raise RuntimeError(
            f"flowrunner's statements replayed: {done - WARMUP} of {runs} runs done, "
            f"{replayed} of {lines} history lines"
        )
    return Measured(runs, elapsed, journal, level, commits=committed)


# -- DBOS Transact -----------------------------------------------------------------------


def dbos_job(folder: Path, runs: int, *, durable: bool) -> Measured:
    """``@DBOS.workflow`` calling five ``@DBOS.step``s, its system database on SQLite."""
    from dbos import DBOS

    five_steps, settings = dbos_app(folder / "dbos.sqlite", durable=durable)

    def work(ids: range) -> None:
        for n in ids:
            if five_steps(n) != n + STEPS:
                raise RuntimeError("DBOS: a workflow returned a wrong result")

    work(range(runs, runs + WARMUP))
    settle()
    committed = commits()
    began = time.perf_counter()
    work(range(runs))
    elapsed = time.perf_counter() - began
    committed = commits() - committed
    DBOS.destroy()
    with sqlite3.connect(folder / "dbos.sqlite") as check:
        done = check.execute(
            "SELECT count(*) FROM workflow_status WHERE status = 'SUCCESS'"
        ).fetchone()[0]
        outputs = check.execute("SELECT count(*) FROM operation_outputs").fetchone()[0]
    if done != runs + WARMUP or outputs != (runs + WARMUP) * STEPS:
        raise RuntimeError(
            f"DBOS: {done - WARMUP} of {runs} workflows ended, {outputs} steps recorded"
        )
    journal, level = settings[0] if settings else ("?", "?")
    return Measured(runs, elapsed, journal, level, commits=committed if durable else None)


def dbos_app(path: Path, *, durable: bool) -> tuple[Callable[[int], int], list[tuple[str, str]]]:
    """DBOS launched on the SQLite file ``path``: its five-step workflow, and (filled as
    DBOS opens its first connection) the journal mode and synchronous level it runs with.

    DBOS builds its own SQLAlchemy engine from ``system_database_url`` and takes
    ``db_engine_kwargs`` for it; its ``creator`` is where our connections get the
    pragmas (DBOS's own connect hook — IMMEDIATE transactions, busy timeout — still
    runs on them). As shipped, DBOS sets neither: a rollback journal, SQLite's default
    ``synchronous``.
    """
    from dbos import DBOS

    config: dict[str, Any] = {
        "name": "peers_bench",
        "system_database_url": f"sqlite:///{path}",
        "log_level": "WARNING",
    }
    if durable:

        def connect() -> sqlite3.Connection:
            return durable_connection(sqlite3.connect(path, check_same_thread=False))

        config["db_engine_kwargs"] = {"creator": connect}
    # Listened on every pool of the process (each variant has a process of its own).
    settings: list[tuple[str, str]] = []

    def read_settings(dbapi_connection: object, _record: object) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection) and not settings:
            settings.append(settings_of(dbapi_connection))

    sa.event.listen(sa.pool.Pool, "connect", read_settings)
    DBOS(config=config)  # type: ignore[arg-type]

    @DBOS.step()
    def step(x: int) -> int:
        return x + 1

    @DBOS.workflow()
    def five_steps(x: int) -> int:
        for _ in range(STEPS):
            x = step(x)
        return x

    DBOS.launch()
    return five_steps, settings


# -- SpiffWorkflow -----------------------------------------------------------------------


def spiff_job(folder: Path, runs: int) -> Measured:
    """The five-task BPMN process with ``BpmnWorkflow``, its state saved after each task.

    Saved as a Spiff application saves it: the workflow serialized to JSON by
    ``BpmnWorkflowSerializer`` and written to a row, one transaction per write — when
    created, after each of the five script tasks, and when it has ended (seven writes,
    as DBOS's workflow row, five step outputs and final status are seven).
    """
    from SpiffWorkflow.bpmn.parser import BpmnParser
    from SpiffWorkflow.bpmn.serializer import BpmnWorkflowSerializer
    from SpiffWorkflow.bpmn.specs.mixins.script_task import ScriptTask
    from SpiffWorkflow.bpmn.workflow import BpmnWorkflow

    parser = BpmnParser()
    parser.add_bpmn_file(str(BPMN))
    spec = parser.get_spec("five_steps")
    serializer = BpmnWorkflowSerializer()
    db = durable_connection(sqlite3.connect(folder / "spiff.db", isolation_level=None))
    db.execute("CREATE TABLE workflow (id INTEGER PRIMARY KEY, state TEXT NOT NULL, done INTEGER)")

    def write(sql: str, n: int, workflow: Any) -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute(sql, {"id": n, "state": serializer.serialize_json(workflow)})
        db.execute("COMMIT")

    def work(ids: range) -> None:
        for n in ids:
            workflow = BpmnWorkflow(spec)
            write("INSERT INTO workflow VALUES (:id, :state, 0)", n, workflow)

            def saved(task: Any, n: int = n, workflow: Any = workflow) -> None:
                if isinstance(task.task_spec, ScriptTask):
                    write("UPDATE workflow SET state = :state WHERE id = :id", n, workflow)

            workflow.do_engine_steps(did_complete_task=saved)
            if not workflow.is_completed() or workflow.data.get("x") != STEPS:
                raise RuntimeError("SpiffWorkflow: a workflow did not end with its result")
            write("UPDATE workflow SET state = :state, done = 1 WHERE id = :id", n, workflow)

    work(range(runs, runs + WARMUP))
    settle()
    committed = commits()
    began = time.perf_counter()
    work(range(runs))
    elapsed = time.perf_counter() - began
    committed = commits() - committed
    done = db.execute("SELECT count(*) FROM workflow WHERE done = 1").fetchone()[0]
    journal, level = settings_of(db)
    db.close()
    if done != runs + WARMUP:
        raise RuntimeError(f"SpiffWorkflow: only {done - WARMUP} of {runs} workflows ended")
    return Measured(runs, elapsed, journal, level, commits=committed)


# -- the storage's limit ------------------------------------------------------------------


def storage_job(folder: Path, runs: int, *, commits_per_workflow: float) -> Measured:
    """What the disk allows: stdlib ``sqlite3`` in WAL with ``synchronous=FULL``, one tiny
    write per commit, as many commits per workflow as flowrunner made (measured in the
    same repetition) — no engine at all, so no workflow engine on this file can beat it."""
    db = durable_connection(sqlite3.connect(folder / "storage.db", isolation_level=None))
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    per = max(1, round(commits_per_workflow))

    def work(ids: range) -> None:
        for n in ids:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (?, 0)", (n,))
            db.execute("COMMIT")
            for _ in range(per - 1):
                db.execute("BEGIN IMMEDIATE")
                db.execute("UPDATE t SET v = v + 1 WHERE id = ?", (n,))
                db.execute("COMMIT")

    work(range(runs, runs + WARMUP))
    settle()
    committed = commits()
    began = time.perf_counter()
    work(range(runs))
    elapsed = time.perf_counter() - began
    committed = commits() - committed
    journal, level = settings_of(db)
    db.close()
    return Measured(runs, elapsed, journal, level, commits=committed)
