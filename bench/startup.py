"""Start-up: what ``import flowrunner`` and ``flowrunner --help`` cost before they begin,
as ``python -X importtime`` counts it, and what an application that mounts a runner
loads (as a worker does before it serves), beside a plain ``import click`` (the command line's
own library) — and, with ``--before``, beside another flowrunner source tree.

    python bench/startup.py [--rounds 9] [--before PATH]

Each measure is a fresh interpreter: the sum of its top-level imports' cumulative times
(what ``-X importtime`` prints without indentation), and how many modules it loaded. The
trees and measures take turns in every round, so a busy machine weighs on all alike; the
script prints each one's median over the rounds, and the ratio to the first tree's.
``--before`` names a source tree (a checkout, or ``git archive`` of an older commit)
whose ``flowrunner`` is imported instead, by ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURES = {
    "import click": "import click",
    "import flowrunner": "import flowrunner",
    "flowrunner --help": (
        "import sys\nsys.argv = ['flowrunner', '--help']\nfrom flowrunner.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    ),
    "flowrunner worker --help": (
        "import sys\nsys.argv = ['flowrunner', 'worker', '--help']\n"
        "from flowrunner.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    ),
    # What a worker process loads before it serves: an application that mounts a runner
    # (the purchase-order sample: its tables, commands and binding).
    "a sample app's runner": "from fixtures.purchase_orders import app",
}


def measure(code: str, tree: Path) -> tuple[float, int]:
    """Milliseconds spent importing, and modules loaded, running ``code`` with ``tree``'s
    flowrunner."""
    script = f"{code}\nimport sys\nprint(len(sys.modules), file=sys.stderr)"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script],
        cwd=tree,  # ``-c`` puts the current directory first on the path
        env={"PYTHONPATH": str(tree), "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    micros = 0
    lines = done.stderr.splitlines()
    for line in lines:
        if line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line.removeprefix("import time:").split("|")
            if not name.startswith("  ") and cumulative.strip().isdigit():
                micros += int(cumulative)
    # The count is the last line that is not an import (one may come at exit, as gc).
    count = next(line for line in reversed(lines) if line.isdigit())
    return micros / 1000, int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--before", type=Path, default=None, help="another source tree")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    times: dict[tuple[str, str], list[float]] = {}
    modules: dict[tuple[str, str], int] = {}
    for _ in range(args.rounds):
        for label, code in MEASURES.items():
            for tree, path in trees.items():
                if label == "import click" and tree != "this tree":
                    continue
                took, count = measure(code, path)
                times.setdefault((label, tree), []).append(took)
                modules[label, tree] = count
    print(f"median of {args.rounds} rounds, python -X importtime ({sys.version.split()[0]})")
    print(f"{'measure':26} {'tree':10} {'ms':>8} {'modules':>8} {'vs before':>10}")
    for label, tree in times:
        median = statistics.median(times[label, tree])
        before = times.get((label, "before"))
        ratio = f"{median / statistics.median(before):.2f}×" if before else ""
        print(f"{label:26} {tree:10} {median:8.1f} {modules[label, tree]:8d} {ratio:>10}")


if __name__ == "__main__":
    main()
