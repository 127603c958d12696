"""docs/web.md runs, in order, as one program — a FastAPI app, tried with its TestClient —
from flowrunner's wheel, and prints what it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import pytest
from guides import run_guide, said_pairs
from installed import Installed


@pytest.mark.slow
def test_the_web_guide_runs_and_prints_what_it_says(database_url: str, wheel: Installed) -> None:
    # A module of its own, as the reader's app file would be: FastAPI and pydantic look
    # the guide's models up in it.
    guide = run_guide(
        "web.md",
        blocks=8,
        module="web_guide",
        own_module=True,
        python=wheel.python,
        env={"ORDERS_DATABASE_URL": database_url},
    )
    # "prints `this`", or "prints `this` and `that`" for two lines.
    guide.check(said_pairs(guide.text), at_least=10)
