"""docs/inbound.md runs, in order, as one program — a FastAPI app answering a payment
processor's signed callbacks, tried with its TestClient — and prints what it says; once
on SQLite and once on PostgreSQL."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import types
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowrunner.inbound import receipt

DOC = Path(__file__).resolve().parent.parent / "docs" / "inbound.md"


def test_the_inbound_guide_runs_and_prints_what_it_says(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_DATABASE_URL", database_url)
    # Set where the server runs, never in the code: the guide reads it as the sender.
    monkeypatch.setenv("PAYMENT_CALLBACK_SECRET", "whsec-guide-5d1c")
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 8
    out = io.StringIO()
    guide = types.ModuleType("inbound_guide")
    sys.modules[guide.__name__] = guide
    namespace = guide.__dict__
    try:
        with contextlib.redirect_stdout(out):
            for block in blocks:
                code = compile(block, str(DOC), "exec", dont_inherit=True)
                exec(code, namespace)  # our own doc, not user input
    finally:
        del sys.modules[guide.__name__]
        engine = namespace.get("engine")
        if isinstance(engine, sa.Engine):
            engine.dispose()
    printed = out.getvalue()
    # "prints `this`", "prints `this` and `that`", "prints `a`, `b` and `c`".
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    said = " ".join(re.findall(r"\bprints (.*?)(?:\n\n|$)", prose, flags=re.S))
    claims = re.findall(r"`([^`]+)`", said)
    assert len(claims) >= 12
    for claim in claims:
        assert claim in printed, f"the guide says it prints {claim!r}; it printed {printed!r}"


def test_the_guide_lists_every_status_a_callback_is_answered_with() -> None:
    text = DOC.read_text(encoding="utf-8").split("## The answers")[1].split("## Reference")[0]
    listed = {int(status) for status in re.findall(r"^\| (\d{3}) \|", text, re.M)}
    assert listed == set(receipt.STATUSES) - {500}
    assert "A 500 answers only a fault of flowrunner's own" in text
