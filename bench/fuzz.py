"""A long fuzz run of every entry point: ``tests/test_fuzz_entry.py`` with many examples.

Run ``python bench/fuzz.py`` (10,000 examples a test) or ``python bench/fuzz.py 50000``;
extra arguments go to pytest (``-k saves``). PostgreSQL is fuzzed too when
``FLOWRUNNER_TEST_POSTGRES_URL`` names a server. Nothing here is a test: the suite runs
the same file with the hypothesis profile's examples.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXAMPLES = 10_000


def main(argv: list[str]) -> int:
    examples = DEFAULT_EXAMPLES
    if argv and argv[0].isdigit():
        examples = int(argv.pop(0))
    os.environ["FLOWRUNNER_FUZZ_EXAMPLES"] = str(examples)
    os.chdir(ROOT)
    return int(pytest.main(["-q", "tests/test_fuzz_entry.py", *argv]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
