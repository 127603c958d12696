"""A long fuzz run: the suite's fuzz tests with many examples, surface by surface.

Run ``python bench/fuzz.py`` (10,000 examples a test, every surface),
``python bench/fuzz.py 100000 inbound workflows`` (those surfaces only), or
``python bench/fuzz.py --list``. Arguments after the surfaces go to pytest (``-k saves``,
``-n 0`` for one process). PostgreSQL is fuzzed too when ``FLOWRUNNER_TEST_POSTGRES_URL``
names a server. Nothing here is a test: the suite runs the same files with the
hypothesis profile's examples; here ``FLOWRUNNER_FUZZ_EXAMPLES`` says how many.

The surfaces, each one pytest selection:

- ``entry``: conditions, timestamps, durations, row saves, the command line;
- ``jobs``: job declarations, their slots from any moment, schedules answering any plan;
- ``timers``: timers on date columns, declared and mounted;
- ``inbound-declared``: signed endpoints and their HMACs, declared and checked;
- ``inbound``: signed callbacks over HTTP — any signature, time, name, method and body
  (nesting, numbers of any size, a name twice, bytes not UTF-8, NUL, lone surrogates);
- ``workflows-defined``: code workflows defined, mounted, started by hand or by an event;
- ``workflows``: code workflows' bodies taking any steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXAMPLES = 10_000
DECLARATIONS = "tests/test_fuzz_declarations.py"
SURFACES: dict[str, list[str]] = {
    "entry": ["tests/test_fuzz_entry.py"],
    "jobs": [DECLARATIONS, "-k", "job or slots or plan"],
    "timers": [DECLARATIONS, "-k", "timer"],
    "inbound-declared": [DECLARATIONS, "-k", "inbound"],
    "inbound": ["tests/test_inbound_fuzz.py"],
    "workflows-defined": [DECLARATIONS, "-k", "workflow_is_defined or any_key"],
    "workflows": ["tests/test_fuzz_workflows.py"],
}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--list"]:
        print("\n".join(SURFACES))
        return 0
    examples = DEFAULT_EXAMPLES
    if argv and argv[0].isdigit():
        examples = int(argv.pop(0))
    chosen = []
    while argv and argv[0] in SURFACES:
        chosen.append(argv.pop(0))
    env = {**os.environ, "FLOWRUNNER_FUZZ_EXAMPLES": str(examples)}
    status = 0
    for surface in chosen or list(SURFACES):
        print(f"== {surface}: {examples:,} examples a test", flush=True)
        command = [sys.executable, "-m", "pytest", "-q", *SURFACES[surface], *argv]
        status = max(status, subprocess.call(command, cwd=ROOT, env=env))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
