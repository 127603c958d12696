"""docs/inbound.md runs, in order, as one program — a FastAPI app answering a payment
processor's signed callbacks, tried with its TestClient — from flowrunner's wheel, and
prints what it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed

from flowrunner.inbound import receipt

DOC = Path(__file__).resolve().parent.parent / "docs" / "inbound.md"


@pytest.mark.slow
def test_the_inbound_guide_runs_and_prints_what_it_says(
    database_url: str, wheel: Installed
) -> None:
    guide = run_guide(
        "inbound.md",
        blocks=13,
        module="inbound_guide",
        own_module=True,
        python=wheel.python,
        env={"ORDERS_DATABASE_URL": database_url},
    )
    # "prints `this`", "prints `this` and `that`", "prints `a`, `b` and `c`".
    guide.check(said_in_paragraphs(guide.text), at_least=15)


def test_the_guide_lists_every_status_a_callback_is_answered_with() -> None:
    text = DOC.read_text(encoding="utf-8").split("## The answers")[1].split("## Reference")[0]
    listed = {int(status) for status in re.findall(r"^\| (\d{3}) \|", text, re.M)}
    assert listed == set(receipt.STATUSES) - {500}
    assert "A 500 answers only a fault of flowrunner's own" in text
