"""``flowrunner migrate up|status`` through click's runner, on a SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from flowrunner.cli import cli
from flowrunner.store import migrate


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.db'}"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["migrate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_status_of_an_empty_database(url: str) -> None:
    code, out, _ = invoke("status", "--database", url)
    assert code == 0
    # The command to run is told with the database it was asked about.
    assert f"do not exist yet; run: flowrunner migrate up --database {url}\n" in out
    assert "pending: 0001" in out and migrate.head() in out
    code, _, _ = invoke("status", "--database", url, "--check")
    assert code == 1


def test_up_then_up_again_is_a_no_op(url: str) -> None:
    empty = sa.create_engine(url)
    revisions = len(migrate.status(empty).pending)
    empty.dispose()
    code, out, _ = invoke("up", "--database", url)
    assert code == 0
    assert revisions >= 3
    assert out.strip() == (
        f"migrated from nothing to {migrate.head()} ({revisions} migrations applied)"
    )
    code, out, _ = invoke("up", "--database", url)
    assert code == 0
    assert out.strip() == f"already current (revision {migrate.head()}); nothing to do"
    code, out, _ = invoke("status", "--database", url, "--check")
    assert code == 0
    assert "current" in out
    engine = sa.create_engine(url)
    try:
        assert migrate.status(engine).is_current
    finally:
        engine.dispose()


def test_no_target_is_a_usage_error() -> None:
    code, _, err = invoke("up")
    assert code == 2
    assert "give --app MODULE:ATTR or --database URL" in err


def test_a_bad_url_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = invoke("status", "--database", "nosuchdb://x")
    assert code == 2
    assert (
        "Error: Invalid value for '--database': 'nosuchdb://x' names no database "
        "SQLAlchemy knows" in err
    )
    assert "Traceback" not in out + err
    code, out, err = invoke("status", "--database", "mysql://ann:secret@db/app")
    assert code == 2
    assert "'mysql://ann:***@db/app' needs a database driver that is not installed" in err
    assert "secret" not in err


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "app.db"
    code, out, err = invoke("up", "--database", f"sqlite:///{missing}")
    assert code == 2
    assert err == "Error: cannot use the database: unable to open database file\n"
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err


def test_an_app_that_cannot_be_loaded_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notanapp.py").write_text("runner = 42\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = invoke("up", "--app", "notanapp:runner")
    assert code == 2
    assert "neither a FlowRunner nor a function returning one" in err
    code, _, err = invoke("status", "--app", "no_such_module_here:runner")
    assert code == 2
    assert "cannot import" in err


def test_up_through_the_applications_runner(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's runner refuses to serve before `migrate up`, yet `migrate up` can load it."""
    from flowrunner import errors
    from flowrunner.cli import app_loader

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    spec = "fixtures.purchase_orders.app:runner"
    with pytest.raises(errors.SchemaOutdated, match="flowrunner migrate up"):
        app_loader.load_app(spec, database_url=url)
    code, out, _ = invoke("up", "--app", spec, "--database", url)
    assert code == 0, out
    assert out.startswith("migrated from nothing to")
    runner = app_loader.load_app(spec, database_url=url)
    try:
        assert migrate.ensure_current(runner.engine).is_current
    finally:
        runner.engine.dispose()


def test_a_command_before_the_tables_exist_tells_the_migration_to_run(url: str) -> None:
    """An operator lists runs on a database nobody has migrated: the one line says the
    command to run, with the app and database they gave."""
    result = CliRunner().invoke(
        cli, ["runs", "list", "--app", "fixtures.tickets.app:runner", "--database", url]
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "Error: the flowrunner tables do not exist yet; run: flowrunner migrate up "
        f"--app fixtures.tickets.app:runner --database {url}"
    )
    code, _, _ = invoke("up", "--app", "fixtures.tickets.app:runner", "--database", url)
    assert code == 0
    again = CliRunner().invoke(
        cli, ["runs", "list", "--app", "fixtures.tickets.app:runner", "--database", url]
    )
    assert again.exit_code == 0, again.stderr


def test_the_command_to_run_hides_a_password_and_is_quoted_for_a_shell() -> None:
    from flowrunner.cli import up_command

    assert up_command(None, "postgresql+psycopg://olga:s3cret@db/desk") == (
        "flowrunner migrate up --database 'postgresql+psycopg://olga:***@db/desk'"
    )
    assert up_command("my app:runner", None) == "flowrunner migrate up --app 'my app:runner'"
    assert up_command(None, None) == migrate.UP_COMMAND
