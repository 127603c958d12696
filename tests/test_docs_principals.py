"""The examples in docs/principals.md run, in order, as one program (the module ``desk``,
which the guide's ``--app desk:runner`` names), from flowrunner's wheel, and print what
the guide says they print."""

from __future__ import annotations

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed


@pytest.mark.slow
def test_the_principals_guide_runs_and_prints_what_it_says(wheel: Installed) -> None:
    guide = run_guide(
        "principals.md", blocks=5, module="desk", own_module=True, python=wheel.python
    )
    guide.check(said_in_paragraphs(guide.text), at_least=9, any_spacing=True)
