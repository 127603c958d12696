"""docs/web.md runs, in order, as one program — a FastAPI app, tried with its TestClient —
and prints what it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import pytest
from guides import run_guide, said_pairs


def test_the_web_guide_runs_and_prints_what_it_says(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_DATABASE_URL", database_url)
    # A module of its own, as the reader's app file would be: FastAPI and pydantic look
    # the guide's models up in it.
    guide = run_guide("web.md", blocks=8, module="web_guide", own_module=True)
    # "prints `this`", or "prints `this` and `that`" for two lines.
    guide.check(said_pairs(guide.text), at_least=10)
