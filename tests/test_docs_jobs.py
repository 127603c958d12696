"""The examples in docs/jobs.md run, in order, as one program, from flowrunner's wheel,
and print what it says."""

from __future__ import annotations

import re

import pytest
from guides import run_guide, said_pairs
from installed import Installed


@pytest.mark.slow
def test_jobs_guide_examples_run_and_print_what_the_guide_says(wheel: Installed) -> None:
    guide = run_guide("jobs.md", blocks=8, module="jobs_guide", python=wheel.python)
    guide.check(said_pairs(guide.text), at_least=9)
    # The indented block after "prints" is what the history printed, line for line.
    shown = re.search(r"prints\n\n((?:    .+\n)+)", guide.text)
    assert shown is not None
    for line in shown.group(1).splitlines():
        assert line.strip() in guide.printed.splitlines(), line
