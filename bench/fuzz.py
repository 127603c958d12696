"""A long fuzz run of every entry point: the fuzz tests with many examples a test.

    python bench/fuzz.py [SURFACE ...] [EXAMPLES] [pytest arguments]

SURFACE is one of ``SURFACES`` below; all of them without one. EXAMPLES is how many
inputs each test draws (10,000 without it): ``python bench/fuzz.py console cli 100000``.
Extra arguments go to pytest (``-k sqlite``, joined to a surface's own ``-k``).
PostgreSQL is fuzzed too when ``FLOWRUNNER_TEST_POSTGRES_URL`` names a server. Each
surface prints what its inputs came to (statuses, exit codes) when it ends. Nothing
here is a test: the suite runs the same files with the hypothesis profile's examples.

- ``entry``: conditions, timestamps, durations, row saves, the command line
  (``tests/test_fuzz_entry.py``);
- ``console``: every route and field of the web console (``tests/test_fuzz_console.py``);
- ``cli``: the operators' commands (``tests/test_fuzz_cli.py``);
- ``jobs``: job declarations, their slots from any moment, schedules answering any plan;
- ``timers``: timers on date columns, declared and mounted;
- ``inbound-declared``: signed endpoints and their HMACs, declared and checked;
- ``workflows-defined``: code workflows defined, mounted, started by hand or by an event
  (these four: ``tests/test_fuzz_declarations.py``);
- ``inbound``: signed callbacks over HTTP — any signature, time, name, method and body:
  nesting, numbers of any size, a name twice, bytes not UTF-8, NUL, lone surrogates
  (``tests/test_inbound_fuzz.py``);
- ``workflows``: code workflows' bodies taking any steps (``tests/test_fuzz_workflows.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXAMPLES = 10_000
DECLARATIONS = "tests/test_fuzz_declarations.py"
SURFACES = {
    "entry": ["tests/test_fuzz_entry.py"],
    "console": ["tests/test_fuzz_console.py", "-k", "every_route"],
    "cli": ["tests/test_fuzz_cli.py", "-k", "every_operators"],
    "jobs": [DECLARATIONS, "-k", "job or slots or plan"],
    "timers": [DECLARATIONS, "-k", "timer"],
    "inbound-declared": [DECLARATIONS, "-k", "inbound"],
    "workflows-defined": [DECLARATIONS, "-k", "workflow_is_defined or any_key"],
    "inbound": ["tests/test_inbound_fuzz.py"],
    "workflows": ["tests/test_fuzz_workflows.py"],
}


def main(argv: list[str]) -> int:
    chosen = []
    while argv and argv[0] in SURFACES:
        chosen.append(argv.pop(0))
    examples = DEFAULT_EXAMPLES
    if argv and argv[0].isdigit():
        examples = int(argv.pop(0))
    os.environ["FLOWRUNNER_FUZZ_EXAMPLES"] = str(examples)
    os.environ["FLOWRUNNER_FUZZ_TALLY"] = "1"
    os.chdir(ROOT)
    asked = ""
    if "-k" in argv:  # the surface's own -k and the caller's, both
        at = argv.index("-k")
        asked = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    failed = 0
    for surface in chosen or list(SURFACES):
        print(f"== {surface}: {examples:,} inputs a test", flush=True)
        args = list(SURFACES[surface])
        if asked:
            if "-k" in args:
                at = args.index("-k") + 1
                args[at] = f"({args[at]}) and ({asked})"
            else:
                args += ["-k", asked]
        # -n 0: one process, so the tally printed at the end counts every input.
        failed |= int(pytest.main(["-q", "-n", "0", "-s", *args, *argv]))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
