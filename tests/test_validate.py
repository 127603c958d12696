"""Snapshots re-judged at load: a row that broke later is named in one sentence."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from flowrunner import query, tables
from flowrunner.binding import FlowBinding, Kind
from flowrunner.flows import edits, snapshot, starts, validation

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)


@pytest.fixture
def engine(sqlite_engine: sa.Engine) -> sa.Engine:
    po.metadata.create_all(sqlite_engine)
    return sqlite_engine


def stored(conn: sa.Connection, flow_id: int) -> snapshot.FlowSnapshot:
    return starts.stored_snapshot(conn, tables.reflect(conn, BINDING), flow_id)


def big_orders(engine: sa.Engine) -> int:
    po_tables = tables.reflect(engine, BINDING)
    with engine.begin() as conn:
        flow_id = edits.save_flow(
            conn,
            BINDING,
            po_tables,
            {"name": "Big orders", "start": "created", "condition": "amount > 10000"},
        )
        for row in (
            {"position": 1, "kind": "approval", "title": "Manager approval", "approver": "ann"},
            {"position": 2, "kind": "branch", "condition": "region = EU", "title": "In Europe?"},
            {"position": 3, "kind": "send", "title": "Send"},
        ):
            edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **row})
    return int(flow_id)


def loaded(engine: sa.Engine, *around: str) -> snapshot.FlowSnapshot:
    """The Big orders flow as a run would load it, once the SQL statements ``around``
    (``:f`` is the flow's id) changed its rows around validation."""
    flow_id = big_orders(engine)
    with engine.begin() as conn:
        for statement in around:
            conn.execute(sa.text(statement), {"f": flow_id})
        return stored(conn, flow_id)


def test_a_sound_snapshot_checks_clean(engine: sa.Engine) -> None:
    snap = loaded(engine)
    assert validation.check(snap, BINDING, COLUMNS) is None
    # The stored snapshot (JSON) checks the same.
    assert (
        validation.check(snapshot.FlowSnapshot.from_dict(snap.to_dict()), BINDING, COLUMNS) is None
    )


def test_a_row_written_around_validation_is_named(engine: sa.Engine) -> None:
    snap = loaded(
        engine,
        "INSERT INTO po_flow_step (flow_id, position, kind, title, duration) "
        "VALUES (:f, 4, 'wait', 'Cool down', '2 dayz')",
    )
    assert validation.check(snap, BINDING, COLUMNS) == (
        "flow 'Big orders', step 'Cool down' (wait, position 4): "
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"
    )


def test_a_kind_removed_from_the_binding_is_named(engine: sa.Engine) -> None:
    snap = loaded(engine)
    smaller = FlowBinding(
        **{**BINDING.model_dump(), "kinds": {"send": Kind(command="send_purchase_order")}}
    )
    assert validation.check(snap, smaller, COLUMNS) == (
        "flow 'Big orders', step 'Manager approval' (approval, position 1): kind 'approval' "
        "is not in the binding — use one of set, wait, until, branch, waitFor, notify, "
        "subflow, send"
    )


def test_a_dropped_column_is_named(engine: sa.Engine) -> None:
    snap = loaded(engine, "ALTER TABLE purchase_order DROP COLUMN region")
    columns = BINDING.resource_columns(engine)
    sentence = validation.check(snap, BINDING, columns)
    assert sentence is not None
    assert sentence.startswith(
        "flow 'Big orders', step 'In Europe?' (branch, position 2): the condition cannot be read:"
    )
    assert "region" in sentence


def test_a_flow_row_broken_later_is_named(engine: sa.Engine) -> None:
    snap = loaded(engine, "UPDATE po_flow SET start = 'hourly' WHERE id = :f")
    assert validation.check(snap, BINDING, COLUMNS) == (
        "flow 'Big orders': 'hourly' is not a start — write created, updated, manual or schedule"
    )


def test_cross_row_problems_are_named_too(engine: sa.Engine) -> None:
    snap = loaded(
        engine,
        "INSERT INTO po_flow_step (flow_id, position, kind, title) "
        "VALUES (:f, 2, 'send', 'Beside the branch')",
        "UPDATE po_flow_step SET goto = 9 WHERE kind = 'branch'",
    )
    found = validation.sentences(snap, BINDING, COLUMNS)
    assert found == [
        "flow 'Big orders', step 'In Europe?' (branch, position 2): "
        "there is no step at position 9 in this flow",
        "flow 'Big orders', step 'In Europe?' (branch, position 2): "
        "a branch stands alone at its position, but position 2 also has 'Beside the branch'",
        "flow 'Big orders', step 'Beside the branch' (send, position 2): "
        "position 2 holds a branch, which stands alone — choose another position",
    ]


def test_row_invalid_serializes_like_a_422() -> None:
    found = validation.errors_for_flow(
        BINDING,
        {"name": "", "start": "created"},
        [{"position": 1, "kind": "wait"}],
        COLUMNS,
    )
    error = validation.RowsInvalid(found)
    assert error.status_code == 422
    assert error.to_dict() == {
        "detail": [
            {
                "loc": ["body", "a flow without a name", "name"],
                "msg": "a flow needs a name",
                "type": "column_required",
            },
            {
                "loc": ["body", "a flow without a name, step (wait, position 1)", "duration"],
                "msg": "a wait step needs 'duration'",
                "type": "column_required",
            },
        ]
    }
    assert str(error).splitlines() == [
        "a flow without a name: name: a flow needs a name",
        "a flow without a name, step (wait, position 1): duration: a wait step needs 'duration'",
    ]
