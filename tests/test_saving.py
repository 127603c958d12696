"""The validated save paths (Core saves and the ORM flush hook) on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from fixtures.purchase_orders import app as po
from flowrunner import errors, tables
from flowrunner.binding import FlowBinding
from flowrunner.flows import edits, orm_hook, starts, validation
from flowrunner.runner import flow_runner
from flowrunner.store import app_tables

BINDING = po.binding


@pytest.fixture
def engine(po_engine: sa.Engine) -> sa.Engine:
    return po_engine


def counts(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        flows = conn.scalar(sa.select(sa.func.count()).select_from(po.po_flow))
        steps = conn.scalar(sa.select(sa.func.count()).select_from(po.po_flow_step))
    return int(flows or 0), int(steps or 0)


def stored_steps(engine: sa.Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(po.po_flow_step).order_by("id")).mappings()]


def refused(engine: sa.Engine, write: Callable[[sa.Connection], object]) -> errors.RowInvalid:
    """The refusal of ``write``, which must leave the stored steps as they were."""
    before = stored_steps(engine)
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        write(conn)
    assert stored_steps(engine) == before
    return caught.value


def a_flow(engine: sa.Engine, po_tables: tables.AppTables) -> tuple[int, dict[str, int]]:
    """A flow with a wait at 1, a branch at 2 going back to 1, and a send at 3."""
    with engine.begin() as conn:
        flow_id = edits.save_flow(
            conn, BINDING, po_tables, {"name": "Big orders", "start": "created"}
        )
        ids = {
            "wait": edits.save_step(
                conn,
                BINDING,
                po_tables,
                {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "1 day"},
            ),
            "branch": edits.save_step(
                conn,
                BINDING,
                po_tables,
                {
                    "flow_id": flow_id,
                    "position": 2,
                    "kind": "branch",
                    "condition": "status = open",
                    "goto": 1,
                    "title": "Still open?",
                },
            ),
            "send": edits.save_step(
                conn, BINDING, po_tables, {"flow_id": flow_id, "position": 3, "kind": "send"}
            ),
        }
    return flow_id, ids


def test_core_saves_store_normalized_rows(engine: sa.Engine, po_tables: tables.AppTables) -> None:
    flow_id, ids = a_flow(engine, po_tables)
    with engine.begin() as conn:
        edits.update_step(
            conn, BINDING, po_tables, ids["wait"], {"duration": " 2 days ", "title": "  "}
        )
        snap = starts.stored_snapshot(conn, po_tables, flow_id)
    assert [(s.position, s.kind) for s in snap.steps] == [(1, "wait"), (2, "branch"), (3, "send")]
    assert snap.steps[0].get("duration") == "2 days" and snap.steps[0].title is None
    assert snap.flow.name == "Big orders" and snap.flow.active is True
    with engine.begin() as conn:
        edits.update_flow(conn, BINDING, po_tables, flow_id, {"active": False})
        edits.delete_step(conn, BINDING, po_tables, ids["send"])
        assert starts.stored_snapshot(conn, po_tables, flow_id).flow.active is False
    assert counts(engine) == (1, 2)


def test_core_refuses_a_bad_step_and_stores_nothing(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    flow_id, _ = a_flow(engine, po_tables)
    row = {"flow_id": flow_id, "position": 4, "kind": "wait", "duration": "2 dayz", "field": "x"}
    error = refused(engine, lambda conn: edits.save_step(conn, BINDING, po_tables, row))
    assert [(e.field, e.code) for e in error.errors] == [
        ("field", "column_not_read"),
        ("duration", "duration_invalid"),
    ]
    assert error.row == "flow 'Big orders', step (wait, position 4)"


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"flow_id": 999, "position": 1, "kind": "send"}, "flow_id", "flow_unknown"),
        ({"position": 2, "kind": "send"}, "position", "branch_not_alone"),
        (
            {"position": 5, "kind": "branch", "condition": "amount > 1", "goto": 4},
            "goto",
            "goto_unknown",
        ),
        (
            {"position": 5, "kind": "notify", "audience": "boss", "message": "x"},
            "audience",
            "audience_unknown",
        ),
    ],
)
def test_core_refuses_cross_row_problems(
    engine: sa.Engine, po_tables: tables.AppTables, change: dict[str, Any], field: str, code: str
) -> None:
    flow_id, _ = a_flow(engine, po_tables)
    row = {"flow_id": flow_id, **change}
    error = refused(engine, lambda conn: edits.save_step(conn, BINDING, po_tables, row))
    assert (field, code) in [(e.field, e.code) for e in error.errors]


def test_the_last_step_a_goto_names_cannot_go(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    flow_id, ids = a_flow(engine, po_tables)
    wait = ids["wait"]
    (error,) = refused(
        engine, lambda conn: edits.delete_step(conn, BINDING, po_tables, wait)
    ).errors
    assert (error.field, error.code) == ("position", "goto_target_in_use")
    assert error.message == (
        "'Still open?' at position 2 goes to position 1, so its last step cannot be removed"
    )
    # Moving it away is removing it from position 1 too.
    moved = {"position": 7}
    refused(engine, lambda conn: edits.update_step(conn, BINDING, po_tables, wait, moved))
    # With a second step at position 1 (one that waits: the loop still pauses), the
    # first may go.
    with engine.begin() as conn:
        edits.save_step(
            conn,
            BINDING,
            po_tables,
            {"flow_id": flow_id, "position": 1, "kind": "waitFor", "event": "po.decided"},
        )
        edits.delete_step(conn, BINDING, po_tables, ids["wait"])
    assert counts(engine) == (1, 3)


def test_flow_names_are_unique_and_flows_delete_with_their_steps(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    flow_id, _ = a_flow(engine, po_tables)
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.save_flow(conn, BINDING, po_tables, {"name": "Big orders", "start": "manual"})
    assert [e.code for e in caught.value.errors] == ["name_taken"]
    with engine.begin() as conn:
        edits.save_flow(
            conn, BINDING, po_tables, {"id": flow_id, "name": "Big orders", "start": "manual"}
        )
        edits.delete_flow(conn, BINDING, po_tables, flow_id)
    assert counts(engine) == (0, 0)


# -- the ORM -----------------------------------------------------------------------


class Base(orm.DeclarativeBase):
    pass


class Flow(Base):
    """The purchase-order flows, mapped once for every test of the ORM path."""

    __table__ = po.po_flow
    steps: orm.Mapped[list[Step]] = orm.relationship(back_populates="flow")
    # Typing only: the columns come from the table.
    id: orm.Mapped[int]
    start: orm.Mapped[str | None]
    active: orm.Mapped[Any]


class Step(Base):
    __table__ = po.po_flow_step
    flow: orm.Mapped[Flow] = orm.relationship(back_populates="steps")
    # Typing only: the columns come from the table.
    flow_id: orm.Mapped[int]
    kind: orm.Mapped[str | None]
    title: orm.Mapped[str | None]
    duration: orm.Mapped[str | None]
    field: orm.Mapped[str | None]
    value: orm.Mapped[str | None]


@pytest.fixture
def session(engine: sa.Engine) -> Any:
    maker = orm.sessionmaker(engine)
    orm_hook.validate_on_flush(maker, BINDING)
    with maker() as session:
        yield session


def test_orm_adds_a_flow_with_its_steps_in_one_flush(
    engine: sa.Engine, session: orm.Session
) -> None:
    flow = Flow(name="Small orders", start="created", condition="amount <= 10000")
    flow.steps = [
        Step(position=2, kind="branch", condition="status = open", goto=3),
        Step(position=3, kind="send", title="Send to supplier"),
    ]
    session.add(flow)
    session.commit()
    assert counts(engine) == (1, 2)


def test_orm_refuses_bad_rows_and_stores_nothing(
    engine: sa.Engine, po_tables: tables.AppTables, session: orm.Session
) -> None:
    flow_id, ids = a_flow(engine, po_tables)
    before = stored_steps(engine)
    session.add(Step(flow_id=flow_id, position=4, kind="notify", audience="requester"))
    session.add(Flow(name="Big orders", start="sometimes"))
    with pytest.raises(errors.RowInvalid) as caught:
        session.commit()
    codes = sorted(e.code for e in caught.value.errors)
    assert codes == ["column_required", "name_taken", "start_invalid"]
    assert "flow 'Big orders'" in str(caught.value)
    session.rollback()
    # A dirty row is judged as it will stand.
    wait = session.get(Step, ids["wait"])
    assert wait is not None
    wait.duration = "soon"
    with pytest.raises(errors.RowInvalid) as caught:
        session.flush()
    assert [e.code for e in caught.value.errors] == ["duration_invalid"]
    session.rollback()
    # A deletion the goto still needs is refused.
    wait = session.get(Step, ids["wait"])
    session.delete(wait)
    with pytest.raises(errors.RowInvalid) as caught:
        session.flush()
    assert [e.code for e in caught.value.errors] == ["goto_target_in_use"]
    session.rollback()
    assert stored_steps(engine) == before
    assert counts(engine) == (1, 3)


def test_orm_accepts_good_changes(
    engine: sa.Engine, po_tables: tables.AppTables, session: orm.Session
) -> None:
    flow_id, ids = a_flow(engine, po_tables)
    send = session.get(Step, ids["send"])
    assert send is not None
    send.title = "Send it"
    session.add(
        Step(flow_id=flow_id, position=4, kind="notify", audience="requester", message="Sent.")
    )
    branch = session.get(Step, ids["branch"])
    session.delete(branch)
    session.commit()
    assert sorted(s["kind"] for s in stored_steps(engine)) == ["notify", "send", "wait"]
    # The flow goes with all of its steps, or not at all.
    flow = session.get(Flow, flow_id)
    session.delete(flow)
    with pytest.raises(errors.RowInvalid, match="still has 3 step"):
        session.flush()
    session.rollback()
    flow = session.get(Flow, flow_id)
    assert flow is not None
    for step in list(flow.steps):
        session.delete(step)
    session.delete(flow)
    session.commit()
    assert counts(engine) == (0, 0)


# -- the tables are read once ------------------------------------------------------


@pytest.fixture
def reflections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The binding names each reading of the application's tables was for."""
    seen: list[str] = []
    real = app_tables.reflect

    def counted(bind: Any, binding: FlowBinding) -> app_tables.AppTables:
        seen.append(binding.resource)
        return real(bind, binding)

    monkeypatch.setattr(app_tables, "reflect", counted)
    return seen


def test_a_runner_reads_the_tables_once_at_mount(engine: sa.Engine, reflections: list[str]) -> None:
    runner = flow_runner(BINDING, engine, commands=po.COMMANDS, check_schema=False)
    for name in ("One", "Two"):
        with engine.begin() as conn:
            flow_id = runner.save_flow(conn, {"name": name, "start": "manual"})
            runner.save_step(conn, {"flow_id": flow_id, "position": 1, "kind": "send"})
            runner.snapshot(conn, flow_id)
    assert reflections == ["purchase_order"]


def test_the_flush_hook_reads_the_tables_once_for_every_session(
    engine: sa.Engine, reflections: list[str]
) -> None:
    maker = orm.sessionmaker(engine)
    orm_hook.validate_on_flush(maker, BINDING)
    with maker() as session:
        session.commit()  # nothing to judge: nothing read
    assert reflections == []
    for name in ("One", "Two"):
        with maker() as session:
            session.add(Flow(name=name, start="manual"))
            session.commit()
    assert reflections == ["purchase_order"]


# -- tenants -----------------------------------------------------------------------


def accounts(*columns: sa.Column[Any]) -> sa.MetaData:
    """Metadata holding an ``account`` table of an id, a status and ``columns``."""
    metadata = sa.MetaData()
    sa.Table(
        "account",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("status", sa.String(20)),
        *columns,
    )
    return metadata


def tenant_app(engine: sa.Engine) -> FlowBinding:
    binding = FlowBinding(
        resource="account",
        flows_table="account_flow",
        steps_table="account_flow_step",
        set_columns=["status"],
        tenant="tenant_id",
    )
    metadata = accounts(sa.Column("tenant_id", sa.String(20)))
    tables.for_binding(metadata, binding)
    metadata.create_all(engine)
    binding.check(engine)
    return binding


def test_flows_and_steps_belong_to_a_tenant(engine: sa.Engine) -> None:
    binding = tenant_app(engine)
    app = tables.reflect(engine, binding)
    with engine.begin() as conn:
        acme = edits.save_flow(
            conn, binding, app, {"name": "Close", "start": "manual", "tenant_id": "acme"}
        )
        edits.save_flow(
            conn, binding, app, {"name": "Close", "start": "manual", "tenant_id": "globex"}
        )
        step = {"flow_id": acme, "position": 1, "kind": "set", "field": "status", "value": "closed"}
        edits.save_step(conn, binding, app, step)
        snap = starts.stored_snapshot(conn, app, acme)
    assert snap.flow.tenant == "acme" and snap.steps[0].get("tenant_id") == "acme"
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.save_flow(
            conn, binding, app, {"name": "Close", "start": "created", "tenant_id": "acme"}
        )
    assert [e.code for e in caught.value.errors] == ["name_taken"]
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.save_flow(conn, binding, app, {"name": "Open", "start": "created"})
    assert [(e.field, e.code) for e in caught.value.errors] == [("tenant_id", "column_required")]
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.save_step(conn, binding, app, {**step, "position": 2, "tenant_id": "globex"})
    assert [(e.field, e.code) for e in caught.value.errors] == [("tenant_id", "tenant_mismatch")]


def test_the_apps_own_columns_are_kept_and_not_judged(sqlite_engine: sa.Engine) -> None:
    binding = FlowBinding(
        resource="account", flows_table="acct_flow", steps_table="acct_step", set_columns=["status"]
    )
    metadata = accounts()
    _, steps = tables.for_binding(metadata, binding)
    steps.append_column(sa.Column("created_by", sa.String(20)))
    metadata.create_all(sqlite_engine)
    app = tables.reflect(sqlite_engine, binding)
    with sqlite_engine.begin() as conn:
        flow_id = edits.save_flow(conn, binding, app, {"name": "Audit", "start": "manual"})
        row = {"flow_id": flow_id, "position": 1, "kind": "wait", "duration": "1 day"}
        edits.save_step(conn, binding, app, {**row, "created_by": "ann"})
        snap = starts.stored_snapshot(conn, app, flow_id)
        assert conn.scalar(sa.select(steps.c.created_by)) == "ann"
    assert validation.check(snap, binding, binding.resource_columns(sqlite_engine)) is None
    with (
        pytest.raises(errors.RowInvalid, match="'colour' is not a column"),
        sqlite_engine.begin() as conn,
    ):
        edits.save_step(conn, binding, app, {**row, "colour": "red"})
