"""docs/answer-links.md runs, in order, as one program — a command mailing Approve and
Reject links, the pages served by a FastAPI app and tried with its TestClient — from
flowrunner's wheel, and prints what it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import pytest
from guides import run_guide, said_pairs
from installed import Installed


@pytest.mark.slow
def test_the_answer_links_guide_runs_and_prints_what_it_says(
    database_url: str, wheel: Installed
) -> None:
    guide = run_guide(
        "answer-links.md",
        blocks=9,
        module="answer_links_guide",
        python=wheel.python,
        env={"ORDERS_DATABASE_URL": database_url},
    )
    guide.check(said_pairs(guide.text), at_least=12)
