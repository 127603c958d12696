"""Alembic's entry point for flowrunner's own tables, driven from ``flowrunner.store.migrate``.

The caller hands over an open connection in ``config.attributes["connection"]``;
there is no alembic.ini and no URL here. The version table is
``flowrunner_alembic_version`` so it never meets the application's own Alembic.
"""

from __future__ import annotations

from alembic import context

from flowrunner.store import engine_tables, migrate

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run flowrunner's migrations through `flowrunner migrate up`")

context.configure(
    connection=connection,
    target_metadata=engine_tables.metadata,
    version_table=migrate.VERSION_TABLE,
    # Only flowrunner's tables are ours to compare; the application owns the rest.
    include_name=migrate.include_name,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
