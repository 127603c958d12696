"""Events with shapes: a binding declares an event's fields as a pydantic model.

A purchasing app: an order waits for its approver's decision (``po.decided``, which the
app emits), then the ``send`` kind sends it and records ``po.sent`` from the command's
answer. A decision that breaks its shape is refused with every field's problem and
nothing written; a step whose condition reads a field the event does not have is refused
when it is saved; an answer that breaks ``po.sent``'s shape fails the step with the
command's writes undone; and the event check names an event something waits for that
nothing records. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from running import T0

from flowrunner import (
    BindingError,
    Event,
    EventRejected,
    FlowBinding,
    FlowRunner,
    Kind,
    RowInvalid,
    RunStatus,
    flow_runner,
    tables,
    testing,
)
from flowrunner.cli import cli
from flowrunner.store import engine_tables, migrate


class Decided(pydantic.BaseModel):
    decision: Literal["approved", "rejected"]
    approver: str
    note: str | None = None


class Sent(pydantic.BaseModel):
    supplier: str
    sent_on: date


def binding(*, decided_emitted: bool = True, **more: Any) -> FlowBinding:
    return FlowBinding(
        resource="purchase_order",
        flows_table="po_flow",
        steps_table="po_flow_step",
        events={
            "po.decided": Event(key="order", shape=Decided, emitted=decided_emitted),
            "po.sent": Event(key="order", shape=Sent),
            **more,
        },
        kinds={
            "approval": Kind(
                command="request_approval",
                input=["approver"],
                wait_for="po.decided",
                by="approver",
            ),
            "send": Kind(command="send_order", records="po.sent"),
        },
        set_columns=["status"],
    )


metadata = sa.MetaData()
purchase_order = sa.Table(
    "purchase_order",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("status", sa.String(20), nullable=False, server_default="open"),
)
shipment = sa.Table(
    "shipment",
    metadata,
    sa.Column("order_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("supplier", sa.String(40), nullable=False),
)
tables.for_binding(metadata, binding())


class App:
    """The app's commands; ``answer`` is what sending answers (a test may spoil it)."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] = {"supplier": "Acme", "sent_on": date(2026, 3, 2)}

    def commands(self) -> dict[str, Any]:
        def request_approval(ctx: Any) -> dict[str, Any]:
            return {"asked": 1}

        def send_order(ctx: Any) -> dict[str, Any]:
            ctx.conn.execute(shipment.insert().values(order_id=ctx.record["id"], supplier="Acme"))
            return self.answer

        return {"request_approval": request_approval, "send_order": send_order}


def mount(engine: sa.Engine, app: App, **options: Any) -> FlowRunner:
    metadata.create_all(engine)
    return flow_runner(options.pop("binding", None) or binding(), engine, commands=app.commands())


def approve_and_send(runner: FlowRunner) -> None:
    with runner.engine.begin() as conn:
        flow = runner.editor.save_flow(conn, {"name": "Approve and send", "start": "created"})
        for row in (
            {"position": 1, "kind": "approval", "title": "Approval", "approver": "ann"},
            {"position": 2, "kind": "send", "title": "Send"},
            {"position": 3, "kind": "set", "title": "Done", "field": "status", "value": "sent"},
        ):
            runner.editor.save_step(conn, {**row, "flow_id": flow})


def stored_events(engine: sa.Engine) -> list[tuple[str, dict[str, Any]]]:
    events = engine_tables.events
    with engine.connect() as conn:
        rows = conn.execute(sa.select(events.c.name, events.c.payload).order_by(events.c.id))
        return [(name, dict(payload)) for name, payload in rows]


def test_a_decision_that_breaks_its_shape_is_refused_with_field_errors_and_nothing_written(
    engine: sa.Engine,
) -> None:
    runner = mount(engine, App())
    approve_and_send(runner)
    driver = testing.FlowDriver(runner, start=T0)
    driver.create({"id": 1})

    with engine.begin() as conn:
        with pytest.raises(EventRejected) as refused:
            runner.emit(conn, "po.decided", {"order": 1, "decision": "maybe"})
        # The refusal left the application's transaction usable: its own write commits.
        conn.execute(purchase_order.update().values(status="asked again"))

    assert refused.value.status_code == 422 and refused.value.code == "event_invalid"
    assert [(e.field, e.message) for e in refused.value.errors] == [
        ("decision", "should be 'approved' or 'rejected', not 'maybe'"),
        ("approver", "po.decided needs the field 'approver'"),
    ]
    assert refused.value.to_dict()["detail"][0] == {
        "loc": ["body", "decision"],
        "msg": "should be 'approved' or 'rejected', not 'maybe'",
        "type": "literal_error",
    }
    assert stored_events(engine) == []
    (run,) = driver.runs(1)
    assert run.status == RunStatus.WAITING and driver.record(1) == {
        "id": 1,
        "status": "asked again",
    }

    # A decision of the right shape goes on: the order is sent, and po.sent recorded
    # from the send command's answer, about the order, with its fields as the shape reads them.
    driver.emit("po.decided", {"order": 1, "decision": "approved", "approver": "ann"})
    (run,) = driver.runs(1)
    assert run.status == RunStatus.DONE and driver.record(1) == {"id": 1, "status": "sent"}
    assert stored_events(engine) == [
        ("po.decided", {"decision": "approved", "approver": "ann", "note": None, "order": 1}),
        ("po.sent", {"supplier": "Acme", "sent_on": "2026-03-02", "order": 1}),
    ]


def test_a_step_condition_on_a_misspelled_event_field_is_refused_when_saved(
    engine: sa.Engine,
) -> None:
    runner = mount(engine, App())
    with engine.begin() as conn:
        flow = runner.editor.save_flow(conn, {"name": "Approve", "start": "created"})
    step = {
        "flow_id": flow,
        "position": 1,
        "kind": "approval",
        "title": "Approval",
        "approver": "ann, bob",
        "mode": "all",
        "condition": "event.decison = rejected",
    }
    with engine.begin() as conn, pytest.raises(RowInvalid) as refused:
        runner.editor.save_step(conn, step)
    assert [(e.field, e.message, e.code) for e in refused.value.errors] == [
        (
            "condition",
            "event.decison is not a field of po.decided — decision, approver, note; "
            "did you mean 'decision'?",
            "event_field_unknown",
        )
    ]
    with engine.connect() as conn:
        assert (
            conn.execute(
                sa.select(sa.func.count()).select_from(metadata.tables["po_flow_step"])
            ).scalar()
            == 0
        )

    with engine.begin() as conn:  # spelled right, it is saved
        runner.editor.save_step(conn, {**step, "condition": "event.decision = rejected"})


def test_who_answered_must_be_a_field_of_the_events_shape() -> None:
    with pytest.raises(BindingError) as refused:
        FlowBinding(
            resource="purchase_order",
            flows_table="po_flow",
            steps_table="po_flow_step",
            events={"po.decided": Event(key="order", shape=Decided)},
            kinds={"approval": Kind(command="ask", wait_for="po.decided", by="approvr")},
        )
    assert str(refused.value) == (
        "FlowBinding: kind 'approval': by 'approvr' is not a field of po.decided "
        "— decision, approver, note"
    )
    with pytest.raises(BindingError) as unknown:
        FlowBinding(
            resource="purchase_order",
            flows_table="po_flow",
            steps_table="po_flow_step",
            events={"po.sent": Event(key="order", shape=Sent)},
            kinds={"send": Kind(command="send_order", records="po.shipped")},
        )
    assert "kind 'send' records 'po.shipped', which is not one of the binding's events" in str(
        unknown.value
    )


def test_an_answer_that_breaks_its_events_shape_fails_the_step_and_undoes_its_writes(
    engine: sa.Engine,
) -> None:
    app = App()
    app.answer = {"supplier": "Acme", "sent_on": "some day soon"}
    runner = mount(engine, app)
    approve_and_send(runner)
    driver = testing.FlowDriver(runner, start=T0)
    driver.create({"id": 1})
    driver.emit("po.decided", {"order": 1, "decision": "approved", "approver": "ann"})

    (run,) = driver.runs(1)
    assert run.status == RunStatus.FAILED
    failure = " ".join(line.sentence for line in driver.history(run.id))
    assert "command 'send_order' answered what its event cannot record" in failure
    assert "sent_on" in failure
    with engine.connect() as conn:  # the command's own write went with it
        assert conn.execute(sa.select(shipment)).all() == []
    assert [name for name, _ in stored_events(engine)] == ["po.decided"]


def test_the_event_check_names_an_event_something_waits_for_that_nothing_records(
    engine: sa.Engine,
) -> None:
    runner = mount(
        engine,
        App(),
        binding=binding(
            decided_emitted=False,
            **{"po.cancelled": "order", "po.lost": Event(key="order")},
        ),
    )
    assert runner.event_warnings() == [
        "[api-event-unknown] kind 'approval' waits for 'po.decided', which nothing records: "
        "no kind records it (Kind(records=...)), no inbound endpoint emits it, and the "
        "binding does not say the application emits it (Event(..., emitted=True))"
    ]
    # po.sent is recorded by the send kind; po.cancelled, declared in the plain way, is
    # the application's to emit: a step waiting for either is no warning.
    with engine.begin() as conn:
        flow = runner.editor.save_flow(conn, {"name": "Wait", "start": "created"})
        for position, event in ((1, "po.sent"), (2, "po.cancelled")):
            row = {"flow_id": flow, "position": position, "kind": "waitFor", "event": event}
            runner.editor.save_step(conn, row)
    assert len(runner.event_warnings()) == 1
    # po.lost is declared, but nothing says who would ever record it.
    with engine.begin() as conn:
        row = {"flow_id": flow, "position": 3, "kind": "waitFor", "event": "po.lost"}
        runner.editor.save_step(conn, {**row, "title": "Lost in the post"})
    assert runner.event_warnings()[1].startswith(
        "[api-event-unknown] step 'Lost in the post' of flow 'Wait' waits for 'po.lost', "
        "which nothing records"
    )

    quiet = mount(engine, App(), binding=binding(decided_emitted=True))
    assert quiet.event_warnings() == []


def forgetful(url: str | None = None) -> FlowRunner:
    """The app with nothing saying who emits po.decided (``--app`` for the command line)."""
    assert url is not None
    engine = sa.create_engine(url)
    migrate.upgrade(engine)
    return mount(engine, App(), binding=binding(decided_emitted=False))


def test_flows_validate_warns_of_an_event_nothing_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orders.db'}"
    app = ["--app", f"{__name__}:forgetful", "--database", url]
    said = CliRunner().invoke(cli, ["flows", "validate", *app])
    assert said.exit_code == 0, said.output  # a warning, not a broken row
    assert said.stderr.startswith(
        "warning: [api-event-unknown] kind 'approval' waits for 'po.decided', which nothing"
    )
    assert said.stdout == "0 flow(s), 0 step(s): all sound\n"
    document = json.loads(CliRunner().invoke(cli, ["flows", "validate", *app, "--json"]).stdout)
    assert [w[:40] for w in document["warnings"]] == ["[api-event-unknown] kind 'approval' wait"]
