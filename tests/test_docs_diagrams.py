"""docs/diagrams.md is what the code draws today: its Mermaid blocks are the fixture flows'
diagrams as ``Diagram.mermaid()`` writes them now, its screenshots are there, and its
Python example runs from flowrunner's wheel and prints what the page says.

After a change to the diagrams, write the page's Mermaid blocks again with
``PYTHONPATH=. python tests/test_docs_diagrams.py``, and its screenshots with
``FLOWRUNNER_WRITE_DOC_IMAGES=1 python -m pytest tests/test_diagrams_browser.py -k docs``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from drawn import config, drawn_run, fixture_snapshots
from guides import run_guide, said_inline
from installed import Installed

from flowrunner import diagrams

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "diagrams.md"
# <!-- diagram: APP "FLOW" --> or <!-- diagram: APP "FLOW" run STORY -->, then a mermaid block.
BLOCK = re.compile(r'<!-- diagram: (\w+) "([^"]+)"( run \w+)? -->\n```mermaid\n(.*?)```', re.S)
IMAGE = re.compile(r"!\[[^\]]*\]\((images/[^)]+\.png)\)")


def drawn_flow(app: str, flow: str) -> str:
    return diagrams.flow_diagram(fixture_snapshots(app)[flow], config=config(app)).mermaid()


def expected(app: str, flow: str, story: str | None) -> str:
    return drawn_flow(app, flow) if story is None else drawn_run(app, flow, story).mermaid()


def test_the_mermaid_blocks_are_what_the_code_draws_now() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 4
    for app, flow, story, shown in blocks:
        story_name = story.removeprefix(" run ") if story else None
        assert shown == expected(app, flow, story_name), (
            f"docs/diagrams.md's diagram of {flow!r} is not what the code draws now: "
            "run PYTHONPATH=. python tests/test_docs_diagrams.py"
        )


def test_the_screenshots_are_there_and_small() -> None:
    images = IMAGE.findall(DOC.read_text(encoding="utf-8"))
    assert len(images) >= 3
    for image in images:
        path = DOC.parent / image
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image
        assert path.stat().st_size < 200_000, f"{image} is too big for the docs"


@pytest.mark.slow
def test_the_python_example_runs_and_prints_what_the_page_says(wheel: Installed) -> None:
    guide = run_guide("diagrams.md", blocks=1, module="diagrams_guide", python=wheel.python)
    guide.check(said_inline(guide.text), at_least=2)


def write_blocks() -> None:
    """Write the page's Mermaid blocks as the code draws them now."""
    text = DOC.read_text(encoding="utf-8")

    def block(match: re.Match[str]) -> str:
        app, flow, story = match.group(1), match.group(2), match.group(3)
        drawn = expected(app, flow, story.removeprefix(" run ") if story else None)
        head = match.group(0).split("\n", 1)[0]
        return f"{head}\n```mermaid\n{drawn}```"

    DOC.write_text(BLOCK.sub(block, text), encoding="utf-8")


if __name__ == "__main__":
    write_blocks()
