"""The SQL statements flowrunner sends per run of ``bench/peers.py``'s job, and where its time goes.

    python bench/statements.py [--runs 200] [--no-profile]

Counted with a SQLAlchemy ``before_cursor_execute`` listener on the runner's engine,
for the five-step flows of ``bench/peer_jobs.py`` at one run per transaction:

- the start path: the application's transaction that inserts a record and calls
  ``record_created``;
- the worker's path: the claim (one per ``run_due``, shared by the runs it claims),
  then each run's own transaction — the advance (loading the run and its record,
  the steps, their history lines) and the save (the lease fence, the run's new
  state, its due row) — told apart by the worker's named commit boundaries.

Then a cProfile of starting and driving the runs of the command flow, top 15 by
cumulative time and top 10 by own time; last, when DBOS Transact is installed, what it
sends per workflow of the same five steps.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import importlib.util
import pstats
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# peer_jobs, beside this script, puts the repository on the path for flowrunner.
import peer_jobs
import sqlalchemy as sa

from flowrunner import worker

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
    """cProfile of starting and driving ``runs`` runs of the command flow, one per transaction."""
    with tempfile.TemporaryDirectory() as folder:
        engine = peer_jobs.durable_engine(Path(folder) / "profile.db")
        runner, item = peer_jobs.mount(engine, "commands")
        serving = worker.Worker(runner, batch=1)
        profiler = cProfile.Profile()
        profiler.enable()
        peer_jobs.start_runs(runner, item, range(1, runs + 1))
        peer_jobs.drive(serving)
        profiler.disable()
        engine.dispose()
    stats = pstats.Stats(profiler)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = stats.total_tt  # type: ignore[attr-defined]
    say(f"-- profile: {runs} runs of the command flow, one per transaction, {total:.2f} s --")
    for order, column, top in (("cumulative", 3, 15), ("own time", 2, 10)):
        say(f"top {top} by {order}:  seconds   share   calls/run  function")
        ranked = sorted(table.items(), key=lambda item: item[1][column], reverse=True)
        for (path, line, name), entry in ranked[:top]:
            seconds, calls = entry[column], entry[1]
            say(
                f"  {seconds:24.3f} {seconds / total:7.1%} {calls / runs:11.3g}  "
                f"{_short(path)}:{line}({name})"
            )


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


def _short(path: str) -> str:
    """A source path without the machine's folders: its last two parts."""
    parts = Path(path).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    for flow in ("commands", "sets"):
        count(flow, args.runs, print)
        print()
    if not args.no_profile:
        profile(args.runs, print)
    if importlib.util.find_spec("dbos") is not None:
        print()
        dbos(args.runs, print)


if __name__ == "__main__":
    sys.exit(main())
