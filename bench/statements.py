"""The SQL statements flowrunner sends per run of ``bench/peers.py``'s job, and where its time goes.

    python bench/statements.py [--runs 200] [--no-profile] [--profile-runs 3000]

Counted with a SQLAlchemy ``before_cursor_execute`` listener on the runner's engine,
for the five-step flows of ``bench/peer_jobs.py`` at one run per transaction:

- the start path: the application's transaction that inserts a record and calls
  ``record_created``;
- the worker's path: the claim (one per ``run_due``, shared by the runs it claims),
  then each run's own transaction — the advance (loading the run and its record,
  the steps, their history lines) and the save (the lease fence, the run's new
  state, its due row) — told apart by the worker's named commit boundaries.

Then where the CPU time of starting and driving the runs of the command flow goes
(sampled, see ``profile``); last, when DBOS Transact is installed, what it sends per
workflow of the same five steps.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# peer_jobs, beside this script, puts the repository on the path for flowrunner.
import peer_jobs
import sqlalchemy as sa

from flowrunner.engine import worker

# A statement's shape, for the listing: its verb and its table.
_CONTROL = re.compile(
    r"^\s*(BEGIN IMMEDIATE|BEGIN|SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\b"
)
# A table's name, without the schema in front of it (DBOS writes ``main.workflow_status``).
_NAME = r'(?:"?\w+"?\.)?"?(\w+)'
_WRITE = re.compile(r"^\s*(INSERT INTO|UPDATE|DELETE FROM)\s+" + _NAME)
_READ = re.compile(r"\bFROM\s+" + _NAME)


def shape(statement: str) -> str:
    """``SELECT item``, ``INSERT INTO flowrunner_runs``, ``SAVEPOINT``: what a statement is."""
    if found := _CONTROL.match(statement):
        return found.group(1)
    if found := _WRITE.match(statement):
        return f"{found.group(1)} {found.group(2)}"
    found = _READ.search(statement)
    return f"SELECT {found.group(1) if found else '?'}"


class Counter:
    """Statements and commits on one engine, filed under the phase named last."""

    def __init__(self, engine: sa.Engine) -> None:
        self.phase = "setup"
        self.statements: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.commits: collections.Counter[str] = collections.Counter()
        sa.event.listen(engine, "before_cursor_execute", self._statement)
        sa.event.listen(engine, "commit", self._commit)

    def _statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        self.statements[self.phase][shape(statement)] += 1

    def _commit(self, _conn: Any) -> None:
        self.commits[self.phase] += 1

    def total(self, phase: str) -> int:
        return sum(self.statements[phase].values())

    def at(self, point: str) -> None:
        """The worker's hook: its commit boundaries mark where each phase begins."""
        if point in ("claimed", "committed"):
            self.phase = "advance"
        elif point == "before-save":
            self.phase = "save"
        elif point == "before-commit":
            self.phase = "commit"


def count(flow: str, runs: int, say: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        engine = peer_jobs.durable_engine(Path(folder) / "count.db")
        runner, item = peer_jobs.mount(engine, flow)
        counter = Counter(engine)
        # The first run pays for building statements (once per process); count the rest.
        peer_jobs.start_runs(runner, item, range(1, 2))
        peer_jobs.drive(worker.Worker(runner))
        counter.statements.clear()
        counter.commits.clear()
        counter.phase = "start"
        peer_jobs.start_runs(runner, item, range(2, runs + 2))
        serving = worker.Worker(runner, batch=1, crash_at=counter.at)
        claims = 0
        while True:
            counter.phase = "claim"
            before = collections.Counter(counter.statements["claim"])
            if not serving.run_due(limit=100):
                # The last claim finds nothing: filed apart, it is no run's cost.
                counter.statements["idle"] = counter.statements["claim"] - before
                counter.statements["claim"] = before
                break
            claims += 1
        engine.dispose()
    steps = peer_jobs.STEPS
    per_run = {phase: counter.total(phase) / runs for phase in counter.statements}
    say(f"-- {flow} flow ({steps} steps), {runs} runs, one run per transaction --")
    say(
        f"start path (insert + record_created): {per_run['start']:5.1f} statements per run, "
        f"{counter.commits['start'] / runs:.0f} commit"
    )
    _listing(counter.statements["start"], runs, say)
    say(
        f"claim of up to 100 runs:              {counter.total('claim') / claims:5.1f} statements, "
        f"1 commit ({per_run['claim']:.2f} statements per run); one that finds nothing: "
        f"{counter.total('idle')}"
    )
    _listing(counter.statements["claim"], claims, say)
    for phase in ("advance", "save"):
        say(f"{phase + ':':38} {per_run[phase]:5.1f} statements per run")
        _listing(counter.statements[phase], runs, say)
    run = per_run["advance"] + per_run["save"]
    commits = (counter.commits["advance"] + counter.commits["commit"]) / runs
    say(
        f"worker's path, per run:               {run + per_run['claim']:5.1f} statements with "
        f"its share of the claim ({run / steps:.1f} per step without it), {commits:.0f} commit"
    )


def _listing(found: collections.Counter[str], per: int, say: Callable[[str], None]) -> None:
    say("    " + ", ".join(f"{n / per:g}x {what}" for what, n in found.most_common()))


def profile(runs: int, say: Callable[[str], None]) -> None:
    """Where the CPU time of starting and driving ``runs`` runs of the command flow goes.

    Sampled, not traced: every half millisecond of the process's CPU time (``SIGPROF``)
    the stack is looked at, and each flowrunner function on it is counted once. A
    tracing profiler (cProfile) would slow every Python call and so overweight the ones
    that make many small calls; sampling leaves them as they run. The time waiting for
    the disk (a commit's fsync) is not CPU time and is not counted.
    """
    if not hasattr(signal, "setitimer"):
        say("-- profile: needs SIGPROF (Unix) --")
        return
    on_stack: collections.Counter[str] = collections.Counter()
    samples = [0]
    running = [False]

    def sample(_signal: int, frame: Any) -> None:
        if not running[0]:
            return
        samples[0] += 1
        seen: set[str] = set()
        while frame is not None:
            name = _ours(frame.f_code)
            if name is not None and name not in seen:
                seen.add(name)
                on_stack[name] += 1
            frame = frame.f_back

    previous = signal.signal(signal.SIGPROF, sample)
    signal.setitimer(signal.ITIMER_PROF, 0.0005, 0.0005)
    try:
        with tempfile.TemporaryDirectory() as folder:
            engine = peer_jobs.durable_engine(Path(folder) / "profile.db")
            runner, item = peer_jobs.mount(engine, "commands")
            peer_jobs.start_runs(runner, item, range(1, 3))  # statements built, flows read
            peer_jobs.drive(worker.Worker(runner))
            serving = worker.Worker(runner, batch=1)
            running[0] = True
            began = time.process_time()
            peer_jobs.start_runs(runner, item, range(3, runs + 3))
            started = time.process_time()
            peer_jobs.drive(serving)
            ended = time.process_time()
            running[0] = False
            engine.dispose()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, previous)
    per_run = (ended - began) / runs * 1e6
    say(
        f"-- CPU time: {runs} runs of the command flow, one per transaction: {per_run:.0f} us "
        f"a run ({(started - began) / runs * 1e6:.0f} starting it, "
        f"{(ended - started) / runs * 1e6:.0f} driving it); {samples[0]} samples --"
    )
    say("   us/run  share  flowrunner function (counted whenever it is on the stack)")
    for name, count in on_stack.most_common(30):
        share = count / max(1, samples[0])
        say(f"  {share * per_run:7.0f} {share:6.1%}  {name}")


def _ours(code: Any) -> str | None:
    """``module.py:function`` of a flowrunner function, or None for any other."""
    parts = Path(code.co_filename).parts
    if "flowrunner" not in parts:
        return None
    inside = parts[len(parts) - parts[::-1].index("flowrunner") :]
    return f"{'/'.join(inside)}:{code.co_name}"


def dbos(runs: int, say: Callable[[str], None]) -> None:
    """For comparison: what DBOS Transact sends per workflow of the same job."""
    from dbos import DBOS

    found: collections.Counter[str] = collections.Counter()
    commits: collections.Counter[str] = collections.Counter()
    writing: set[int] = set()  # connections whose transaction has written
    counting = False

    def statement(conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        if counting:
            found[shape(text)] += 1
            if not text.lstrip().upper().startswith("SELECT"):
                writing.add(id(conn))

    def commit(conn: Any) -> None:
        if counting:
            commits["writing" if id(conn) in writing else "reading"] += 1
        writing.discard(id(conn))

    with tempfile.TemporaryDirectory() as folder:
        five_steps, _settings = peer_jobs.dbos_app(Path(folder) / "dbos.sqlite", durable=True)
        five_steps(0)
        # DBOS's engine is its own; listening on every engine catches it.
        sa.event.listen(sa.Engine, "before_cursor_execute", statement)
        sa.event.listen(sa.Engine, "commit", commit)
        counting = True
        for n in range(runs):
            five_steps(n)
        counting = False
        DBOS.destroy()
    say(f"-- for comparison: DBOS Transact, {runs} workflows of the same five steps --")
    say(
        f"per workflow: {found.total() / runs:.1f} statements in "
        f"{commits['writing'] / runs:.1f} writing and {commits['reading'] / runs:.1f} "
        "read-only transactions (its background threads' polls included)"
    )
    _listing(found, runs, say)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--profile-runs", type=int, default=3000, help="runs sampled (the kernel ticks coarsely)"
    )
    args = parser.parse_args()
    for flow in ("commands", "sets"):
        count(flow, args.runs, print)
        print()
    if not args.no_profile and args.profile_runs > 0:
        profile(args.profile_runs, print)
    if importlib.util.find_spec("dbos") is not None:
        print()
        dbos(args.runs, print)


if __name__ == "__main__":
    sys.exit(main())
