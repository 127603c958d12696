"""The examples in docs/workflows.md — the seed's late fees and credit check — run in
order as one program, the credit provider a real HTTP service on 127.0.0.1, and print
what the guide says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from provider import serving

DOC = Path(__file__).resolve().parent.parent / "docs" / "workflows.md"


def test_workflows_guide_examples_run_and_print_what_the_guide_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 4
    out = io.StringIO()
    with serving() as provider, contextlib.redirect_stdout(out):
        namespace: dict[str, object] = {
            "__name__": "workflows_guide",
            "credit_provider_url": provider.url,
        }
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # our own doc, not user input
    printed = out.getvalue()
    for claim in re.findall(r"prints\s+`([^`]+)`", text):
        assert claim in printed, f"the guide says it prints {claim!r}; it printed {printed!r}"
    history = re.search(r"step:\n\n```\n(.*?)```", text, flags=re.S)
    assert history is not None and history.group(1) in printed
    # The credit provider was asked once per application, each with its own key.
    assert sorted(provider.sent_keys("/checks")) == ["run-3/request-check", "run-4/request-check"]
