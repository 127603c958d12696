"""The examples in docs/at-timers.md run, in order, as one program, on the ticket sample
app that ships with flowrunner, from its wheel, and print what the guide says they print."""

from __future__ import annotations

import pytest
from guides import run_guide, said_inline
from installed import Installed


@pytest.mark.slow
def test_the_timers_guide_runs_and_prints_what_it_says(wheel: Installed) -> None:
    guide = run_guide("at-timers.md", blocks=4, module="timers_guide", python=wheel.python)
    guide.check(said_inline(guide.text), at_least=8, any_spacing=True)
