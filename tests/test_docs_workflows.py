"""The examples in docs/workflows.md — the seed's late fees and credit check (the credit
provider a stand-in HTTP service the guide starts on 127.0.0.1), a renewal retried, an
order waiting for its credit check child and forked from its charge — run in order as
one program, from flowrunner's wheel, and print what the guide says."""

from __future__ import annotations

import re

import pytest
from guides import run_guide, said_inline
from installed import Installed


@pytest.mark.slow
def test_workflows_guide_examples_run_and_print_what_the_guide_says(wheel: Installed) -> None:
    guide = run_guide("workflows.md", blocks=8, module="workflows_guide", python=wheel.python)
    claims = said_inline(guide.text)
    # The credit provider was asked once per application, each with its own key.
    assert "['run-3/request-check', 'run-4/request-check']" in claims
    guide.check(claims, at_least=14)
    history = re.search(r"step:\n\n```\n(.*?)```", guide.text, flags=re.S)
    assert history is not None and history.group(1) in guide.printed
