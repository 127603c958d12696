"""docs/events.md runs, in order, as one program, from flowrunner's wheel, and prints what
it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed


@pytest.mark.slow
def test_the_events_guide_runs_and_prints_what_it_says(database_url: str, wheel: Installed) -> None:
    guide = run_guide(
        "events.md",
        blocks=7,
        module="events_guide",
        own_module=True,
        python=wheel.python,
        env={"EVENTS_DATABASE_URL": database_url},
    )
    guide.check(said_in_paragraphs(guide.text), at_least=12)
