"""The examples in docs/at-timers.md run, in order, as one program, on the ticket sample
app, and print what the guide says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "at-timers.md"


def test_the_timers_guide_runs_and_prints_what_it_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    out = io.StringIO()
    namespace: dict[str, object] = {"__name__": "timers_guide"}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # our own doc, not user input
    printed = out.getvalue()
    claims = re.findall(r"prints\s+`([^`]+)`", text)
    assert len(claims) >= 8
    for claim in claims:
        said = " ".join(claim.split())
        assert said in " ".join(printed.split()), f"the guide says {said!r}; it printed {printed!r}"
