"""The grammar ships inside the wheel and is found in an editable (source) install; the
wheel carries the license, and ``flowrunner.__version__`` is the installed metadata's."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest
from installed import Installed

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
def test_wheel_installs_and_parses(wheel: Installed, tmp_path: Path) -> None:
    dist_info = f"flowrunner-{PROJECT['version']}.dist-info"
    with zipfile.ZipFile(wheel.wheel) as archive:
        assert archive.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = archive.read(f"{dist_info}/METADATA").decode()
        shipped = set(archive.namelist())
    # The console's pages and its own script and style travel with it.
    console = "flowrunner/web/console"
    for name in ("templates/base.html", "templates/flow.html", "static/console.js"):
        assert f"{console}/{name}" in shipped, name
    assert "License-File: LICENSE" in metadata.splitlines()
    done = _outside(wheel, tmp_path, _CHECK)
    grammar, canonical, versions = done.stdout.strip().splitlines()
    assert Path(grammar).parts[-3:] == ("flowrunner", "grammar", "query.lark")
    assert "site-packages" in grammar
    assert canonical == "status = 'open' and amount > 100"
    assert versions.split() == [PROJECT["version"]] * 2


# Every module the wheel ships, imported: none may need what only a checkout has.
_IMPORT_ALL = """
import importlib, pkgutil, flowrunner
# Alembic runs these itself (and they refuse to be imported); __main__ runs the command.
SKIP = ("flowrunner.store.migrations", "flowrunner.__main__")
names = [m.name for m in pkgutil.walk_packages(flowrunner.__path__, "flowrunner.")]
for name in names:
    if not name.startswith(SKIP):
        importlib.import_module(name)
print(len(names))
"""


@pytest.mark.slow
def test_every_module_of_the_wheel_imports(wheel: Installed, tmp_path: Path) -> None:
    done = _outside(wheel, tmp_path, _IMPORT_ALL)
    assert int(done.stdout) > 150
    fixtures = _outside(wheel, tmp_path, "import flowrunner.fixtures.purchase_orders.scheduled")
    assert fixtures.returncode == 0


def _outside(wheel: Installed, tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in the wheel's environment, in a folder away from the checkout."""
    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(wheel.python), "-W", "error", "-c", code],
        cwd=outside,
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
