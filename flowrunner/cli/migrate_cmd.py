"""``flowrunner migrate up|status``: create or move the engine's tables, or say where they stand.

Serving never migrates; this is the one way the tables change. Both commands take the
application (``--app MODULE:ATTR``, whose runner names the database) or a database
URL alone (``--database URL``); with both, the URL is handed to the app's factory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
import sqlalchemy as sa

from flowrunner import cli as cli_mod
from flowrunner.store import migrate as migrate_mod

F = TypeVar("F", bound=Callable[..., Any])


def _target(function: F) -> F:
    function = cli_mod.database_option("Database URL (SQLAlchemy form), e.g. sqlite:///app.db.")(
        function
    )
    return click.option(
        "--app",
        "app_spec",
        metavar="MODULE:ATTR",
        default=None,
        help="The application's flow runner, or a function returning one.",
    )(function)


@contextmanager
def _engine(app_spec: str | None, database: str | None) -> Iterator[sa.Engine]:
    """The engine to migrate; what goes wrong finding or reaching it is the CLI's one line."""
    if app_spec is None and database is None:
        raise click.UsageError("give --app MODULE:ATTR or --database URL")
    if app_spec is not None:
        # The tables may not exist yet: the runner must not refuse to mount.
        yield cli_mod.load_runner(app_spec, database, check_schema=False).engine
        return
    assert database is not None
    engine = sa.create_engine(database)
    try:
        yield engine
    finally:
        engine.dispose()


@click.group(epilog=cli_mod.EXIT_STATUSES)
def migrate() -> None:
    """Create or move flowrunner's own tables (forward-only migrations)."""


@migrate.command("up")
@_target
def up(app_spec: str | None, database: str | None) -> None:
    """Apply every pending migration; running it again changes nothing."""
    with _engine(app_spec, database) as engine:
        before = migrate_mod.status(engine)
        if not before.known:
            raise cli_mod.InputError(before.describe())
        if before.is_current:
            click.echo(f"already current (revision {before.head}); nothing to do")
            return
        after = migrate_mod.upgrade(engine)
    applied = len(before.pending)
    click.echo(
        f"migrated from {before.current or 'nothing'} to {after.current} "
        f"({applied} migration{'s' if applied != 1 else ''} applied)"
    )


@migrate.command("status")
@_target
@click.option("--check", is_flag=True, help="Exit with code 1 unless the tables are current.")
def status(app_spec: str | None, database: str | None, check: bool) -> None:
    """Say whether the tables are current, behind (and by what), or missing."""
    with _engine(app_spec, database) as engine:
        found = migrate_mod.status(engine)
    click.echo(found.describe())
    if found.pending:
        click.echo("pending: " + ", ".join(found.pending))
    if check and not found.is_current:
        raise SystemExit(1)
