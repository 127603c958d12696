"""``FLOWRUNNER_APP`` and ``FLOWRUNNER_DATABASE_URL`` stand for ``--app`` and ``--database``
when they are not typed: a deployment sets them once for every command. A typed option
wins; a variable's value is checked as the option's is, and refused naming both."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import MARK_AND_TELL, mount, ticket

from flowrunner.cli import cli
from flowrunner.store import engine_tables

FACTORY = "fixtures.tickets.app:runner"  # a function taking url


@pytest.fixture
def desks(tmp_path: Path) -> tuple[str, str]:
    """Two desks with a due run each: ``a.db`` and ``b.db``."""
    urls = []
    for name, number in (("a", 1), ("b", 2)):
        url = f"sqlite:///{tmp_path / f'{name}.db'}"
        engine = sa.create_engine(url)
        mount(engine, "tickets", flows=MARK_AND_TELL).create(ticket(number), run=False)
        engine.dispose()
        urls.append(url)
    return urls[0], urls[1]


def statuses(url: str) -> list[str]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = conn.execute(sa.select(engine_tables.runs.c.status)).scalars().all()
    engine.dispose()
    return list(found)


def invoke(*args: str, **environment: str) -> tuple[int, str, str]:
    result = CliRunner(env=environment).invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_variables_stand_for_the_options(desks: tuple[str, str]) -> None:
    a, b = desks
    code, out, err = invoke("worker", "--once", FLOWRUNNER_APP=FACTORY, FLOWRUNNER_DATABASE_URL=b)
    assert code == 0, err
    assert "advanced 1 run(s)" in out
    assert (statuses(a), statuses(b)) == (["running"], ["done"])


def test_a_typed_option_wins_over_its_variable(desks: tuple[str, str]) -> None:
    a, b = desks
    code, _, err = invoke(
        "worker", "--once", "--database", a, FLOWRUNNER_APP=FACTORY, FLOWRUNNER_DATABASE_URL=b
    )
    assert code == 0, err
    assert (statuses(a), statuses(b)) == (["done"], ["running"])


def test_migrate_takes_the_database_alone_from_its_variable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("migrate", "up", FLOWRUNNER_DATABASE_URL=url)
    assert code == 0, err
    code, out, _ = invoke("migrate", "status", FLOWRUNNER_DATABASE_URL=url)
    assert code == 0 and "current" in out


def test_a_variable_is_checked_as_its_option_is() -> None:
    code, _, err = invoke("migrate", "status", FLOWRUNNER_DATABASE_URL="nosuchdb://x")
    assert code == 2
    assert (
        "Invalid value for '--database' (env var: 'FLOWRUNNER_DATABASE_URL'): 'nosuchdb://x' "
        "names no database"
    ) in err


def test_without_either_the_app_is_asked_for() -> None:
    code, _, err = invoke("runs", "list")
    assert code == 2 and "Missing option '--app'" in err


def test_the_help_names_the_variables() -> None:
    shown = " ".join(CliRunner().invoke(cli, ["worker", "--help"]).output.split())
    assert "[env var: FLOWRUNNER_APP; required]" in shown
    assert "[env var: FLOWRUNNER_DATABASE_URL]" in shown
