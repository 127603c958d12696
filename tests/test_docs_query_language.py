"""The Python example of docs/query-language.md runs from flowrunner's wheel and prints
what the page says (its ``example`` blocks are tests/test_query_docs.py's)."""

from __future__ import annotations

import pytest
from guides import run_guide, said_in_paragraphs
from installed import Installed


@pytest.mark.slow
def test_the_query_languages_python_example_runs_and_prints_what_it_says(
    wheel: Installed,
) -> None:
    guide = run_guide("query-language.md", blocks=1, module="query_guide", python=wheel.python)
    # What the section "In Python" says (the page's other "prints" are the command line's).
    in_python = guide.text.split("## In Python")[1].split("\n## ")[0]
    guide.check(said_in_paragraphs(in_python), at_least=4)
