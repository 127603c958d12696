"""The examples in docs/jobs.md run, in order, as one program, and print what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "jobs.md"


def test_jobs_guide_examples_run_and_print_what_the_guide_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    out = io.StringIO()
    namespace: dict[str, object] = {"__name__": "jobs_guide"}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # our own doc, not user input
    printed = out.getvalue()
    claims = re.findall(r"prints `([^`]+)`", text)
    assert len(claims) >= 4
    for claim in claims:
        assert claim in printed, f"the guide says it prints {claim!r}; it printed {printed!r}"
    # The indented block after "prints" is what the history printed, line for line.
    shown = re.search(r"prints\n\n((?:    .+\n)+)", text)
    assert shown is not None
    for line in shown.group(1).splitlines():
        assert line.strip() in printed.splitlines(), line
