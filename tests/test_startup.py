"""The command line starts fast: ``import flowrunner`` and ``flowrunner --help`` load only
what they use, each name of the public API is imported when first asked for, and a
runner on current tables mounts without Alembic. The figures are in docs/performance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import flowrunner
from flowrunner import cli
from flowrunner.store import migrate

ROOT = Path(__file__).resolve().parent.parent
# Libraries the bare package and the command line's help must not load.
HEAVY = ("sqlalchemy", "alembic", "pydantic", "jinja2", "fastapi", "uvicorn", "rich", "lark")


def loaded_after(code: str, cwd: Path = ROOT) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_import_flowrunner_loads_no_library() -> None:
    modules = loaded_after("import flowrunner")
    assert heavy_in(modules) == []
    assert {m for m in modules if m.startswith("flowrunner.")} == {"flowrunner.moved"}


def helped(*command: str) -> set[str]:
    """The modules ``flowrunner COMMAND --help`` loads."""
    code = (
        f"import sys\nsys.argv = ['flowrunner', *{list(command)!r}, '--help']\n"
        "from flowrunner.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    )
    return loaded_after(code)


def test_the_help_loads_no_command_and_no_library() -> None:
    modules = helped()
    assert heavy_in(modules) == []
    assert not [m for m in modules if m.endswith("_cmd")]


def test_the_workers_help_loads_nothing_it_serves_with() -> None:
    assert heavy_in(helped("worker")) == []


@pytest.mark.parametrize("command", sorted(cli.SUBCOMMANDS))
def test_only_migrate_runs_with_alembic_and_only_console_with_its_stack(command: str) -> None:
    """No command's help loads Alembic or the console's stack (nor does running one but
    ``migrate`` and ``console``: serving finds its tables current without Alembic)."""
    loaded = {m.split(".")[0] for m in helped(command)}
    assert not loaded & {"alembic", "jinja2", "uvicorn", "starlette", "fastapi"}


def test_each_public_name_is_imported_when_asked_for() -> None:
    for name in flowrunner.__all__:
        assert getattr(flowrunner, name) is not None, name
        exec(f"from flowrunner import {name}", {})  # the way applications write it
    assert flowrunner.__version__
    assert flowrunner.errors.RowInvalid is flowrunner.RowInvalid  # a submodule, as before
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        _ = flowrunner.nothing_here
    with pytest.raises(ImportError):
        exec("from flowrunner import nothing_here", {})


def test_the_helps_listing_is_each_commands_own_short_help() -> None:
    assert set(cli.SUMMARIES) == set(cli.SUBCOMMANDS)
    for name in cli.SUBCOMMANDS:
        command = cli.cli.get_command(click.Context(cli.cli), name)
        assert command is not None, name
        assert cli.SUMMARIES[name] == command.get_short_help_str(limit=10_000), name


def test_the_newest_revision_is_read_as_alembic_reads_it() -> None:
    assert migrate.head_written() == migrate.head()


MOUNT = """
import sys
import sqlalchemy as sa
from fixtures.tickets import app as tickets
from flowrunner.store import migrate

migrate.upgrade(sa.create_engine("sqlite:///desk.db"))
for name in [m for m in sys.modules if m.split(".")[0] == "alembic"]:
    del sys.modules[name]
runner = tickets.runner("sqlite:///desk.db")
"""


def test_a_runner_on_current_tables_mounts_without_alembic(tmp_path: Path) -> None:
    modules = loaded_after(MOUNT, cwd=tmp_path)
    assert "flowrunner.runner" in modules
    assert not [m for m in modules if m.split(".")[0] in ("alembic", "jinja2", "uvicorn")]
