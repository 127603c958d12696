"""An application's own Alembic leaves flowrunner's tables alone with the one line
``flowrunner.alembic`` gives its ``env.py``: its autogenerate, run against a database
that holds the application's tables and flowrunner's (migrated), proposes nothing on
flowrunner's — where without the line it would drop all of them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from fixtures.purchase_orders import app as po
from flowrunner import alembic as flowrunner_alembic
from flowrunner.store import engine_tables, migrate

# flowrunner's own tables: the engine's, and the version table of its migrations.
OURS = {*engine_tables.metadata.tables, migrate.VERSION_TABLE}

# The application's env.py, as docs/engine.md writes it (its one flowrunner line marked).
ENV_PY = """\
from alembic import context

from fixtures.purchase_orders import app
from flowrunner.alembic import include_name

with context.config.attributes["connection"] as connection:
    context.configure(
        connection=connection,
        target_metadata=app.metadata,
        include_name=include_name,  # flowrunner's tables are not the application's
    )
    with context.begin_transaction():
        context.run_migrations()
"""


def _migrated(engine: sa.Engine) -> sa.Engine:
    po.metadata.create_all(engine)
    migrate.upgrade(engine)
    return engine


def _tables_touched(operations: list[Any]) -> set[str]:
    """The tables an autogenerate's operations name (a table, or an index's)."""
    touched: set[str] = set()
    for operation in operations:
        for part in operation if isinstance(operation, list) else [operation]:
            item = part[1] if isinstance(part, tuple) and len(part) > 1 else None
            table = item if isinstance(item, sa.Table) else getattr(item, "table", None)
            if isinstance(table, sa.Table):
                touched.add(table.name)
            elif isinstance(part, tuple) and len(part) > 3 and isinstance(part[3], str):
                touched.add(part[3])  # a column's or a type's change: (op, schema, table, …)
    return touched


def test_ours_are_the_tables_the_store_names_so() -> None:
    assert flowrunner_alembic.PREFIX == migrate.TABLE_PREFIX
    assert all(flowrunner_alembic.is_flowrunner_table(name) for name in OURS)


def test_without_the_line_the_applications_autogenerate_would_drop_ours(
    any_engine: sa.Engine,
) -> None:
    with _migrated(any_engine).connect() as conn:
        operations = compare_metadata(MigrationContext.configure(conn), po.metadata)
    assert _tables_touched(operations) >= OURS
    assert len(OURS) == 13


def test_with_include_name_it_proposes_nothing_on_ours(any_engine: sa.Engine) -> None:
    with _migrated(any_engine).connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_name": flowrunner_alembic.include_name}
        )
        operations = compare_metadata(context, po.metadata)
    assert not _tables_touched(operations) & OURS, operations


def test_with_include_object_it_proposes_nothing_on_ours(any_engine: sa.Engine) -> None:
    with _migrated(any_engine).connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": flowrunner_alembic.include_object}
        )
        operations = compare_metadata(context, po.metadata)
    assert not _tables_touched(operations) & OURS, operations


def test_the_applications_revision_autogenerate_writes_nothing_of_ours(
    any_engine: sa.Engine, tmp_path: Path
) -> None:
    """``alembic revision --autogenerate`` as the application runs it, with its env.py."""
    scripts = tmp_path / "migrations"
    config = Config(str(tmp_path / "alembic.ini"), stdout=io.StringIO())
    config.set_main_option("script_location", str(scripts))
    command.init(config, str(scripts))
    (scripts / "env.py").write_text(ENV_PY, encoding="utf-8")
    _migrated(any_engine)
    with any_engine.connect() as conn:
        config.attributes["connection"] = conn
        command.revision(config, message="the application's next", autogenerate=True)
    (written,) = (scripts / "versions").glob("*.py")
    text = written.read_text(encoding="utf-8")
    assert "the application's next" in text
    assert "flowrunner_" not in text, text
