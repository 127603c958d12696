"""The examples in docs/engine.md run, in order, as one program, and print what it says."""

from __future__ import annotations

from guides import run_guide, said_inline


def test_engine_guide_examples_run_and_print_what_the_guide_says() -> None:
    guide = run_guide("engine.md", blocks=6, module="engine_guide")
    guide.check(said_inline(guide.text), at_least=15)
