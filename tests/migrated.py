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

On PostgreSQL even the replay is most of a test's cost (creating a dozen tables and
their indexes, then dropping them, about 0.3 s), so the tables are recycled: when a
test's schema is about to be dropped, ``recycle`` moves the engine's tables out of it
into a spare schema of their own, emptied and their sequences restarted, provided their
shape is still exactly the migrated one (columns, defaults, indexes, constraints,
triggers, the version stamp). The next ``upgrade`` moves a spare set into its database
(``ALTER TABLE … SET SCHEMA``, a few milliseconds) instead of replaying. A set whose
shape a test changed, or that cannot be emptied, is dropped with its schema as before.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flowrunner.store import dialects, migrate

# Spare sets of the engine's tables on PostgreSQL, each alone in a schema: (server URL,
# schema), emptied and ready to move. The shape of a freshly migrated set (see
# ``_shape``), and its tables' names, taken from the first replay of the process.
_SPARES: list[tuple[str, str]] = []
_MIGRATED_SHAPE: list[Any] = []
_ENGINE_TABLES: list[str] = []
# The sequences the engine's tables own (moved with them), read with the first shape.
_SEQUENCES: list[str] = []

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
    if engine.dialect.name == "postgresql" and _move_spare_into(engine):
        return
    with dialects.begin(engine) as conn:
        if engine.dialect.name == "postgresql" and not any(p for _, p, _ in script):
            # One round trip: PostgreSQL takes statements without parameters together.
            conn.exec_driver_sql(";\n".join(statement for statement, _, _ in script))
            if not _MIGRATED_SHAPE:
                schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
                _ENGINE_TABLES.extend(sorted(_created_tables(script)))
                _MIGRATED_SHAPE.extend(_shape(conn, schema))
                _SEQUENCES.extend(
                    conn.execute(sa.text(_OWNED_SEQUENCES), {"s": schema, "tables": _ENGINE_TABLES})
                    .scalars()
                    .all()
                )
            return
        for statement, parameters, many in script:
            if many:
                conn.exec_driver_sql(statement, parameters)
            else:
                conn.exec_driver_sql(statement, parameters or ())


# What ``create_all`` sends for an application's metadata on an empty database, by the
# metadata itself (kept, so no other takes its place), its tables and columns and the
# dialect: its CREATE TABLE and CREATE INDEX text.
_CREATES: dict[tuple[object, ...], list[str]] = {}


def create(metadata: sa.MetaData, engine: sa.Engine) -> None:
    """``metadata.create_all(engine)``: on a database with none of its tables yet, the
    statements ``create_all`` sends there, compiled once a test process and sent again (on
    PostgreSQL in one round trip), where ``create_all`` asks for each table whether it is
    there and compiles each statement anew; otherwise ``create_all`` itself."""
    names = [table.name for table in metadata.sorted_tables]
    key = (
        metadata,
        engine.dialect.name,
        tuple((t.name, tuple(c.name for c in t.columns)) for t in metadata.sorted_tables),
    )
    with engine.begin() as conn:
        if not names or _any_of(conn, names):
            metadata.create_all(conn)
            return
        kept = _CREATES.get(key)
        if kept is None:
            ddl: list[str] = []
            dialect = conn.dialect

            def keep(element: Any, *_: object, **__: object) -> None:
                ddl.append(str(element.compile(dialect=dialect)).strip())

            metadata.create_all(sa.create_mock_engine(engine.url, keep), checkfirst=False)
            kept = _CREATES[key] = ddl
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(";\n".join(kept))
        else:
            for statement in kept:
                conn.exec_driver_sql(statement)


def _any_of(conn: sa.Connection, names: list[str]) -> bool:
    """Whether any table (or view) of these names is in the database's current schema."""
    if conn.dialect.name == "postgresql":
        query = (
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relname = ANY(%(names)s) LIMIT 1"
        )
        return conn.exec_driver_sql(query, {"names": names}).first() is not None
    if conn.dialect.name == "sqlite":
        marks = ", ".join("?" for _ in names)
        query = f"SELECT 1 FROM sqlite_master WHERE name IN ({marks}) LIMIT 1"
        return conn.exec_driver_sql(query, tuple(names)).first() is not None
    return True  # another database: ``create_all`` judges


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


def recycle(admin: sa.Engine, schema: str) -> None:
    """Before ``schema`` is dropped: keep its engine tables, emptied, as a spare set.

    Nothing happens unless they are there in exactly the migrated shape; any failure
    (a test's connection still holding a lock, a row another table refers to) leaves
    them to be dropped with the schema."""
    if admin.dialect.name != "postgresql" or not _MIGRATED_SHAPE:
        return
    spare = f"p_{uuid.uuid4().hex[:12]}"
    try:
        with admin.begin() as conn:
            conn.exec_driver_sql("SET LOCAL lock_timeout = '2s'")
            if _shape(conn, schema) != _MIGRATED_SHAPE:
                return
            moves = [f'ALTER TABLE "{schema}"."{t}" SET SCHEMA "{spare}"' for t in _ENGINE_TABLES]
            emptied = [
                f'DELETE FROM "{spare}"."{t}"' for t in _ENGINE_TABLES if t != migrate.VERSION_TABLE
            ]
            restarts = [f'ALTER SEQUENCE "{spare}"."{name}" RESTART' for name in _SEQUENCES]
            conn.exec_driver_sql(
                ";".join([f'CREATE SCHEMA "{spare}"', *moves, *emptied, *restarts])
            )
    except sa.exc.DBAPIError:
        return
    _SPARES.append((admin.url.render_as_string(hide_password=False), spare))


def drop_spares() -> None:
    """Drop the spare sets still waiting (at the end of the test process)."""
    by_server: dict[str, list[str]] = {}
    for url, spare in _SPARES:
        by_server.setdefault(url, []).append(spare)
    _SPARES.clear()
    for url, spares in by_server.items():
        admin = sa.create_engine(url)
        try:
            with admin.begin() as conn:
                conn.exec_driver_sql(";".join(f'DROP SCHEMA "{s}" CASCADE' for s in spares))
        finally:
            admin.dispose()


def _move_spare_into(engine: sa.Engine) -> bool:
    """Move a spare set of the same server into ``engine``'s schema; False if none."""
    server = _server(engine.url)
    same = [i for i, (url, _) in enumerate(_SPARES) if _server(sa.make_url(url)) == server]
    if not same:
        return False
    _, spare = _SPARES.pop(same[-1])
    with dialects.begin(engine) as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        moves = [f'ALTER TABLE "{spare}"."{t}" SET SCHEMA "{schema}"' for t in _ENGINE_TABLES]
        conn.exec_driver_sql(";".join([*moves, f'DROP SCHEMA "{spare}"']))
    return True


def _server(url: sa.URL) -> str:
    """A URL without its query (a test's search path): the server and database."""
    return url.set(query={}).render_as_string(hide_password=False)


def _created_tables(script: Script) -> set[str]:
    """The tables the migrations created (not an application's, also in the schema)."""
    created = (re.match(r'\s*CREATE TABLE\s+"?(\w+)', statement) for statement, _, _ in script)
    return {match.group(1) for match in created if match}


# The sequences the engine's tables own (their ids), not an application's in the schema.
_OWNED_SEQUENCES = """
SELECT s.relname::text
FROM pg_class s
JOIN pg_depend d ON d.objid = s.oid AND d.deptype IN ('a', 'i')
JOIN pg_class t ON t.oid = d.refobjid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE s.relkind = 'S' AND n.nspname = :s AND t.relname = ANY(:tables)
ORDER BY 1
"""

# The shape of the engine's tables in a schema, written without the schema's name (the
# search path is the schema while it is read, so PostgreSQL leaves most names unqualified):
# each column with its type, nullability, default and identity; each index, constraint
# and trigger; whether the table is logged; and the version stamp.
_SHAPE = """
SELECT 'column', c.relname::text, concat_ws(' ', a.attname, format_type(a.atttypid,
       a.atttypmod), a.attnotnull, a.attidentity, pg_get_expr(d.adbin, d.adrelid),
       c.relpersistence)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE n.nspname = :s AND c.relname = ANY(:tables)
UNION ALL
SELECT 'index', c.relname::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :s AND c.relname = ANY(:tables)
UNION ALL
SELECT 'constraint', c.relname::text, concat_ws(' ', k.conname, pg_get_constraintdef(k.oid))
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid OR c.oid = k.confrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :s AND c.relname = ANY(:tables)
UNION ALL
SELECT 'trigger', c.relname::text, t.tgname::text
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :s AND c.relname = ANY(:tables) AND NOT t.tgisinternal
ORDER BY 1, 2, 3
"""


def _shape(conn: sa.Connection, schema: str) -> list[Any]:
    tables = _ENGINE_TABLES
    conn.execute(sa.text("SELECT set_config('search_path', :s, true)"), {"s": schema})
    found = conn.execute(sa.text(_SHAPE), {"s": schema, "tables": tables})
    # pg_get_indexdef names the schema whatever the search path: left out.
    rows = [(what, table, text.replace(f"{schema}.", "")) for what, table, text in found]
    present = {table for _, table, _ in rows}
    if present != set(tables):
        return rows
    stamp = conn.exec_driver_sql(
        f'SELECT version_num FROM "{schema}"."{migrate.VERSION_TABLE}" ORDER BY 1'
    ).all()
    return [*rows, ("version", "", tuple(stamp))]
