"""The examples in docs/engine.md run, in order, as one program, from flowrunner's wheel,
and print what it says."""

from __future__ import annotations

import pytest
from guides import run_guide, said_inline
from installed import Installed


@pytest.mark.slow
def test_engine_guide_examples_run_and_print_what_the_guide_says(wheel: Installed) -> None:
    guide = run_guide("engine.md", blocks=6, module="engine_guide", python=wheel.python)
    guide.check(said_inline(guide.text), at_least=15)
