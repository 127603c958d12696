"""The grammar ships inside the wheel and is found in an editable (source) install."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from flowrunner import query
from flowrunner.query import parser

ROOT = Path(__file__).resolve().parent.parent


def test_editable_install_reads_the_top_level_grammar() -> None:
    assert not (ROOT / "flowrunner" / "grammar").exists()
    assert parser.grammar_path() == ROOT / "grammar" / "query.lark"
    assert str(query.parse("status = open")) == "status = 'open'"


def test_the_wheel_location_comes_first() -> None:
    assert parser.GRAMMAR_PATHS[0] == ROOT / "flowrunner" / "grammar" / "query.lark"
    assert parser.GRAMMAR_PATHS[1] == ROOT / "grammar" / "query.lark"


_CHECK = """
import flowrunner.query as q, flowrunner.query.parser as p, pathlib, sys
c = q.parse("status = open and amount > 100", {"status": "text", "amount": "number"})
assert c.matches({"status": "open", "amount": 101}), c
print(p.grammar_path())
print(c)
"""


@pytest.mark.slow
def test_wheel_installs_and_parses(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("flowrunner-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-c", _CHECK],
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    grammar, canonical = done.stdout.strip().splitlines()
    assert Path(grammar).parts[-3:] == ("flowrunner", "grammar", "query.lark")
    assert "site-packages" in grammar
    assert canonical == "status = 'open' and amount > 100"
