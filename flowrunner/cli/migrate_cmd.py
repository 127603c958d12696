"""``flowrunner migrate up|status``: create or move the engine's tables, or say where they stand.

Serving never migrates; this is the one way the tables change. Both commands take the
application (``--app MODULE:ATTR``, whose runner names the database) or a database
URL alone (``--database URL``); with both, the URL is handed to the app's factory, or
refused if the app's runner is bound to another database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click
import sqlalchemy as sa

from flowrunner import cli as cli_mod
from flowrunner.cli import app_loader as app_mod
from flowrunner.store import migrate as migrate_mod

F = TypeVar("F", bound=Callable[..., Any])


def _target(function: F) -> F:
    function = cli_mod.json_option()(function)
    function = cli_mod.database_option()(function)
    return click.option(
        "--app",
        "app_spec",
        metavar="MODULE:ATTR",
        cls=cli_mod.FromEnvironment,
        envvar=cli_mod.APP_VARIABLE,
        show_envvar=True,
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


@migrate.command("up", epilog=cli_mod.EXIT_STATUSES)
@_target
def up(app_spec: str | None, database: str | None, as_json: bool) -> None:
    """Apply every pending migration; running it again changes nothing.

    With --json: {"database", "from", "to", "applied": [revisions]}.
    """
    with _engine(app_spec, database) as engine:
        before = migrate_mod.status(engine)
        if not before.known:
            raise cli_mod.InputError(before.describe())
        after = before if before.is_current else migrate_mod.upgrade(engine)
        where = app_mod.shown(engine.url)
    if as_json:
        cli_mod.echo_json(
            {
                "database": where,
                "from": before.current,
                "to": after.current,
                "applied": list(before.pending),
            }
        )
        return
    if before.is_current:
        click.echo(f"already current (revision {before.head}); nothing to do")
        return
    applied = len(before.pending)
    click.echo(
        f"migrated from {before.current or 'nothing'} to {after.current} "
        f"({applied} migration{'s' if applied != 1 else ''} applied)"
    )


@migrate.command("status", epilog=cli_mod.EXIT_STATUSES)
@_target
@click.option("--check", is_flag=True, help="Exit with code 1 unless the tables are current.")
def status(app_spec: str | None, database: str | None, check: bool, as_json: bool) -> None:
    """Say whether the tables are current, behind (and by what), or missing.

    With --json: {"database", "current", "head", "is_current", "known", "pending",
    "description"}; "current" is null before the first migration.
    """
    with _engine(app_spec, database) as engine:
        found = migrate_mod.status(engine)
        where = app_mod.shown(engine.url)
    command = cli_mod.up_command(app_spec, database)
    if as_json:
        cli_mod.echo_json(
            {
                "database": where,
                "current": found.current,
                "head": found.head,
                "is_current": found.is_current,
                "known": found.known,
                "pending": list(found.pending),
                "description": found.describe(command),
            }
        )
    else:
        click.echo(found.describe(command))
        if found.pending:
            click.echo("pending: " + ", ".join(found.pending))
    if check and not found.is_current:
        raise SystemExit(1)
