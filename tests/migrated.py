"""The engine's tables in a test's fresh database, made fast: the migrations run once per
test process and dialect, on a scratch database of their own, and each test's database
gets the same statements replayed in one transaction.

Alembic itself costs far more than the DDL it sends (about 0.3 s a database on
PostgreSQL, a few hundred tests' worth of the suite): what it decides — which revisions,
in which order, what each one sends — is the same for every empty database of a dialect.
What is replayed is what the migrations sent there, statement for statement (reads left
out: on an empty database they find what they found), so the tables, indexes and the
version stamp are the migrated ones; ``tests/test_migrations.py`` holds a replayed
database against a migrated one. The migrations' own tests call ``migrate.upgrade``.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flowrunner.store import dialects, migrate

# What the migrations sent on an empty database of each dialect: (statement, parameters,
# whether to the many).
Script = list[tuple[str, Any, bool]]
_SCRIPTS: dict[str, Script] = {}
# Left out: reads, and the transaction's own control (the replay has its transaction).
_LEFT_OUT = (
    "SELECT",
    "PRAGMA",
    "SHOW",
    "WITH",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
)


def upgrade(engine: sa.Engine) -> None:
    """``migrate.upgrade(engine)``: on a database without the engine's tables yet (the
    application's own may be there), the migrations' statements replayed."""
    if sa.inspect(engine).has_table(migrate.VERSION_TABLE):
        migrate.upgrade(engine)  # migrated before: Alembic judges what is left
        return
    script = _script(engine)
    dialects.prepare_engine(engine)
    with dialects.begin(engine) as conn:
        if engine.dialect.name == "postgresql" and not any(p for _, p, _ in script):
            # One round trip: PostgreSQL takes statements without parameters together.
            conn.exec_driver_sql(";\n".join(statement for statement, _, _ in script))
            return
        for statement, parameters, many in script:
            if many:
                conn.exec_driver_sql(statement, parameters)
            else:
                conn.exec_driver_sql(statement, parameters or ())


def _script(engine: sa.Engine) -> Script:
    name = engine.dialect.name
    if name not in _SCRIPTS:
        _SCRIPTS[name] = _record(engine)
    return _SCRIPTS[name]


def _record(engine: sa.Engine) -> Script:
    """Migrate a scratch database like ``engine``'s and keep what was sent to it."""
    sent: Script = []

    def keep(
        _conn: object, _cursor: object, statement: str, parameters: Any, _c: object, many: bool
    ) -> None:
        if not statement.lstrip().upper().startswith(_LEFT_OUT):
            sent.append((statement, parameters, many))

    if engine.dialect.name == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="migrated-"))
        scratch = sa.create_engine(f"sqlite:///{folder / 'scratch.db'}")
        _keep_while_migrating(scratch, keep)
        return sent
    schema = f"m_{uuid.uuid4().hex[:12]}"
    url = engine.url.render_as_string(hide_password=False)
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    scratch = sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    try:
        _keep_while_migrating(scratch, keep)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
    return sent


def _keep_while_migrating(scratch: sa.Engine, keep: Any) -> None:
    sa.event.listen(scratch, "before_cursor_execute", keep)
    try:
        migrate.upgrade(scratch)
    finally:
        sa.event.remove(scratch, "before_cursor_execute", keep)
        scratch.dispose()
