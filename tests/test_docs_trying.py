"""The examples in docs/trying.md run, in order, as one program, from flowrunner's wheel,
and print what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed

DOC = Path(__file__).resolve().parent.parent / "docs" / "trying.md"


@pytest.mark.slow
def test_trying_guide_examples_run_and_print_what_the_guide_says(wheel: Installed) -> None:
    guide = run_guide("trying.md", blocks=7, module="trying_guide", python=wheel.python)
    # What the guide says a block prints: the quoted outputs after "prints", to the end
    # of its paragraph.
    guide.check(said_in_paragraphs(guide.text), at_least=12, any_spacing=True)


def test_every_code_a_script_can_have_is_in_the_guide() -> None:
    from flowrunner.flows.trial import script

    text = DOC.read_text(encoding="utf-8").split("## Every problem a script can have")[1]
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))
    assert documented == set(script.CODES)
