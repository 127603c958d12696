"""The examples in docs/notices.md run, in order, as one program, on the ticket sample app
that ships with flowrunner, from its wheel: a webhook receiver on 127.0.0.1 that fails
twice acts on the notice once, a failed notice is sent again, and each prints what the
guide says it prints."""

from __future__ import annotations

import pytest
from guides import run_guide, said_inline
from installed import Installed


@pytest.mark.slow
def test_the_notices_guide_runs_and_prints_what_it_says(wheel: Installed) -> None:
    guide = run_guide("notices.md", blocks=5, module="notices_guide", python=wheel.python)
    guide.check(said_inline(guide.text), at_least=8, any_spacing=True)
