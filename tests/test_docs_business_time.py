"""The examples in docs/business-time.md run, in order, as one program, from flowrunner's
wheel, and print what the guide says they print."""

from __future__ import annotations

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed


@pytest.mark.slow
def test_the_business_time_guide_runs_and_prints_what_it_says(wheel: Installed) -> None:
    guide = run_guide("business-time.md", blocks=5, module="business_guide", python=wheel.python)
    guide.check(said_in_paragraphs(guide.text), at_least=7, any_spacing=True)
