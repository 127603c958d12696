"""The examples in docs/trying.md run, in order, as one program, and print what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "trying.md"


def test_trying_guide_examples_run_and_print_what_the_guide_says() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 7
    out = io.StringIO()
    namespace: dict[str, object] = {"__name__": "trying_guide"}
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(DOC), "exec"), namespace)  # our own doc, not user input
    printed = " ".join(out.getvalue().split())
    # What the guide says a block prints: the quoted outputs after "prints", to the end
    # of its paragraph.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    said = " ".join(re.findall(r"\bprints (.*?)(?:\n\n|$)", prose, flags=re.S))
    claims = re.findall(r"`([^`]+)`", said)
    assert len(claims) >= 12
    for claim in claims:
        said = " ".join(claim.split())
        assert said in printed, f"the guide says it prints {said!r}; it printed {printed!r}"


def test_every_code_a_script_can_have_is_in_the_guide() -> None:
    from flowrunner.flows.trial import script

    text = DOC.read_text(encoding="utf-8").split("## Every problem a script can have")[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))
    assert documented == set(script.CODES)
