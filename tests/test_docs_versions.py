"""The examples in docs/versions.md — a desk's follow-up flow published, compared,
published again, its waiting runs moved, rolled back — run in order as one program,
from flowrunner's wheel, and print what the guide says."""

from __future__ import annotations

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed


@pytest.mark.slow
def test_versions_guide_examples_run_and_print_what_the_guide_says(wheel: Installed) -> None:
    guide = run_guide("versions.md", blocks=6, module="versions_guide", python=wheel.python)
    guide.check(said_in_paragraphs(guide.text), at_least=8)
