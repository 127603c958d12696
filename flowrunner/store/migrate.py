"""Creating and moving the engine's tables with Alembic, driven from code (no alembic.ini).

``upgrade(engine)`` brings the tables to the newest revision (``flowrunner migrate
up``); ``status(engine)`` says where they stand; ``ensure_current(engine)`` is what
serving calls: it never migrates, it refuses with the command to run. Migrations
are forward-only and keep their own version table, ``flowrunner_alembic_version``,
beside any the application has.

Alembic is imported only to migrate or to say how far behind the tables are: a process
that serves finds its tables current with one plain read (``ensure_current``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.store import dialects

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

VERSION_TABLE = "flowrunner_alembic_version"
TABLE_PREFIX = "flowrunner_"
MIGRATIONS = Path(__file__).with_name("migrations")
UP_COMMAND = "flowrunner migrate up --app MODULE:ATTR"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's filter: only flowrunner's own tables are compared or touched."""
    if type_ == "table":
        return name is not None and name.startswith(TABLE_PREFIX) and name != VERSION_TABLE
    return True


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An Alembic configuration pointing at the migrations inside the installed package."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    """The migrations as Alembic reads them, once a process: reading them runs each
    revision's file, and the package's files do not change while it runs."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    """The newest revision this flowrunner knows."""
    revision = _scripts().get_current_head()
    assert revision is not None
    return revision


# ``revision = "0004"`` and ``down_revision = "0003"`` (or ``None``) in a migration's file.
_REVISION = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+)$", re.M)


@functools.cache
def head_written() -> str:
    """The newest revision, read from the migrations' files as written, without Alembic:
    the one no other names as its ``down_revision`` (``head()`` asks Alembic the same)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict(_REVISION.findall(path.read_text(encoding="utf-8")))
        revisions.add(found["revision"].strip("\"' "))
        parents.add(found["down_revision"].strip("\"' "))
    (newest,) = revisions - parents
    return newest


def _stamped(conn: sa.Connection) -> list[str]:
    """The revisions the version table holds (none when it does not exist)."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return []
    table = sa.table(VERSION_TABLE, sa.column("version_num"))
    return [str(value) for value in conn.execute(sa.select(table.c.version_num)).scalars()]


def current(conn: sa.Connection) -> str | None:
    """The revision the database is at, or None before the first ``migrate up``."""
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    revision: str | None = context.get_current_revision()
    return revision


@dataclass(frozen=True)
class MigrationStatus:
    """Where the engine's tables stand against this flowrunner's migrations."""

    current: str | None
    head: str
    pending: tuple[str, ...]
    # False when the database is at a revision this flowrunner does not know (a newer one).
    known: bool = True

    @property
    def is_current(self) -> bool:
        return self.known and self.current == self.head

    def describe(self, command: str = UP_COMMAND) -> str:
        """Where the tables stand, in a sentence; ``command`` is the one it tells to run
        when they are missing or behind (the command line gives it its own options)."""
        if not self.known:
            return (
                f"the flowrunner tables are at revision {self.current}, which this "
                f"flowrunner does not know; upgrade flowrunner (it knows up to {self.head})"
            )
        if self.current is None:
            return f"the flowrunner tables do not exist yet; run: {command}"
        if self.is_current:
            return f"the flowrunner tables are current (revision {self.head})"
        return (
            f"the flowrunner tables are at revision {self.current}, behind {self.head} "
            f"({len(self.pending)} migration(s) to apply); run: {command}"
        )


def status(engine: sa.Engine) -> MigrationStatus:
    """Read the database's revision and compare it with this flowrunner's newest."""
    scripts = _scripts()
    newest = head()
    with engine.connect() as conn:
        at = current(conn)
    known_revisions = {script.revision for script in scripts.walk_revisions()}
    if at is not None and at not in known_revisions:
        return MigrationStatus(current=at, head=newest, pending=(), known=False)
    pending = tuple(
        script.revision
        for script in reversed(list(scripts.iterate_revisions(newest, at or "base")))
    )
    return MigrationStatus(current=at, head=newest, pending=pending)


def upgrade(engine: sa.Engine, revision: str = "head") -> MigrationStatus:
    """Apply every pending migration in one transaction; a current database is left alone.

    Two deploys migrating at once take turns (an advisory lock on PostgreSQL, the
    immediate transaction on SQLite); the second finds nothing left to do. A database
    already at the newest revision is found so by one read of the version table, as
    ``ensure_current`` finds it, Alembic left unimported.
    """
    dialects.prepare_engine(engine)
    if revision == "head" and (newest := _at_newest(engine)) is not None:
        return newest
    from alembic import command

    with dialects.begin(engine) as conn:
        dialects.lock_for_transaction(conn, "flowrunner:migrate")
        command.upgrade(alembic_config(conn), revision)
    return status(engine)


def _at_newest(engine: sa.Engine) -> MigrationStatus | None:
    """The status of a database at the newest revision, found so by one read of the
    version table with Alembic left unimported; None for any other (``status`` judges)."""
    newest = head_written()
    with engine.connect() as conn:
        if _stamped(conn) == [newest]:
            return MigrationStatus(current=newest, head=newest, pending=())
    return None


def ensure_current(engine: sa.Engine) -> MigrationStatus:
    """Refuse to serve unless the tables are at this flowrunner's newest revision.

    Raises ``errors.SchemaOutdated`` whose message names the command to run. Tables at the
    newest revision are found so with one read of the version table, Alembic left
    unimported; anything else is judged by ``status``.
    """
    newest = _at_newest(engine)
    if newest is not None:
        return newest
    found = status(engine)
    if not found.is_current:
        raise errors.SchemaOutdated(found.describe())
    return found
