"""Each optional library, missing, fails with the one extra that installs it, in one line:
``errors.ExtraMissing`` in Python, exit status 2 on the command line. Each case runs in a
fresh interpreter where the library cannot be imported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from flowrunner.foundations import extras

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]

# A finder ahead of all others that finds none of the blocked modules, as though they
# were not installed.
BLOCK = """
import sys
BLOCKED = {blocked!r}
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, NotInstalled())
"""

PYTHON_CASES = [
    (["fastapi"], "from flowrunner.web import router", "flowrunner.web needs fastapi", "web"),
    (["fastapi"], "from flowrunner import web; web.install", "flowrunner.web needs fastapi", "web"),
    (["jinja2"], "import flowrunner.web.console", "the console needs jinja2", "console"),
    (["starlette"], "import flowrunner.web.console", "the console needs starlette", "console"),
    (
        ["python_multipart"],
        "import flowrunner.web.console",
        "the console needs python_multipart",
        "console",
    ),
    (
        ["httpx"],
        "from flowrunner.workflows import http_call, definitions\n"
        "http_call.attempt(definitions.Connection('http://127.0.0.1:9'), {}, key='k')",
        "w.call needs httpx",
        "workflows",
    ),
]


def run(blocked: list[str], code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("FLOWRUNNER_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-c", BLOCK.format(blocked=blocked) + code],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("blocked", "code", "said", "extra"), PYTHON_CASES)
def test_an_optional_import_names_its_extra(
    blocked: list[str], code: str, said: str, extra: str
) -> None:
    done = run(blocked, code)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"flowrunner.errors.ExtraMissing: {said}, which is not installed: "
        f"pip install 'flowrunner[{extra}]'"
    )


def test_the_console_needs_no_fastapi_of_its_own() -> None:
    """``flowrunner.web`` imports FastAPI only when its names are used: the console, a
    Starlette application, imports without it."""
    done = run(["fastapi"], "import flowrunner.web.console")
    assert done.returncode == 0, done.stderr


def cli(blocked: list[str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    code = f"import sys\nsys.argv = ['flowrunner', *{list(args)!r}]\n"
    code += "from flowrunner.cli import main\nmain()"
    return run(blocked, code, cwd)


TOKEN = ["--token", "0123456789abcdef"]
CLI_CASES = [
    (
        ["uvicorn"],
        ["console", "--app", "fixtures.tickets.app:runner", *TOKEN],
        "flowrunner console needs uvicorn",
        "console",
    ),
    (
        ["jinja2"],
        ["console", "--app", "fixtures.tickets.app:runner", *TOKEN],
        "flowrunner console needs jinja2",
        "console",
    ),
    (
        ["prometheus_client"],
        ["worker", "--app", "fixtures.tickets.app:runner", "--metrics-port", "0"],
        "flowrunner worker --metrics-port needs prometheus_client",
        "metrics",
    ),
    (
        ["psycopg"],
        ["migrate", "status", "--database", "postgresql+psycopg://ann:secret@db/app"],
        "Invalid value for '--database': 'postgresql+psycopg://ann:***@db/app' needs psycopg",
        "postgres",
    ),
]


@pytest.mark.parametrize(("blocked", "args", "said", "extra"), CLI_CASES)
def test_a_command_without_its_extra_exits_2_naming_it(
    blocked: list[str], args: list[str], said: str, extra: str
) -> None:
    done = cli(blocked, *args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    # One line; a usage error (a bad option's value) also says where its help is.
    assert len(error) == 1, done.stderr
    said_so = f"Error: {said}, which is not installed: pip install 'flowrunner[{extra}]'"
    assert error[0] == said_so or error[0].startswith(f"{said_so} (see 'flowrunner "), error


def test_a_postgresql_url_of_another_driver_is_told_the_one_the_extra_brings() -> None:
    url = "postgresql+psycopg2://db/app"
    done = cli(["psycopg2", "psycopg"], "migrate", "status", "--database", url)
    assert done.returncode == 2
    assert (
        f"'{url}' needs psycopg2, which is not installed; flowrunner's postgres "
        "extra brings psycopg: write postgresql+psycopg://… and pip install "
        "'flowrunner[postgres]'"
    ) in done.stderr


APP = """\
import sqlalchemy as sa
from fixtures.tickets import app as tickets
from flowrunner import flow_runner

runner = flow_runner(tickets.binding, sa.create_engine("postgresql+psycopg://db/app"))
"""


def test_an_app_whose_driver_is_missing_is_told_the_extra(tmp_path: Path) -> None:
    (tmp_path / "pgapp.py").write_text(APP, encoding="utf-8")
    environment_root = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
    done = run(
        ["psycopg"],
        environment_root + "sys.argv = ['flowrunner', 'runs', 'list', '--app', 'pgapp:runner']\n"
        "from flowrunner.cli import main\nmain()",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: --app pgapp:runner needs psycopg, which is not installed: "
        "pip install 'flowrunner[postgres]'"
    )


def _module(requirement: str) -> str:
    name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
    return name.lower().replace("-", "_")


@pytest.mark.parametrize("extra", ["postgres", "web", "console", "workflows"])
def test_each_library_of_an_applications_extra_is_known_by_it(extra: str) -> None:
    for requirement in EXTRAS[extra]:
        if requirement.startswith("flowrunner["):
            continue
        assert extras.EXTRAS.get(_module(requirement)) == extra, requirement
    assert set(extras.EXTRAS.values()) <= set(EXTRAS)


def test_any_command_refuses_a_missing_extra_with_exit_2() -> None:
    """Whatever command an optional library is found missing in, the same one line."""
    from flowrunner import cli as cli_mod

    found = cli_mod.refusal(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"))
    assert isinstance(found, cli_mod.InputError) and found.exit_code == 2
    assert found.message == (
        "flowrunner needs uvicorn, which is not installed: pip install 'flowrunner[console]'"
    )
    other = cli_mod.refusal(ModuleNotFoundError("No module named 'left_pad'", name="left_pad"))
    assert other.exit_code == 1


def test_the_readme_lists_each_extra_an_application_installs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `(\w+)` \| ", readme, re.M))
    assert listed == set(extras.EXTRAS.values())
