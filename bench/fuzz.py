"""A long fuzz run of every entry point: the fuzz tests with many examples a test.

    python bench/fuzz.py [SURFACE ...] [EXAMPLES] [pytest arguments]

SURFACE is ``entry`` (``tests/test_fuzz_entry.py``: parse, durations, row saves, the
commands that manage flows), ``console`` (``tests/test_fuzz_console.py``: every route
and field of the web console) or ``cli`` (``tests/test_fuzz_cli.py``: the operators'
commands); all three without one. EXAMPLES is how many inputs each test draws (10,000
without it): ``python bench/fuzz.py console cli 100000``. Extra arguments go to pytest
(``-k sqlite``). PostgreSQL is fuzzed too when ``FLOWRUNNER_TEST_POSTGRES_URL`` names a
server. Each surface prints what its inputs came to (statuses, exit codes) when it ends.
Nothing here is a test: the suite runs the same files with the hypothesis profile's
examples.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXAMPLES = 10_000
SURFACES = {
    "entry": ["tests/test_fuzz_entry.py"],
    "console": ["tests/test_fuzz_console.py", "-k", "every_route"],
    "cli": ["tests/test_fuzz_cli.py", "-k", "every_operators"],
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
