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

from flowrunner import app as app_mod
from flowrunner import errors
from flowrunner.store import migrate as migrate_mod

F = TypeVar("F", bound=Callable[..., Any])


def _target(function: F) -> F:
    function = click.option(
        "--database",
        "database",
        metavar="URL",
        default=None,
        help="Database URL (SQLAlchemy form), e.g. sqlite:///app.db.",
    )(function)
    return click.option(
        "--app",
        "app_spec",
        metavar="MODULE:ATTR",
        default=None,
        help="The application's flow runner, or a function returning one.",
    )(function)


@contextmanager
def _engine(app_spec: str | None, database: str | None) -> Iterator[sa.Engine]:
    """The engine to migrate; one-line errors for everything that can go wrong finding it."""
    if app_spec is None and database is None:
        raise click.UsageError("give --app MODULE:ATTR or --database URL")
    owned = False
    try:
        if app_spec is not None:
            # The tables may not exist yet: the runner must not refuse to mount.
            runner = app_mod.load_app(app_spec, database_url=database, check_schema=False)
            engine = runner.engine
        else:
            assert database is not None
            engine = sa.create_engine(database)
            owned = True
    except errors.FlowrunnerError as exc:
        raise click.ClickException(str(exc)) from exc
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise click.ClickException(f"cannot use the database URL {database!r}: {exc}") from exc
    try:
        yield engine
    except sa.exc.OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise click.ClickException(f"cannot reach the database: {reason}") from exc
    except errors.FlowrunnerError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if owned:
            engine.dispose()


@click.group()
def migrate() -> None:
    """Create or move flowrunner's own tables (forward-only migrations)."""


@migrate.command("up")
@_target
def up(app_spec: str | None, database: str | None) -> None:
    """Apply every pending migration; running it again changes nothing."""
    with _engine(app_spec, database) as engine:
        before = migrate_mod.status(engine)
        if not before.known:
            raise click.ClickException(before.describe())
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
