"""Any step row at all is either accepted (and then snapshots and checks cleanly) or
refused with RowInvalid whose every error names a real column — never another exception."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fixtures.purchase_orders import app as po
from flowrunner import binding as binding_mod
from flowrunner import errors, query, tables
from flowrunner.flows import edits, rows, snapshot, starts, validation

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)
REAL = {*binding_mod.STEP_COLUMNS, *BINDING.input_columns}
SIBLINGS = [
    {"id": 1, "flow_id": 7, "position": 1, "kind": "wait", "duration": "1 day"},
    {"id": 2, "flow_id": 7, "position": 5, "kind": "send", "title": "Send"},
]

SAMPLES: dict[str, list[Any]] = {
    "kind": [*BINDING.kind_names, "approve", "", "SET"],
    "duration": ["2 days", "-4 hours", "P1D", "0 minutes", "2 dayz", "1 day 4 hours"],
    "remind": ["1 day", "-1 day", "soon"],
    "field": ["status", "priority", "amount", "created_at", "needed_by", "nope"],
    "value": ["approved", "'x y'", "now()", "12", "(", "null", "true"],
    "condition": [
        "amount > 1000",
        "status = open",
        "event.decision = rejected",
        "amount >",
        "x = 1",
    ],
    "goto": [1, 5, 3, "2", -1, "x"],
    "position": [0, 1, 3, 5, "3", -2, "x", 2.0],
    "event": ["po.decided", "po.sent"],
    "audience": ["requester", "boss"],
    "message": ["Approved.", "x" * 501],
    "mode": ["any", "all", "2", "60%", "0", "150%", "most"],
    "on_failure": [1, 5, 3, "2", -1, "x"],
    "escalate": ["2 days", "0 days", "-1 day", "soon"],
    "escalate_to": ["requester", "boss"],
    "approver": ["ann@example.com", "ann, bob"],
    "title": ["Manager approval", "  "],
    "flow_id": [7, "7", None],
}
garbage = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.integers(min_value=-5, max_value=20),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
)


@st.composite
def any_rows(draw: st.DrawFn) -> dict[str, Any]:
    """Any kind, any columns, sample or garbage values: mostly refused."""
    row: dict[str, Any] = {"flow_id": 7}
    columns = draw(st.sets(st.sampled_from(sorted(SAMPLES)), max_size=8))
    for column in ["kind", "position", *sorted(columns)]:
        row[column] = draw(st.one_of(st.sampled_from(SAMPLES[column]), garbage))
    return row


@st.composite
def near_rows(draw: st.DrawFn) -> dict[str, Any]:
    """A real kind with the columns it reads, from the samples: often accepted."""
    kind = draw(st.sampled_from(BINDING.kind_names))
    needed, optional = rows.reads(BINDING, kind)
    columns = [*needed, *draw(st.sets(st.sampled_from([*optional, "title"])))]
    if draw(st.booleans()):
        columns.append(draw(st.sampled_from(sorted(SAMPLES))))
    row: dict[str, Any] = {"flow_id": 7, "kind": kind, "position": draw(st.integers(0, 6))}
    for column in columns:
        row[column] = draw(st.sampled_from(SAMPLES[column]))
    return row


step_rows = st.one_of(any_rows(), near_rows())


@given(step_rows)
def test_any_step_row_is_accepted_soundly_or_refused_by_column(row: dict[str, Any]) -> None:
    try:
        validation.validate_step_row(BINDING, row, COLUMNS, siblings=SIBLINGS)
    except errors.RowInvalid as refused:
        event("refused")
        assert refused.errors
        for error in refused.errors:
            assert error.field in REAL, error
            assert error.message and error.code in validation.CODES
        return
    event("accepted")
    flow = {"id": 7, "name": "Property", "start": "created"}
    snap = snapshot.FlowSnapshot.build(flow, [*SIBLINGS, {**row, "id": 3}])
    assert validation.check(snap, BINDING, COLUMNS) is None
    assert (
        validation.check(snapshot.FlowSnapshot.from_dict(snap.to_dict()), BINDING, COLUMNS) is None
    )


@pytest.fixture
def stored_flow(any_engine: sa.Engine) -> sa.Engine:
    po.metadata.create_all(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.insert(po.po_flow).values(id=7, name="Property", start="created"))
        for sibling in SIBLINGS:
            # Without ids, so the database's own sequence stays in step.
            values = {k: v for k, v in sibling.items() if k != "id"}
            conn.execute(sa.insert(po.po_flow_step).values(values))
    return any_engine


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=step_rows)
def test_what_validation_accepts_the_database_stores(
    stored_flow: sa.Engine, row: dict[str, Any]
) -> None:
    po_tables = tables.reflect(stored_flow, BINDING)
    with stored_flow.connect() as conn:
        transaction = conn.begin()
        try:
            step_id = edits.save_step(conn, BINDING, po_tables, row, columns=COLUMNS)
        except errors.RowInvalid as refused:
            event("refused")
            assert all(error.field in REAL for error in refused.errors)
        else:
            event("stored")
            snap = starts.stored_snapshot(conn, po_tables, 7)
            assert step_id in {s.id for s in snap.steps}
            assert validation.check(snap, BINDING, COLUMNS) is None
        finally:
            transaction.rollback()
