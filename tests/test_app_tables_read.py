"""A runner reads the application's tables as SQLAlchemy's full reflection would, for
what it uses of them: every column's name, type, nullability and server default, and
the primary key (so a new flow row's id comes back as before). Tables read alike from
two databases are one set of tables, with what was built on them."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from fixtures.tickets import app as tk
from flowrunner import errors
from flowrunner.store import app_tables, flow_rows, prepared

APPS = [pytest.param(po, id="purchase_orders"), pytest.param(tk, id="tickets")]


def described(column: sa.Column[Any]) -> tuple[object, ...]:
    default = column.server_default
    return (
        column.name,
        repr(column.type),
        column.nullable,
        str(default.arg) if isinstance(default, sa.DefaultClause) else None,
        column.primary_key,
        column.autoincrement,
        column.comment,
    )


@pytest.mark.parametrize("app", APPS)
def test_the_tables_read_have_the_columns_and_key_full_reflection_finds(
    app: ModuleType, any_engine: sa.Engine
) -> None:
    app.metadata.create_all(any_engine)
    binding = app.binding
    names = [binding.resource, binding.flows_table, binding.steps_table]
    read = app_tables.read_tables(any_engine, {name: "some" for name in names})
    assert [table.name for table in read] == names
    for table in read:
        whole = sa.Table(table.name, sa.MetaData(), autoload_with=any_engine)
        assert [described(c) for c in table.columns] == [described(c) for c in whole.columns]
        ours, theirs = table.autoincrement_column, whole.autoincrement_column
        assert ours is not None and theirs is not None and ours.name == theirs.name


def test_a_new_flow_row_s_id_comes_back(any_engine: sa.Engine) -> None:
    po.metadata.create_all(any_engine)
    [flows] = app_tables.read_tables(any_engine, {"po_flow": "flows"})
    with any_engine.begin() as conn:
        first = conn.execute(sa.insert(flows).values(name="a", start="manual"))
        second = conn.execute(sa.insert(flows).values(name="b", start="manual"))
        assert (first.inserted_primary_key, second.inserted_primary_key) == ((1,), (2,))
        assert conn.execute(sa.select(flows.c.active)).scalars().all() == [True, True]


def test_a_missing_table_is_named_as_the_binding_calls_it(any_engine: sa.Engine) -> None:
    po.metadata.create_all(any_engine)
    with pytest.raises(errors.BindingError) as refused:
        app_tables.read_tables(any_engine, {"po_flow": "flows", "po_steps": "steps"})
    assert str(refused.value) == "the steps table 'po_steps' does not exist in the database"


def test_a_view_is_read_like_a_table(any_engine: sa.Engine) -> None:
    po.metadata.create_all(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.text("CREATE VIEW open_order AS SELECT id, number FROM purchase_order"))
    [view] = app_tables.read_tables(any_engine, {"open_order": "resource"})
    assert [c.name for c in view.columns] == ["id", "number"]


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_second_database_of_the_same_tables_shares_them_and_what_was_built_on_them(
    engines: Callable[[], sa.Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = engines(), engines()
    for engine in (first, second):
        po.metadata.create_all(engine)
    with first.begin() as conn:
        conn.execute(sa.insert(po.po_flow).values(name="only in the first", start="created"))
    compiles: list[object] = []
    real = prepared.compile_for

    def counted(*args: Any, **kwargs: Any) -> prepared.Compiled:
        compiles.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(prepared, "compile_for", counted)
    ours = app_tables.reflect(first, po.binding)
    with first.connect() as conn:
        digest = flow_rows.startable_digest(conn, ours, "created")
    made = len(compiles)
    theirs = app_tables.reflect(second, po.binding)
    assert theirs is ours and theirs.flows is ours.flows
    with second.connect() as conn:
        # Each database answers for its own rows, with the statement built once.
        assert flow_rows.startable_digest(conn, theirs, "created") != digest
        assert flow_rows.flows_to_start(conn, theirs, "created") == []
    with first.connect() as conn:
        assert [f["name"] for f in flow_rows.flows_to_start(conn, ours, "created")] == [
            "only in the first"
        ]
    assert len(compiles) == made


@pytest.mark.parametrize("engines", ["sqlite", "postgresql"], indirect=True)
def test_a_table_the_database_describes_otherwise_is_read_anew(
    engines: Callable[[], sa.Engine],
) -> None:
    first, second = engines(), engines()
    po.metadata.create_all(first)
    po.metadata.create_all(second)
    with second.begin() as conn:
        conn.execute(sa.text("ALTER TABLE po_flow_step ADD COLUMN audited_by TEXT"))
    ours, theirs = app_tables.reflect(first, po.binding), app_tables.reflect(second, po.binding)
    assert theirs is not ours and theirs.steps is not ours.steps
    assert theirs.step_extra == {"audited_by"} and ours.step_extra == frozenset()
    assert "audited_by" in theirs.steps.c and "audited_by" not in ours.steps.c
