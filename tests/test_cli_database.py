"""``--database`` names the database a command acts on: the app's function is given it, or
the command is refused with both databases named. Never does a command act on another.

Two SQLite files play the parts: ``a.db``, the one an app's runner is bound to, and
``b.db``, the one typed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import forked
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import MARK_AND_TELL, mount, ticket

from fixtures.tickets import app as tickets
from flowrunner.cli import app_loader, cli
from flowrunner.flows import files
from flowrunner.store import engine_tables

ROOT = Path(__file__).resolve().parent.parent
FACTORY = "fixtures.tickets.app:runner"  # a function taking url
FLOWS = str(tickets.FLOWS_FILE)
IMPORTED = sorted(["Tell", *(doc.flow["name"] for doc in files.read_file(FLOWS))])

# An application whose runner is bound to one database, three ways.
BOUND_APP = """\
from fixtures.tickets import app as tickets

A = {a!r}
runner = tickets.runner(A)


def without_url():
    return tickets.runner(A)


def ignoring_url(url=None):
    return tickets.runner(A)
"""


@pytest.fixture
def desks(tmp_path: Path) -> tuple[str, str]:
    """Two desks with a due run each: ``a.db`` (ticket 1) and ``b.db`` (ticket 2)."""
    urls = []
    for name, number in (("a", 1), ("b", 2)):
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        engine = sa.create_engine(url)
        mount(engine, "tickets", flows=MARK_AND_TELL).create(ticket(number), run=False)
        engine.dispose()
        urls.append(url)
    return urls[0], urls[1]


@pytest.fixture
def bound(tmp_path: Path, desks: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The module name of an app bound to ``a.db``, importable from the current directory."""
    name = "bound_desk_app"
    (tmp_path / f"{name}.py").write_text(BOUND_APP.format(a=desks[0]), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def flow_names(url: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        names = conn.execute(sa.select(tickets.ticket_flow.c.name)).scalars().all()
    engine.dispose()
    return sorted(names)


def statuses(url: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(sa.select(engine_tables.runs.c.status)).scalars().all()
    engine.dispose()
    return list(found)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


# -- in process -------------------------------------------------------------------------------


def test_the_apps_function_is_given_the_database_typed(desks: tuple[str, str]) -> None:
    a, b = desks
    code, out, err = invoke("flows", "import", FLOWS, "--app", FACTORY, "--database", b)
    assert code == 0, err
    assert out.startswith("imported 3 flow(s)")
    assert flow_names(b) == IMPORTED
    assert flow_names(a) == ["Tell"]  # untouched
    code, out, err = invoke("worker", "--app", FACTORY, "--database", b, "--once")
    assert code == 0, err
    assert statuses(b) == ["done"]
    assert statuses(a) == ["running"]  # still due: nobody served it


BOTH = "so that --database chooses the database"


@pytest.mark.parametrize(
    ("attr", "sentence"),
    [
        ("runner", "is a runner bound to {a}, not to --database {b}; leave out --database, "
         f"or make runner a function taking url (def runner(url=None)) {BOTH}"),
        ("without_url", "takes no url and returns a runner bound to {a}, not to --database {b}; "
         "leave out --database, or give without_url a url parameter "
         f"(def without_url(url=None)) {BOTH}"),
        ("ignoring_url", "was given --database {b} but returned a runner on {a}; "
         "build the runner's engine from the url it is given"),
    ],
)  # fmt: skip
def test_an_app_bound_to_another_database_is_refused_naming_both(
    desks: tuple[str, str], bound: str, attr: str, sentence: str
) -> None:
    a, b = desks
    for args in (
        ["flows", "import", FLOWS],
        ["flows", "validate"],
        ["worker", "--once"],
        ["migrate", "up"],
        ["prune", "--older-than", "90 days"],
    ):
        code, out, err = invoke(*args, "--app", f"{bound}:{attr}", "--database", b)
        assert code == 2, (args, out, err)
        assert out == ""
        [line] = err.splitlines()
        assert line == f"Error: --app {bound}:{attr} " + sentence.format(a=a, b=b)
    # Neither database was acted on: no flows imported, no run advanced.
    assert flow_names(a) == flow_names(b) == ["Tell"]
    assert statuses(a) == statuses(b) == ["running"]


def test_the_same_database_written_another_way_is_the_apps_own(
    desks: tuple[str, str], bound: str
) -> None:
    a, b = desks
    # Relative to the current directory, as SQLite opens it; and another driver name.
    for typed in ("sqlite:///a.db", "sqlite+pysqlite:///./a.db", a):
        code, _, err = invoke("flows", "validate", "--app", f"{bound}:runner", "--database", typed)
        assert code == 0, (typed, err)
    code, _, err = invoke(
        "worker", "--app", f"{bound}:runner", "--database", "sqlite:///a.db", "--once"
    )
    assert code == 0, err
    assert statuses(a) == ["done"]
    assert statuses(b) == ["running"]


def test_without_database_the_app_chooses(desks: tuple[str, str], bound: str) -> None:
    a, b = desks
    code, _, err = invoke("worker", "--app", f"{bound}:runner", "--once")
    assert code == 0, err
    assert (statuses(a), statuses(b)) == (["done"], ["running"])


def test_a_password_in_either_url_is_never_shown(desks: tuple[str, str], bound: str) -> None:
    typed = "postgresql+psycopg://ann:hunter2@127.0.0.1:1/desk"
    code, _, err = invoke("flows", "validate", "--app", f"{bound}:runner", "--database", typed)
    assert code == 2
    assert "not to --database postgresql+psycopg://ann:***@127.0.0.1:1/desk;" in err
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("left", "right", "same"),
    [
        ("postgresql+psycopg://ann:one@db/app", "postgresql://ann:two@db:5432/app", True),
        ("postgresql://ann@DB/app", "postgresql://ann@db/app", True),
        ("postgresql://ann@db/app", "postgresql://bob@db/app", False),
        ("postgresql://ann@db/app", "postgresql://ann@db2/app", False),
        ("postgresql://ann@db/app", "postgresql://ann@db:5433/app", False),
        ("postgresql://ann@db/app", "postgresql://ann@db/app2", False),
        ("postgresql://ann@db/app", "postgresql://ann@db/app?options=-csearch_path%3Dx", False),
        ("postgresql://ann@db/app", "sqlite:///app", False),
        ("sqlite:///x.db", "sqlite+pysqlite:///./x.db", True),
        ("sqlite:///x.db", "sqlite:///y.db", False),
        ("sqlite://", "sqlite:///:memory:", True),
    ],
)
def test_which_urls_name_one_database(left: str, right: str, same: bool) -> None:
    assert app_loader.same_database(left, right) is same
    assert app_loader.same_database(right, left) is same


# -- as real processes --------------------------------------------------------------------------


def flowrunner(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return forked.run(
        [sys.executable, "-m", "flowrunner", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.slow
def test_a_real_worker_serves_the_database_typed_or_none(
    tmp_path: Path, desks: tuple[str, str], bound: str
) -> None:
    a, b = desks
    refused = flowrunner(tmp_path, "worker", "--app", f"{bound}:runner", "--database", b, "--once")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"Error: --app {bound}:runner is a runner bound to {a}, ")
    assert (statuses(a), statuses(b)) == (["running"], ["running"])  # a was not served instead

    served = flowrunner(tmp_path, "worker", "--app", FACTORY, "--database", b, "--once")
    assert served.returncode == 0, served.stderr
    assert served.stdout.startswith("advanced 1 run(s) of 1 claimed")
    assert (statuses(a), statuses(b)) == (["running"], ["done"])

    same = flowrunner(
        tmp_path, "worker", "--app", f"{bound}:runner", "--database", "sqlite:///a.db", "--once"
    )
    assert same.returncode == 0, same.stderr
    assert (statuses(a), statuses(b)) == (["done"], ["done"])


@pytest.mark.slow
def test_real_imports_land_in_the_database_typed(
    tmp_path: Path, desks: tuple[str, str], bound: str
) -> None:
    a, b = desks
    done = flowrunner(tmp_path, "flows", "import", FLOWS, "--app", FACTORY, "--database", b)
    assert done.returncode == 0, done.stderr
    refused = flowrunner(
        tmp_path, "flows", "import", FLOWS, "--app", f"{bound}:without_url", "--database", b
    )
    assert refused.returncode == 2
    assert f"returns a runner bound to {a}, not to --database {b}" in refused.stderr
    assert flow_names(a) == ["Tell"]
    assert flow_names(b) == IMPORTED
