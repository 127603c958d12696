"""Names read as people write them: flowrunner's own words in any case, stored in one
spelling by the Core and the ORM path alike; the binding's names exact, with "did you
mean" for a near miss; flow names unique whatever their case (per tenant); and the
refusals that used to be silent — ``changes`` naming the key, deleting a step that is
not there, starting an inactive manual flow. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from running import mount, order
from sqlalchemy import orm
from test_saving import Flow, Step, tenant_app

from fixtures.purchase_orders import app as po
from flowrunner import errors, query, tables
from flowrunner.binding import FlowBinding, Kind
from flowrunner.flows import edits, files, orm_hook, rows, spelling, validation

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)


@pytest.fixture
def engine(po_engine: sa.Engine) -> sa.Engine:
    return po_engine


@pytest.fixture
def maker(engine: sa.Engine) -> orm.sessionmaker[orm.Session]:
    made = orm.sessionmaker(engine)
    orm_hook.validate_on_flush(made, BINDING)
    return made


def stored_steps(engine: sa.Engine, flow_id: Any) -> list[dict[str, Any]]:
    steps = po.po_flow_step
    with engine.connect() as conn:
        found = conn.execute(sa.select(steps).where(steps.c.flow_id == flow_id).order_by("id"))
        return [
            {k: v for k, v in r.items() if k not in ("id", "flow_id")} for r in found.mappings()
        ]


def stored_flow(engine: sa.Engine, flow_id: Any) -> dict[str, Any]:
    flows = po.po_flow
    with engine.connect() as conn:
        found = conn.execute(sa.select(flows).where(flows.c.id == flow_id)).mappings().one()
        return {k: v for k, v in found.items() if k != "id"}


# Rows as a business user might type them, and how each is stored.
TYPED_FLOW: dict[str, Any] = {
    "name": "  Chase  ",
    "start": " Created ",
    "condition": " amount > 5 ",
    "active": "Yes",
}
TYPED_STEPS: list[dict[str, Any]] = [
    {"position": " 1 ", "kind": "WAITFOR", "event": "po.decided", "duration": " 2 Days "},
    {"position": 1, "kind": "Notify", "audience": "requester", "message": " Hello "},
    {"position": "2", "kind": "approval", "approver": " ann, bob ", "mode": " All "},
    {"position": 3, "kind": "approval", "approver": "cara", "mode": "60 %"},
    {"position": 4, "kind": "Branch", "condition": "status IS NOT null", "goto": " 1 "},
    {"position": 5, "kind": "SET", "field": "status", "value": " done ", "title": "  "},
]
STORED_FLOW = {
    "name": "Chase",
    "start": "created",
    "condition": "amount > 5",
    "changes": None,
    "active": True,
    "calendar": None,
    "schedule": None,
}
STORED_KINDS = [
    (1, "waitFor", None),
    (1, "notify", None),
    (2, "approval", "all"),
    (3, "approval", "60%"),
    (4, "branch", None),
    (5, "set", None),
]


def core_save(engine: sa.Engine, po_tables: tables.AppTables) -> Any:
    with engine.begin() as conn:
        flow_id = edits.save_flow(conn, BINDING, po_tables, TYPED_FLOW)
        for step in TYPED_STEPS:
            edits.save_step(conn, BINDING, po_tables, {"flow_id": flow_id, **step})
    return flow_id


def orm_save(maker: orm.sessionmaker[orm.Session]) -> Any:
    with maker() as session:
        flow = Flow(**TYPED_FLOW)
        flow.steps = [Step(**step) for step in TYPED_STEPS]
        session.add(flow)
        session.commit()
        return flow.id


def test_core_saves_store_the_canonical_spelling(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    flow_id = core_save(engine, po_tables)
    assert stored_flow(engine, flow_id) == STORED_FLOW
    steps = stored_steps(engine, flow_id)
    assert [(s["position"], s["kind"], s["mode"]) for s in steps] == STORED_KINDS
    assert steps[0]["duration"] == "2 Days"  # the user's own text, trimmed
    assert (steps[1]["message"], steps[2]["approver"]) == ("Hello", "ann, bob")
    assert (steps[4]["goto"], steps[4]["condition"]) == (1, "status IS NOT null")
    assert (steps[5]["value"], steps[5]["title"]) == ("done", None)


def test_the_orm_stores_exactly_what_the_core_path_stores(
    engine: sa.Engine, po_tables: tables.AppTables, maker: orm.sessionmaker[orm.Session]
) -> None:
    core = core_save(engine, po_tables)
    with engine.begin() as conn:  # the same name again would be taken
        edits.update_flow(conn, BINDING, po_tables, core, {"name": "Core chase"})
    through_orm = orm_save(maker)
    assert stored_flow(engine, through_orm) == STORED_FLOW
    assert stored_steps(engine, through_orm) == stored_steps(engine, core)


def test_the_orm_normalizes_a_changed_row_too(
    engine: sa.Engine, maker: orm.sessionmaker[orm.Session]
) -> None:
    flow_id = orm_save(maker)
    with maker() as session:
        flow = session.get(Flow, flow_id)
        assert flow is not None
        flow.start, flow.active = "MANUAL", "no"
        step = session.scalars(sa.select(Step).where(Step.flow_id == flow_id)).first()
        assert step is not None
        step.kind, step.duration = " WaitFor ", "  "
        session.commit()
    assert stored_flow(engine, flow_id)["start"] == "manual"
    assert stored_flow(engine, flow_id)["active"] is False
    first = stored_steps(engine, flow_id)[0]
    assert (first["kind"], first["duration"]) == ("waitFor", None)


def test_a_canonically_stored_flow_runs(any_engine: sa.Engine) -> None:
    driver = mount(
        any_engine,
        "purchase_orders",
        flows="""
- name: Shout
  start: CREATED
  steps:
    - {position: 1, kind: SET, field: priority, value: high}
    - {position: 2, kind: NOTIFY, audience: requester, message: Raised}
""",
    )
    driver.create(order(1))
    (run,) = driver.runs(1)
    assert run.status == "done"
    assert [n.message for n in driver.notices(run.id)] == ["Raised"]


def test_rows_written_around_validation_in_another_case_still_run(any_engine: sa.Engine) -> None:
    # A run's snapshot reads a built-in kind as validation does: in any case.
    driver = mount(any_engine, "purchase_orders", flows="[]")
    flows, steps = driver.runner.tables.flows, driver.runner.tables.steps
    with any_engine.begin() as conn:
        key = conn.execute(
            sa.insert(flows).values(name="Shout", start="created", active=True)
        ).inserted_primary_key
        assert key is not None
        conn.execute(
            sa.insert(steps).values(
                flow_id=key[0], position=1, kind="NOTIFY", audience="requester", message="Hi"
            )
        )
    driver.create(order(1))
    (run,) = driver.runs(1)
    assert (run.status, run.reason) == ("done", "the flow ended after its last step")
    assert [n.message for n in driver.notices(run.id)] == ["Hi"]


# -- the binding's names are exact, and a near miss is told what it meant ---------------


def step_problems(row: dict[str, Any]) -> list[tuple[str, str, str]]:
    found = rows.step_errors(BINDING, {"flow_id": 1, "position": 1, **row}, COLUMNS)
    return [(e.field, e.code, e.message) for e in found]


def test_the_applications_kind_is_exact_and_a_near_miss_is_told_what_it_meant() -> None:
    kinds = ", ".join(BINDING.kind_names)
    assert step_problems({"kind": "Approval", "approver": "ann"})[0] == (
        "kind",
        "kind_unknown",
        f"kind 'Approval' is not in the binding — use one of {kinds}; did you mean 'approval'?",
    )
    assert step_problems({"kind": "wiat", "duration": "1 day"})[0][2].endswith(
        "did you mean 'wait'?"
    )
    assert step_problems({"kind": "teleport"})[0][2] == (
        f"kind 'teleport' is not in the binding — use one of {kinds}"
    )


def test_events_and_audiences_are_exact_and_a_near_miss_is_told_what_it_meant() -> None:
    assert step_problems({"kind": "waitFor", "event": "PO.decided"}) == [
        (
            "event",
            "event_unknown",
            "'PO.decided' is not one of the binding's events (po.decided) — "
            "did you mean 'po.decided'?",
        )
    ]
    assert step_problems({"kind": "notify", "audience": "requestor", "message": "hi"}) == [
        (
            "audience",
            "audience_unknown",
            "'requestor' is not an audience of the notify rules (requester) — "
            "did you mean 'requester'?",
        )
    ]
    assert step_problems({"kind": "notify", "audience": "finance", "message": "hi"}) == [
        (
            "audience",
            "audience_unknown",
            "'finance' is not an audience of the notify rules (requester)",
        )
    ]


def test_a_start_and_a_changed_column_near_misses_are_told_what_they_meant() -> None:
    flow = {"name": "x", "start": "udpated", "changes": "prority"}
    found = [(e.field, e.message) for e in rows.flow_errors(BINDING, flow, COLUMNS)]
    assert found == [
        (
            "start",
            "'udpated' is not a start — write created, updated, manual or schedule; "
            "did you mean 'updated'?",
        ),
        ("changes", "only a flow that starts on 'updated' can name the column an update changes"),
        ("changes", "'prority' is not a column of purchase_order — did you mean 'priority'?"),
    ]


def test_changes_cannot_name_the_key_column() -> None:
    flow = {"name": "x", "start": "updated", "changes": "id"}
    assert [(e.field, e.code, e.message) for e in rows.flow_errors(BINDING, flow, COLUMNS)] == [
        (
            "changes",
            "changes_key",
            "'id' is the key of purchase_order, which an update never changes — name the "
            "column whose change starts the flow",
        )
    ]


def test_an_application_kind_cannot_be_a_built_in_kind_in_another_case() -> None:
    with pytest.raises(errors.BindingError, match="kind 'Wait' is a built-in kind"):
        FlowBinding(
            resource="r", flows_table="f", steps_table="s", kinds={"Wait": Kind(command="w")}
        )


def test_did_you_mean_offers_one_close_name_or_nothing() -> None:
    assert spelling.did_you_mean("aprover", ["approver", "amount"]) == " — did you mean 'approver'?"
    assert spelling.did_you_mean("zzz", ["approver"]) == ""
    assert spelling.did_you_mean("approver", ["approver"]) == ""


# -- flow names are unique whatever their case ------------------------------------------


def test_a_flow_name_in_another_case_is_taken_on_a_core_save(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    with engine.begin() as conn:
        big = edits.save_flow(conn, BINDING, po_tables, {"name": "Big orders", "start": "manual"})
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.save_flow(conn, BINDING, po_tables, {"name": " BIG Orders ", "start": "manual"})
    assert [(e.field, e.code, e.message) for e in caught.value.errors] == [
        (
            "name",
            "name_taken",
            "there is already a flow named 'Big orders' (names are the same whatever their case)",
        )
    ]
    # The flow itself may change the case of its own name.
    with engine.begin() as conn:
        edits.update_flow(conn, BINDING, po_tables, big, {"name": "BIG ORDERS"})
    assert stored_flow(engine, big)["name"] == "BIG ORDERS"


def test_a_flow_name_in_another_case_is_taken_on_an_orm_flush(
    engine: sa.Engine, maker: orm.sessionmaker[orm.Session]
) -> None:
    with maker() as session:
        session.add(Flow(name="Big orders", start="manual"))
        session.commit()
        session.add(Flow(name="big orders", start="created"))
        with pytest.raises(errors.RowInvalid, match="already a flow named 'Big orders'"):
            session.flush()
        session.rollback()
        # Two new flows of one flush are judged against each other too.
        session.add_all([Flow(name="Small", start="manual"), Flow(name="SMALL", start="manual")])
        with pytest.raises(errors.RowInvalid) as caught:
            session.flush()
        assert {e.code for e in caught.value.errors} == {"name_taken"}


def test_a_flow_name_in_another_case_is_taken_on_import(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    docs = files.loads_yaml("- {name: Nudge, start: manual}\n- {name: NUDGE, start: manual}\n")
    with (
        pytest.raises(validation.RowsInvalid, match="already a flow named 'Nudge'"),
        engine.begin() as conn,
    ):
        files.import_flows(conn, BINDING, po_tables, docs)
    # --replace takes the stored flow of the same name, whatever its case.
    with engine.begin() as conn:
        files.import_flows(conn, BINDING, po_tables, docs[:1])
    with engine.begin() as conn:
        again = files.loads_yaml("- {name: nudge, start: created}\n")
        result = files.import_flows(conn, BINDING, po_tables, again, replace=True)
    assert result.replaced == ["nudge"]
    with engine.connect() as conn:
        names = conn.scalars(sa.select(po.po_flow.c.name)).all()
    assert names == ["nudge"]


def test_each_tenant_has_its_own_names_whatever_their_case(any_engine: sa.Engine) -> None:
    binding = tenant_app(any_engine)
    app = tables.reflect(any_engine, binding)
    with any_engine.begin() as conn:
        edits.save_flow(conn, binding, app, {"name": "Close", "start": "manual", "tenant_id": "a"})
        edits.save_flow(conn, binding, app, {"name": "CLOSE", "start": "manual", "tenant_id": "b"})
    with pytest.raises(errors.RowInvalid) as caught, any_engine.begin() as conn:
        edits.save_flow(conn, binding, app, {"name": "close", "start": "manual", "tenant_id": "b"})
    assert caught.value.errors[0].message == (
        "there is already a flow named 'CLOSE' (names are the same whatever their case)"
    )


# -- refusals that used to be silent ----------------------------------------------------


def test_deleting_a_step_that_does_not_exist_is_refused(
    engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    with pytest.raises(errors.RowInvalid) as caught, engine.begin() as conn:
        edits.delete_step(conn, BINDING, po_tables, 4242)
    assert [(e.field, e.code, e.message) for e in caught.value.errors] == [
        ("id", "step_unknown", "there is no step with id 4242")
    ]


def test_an_operator_cannot_start_an_inactive_manual_flow(any_engine: sa.Engine) -> None:
    driver = mount(
        any_engine,
        "purchase_orders",
        flows="""
- name: Resend
  start: manual
  active: false
  steps:
    - {position: 1, kind: send, title: Send}
""",
    )
    driver.create(order(1))
    with pytest.raises(errors.OperatorError) as caught:
        driver.runner.start("Resend", 1, operator="olga")
    assert str(caught.value) == "flow 'Resend' is inactive; make it active again to start it"
    assert driver.runs(1) == []


def test_an_operator_names_a_flow_in_any_case(any_engine: sa.Engine) -> None:
    driver = mount(
        any_engine,
        "purchase_orders",
        flows="""
- name: Resend
  start: manual
  steps:
    - {position: 1, kind: send, title: Send}
""",
    )
    driver.create(order(1))
    run = driver.runner.start("  resend ", 1, operator="olga")
    assert [r.flow_name for r in driver.runs(1)] == ["Resend"]
    assert driver.runs(1)[0].id == run
    with pytest.raises(errors.OperatorError, match="there is no flow 'resent'"):
        driver.runner.start("resent", 1, operator="olga")
