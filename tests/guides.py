"""The one way the docs tests run a guide: its ```python blocks in order, as one program,
in a project of its own with flowrunner installed from its wheel (``installed``), and what
its prose says they print, checked against what they printed.

Each guide's test says how many blocks it runs and how many claims it checks at least: a
claim is a quoted output the prose says a block prints, or an ``assert`` in the blocks. A
guide whose blocks check nothing — no claim, or fewer than its test counts on — fails.
Each guide checked is reported at the end of the run, with its blocks and claims.
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import forked

DOCS = Path(__file__).resolve().parent.parent / "docs"
PYTHON = re.compile(r"```python\n(.*?)```", re.S)
# The fewest claims any guide may check: a guide whose code checks nothing is no test.
MIN_CLAIMS = 2
# Each guide checked in this process: (guide, blocks, claims), for the run's summary.
CHECKED: list[tuple[str, int, int]] = []

# The program that runs a guide's blocks, in the reader's place: a file of its own (a
# module of that name, in ``sys.modules`` while it runs with ``own``), each block compiled
# alone with its lines numbered as in the guide, warnings as errors. With ``installed``,
# it first makes sure flowrunner is the installed one and the checkout is out of sight.
RUNNER = """
import json, sys, types
request = json.loads(sys.stdin.read())
if request["installed"]:
    import importlib.util, sysconfig
    found = importlib.util.find_spec("flowrunner").origin
    assert found.startswith(sysconfig.get_paths()["purelib"]), found
    assert importlib.util.find_spec("fixtures") is None, "the checkout is on the path"
guide = types.ModuleType(request["module"])
if request["own"]:
    sys.modules[request["module"]] = guide
for line, block in request["blocks"]:
    code = compile("\\n" * (line - 1) + block, request["path"], "exec", dont_inherit=True)
    exec(code, guide.__dict__)
sa, sa_async = sys.modules.get("sqlalchemy"), sys.modules.get("sqlalchemy.ext.asyncio")
for value in list(vars(guide).values()):
    if sa and isinstance(value, sa.Engine):
        value.dispose()
    elif sa_async and isinstance(value, sa_async.AsyncEngine):
        import asyncio
        asyncio.run(value.dispose())
"""


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
    """A guide whose blocks ran: its text, its blocks and what they printed."""

    path: Path
    text: str
    blocks: list[str]
    printed: str
    installed: bool = True

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
        if self.installed:
            CHECKED.append((self.path.name, len(self.blocks), checked))


def run_guide(
    name: str | Path,
    *,
    blocks: int,
    module: str,
    python: Path,
    own_module: bool = False,
    env: Mapping[str, str] | None = None,
    installed: bool = True,
) -> Guide:
    """Run docs/``name``'s Python blocks in order, as one program; at least ``blocks`` of them
    (``name`` may also be a path of its own).

    They run in ``python`` (the wheel's environment, ``installed``), in a new empty folder
    as the reader's project, with this process's environment variables and ``env`` (the
    checkout never on the path), as the module ``module``: with ``own_module`` a module
    in ``sys.modules`` while they run, as the reader's app file would be (FastAPI and
    pydantic look the guide's models up there). A block that fails fails the test with
    its traceback, its lines numbered as in the guide.
    """
    path = DOCS / name
    text = path.read_text(encoding="utf-8")
    found = python_blocks(text)
    assert len(found) >= blocks, f"{path.name} has {len(found)} Python block(s), not {blocks}"
    starts = [text[: match.start(1)].count("\n") + 1 for match in PYTHON.finditer(text)]
    request = {
        "path": str(path),
        "module": module,
        "own": own_module,
        "installed": installed,
        "blocks": list(zip(starts, found, strict=True)),
    }
    with tempfile.TemporaryDirectory(prefix="guide-") as project:
        # Forked from a server of the guides' interpreter (``forked``), started as this
        # one is, with warnings as errors, which has imported flowrunner once.
        done = forked.run(
            [str(python), "-W", "error", "-c", RUNNER],
            input=json.dumps(request),
            cwd=project,
            env={**_without_checkout(os.environ), **(env or {})},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, (
        f"{path.name}'s blocks failed in a project of their own:\n{done.stderr}"
        f"\nafter printing:\n{done.stdout}"
    )
    return Guide(path, text, found, done.stdout, installed)


def _without_checkout(environment: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environment.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
