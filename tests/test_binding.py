"""The binding: checked when constructed, and against the database at startup."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from flowrunner import errors, query, tables
from flowrunner.binding import FlowBinding, Kind, NotifyRule


def make(**changes: Any) -> FlowBinding:
    spec: dict[str, Any] = {
        "resource": "purchase_order",
        "flows_table": "po_flow",
        "steps_table": "po_flow_step",
        "events": {"po.decided": "order"},
        "kinds": {
            "approval": Kind(
                command="request_approval",
                input=["approver"],
                wait_for="po.decided",
                remind="remind_approver",
            ),
            "send": Kind(command="send_purchase_order"),
        },
        "set_columns": ["status", "priority"],
        "notify": [
            NotifyRule(audience="requester", to="requester_id", title="{number}: {message}")
        ],
    }
    spec.update(changes)
    return FlowBinding(**spec)


def resource(metadata: sa.MetaData, *, drop: str | None = None, tenant: str | None = None) -> None:
    columns: list[sa.Column[Any]] = [
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("number", sa.String(20)),
        sa.Column("requester_id", sa.String(20)),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("status", sa.String(20)),
        sa.Column("priority", sa.String(20)),
        sa.Column("created_at", sa.DateTime(timezone=True)),
        sa.Column("payload", sa.JSON),
    ]
    if tenant:
        columns.append(sa.Column(tenant, sa.String(20)))
    sa.Table("purchase_order", metadata, *(c for c in columns if c.name != drop))


# -- construction ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "sentence"),
    [
        (
            lambda: Kind(command="request_approval", remind="remind_approver"),
            "remind 'remind_approver' needs wait_for: a kind reminds only while it waits",
        ),
        (
            lambda: make(kinds={"set": Kind(command="x")}),
            "kind 'set' is a built-in kind",
        ),
        (
            lambda: make(kinds={"approval": Kind(command="x", wait_for="po.approved")}),
            "kind 'approval' waits for 'po.approved', which is not one of the binding's events",
        ),
        (
            lambda: make(
                notify=[
                    NotifyRule(audience="requester", to="requester_id"),
                    NotifyRule(audience="requester", to="approver"),
                ]
            ),
            "audience 'requester' has more than one notify rule",
        ),
        (lambda: make(resource="purchase order"), "must be a name of letters"),
        (
            lambda: Kind(command="x", input=["title"]),
            "input column 'title' is one of the steps table's fixed columns",
        ),
        (lambda: make(set_columns=["status", "id"]), "set column 'id' is the key or tenant column"),
        (lambda: make(set_columns=["status", "status"]), "a set column is listed twice"),
        (lambda: make(steps_table="po_flow"), "must be three different tables"),
        (lambda: NotifyRule(audience="x", to="y", title="{a.b}"), "plain column name"),
        (lambda: make(kinds={"my kind": Kind(command="x")}), "kind 'my kind' must be a name"),
        (lambda: make(label="  "), "label '  ' must be one line of 1 to 80 characters"),
        (lambda: make(label="Orders\nand more"), "must be one line of 1 to 80 characters"),
        (lambda: make(record_label="{number.__class__}"), "plain column name"),
        (lambda: make(record_label="an order"), "must name a record by its columns"),
    ],
)
def test_construction_refuses_with_a_sentence(build: Any, sentence: str) -> None:
    with pytest.raises(errors.BindingError, match=sentence.replace("(", r"\(")):
        build()


def test_people_name_the_resource_by_its_label_and_a_record_by_its_columns() -> None:
    plain = make()
    assert (plain.resource_label, plain.record_name({"number": "PO-7"}, 7)) == (
        "purchase_order",
        "7",
    )
    named = make(label=" Purchase orders ", record_label="{number} ({requester_id})")
    assert named.resource_label == "Purchase orders"
    assert named.record_name({"number": "PO-7", "requester_id": "ann"}, 7) == "PO-7 (ann)"
    # A record not there, or whose label would say nothing, is named by its id.
    assert named.record_name(None, 7) == "7"
    assert make(record_label="{number}").record_name({"number": None}, 7) == "7"


def test_binding_answers_what_later_layers_ask() -> None:
    binding = make()
    assert binding.kind_names == (
        "set", "wait", "until", "branch", "waitFor", "notify", "subflow", "approval", "send"
    )  # fmt: skip
    assert binding.input_columns == ("approver",)
    assert binding.audiences == ("requester",)
    assert binding.event_field("po.decided") == "order"
    assert binding.rule_for("requester").to == "requester_id"
    assert binding.kinds["approval"].waits and not binding.kinds["send"].waits
    with pytest.raises(errors.BindingError, match=r"event .po\.cancelled. is not one of"):
        binding.event_field("po.cancelled")
    with pytest.raises(errors.BindingError, match="no notify rule has audience 'approver'"):
        binding.rule_for("approver")


# -- against the database ----------------------------------------------------------


def test_check_reads_the_tables_and_types(sqlite_engine: sa.Engine) -> None:
    binding = make()
    metadata = sa.MetaData()
    resource(metadata)
    tables.for_binding(metadata, binding)
    metadata.create_all(sqlite_engine)
    schema = binding.check(sqlite_engine)
    assert schema.resource_columns["amount"] is query.ColumnType.NUMBER
    assert schema.resource_columns["created_at"] is query.ColumnType.TIMESTAMP
    assert "payload" not in schema.resource_columns
    assert "approver" in schema.steps_columns and "active" in schema.flows_columns
    # The MetaData alone answers the same, before any table exists.
    assert binding.check(metadata).resource_columns == schema.resource_columns
    assert binding.resource_columns(sqlite_engine) == schema.resource_columns


def test_check_works_on_postgresql(pg_engine: sa.Engine) -> None:
    binding = make(tenant="tenant_id")
    metadata = sa.MetaData()
    resource(metadata, tenant="tenant_id")
    tables.for_binding(metadata, binding)
    metadata.create_all(pg_engine)
    with pg_engine.connect() as conn:
        assert binding.check(conn).resource_columns["status"] is query.ColumnType.TEXT


def _flows(metadata: sa.MetaData, binding: FlowBinding, inputs: tuple[str, ...]) -> None:
    tables.flows_table(metadata, binding.flows_table, tenant=binding.tenant)
    tables.steps_table(metadata, binding.steps_table, inputs=inputs, tenant=binding.tenant)


@pytest.mark.parametrize(
    ("binding", "drop", "inputs", "sentence"),
    [
        (
            make(),
            None,
            (),
            "the steps table 'po_flow_step' has no column 'approver', which kind 'approval' reads",
        ),
        (
            make(),
            "priority",
            ("approver",),
            "the resource table 'purchase_order' has no column 'priority', a set column",
        ),
        (
            make(),
            "requester_id",
            ("approver",),
            "the resource table 'purchase_order' has no column 'requester_id', "
            "which notify rule 'requester' sends to",
        ),
        (
            make(),
            "number",
            ("approver",),
            "the resource table 'purchase_order' has no column 'number', "
            "which notify rule 'requester''s title uses",
        ),
        (
            make(key="order_no"),
            None,
            ("approver",),
            "the resource table 'purchase_order' has no column 'order_no', the key column",
        ),
        (
            make(record_label="{number} for {buyer}"),
            None,
            ("approver",),
            "the resource table 'purchase_order' has no column 'buyer', which record_label uses",
        ),
        (
            make(tenant="tenant_id"),
            None,
            ("approver",),
            "the resource table 'purchase_order' has no column 'tenant_id', the tenant column",
        ),
        (
            make(set_columns=["stauts"]),
            None,
            ("approver",),
            "the resource table 'purchase_order' has no column 'stauts', a set column"
            " — did you mean 'status'?",
        ),
        (
            make(notify=[NotifyRule(audience="requester", to="requestor_id")]),
            None,
            ("approver",),
            "the resource table 'purchase_order' has no column 'requestor_id', "
            "which notify rule 'requester' sends to — did you mean 'requester_id'?",
        ),
    ],
)
def test_each_misconfiguration_has_its_sentence(
    sqlite_engine: sa.Engine,
    binding: FlowBinding,
    drop: str | None,
    inputs: tuple[str, ...],
    sentence: str,
) -> None:
    metadata = sa.MetaData()
    resource(metadata, drop=drop)
    _flows(metadata, binding, inputs)
    metadata.create_all(sqlite_engine)
    with pytest.raises(errors.BindingError) as caught:
        binding.check(sqlite_engine)
    assert str(caught.value) == sentence


def test_missing_tables_and_fixed_columns(sqlite_engine: sa.Engine) -> None:
    binding = make()
    with pytest.raises(errors.BindingError, match="the resource table 'purchase_order' does not"):
        binding.check(sqlite_engine)
    metadata = sa.MetaData()
    resource(metadata)
    sa.Table(
        "po_flow",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text),
    )
    tables.steps_table(metadata, "po_flow_step", inputs=["approver"])
    metadata.create_all(sqlite_engine)
    with pytest.raises(errors.BindingError) as caught:
        binding.check(sqlite_engine)
    assert (
        str(caught.value) == "the flows table 'po_flow' has no column 'start', a fixed flow column"
    )
    with pytest.raises(
        errors.BindingError, match="the resource table 'purchase_order' is not in the MetaData"
    ):
        binding.check(sa.MetaData())


def test_tenant_column_is_needed_on_the_flows_and_steps_tables(sqlite_engine: sa.Engine) -> None:
    binding = make(tenant="tenant_id")
    metadata = sa.MetaData()
    resource(metadata, tenant="tenant_id")
    tables.flows_table(metadata, "po_flow", tenant="tenant_id")
    tables.steps_table(metadata, "po_flow_step", inputs=["approver"])
    metadata.create_all(sqlite_engine)
    with pytest.raises(errors.BindingError) as caught:
        binding.check(sqlite_engine)
    assert str(caught.value) == (
        "the steps table 'po_flow_step' has no column 'tenant_id', the tenant column"
    )


def test_table_helpers_declare_the_fixed_columns() -> None:
    metadata = sa.MetaData()
    flows, steps = tables.for_binding(metadata, make(tenant="tenant_id"))
    assert [c.name for c in flows.columns] == [
        "id", "name", "start", "condition", "changes", "active", "calendar", "schedule",
        "tenant_id",
    ]  # fmt: skip
    assert [c.name for c in steps.columns][:4] == ["id", "flow_id", "position", "kind"]
    assert {"approver", "tenant_id", "remind", "mode", "goto"} <= set(steps.columns.keys())
    assert isinstance(steps.c.goto.type, sa.Integer)
    assert next(iter(steps.c.flow_id.foreign_keys)).target_fullname == "po_flow.id"
