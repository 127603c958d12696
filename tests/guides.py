"""The one way the docs tests run a guide: its ```python blocks in order, as one program,
and what its prose says they print, checked against what they printed.

Each guide's test says how many blocks it runs and how many claims it checks at least: a
claim is a quoted output the prose says a block prints, or an ``assert`` in the blocks. A
guide whose blocks check nothing — no claim, or fewer than its test counts on — fails.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

DOCS = Path(__file__).resolve().parent.parent / "docs"
PYTHON = re.compile(r"```python\n(.*?)```", re.S)
# The fewest claims any guide may check: a guide whose code checks nothing is no test.
MIN_CLAIMS = 2


def python_blocks(text: str) -> list[str]:
    """The guide's ```python blocks, in order."""
    return PYTHON.findall(text)


def said_inline(text: str) -> list[str]:
    """Each `x` in "prints `x`"."""
    return re.findall(r"prints\s+`([^`]+)`", text)


def said_pairs(text: str) -> list[str]:
    """Each `x` in "prints `x`", and `y` in "prints `x` and `y`" (two lines)."""
    pairs = re.findall(r"prints `([^`]+)`(?:\s+and\s+`([^`]+)`)?", text)
    return [claim for pair in pairs for claim in pair if claim]


def said_in_paragraphs(text: str) -> list[str]:
    """Every quoted output after "prints" up to the end of its paragraph, outside code
    blocks: "prints `this`", "prints `this` and `that`", "prints `a`, `b` and `c`"."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    said = " ".join(re.findall(r"\bprints (.*?)(?:\n\n|$)", prose, flags=re.S))
    return re.findall(r"`([^`]+)`", said)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Guide:
    """A guide whose blocks ran: its text, its blocks, what they printed, their names."""

    path: Path
    text: str
    blocks: list[str]
    printed: str
    namespace: dict[str, Any] = field(repr=False)

    @property
    def asserts(self) -> int:
        """How many ``assert`` statements the guide's blocks hold."""
        return sum(
            isinstance(node, ast.Assert)
            for block in self.blocks
            for node in ast.walk(ast.parse(block))
        )

    def check(self, claims: list[str], *, at_least: int, any_spacing: bool = False) -> None:
        """Each claim was printed (``any_spacing``: runs of spaces and line ends are one
        space), and the guide checks at least ``at_least`` things: claims and asserts."""
        assert at_least >= MIN_CLAIMS, f"a guide's test must count on {MIN_CLAIMS} claims"
        checked = len(claims) + self.asserts
        assert checked >= at_least, (
            f"{self.path.name} checks {checked} thing(s) ({len(claims)} printed, "
            f"{self.asserts} assert(s)); its test counts on {at_least}"
        )
        printed = _one_line(self.printed) if any_spacing else self.printed
        for claim in claims:
            said = _one_line(claim) if any_spacing else claim
            assert said in printed, (
                f"{self.path.name} says it prints {said!r}; it printed {printed!r}"
            )


def run_guide(
    name: str | Path,
    *,
    blocks: int,
    module: str,
    own_module: bool = False,
    names: Mapping[str, Any] | None = None,
) -> Guide:
    """Run docs/``name``'s Python blocks in order, as one program; at least ``blocks`` of them
    (``name`` may also be a path of its own).

    The blocks run as the module ``module``: a namespace of that ``__name__``, or with
    ``own_module`` a module in ``sys.modules`` while they run, as the reader's app file
    would be (FastAPI and pydantic look the guide's models up there). ``names`` are set
    before the first block. Compiled without this file's ``__future__`` imports, as a
    reader's file would be. The engines the guide made are disposed of afterwards.
    """
    path = DOCS / name
    text = path.read_text(encoding="utf-8")
    found = python_blocks(text)
    assert len(found) >= blocks, f"{path.name} has {len(found)} Python block(s), not {blocks}"
    out = io.StringIO()
    guide = types.ModuleType(module)
    namespace = guide.__dict__
    namespace.update(names or {})
    if own_module:
        sys.modules[module] = guide
    try:
        with contextlib.redirect_stdout(out):
            for block in found:
                code = compile(block, str(path), "exec", dont_inherit=True)
                exec(code, namespace)  # our own docs, not user input
    finally:
        if own_module:
            del sys.modules[module]
        for value in list(namespace.values()):
            if isinstance(value, sa.Engine):
                value.dispose()
            elif isinstance(value, AsyncEngine):
                asyncio.run(value.dispose())
    return Guide(path, text, found, out.getvalue(), namespace)
