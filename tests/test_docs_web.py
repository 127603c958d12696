"""docs/web.md runs, in order, as one program — a FastAPI app, tried with its TestClient —
and prints what it says; once on SQLite and once on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import sys
import types
from pathlib import Path

import pytest
import sqlalchemy as sa

DOC = Path(__file__).resolve().parent.parent / "docs" / "web.md"


def test_the_web_guide_runs_and_prints_what_it_says(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_DATABASE_URL", database_url)
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 8
    out = io.StringIO()
    # A module of its own, as the reader's app file would be: FastAPI and pydantic look
    # the guide's models up in it. Compiled without this file's __future__ imports.
    guide = types.ModuleType("web_guide")
    sys.modules[guide.__name__] = guide
    namespace = guide.__dict__
    try:
        with contextlib.redirect_stdout(out):
            for block in blocks:
                code = compile(block, str(DOC), "exec", dont_inherit=True)
                exec(code, namespace)  # our own doc, not user input
    finally:
        del sys.modules[guide.__name__]
        for name in ("engine",):
            engine = namespace.get(name)
            if isinstance(engine, sa.Engine):
                engine.dispose()
        async_engine = namespace.get("async_engine")
        if async_engine is not None:
            asyncio.run(async_engine.dispose())
    printed = out.getvalue()
    # "prints `this`", or "prints `this` and `that`" for two lines.
    pairs = re.findall(r"prints `([^`]+)`(?:\s+and\s+`([^`]+)`)?", text)
    claims = [claim for pair in pairs for claim in pair if claim]
    assert len(claims) >= 10
    for claim in claims:
        assert claim in printed, f"the guide says it prints {claim!r}; it printed {printed!r}"
