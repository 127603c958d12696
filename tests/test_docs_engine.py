"""The examples in docs/engine.md run, in order, as one program, and print what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "engine.md"


def test_engine_guide_examples_run_and_print_what_the_guide_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 6
    out = io.StringIO()
    namespace: dict[str, object] = {"__name__": "engine_guide"}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # our own doc, not user input
    printed = out.getvalue()
    for claim in re.findall(r"prints `([^`]+)`", text):
        assert claim in printed, f"the guide says it prints {claim!r}; it printed {printed!r}"
