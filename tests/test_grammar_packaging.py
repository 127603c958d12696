"""The grammar ships inside the wheel and is found in an editable (source) install; the
wheel carries the license, and ``flowrunner.__version__`` is the installed metadata's."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import flowrunner
from flowrunner import query
from flowrunner.query import parser

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_editable_install_reads_the_top_level_grammar() -> None:
    assert not (ROOT / "flowrunner" / "grammar").exists()
    assert parser.grammar_path() == ROOT / "grammar" / "query.lark"
    assert str(query.parse("status = open")) == "status = 'open'"


def test_the_wheel_location_comes_first() -> None:
    assert parser.GRAMMAR_PATHS[0] == ROOT / "flowrunner" / "grammar" / "query.lark"
    assert parser.GRAMMAR_PATHS[1] == ROOT / "grammar" / "query.lark"


def test_version_is_the_metadata_of_pyproject() -> None:
    assert flowrunner.__version__ == importlib.metadata.version("flowrunner")
    assert flowrunner.__version__ == PROJECT["version"]


def test_runtime_dependencies_have_lower_bounds_and_no_caps() -> None:
    for requirement in PROJECT["dependencies"]:
        assert ">=" in requirement, requirement
        assert not re.search(r"<|~=|==", requirement), requirement
    # The extras an application installs to run (not the tools of dev and bench).
    for extra in ("postgres", "web", "console"):
        for requirement in PROJECT["optional-dependencies"][extra]:
            if requirement.startswith("flowrunner["):
                continue  # another extra of ours, checked itself
            assert ">=" in requirement, requirement
            assert not re.search(r"<|~=|==", requirement), requirement


_CHECK = """
import importlib.metadata, flowrunner, flowrunner.query as q, flowrunner.query.parser as p
c = q.parse("status = open and amount > 100", {"status": "text", "amount": "number"})
assert c.matches({"status": "open", "amount": 101}), c
print(p.grammar_path())
print(c)
print(flowrunner.__version__, importlib.metadata.version("flowrunner"))
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
    dist_info = f"flowrunner-{PROJECT['version']}.dist-info"
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        shipped = set(archive.namelist())
    # The console's pages and its own script and style travel with it.
    console = "flowrunner/web/console"
    for name in ("templates/base.html", "templates/flow.html", "static/console.js"):
        assert f"{console}/{name}" in shipped, name
    assert "License-File: LICENSE" in metadata.splitlines()
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
    grammar, canonical, versions = done.stdout.strip().splitlines()
    assert Path(grammar).parts[-3:] == ("flowrunner", "grammar", "query.lark")
    assert "site-packages" in grammar
    assert canonical == "status = 'open' and amount > 100"
    assert versions.split() == [PROJECT["version"]] * 2
