"""Against the peers on their own job: five durable steps per workflow, on one SQLite file.

    python bench/peers.py [--runs 400] [--repeat 5] [--quick] [--only NAME ...]

Each variant starts N workflows of five steps and drives every one to its end in
one process, its state on a fresh SQLite file with the same durability (WAL,
``synchronous=FULL``; DBOS is also measured as shipped). Each measurement runs in a
fresh child process, and the variants take turns (A B C …, A B C …), so the machine's
noise falls on all of them alike. Before its clock starts, every variant runs the
same few workflows to their end and collects its set-up's garbage
(``peer_jobs.WARMUP``, ``peer_jobs.settle``). The script prints steps per second per variant
(median of the repetitions) with the commits each workflow made, and flowrunner's speed
over each peer's (median of the repetitions' side-by-side ratios), then the statements
flowrunner sends per run and where a run's time goes (``bench/statements.py``).

flowrunner's five steps are application commands, as DBOS's are functions: each may
reach outside, so each has a checkpoint (a commit) of its own, as DBOS checkpoints
every step. "outside=False" is the same flow with the kind declared to write only
through ``ctx.conn`` (its commands share the run's commit). "traced" is the first with
an OpenTelemetry SDK tracer provider set (``pip install -e '.[traces]'``): a span per
step and per command attempt, exported in batches to memory. The storage's limit is no
engine at all: stdlib ``sqlite3`` on the same durability, one tiny write per commit,
as many commits per workflow as flowrunner made in the same repetition. "flowrunner's
statements alone" is no engine either: the first variant's job recorded statement by
statement, and the same statements sent again by stdlib ``sqlite3`` to a copy of its
file, timed — what flowrunner would do if its own Python cost nothing.

The peers are optional: ``pip install -e '.[bench]'`` installs DBOS Transact and
SpiffWorkflow; a peer that is missing is named, and its variants are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

# Beside this script: the variants' jobs (it puts the repository on the path).
import peer_jobs

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Peer:
    name: str
    module: str
    requirement: str

    @property
    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


DBOS = Peer("DBOS Transact", "dbos", "dbos>=3.4")
SPIFF = Peer("SpiffWorkflow", "SpiffWorkflow", "SpiffWorkflow>=3.2")
# Not a peer: what the traced variant needs (the ``traces`` extra).
OTEL_SDK = Peer("OpenTelemetry SDK", "opentelemetry.sdk", "flowrunner[traces]")


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    job: Callable[[Path, int], peer_jobs.Measured]
    peer: Peer | None = None


VARIANTS = [
    Variant(
        "flowrunner",
        "flowrunner, 1 run per transaction",
        partial(peer_jobs.flowrunner_job, batch=1),
    ),
    Variant(
        "flowrunner-traced",
        "flowrunner, traced (OpenTelemetry SDK)",
        partial(peer_jobs.flowrunner_job, batch=1, tracing=True),
        OTEL_SDK,
    ),
    Variant(
        "flowrunner-one-commit",
        "flowrunner, outside=False, 1 run/tx",
        partial(peer_jobs.flowrunner_job, batch=1, outside=False),
    ),
    Variant(
        "flowrunner-50",
        "flowrunner, 50 runs per transaction",
        partial(peer_jobs.flowrunner_job, batch=50),
    ),
    Variant(
        "flowrunner-sets",
        "flowrunner, built-in steps, 1 run/tx",
        partial(peer_jobs.flowrunner_job, batch=1, flow="sets"),
    ),
    # Not a variant of ours to run: flowrunner's own statements, sent again with no
    # Python of ours between them (``peer_jobs.statements_job``) — what the first
    # variant would do if the engine's work cost nothing.
    Variant("flowrunner-sql", "flowrunner's statements alone", peer_jobs.statements_job),
    Variant("dbos", "DBOS Transact (WAL, FULL)", partial(peer_jobs.dbos_job, durable=True), DBOS),
    Variant(
        "dbos-shipped", "DBOS Transact as shipped", partial(peer_jobs.dbos_job, durable=False), DBOS
    ),
    Variant("spiff", "SpiffWorkflow (WAL, FULL)", peer_jobs.spiff_job, SPIFF),
    # Not a peer: what the disk allows at flowrunner's commits per workflow (its
    # ``commits_per_workflow`` is given by the repetition's flowrunner measurement).
    Variant("storage", "the storage's limit (sqlite3, WAL, FULL)", peer_jobs.storage_job),
]
BY_KEY = {variant.key: variant for variant in VARIANTS}
OURS = [key for key in BY_KEY if key.startswith("flowrunner")]
# The targets, in steps per second at one run per transaction, checkpointed per step.
TARGETS = {"dbos": 4.0, "spiff": 1.5, "storage": 0.5}


def measure_once(variant: Variant, runs: int, commits: float | None = None) -> peer_jobs.Measured:
    """One measurement of ``variant``, in a fresh child process (``commits``: per
    workflow, for the storage's limit)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "measured.json"
        done = subprocess.run(
            [sys.executable, __file__, "--child", variant.key, "--runs", str(runs)],
            env={**os.environ, "PEERS_BENCH_OUT": str(out), "PEERS_COMMITS": str(commits or 7)},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{variant.title} failed:\n{done.stderr[-3000:]}")
        return peer_jobs.Measured(**json.loads(out.read_text()))


def child(key: str, runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        if key == "storage":
            commits = float(os.environ["PEERS_COMMITS"])
            measured = peer_jobs.storage_job(Path(folder), runs, commits_per_workflow=commits)
        else:
            measured = BY_KEY[key].job(Path(folder), runs)
    Path(os.environ["PEERS_BENCH_OUT"]).write_text(json.dumps(asdict(measured)))


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def report(results: dict[str, list[peer_jobs.Measured]], say: Callable[[str], None]) -> None:
    say("")
    say(
        f"{'variant':40} {'steps/s':>8} {'(min-max)':>13} {'workflows/s':>12} "
        f"{'commits/wf':>11}  journal, sync"
    )
    for key, measured in results.items():
        per = measured[0].commits_per_workflow
        commits = "-" if per is None else f"{per:.1f}"
        rates = [m.steps_per_second for m in measured]
        split = ""
        starts = [m.start_seconds for m in measured if m.start_seconds is not None]
        if starts:
            share = statistics.median(s / m.seconds for s, m in zip(starts, measured, strict=True))
            split = f"  (starting runs: {share:.0%} of the time)"
        say(
            f"{BY_KEY[key].title:40} {statistics.median(rates):8.0f} "
            f"{f'({min(rates):.0f}-{max(rates):.0f})':>13} "
            f"{statistics.median(rates) / peer_jobs.STEPS:12.0f} {commits:>11}  "
            f"{measured[0].journal_mode}, {measured[0].synchronous}{split}"
        )
    if results.get("flowrunner") and results.get("flowrunner-traced"):
        pairs = zip(results["flowrunner"], results["flowrunner-traced"], strict=True)
        ratios = [plain.steps_per_second / traced.steps_per_second for plain, traced in pairs]
        say(
            f"\ntraced: {statistics.median(ratios) - 1:+.1%} time per step "
            "(median of the repetitions' side-by-side ratios)"
        )
    peers = [key for key in results if key not in OURS]
    if not peers:
        return
    say("")
    say("flowrunner's steps/s over each peer's (median of the repetitions' ratios):")
    say(f"{'':40}" + "".join(f"{BY_KEY[p].title[:26]:>28}" for p in peers))
    for ours in (key for key in OURS if key in results):
        cells = []
        for peer in peers:
            ratios = [
                mine.steps_per_second / theirs.steps_per_second
                for mine, theirs in zip(results[ours], results[peer], strict=True)
            ]
            target = TARGETS.get(peer) if ours == "flowrunner" else None
            note = f" (target {target:g}x)" if target else ""
            cells.append(f"{statistics.median(ratios):.2f}x{note}")
        say(f"{BY_KEY[ours].title:40}" + "".join(f"{cell:>28}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400, help="workflows per measurement")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved repetitions")
    parser.add_argument("--quick", action="store_true", help="a small check: 30 runs, once")
    parser.add_argument("--only", nargs="+", choices=list(BY_KEY), help="these variants only")
    parser.add_argument(
        "--no-statements", action="store_true", help="skip the statements and the profile"
    )
    parser.add_argument("--child", choices=list(BY_KEY), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.runs)
        return
    if args.quick:
        args.runs, args.repeat = 30, 1
    missing = [peer for peer in (DBOS, SPIFF) if not peer.installed]
    if missing:
        print(
            "Not installed, so not measured: "
            + ", ".join(f"{peer.name} (pip install '{peer.requirement}')" for peer in missing)
            + ". `pip install -e '.[bench]'` installs them all."
        )
    chosen = [
        v
        for v in VARIANTS
        if (args.only is None or v.key in args.only) and (v.peer is None or v.peer.installed)
    ]
    print(
        f"{args.runs} workflows of {peer_jobs.STEPS} durable steps per measurement, "
        f"{args.repeat} interleaved repetitions, each in a fresh process; "
        f"{os.cpu_count()} cores, load average {load()}"
    )
    results: dict[str, list[peer_jobs.Measured]] = {v.key: [] for v in chosen}
    for repetition in range(1, args.repeat + 1):
        line = []
        for variant in chosen:
            # The storage's limit makes as many commits per workflow as flowrunner did.
            ours = results.get("flowrunner") or [None]
            commits = ours[-1].commits_per_workflow if ours[-1] is not None else None
            measured = measure_once(variant, args.runs, commits)
            results[variant.key].append(measured)
            line.append(f"{variant.key} {measured.steps_per_second:.0f}")
        print(f"repetition {repetition}: " + ", ".join(line) + " steps/s")
    report(results, print)
    print(f"\nload average after: {load()}")
    if not args.no_statements:
        print()
        sys.stdout.flush()
        runs = ["--runs", "40", "--profile-runs", "200"] if args.quick else []
        subprocess.run([sys.executable, str(HERE / "statements.py"), *runs], check=True)


if __name__ == "__main__":
    main()
