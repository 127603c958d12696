"""The engine's migrations: a migrated schema equals the metadata, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import migrated
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from storing import at_once

from fixtures.purchase_orders import app as po
from fixtures.tickets import app as tk
from flowrunner import errors
from flowrunner.store import engine_tables, migrate


def differences(engine: sa.Engine) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_name": migrate.include_name, "compare_type": True}
        )
        return list(compare_metadata(context, engine_tables.metadata))


def shape(engine: sa.Engine) -> dict[str, Any]:
    """Tables, columns (name, type class, nullability), keys and indexes, as reflected."""
    inspector = sa.inspect(engine)
    found: dict[str, Any] = {}
    for table in sorted(inspector.get_table_names()):
        if not table.startswith("flowrunner_") or table == migrate.VERSION_TABLE:
            continue
        found[table] = {
            "columns": [
                (c["name"], type(c["type"]).__name__, c["nullable"])
                for c in inspector.get_columns(table)
            ],
            "pk": inspector.get_pk_constraint(table)["constrained_columns"],
            "unique": sorted(
                (u["name"], tuple(u["column_names"]))
                for u in inspector.get_unique_constraints(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(table)
                # PostgreSQL reports unique constraints as indexes too.
                if i["name"] not in {u["name"] for u in inspector.get_unique_constraints(table)}
            ),
        }
    return found


def test_a_migrated_schema_has_no_differences_from_the_metadata(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine)
    assert differences(any_engine) == []


def test_a_fresh_schema_equals_a_migrated_one(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine)
    migrated = shape(any_engine)
    assert set(migrated) == {table.name for table in engine_tables.metadata.sorted_tables}
    with any_engine.begin() as conn:
        engine_tables.metadata.drop_all(conn)
    with any_engine.begin() as conn:
        engine_tables.metadata.create_all(conn)
    assert shape(any_engine) == migrated


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_the_tests_replayed_migration_is_the_migration(engines: Any) -> None:
    """The tests' fixtures replay the migrations' statements (``tests/migrated.py``): the
    same tables, columns, keys and indexes, and the same version stamp."""
    by_migration, by_replay = engines(), engines()
    migrate.upgrade(by_migration)
    migrated.upgrade(by_replay)
    assert shape(by_replay) == shape(by_migration)
    assert differences(by_replay) == []
    assert migrate.status(by_replay) == migrate.status(by_migration)
    assert migrate.status(by_replay).is_current


def everything(engine: sa.Engine) -> dict[str, Any]:
    """Every table of the database whole, as reflected: columns, keys, indexes, checks."""
    inspector = sa.inspect(engine)
    return {
        table: (
            [
                (c["name"], repr(c["type"]), c["nullable"], c["default"])
                for c in inspector.get_columns(table)
            ],
            inspector.get_pk_constraint(table),
            inspector.get_foreign_keys(table),
            inspector.get_indexes(table),
            inspector.get_unique_constraints(table),
            inspector.get_check_constraints(table),
        )
        for table in sorted(inspector.get_table_names())
    }


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
@pytest.mark.parametrize("app", [po, tk], ids=["purchase_orders", "tickets"])
def test_the_tests_created_tables_are_those_create_all_makes(engines: Any, app: Any) -> None:
    """The tests' fixtures send again what ``create_all`` sent for an application's tables
    (``migrated.create``): the same tables, and a database that has them is left to
    ``create_all``, which finds them there."""
    by_create_all, by_create = engines(), engines()
    app.metadata.create_all(by_create_all)
    migrated.create(app.metadata, by_create)
    migrated.create(app.metadata, engines())  # the statements kept now: sent again
    assert everything(by_create) == everything(by_create_all) != {}
    migrated.create(app.metadata, by_create)
    assert everything(by_create) == everything(by_create_all)


@pytest.mark.parametrize("engines", ["postgresql"], indirect=True)
def test_the_tests_recycled_tables_are_freshly_migrated_ones(engines: Any, pg_url: str) -> None:
    """On PostgreSQL the fixtures keep a test's engine tables for the next test
    (``migrated.recycle``): they come back empty, their ids from 1 again, in the migrated
    shape; tables whose shape a test changed are dropped with their schema instead."""
    by_migration, used = engines(), engines()
    migrate.upgrade(by_migration)
    migrated.upgrade(used)
    journal = engine_tables.journal
    row = {"at": sa.func.current_timestamp(), "operator": "ann", "action": "start"}
    with used.begin() as conn:
        conn.execute(sa.insert(journal).values(row))
        conn.execute(sa.insert(journal).values(row))
    admin = sa.create_engine(pg_url)
    spares = len(migrated._SPARES)
    migrated.recycle(admin, used.info_schema)
    assert len(migrated._SPARES) == spares + 1

    again = engines()
    migrated.upgrade(again)
    assert len(migrated._SPARES) == spares
    assert shape(again) == shape(by_migration)
    assert migrate.status(again).is_current
    with again.begin() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(journal)).scalar_one() == 0
        first = conn.execute(sa.insert(journal).values(row).returning(journal.c.id)).scalar_one()
    assert first == 1

    with again.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE flowrunner_journal ADD COLUMN note text")
    migrated.recycle(admin, again.info_schema)
    assert len(migrated._SPARES) == spares
    admin.dispose()


def test_an_empty_database_is_refused_with_the_command_to_run(any_engine: sa.Engine) -> None:
    found = migrate.status(any_engine)
    assert found.current is None and not found.is_current
    assert found.pending[-1] == migrate.head() and found.pending[0] == "0001"
    with pytest.raises(errors.SchemaOutdated, match="flowrunner migrate up --app MODULE:ATTR"):
        migrate.ensure_current(any_engine)


def test_upgrade_makes_it_current(any_engine: sa.Engine) -> None:
    after = migrate.upgrade(any_engine)
    assert after.is_current and after.current == migrate.head() and after.pending == ()
    assert migrate.ensure_current(any_engine).is_current
    assert "current" in after.describe()


def test_upgrading_twice_changes_nothing_and_keeps_data(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine)
    with any_engine.begin() as conn:
        conn.execute(
            sa.insert(engine_tables.journal).values(
                at=sa.func.current_timestamp(), operator="ann", action="start"
            )
        )
    before = shape(any_engine)
    again = migrate.upgrade(any_engine)
    assert again.is_current
    assert shape(any_engine) == before
    with any_engine.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(engine_tables.journal)).scalar()
            == 1
        )


def test_upgrading_a_current_database_only_reads_its_revision(
    any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate.upgrade(any_engine)
    from alembic import command

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("Alembic was asked to upgrade a current database")

    monkeypatch.setattr(command, "upgrade", refused)
    sent: list[str] = []
    sa.event.listen(any_engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    again = migrate.upgrade(any_engine)
    assert again.is_current and again.current == migrate.head() and again.pending == ()
    # Whether the version table is there, then what it holds: nothing written.
    reads = ("SELECT", "PRAGMA", "BEGIN", "COMMIT", "ROLLBACK")
    assert not [s for s in sent if not s.lstrip().upper().startswith(reads)]
    assert any(migrate.VERSION_TABLE in s for s in sent)


def test_a_database_behind_is_upgraded_to_the_newest(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine, "0001")
    after = migrate.upgrade(any_engine)
    assert after.is_current and after.pending == ()
    assert differences(any_engine) == []


def test_a_revision_this_flowrunner_does_not_know_is_refused(any_engine: sa.Engine) -> None:
    migrate.upgrade(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
    found = migrate.status(any_engine)
    assert not found.known and not found.is_current
    with pytest.raises(errors.SchemaOutdated, match="upgrade flowrunner"):
        migrate.ensure_current(any_engine)


def test_a_database_behind_is_described_with_what_is_pending() -> None:
    behind = migrate.MigrationStatus(current="0001", head="0003", pending=("0002", "0003"))
    assert not behind.is_current
    assert behind.describe() == (
        "the flowrunner tables are at revision 0001, behind 0003 (2 migration(s) to apply); "
        "run: flowrunner migrate up --app MODULE:ATTR"
    )


def test_the_applications_own_alembic_and_tables_are_left_alone(any_engine: sa.Engine) -> None:
    with any_engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(sa.text("INSERT INTO alembic_version VALUES ('app_rev_7')"))
        conn.execute(sa.text("CREATE TABLE purchase_order (id INTEGER PRIMARY KEY)"))
    migrate.upgrade(any_engine)
    with any_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar() == (
            "app_rev_7"
        )
    # The application's tables are not flowrunner's to compare (or drop).
    assert differences(any_engine) == []


def test_migrations_are_found_inside_the_package() -> None:
    assert (migrate.MIGRATIONS / "env.py").is_file()
    assert migrate.MIGRATIONS.parent.name == "store"
    assert migrate.alembic_config().get_main_option("script_location") == str(migrate.MIGRATIONS)


def test_deploys_migrating_at_once_take_turns(any_engine: sa.Engine) -> None:
    at_once(lambda _: migrate.upgrade(any_engine), 3)
    assert migrate.status(any_engine).is_current
    assert differences(any_engine) == []


def test_runs_due_before_0002_take_their_runs_resource(any_engine: sa.Engine) -> None:
    """A database with due work at 0001 keeps it claimable by its own resource's runner."""
    migrate.upgrade(any_engine, "0001")
    with any_engine.begin() as conn:
        now = "2026-01-05 09:00:00+00:00"
        conn.execute(
            sa.text(
                "INSERT INTO flowrunner_runs (id, resource, record_id, flow_id, flow_name,"
                " start_key, snapshot, digest, status, state, version, started_at, updated_at)"
                " VALUES (1, 'ticket', '7', '1', 'f', 'k', '{}', 'd', 'waiting', '{}', 1,"
                " :now, :now)"
            ),
            {"now": now},
        )
        conn.execute(
            sa.text("INSERT INTO flowrunner_due (run_id, due_at, wakes) VALUES (1, :now, 0)"),
            {"now": now},
        )
    migrate.upgrade(any_engine)
    with any_engine.connect() as conn:
        resource = conn.execute(sa.text("SELECT resource FROM flowrunner_due")).scalar_one()
    assert resource == "ticket"
