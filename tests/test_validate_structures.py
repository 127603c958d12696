"""Fault paths and escalations as rows: what a step may say, and what it is refused.

A step that runs a command may name ``on_failure``, a position of its flow to go on at
when the command fails for good; a step that waits for something outside the flow may
``escalate`` (a duration) to ``escalate_to`` (an audience). Each is judged when saved,
imported or loaded, by the rules of the other columns: the position exists, the loop it
makes waits, the duration reads, the audience has a notify rule, the two go together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from fixtures.purchase_orders import app as po
from flowrunner import errors, flow_runner, query, tables
from flowrunner.binding import NotifyRule
from flowrunner.flows import edits, files, loops, snapshot, validation

COLUMNS = query.column_types(po.purchase_order)
# The purchasing app, with its managers told through the order's approver column.
BINDING = po.binding.model_copy(
    update={"notify": [*po.binding.notify, NotifyRule(audience="manager", to="approver")]}
)

SEND = {"kind": "send", "title": "Send to supplier"}
APPROVAL = {"kind": "approval", "title": "Manager approval", "approver": "mia"}
TELL = {"kind": "notify", "title": "Tell the buyer", "audience": "requester", "message": "Hi"}
WAIT = {"kind": "wait", "title": "A day", "duration": "1 day"}


def at(position: int, step: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"position": position, **step, **more}


def problems(steps: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """Every problem of a flow of ``steps``: (step title, field, code, message)."""
    flow = {"name": "Structures", "start": "created"}
    found = validation.errors_for_flow(BINDING, flow, steps, COLUMNS)
    by_label = {validation.step_label(s, flow): s.get("title") for s in steps}
    return [
        (str(by_label.get(label)), e.field, e.code, e.message)
        for label, errs in found
        for e in errs
    ]


# -- on_failure ------------------------------------------------------------------------------


def test_a_step_that_runs_a_command_may_name_where_to_go_if_it_fails() -> None:
    assert problems([at(1, SEND, on_failure=3), at(2, TELL), at(3, TELL, title="Why")]) == []
    assert problems([at(1, APPROVAL, on_failure="2"), at(2, TELL)]) == []


@pytest.mark.parametrize("step", [TELL, WAIT], ids=lambda s: s["kind"])
def test_a_built_in_step_runs_no_command_so_it_has_no_fault_path(step: dict[str, Any]) -> None:
    assert problems([at(1, step, on_failure=2), at(2, TELL, title="Next")]) == [
        (
            step["title"],
            "on_failure",
            "column_not_read",
            f"a {step['kind']} step runs no command, so it has no fault path; "
            "leave 'on_failure' empty",
        )
    ]


def test_the_fault_path_goes_to_a_position_the_flow_has() -> None:
    assert problems([at(1, SEND, on_failure=9), at(2, TELL)]) == [
        (
            "Send to supplier",
            "on_failure",
            "on_failure_unknown",
            "there is no step at position 9 in this flow to go to if it fails",
        )
    ]
    assert problems([at(1, SEND, on_failure=-1), at(2, TELL)]) == [
        (
            "Send to supplier",
            "on_failure",
            "on_failure_invalid",
            "on_failure names a position, a whole number of 0 or more",
        )
    ]
    [(_, field, code, message)] = problems([at(1, SEND, on_failure="two"), at(2, TELL)])
    assert (field, code, message) == ("on_failure", "type_invalid", "'two' is not a whole number")


def test_a_fault_path_back_must_pass_a_wait() -> None:
    # Refused at once, every time: the send would be refused again and again.
    assert problems([at(1, TELL), at(2, SEND, on_failure=1)]) == [
        (
            "Send to supplier",
            "on_failure",
            "loop_without_wait",
            "positions 1–2 loop with nothing that waits: add a wait inside the loop",
        )
    ]
    assert problems([at(1, WAIT), at(2, SEND, on_failure=1)]) == []
    # A position whose step waits is left by its fault path before it waited.
    assert problems([at(1, TELL), at(2, APPROVAL, on_failure=1)])[0][2] == "loop_without_wait"
    assert problems([at(1, SEND, on_failure=1)]) == [
        (
            "Send to supplier",
            "on_failure",
            "loop_without_wait",
            "position 1 goes to itself with nothing that waits: "
            "name another position in on_failure, or leave it empty",
        )
    ]


def test_a_fault_path_forward_into_a_loop_counts_too() -> None:
    steps = [
        at(1, TELL),
        at(2, SEND, on_failure=4),
        at(3, WAIT),
        {
            "position": 4,
            "kind": "branch",
            "title": "Again?",
            "condition": "status = open",
            "goto": 1,
        },
    ]
    [(title, field, code, message)] = problems(steps)
    assert (title, field, code) == ("Again?", "goto", "loop_without_wait")
    assert message.startswith("positions 1, 2 and 4 loop with nothing that waits")


def test_the_loop_graph_keeps_a_waiting_positions_fault_edges() -> None:
    waits_then_faults = {1: loops.Point(waits=True, faults=(2,)), 2: loops.Point(goto=1)}
    assert [loop.positions for loop in loops.find(waits_then_faults)] == [(1, 2)]
    assert loops.find({1: loops.Point(waits=True), 2: loops.Point(goto=1)}) == []


# -- escalate, escalate_to --------------------------------------------------------------------


def test_a_step_that_waits_may_escalate_to_an_audience() -> None:
    approval = at(1, APPROVAL, escalate="2 days", escalate_to="manager", duration="1 week")
    wait_for = {"position": 2, "kind": "waitFor", "event": "po.decided", "title": "Decided"}
    until = {"position": 3, "kind": "until", "field": "needed_by", "title": "Needed by"}
    assert problems([approval, {**wait_for, "escalate": "1 day", "escalate_to": "requester"}]) == []
    assert problems([{**until, "escalate": "P1D", "escalate_to": "manager"}]) == []


def test_escalate_and_escalate_to_go_together() -> None:
    assert problems([at(1, APPROVAL, escalate="2 days")]) == [
        (
            "Manager approval",
            "escalate_to",
            "column_required",
            "a step that escalates needs 'escalate_to': the audience told once it has waited "
            "2 days",
        )
    ]
    assert problems([at(1, APPROVAL, escalate_to="manager")]) == [
        (
            "Manager approval",
            "escalate",
            "column_required",
            "a step that escalates to manager needs 'escalate': how long it waits before it "
            "tells them, e.g. 2 days",
        )
    ]


def test_the_duration_reads_and_the_audience_has_a_rule() -> None:
    found = problems([at(1, APPROVAL, escalate="2 dayz", escalate_to="boss")])
    assert found == [
        (
            "Manager approval",
            "escalate",
            "duration_invalid",
            "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        ),
        (
            "Manager approval",
            "escalate_to",
            "audience_unknown",
            "'boss' is not an audience of the notify rules (requester, manager)",
        ),
    ]
    [(_, field, code, _)] = problems([at(1, APPROVAL, escalate="0 days", escalate_to="manager")])
    assert (field, code) == ("escalate", "duration_not_positive")
    [(_, _, code, message)] = problems([at(1, APPROVAL, escalate="2 days", escalate_to="Manager")])
    assert code == "audience_unknown" and message.endswith("did you mean 'manager'?")


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (SEND, "kind 'send' does not wait, so its steps have no 'escalate'; leave it empty"),
        (
            WAIT,
            "a wait step waits only for its duration, so it cannot escalate; "
            "leave 'escalate' empty",
        ),
        (TELL, "a notify step does not wait, so it cannot escalate; leave 'escalate' empty"),
    ],
    ids=lambda value: value["kind"] if isinstance(value, dict) else "",
)
def test_a_step_that_does_not_wait_for_anything_cannot_escalate(
    step: dict[str, Any], message: str
) -> None:
    found = problems([at(1, step, escalate="2 days", escalate_to="manager")])
    assert (step["title"], "escalate", "column_not_read", message) in found
    assert {code for _, _, code, _ in found} == {"column_not_read"}


# -- what reads the latest failure ----------------------------------------------------------


def test_a_branch_and_a_message_may_read_the_latest_failure() -> None:
    steps = [
        at(1, SEND, on_failure=3),
        {"position": 2, "kind": "branch", "title": "Failed?", "condition": "failure is not null"},
        at(3, TELL, message="Order {number} was not sent: {failure}"),
    ]
    assert problems(steps) == []
    # Only a branch reads it: a waiting step's condition is about the record and its answers.
    [(_, field, code, _)] = problems([at(1, APPROVAL, condition="failure is null")])
    assert (field, code) == ("condition", "condition_invalid")


# -- where rows are written ------------------------------------------------------------------


@pytest.fixture
def po_tables(sqlite_engine: sa.Engine) -> tables.AppTables:
    po.metadata.create_all(sqlite_engine)
    return tables.reflect(sqlite_engine, BINDING)


def test_the_steps_table_has_the_columns(po_tables: tables.AppTables) -> None:
    steps = po_tables.steps
    assert isinstance(steps.c.on_failure.type, sa.Integer)
    assert {"escalate", "escalate_to"} <= set(steps.c.keys())


def test_saving_keeps_them_and_refuses_removing_a_fault_target(
    sqlite_engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    with sqlite_engine.begin() as conn:
        flow = edits.save_flow(conn, BINDING, po_tables, {"name": "Send", "start": "created"})
        ids = [
            edits.save_step(conn, BINDING, po_tables, {"flow_id": flow, **row})
            for row in (at(1, TELL), at(2, TELL, title="Why"))
        ]
        edits.save_step(conn, BINDING, po_tables, {"flow_id": flow, **at(0, SEND, on_failure=2)})
        with pytest.raises(errors.RowInvalid) as refused:
            edits.delete_step(conn, BINDING, po_tables, ids[1])
        [problem] = refused.value.errors
        assert (problem.code, problem.message) == (
            "goto_target_in_use",
            "'Send to supplier' at position 0 goes to position 2 if it fails, so its last "
            "step cannot be removed",
        )
        snap = snapshot.FlowSnapshot.build(
            {"id": flow, "name": "Send", "start": "created"},
            [dict(row) for row in conn.execute(sa.select(po_tables.steps)).mappings()],
        )
    [send] = snap.steps_at(0)
    assert send.get("on_failure") == 2
    assert validation.check(snap, BINDING, COLUMNS) is None


def test_moving_a_step_moves_the_fault_paths_that_name_its_position() -> None:
    steps = [
        {"id": 1, "position": 10, **SEND, "on_failure": 30},
        {"id": 2, "position": 20, **TELL},
        {"id": 3, "position": 30, **TELL, "title": "Why"},
    ]
    changed = edits.moved(steps, 3, -1)
    assert [(s["id"], s["position"], s.get("on_failure")) for s in changed] == [
        (1, 10, 20),
        (2, 30, None),
        (3, 20, None),
    ]


def test_a_flow_file_carries_the_columns_both_ways(
    sqlite_engine: sa.Engine, po_tables: tables.AppTables
) -> None:
    text = """
- name: Send or say why
  start: created
  steps:
    - {position: 10, kind: approval, title: Manager approval, approver: mia,
       escalate: 2 days, escalate_to: manager, on_failure: 30}
    - {position: 20, kind: send, title: Send to supplier, on_failure: 30}
    - {position: 30, kind: notify, title: Tell the buyer, audience: requester,
       message: "Not sent: {failure}"}
"""
    with sqlite_engine.begin() as conn:
        files.import_flows(conn, BINDING, po_tables, files.loads_yaml(text), columns=COLUMNS)
        [doc] = files.export_flows(conn, BINDING, po_tables)
    assert doc.steps[0] == {
        "position": 10,
        "kind": "approval",
        "title": "Manager approval",
        "on_failure": 30,
        "escalate": "2 days",
        "escalate_to": "manager",
        "approver": "mia",
    }
    assert doc.steps[1]["on_failure"] == 30
    assert "escalate,escalate_to" in files.dumps_csv([doc], BINDING).splitlines()[0]
    bad = text.replace("escalate_to: manager", "escalate_to: boss").replace("why", "why 2")
    with (
        pytest.raises(validation.RowsInvalid, match="'boss' is not an audience"),
        sqlite_engine.begin() as conn,
    ):
        files.import_flows(conn, BINDING, po_tables, files.loads_yaml(bad), columns=COLUMNS)


def test_a_steps_table_made_before_them_mounts_and_refuses_a_row_that_sets_one(
    sqlite_engine: sa.Engine,
) -> None:
    po.metadata.create_all(sqlite_engine)
    with sqlite_engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE po_flow_step DROP COLUMN on_failure"))
    BINDING.check(sqlite_engine)  # it mounts: its flows run as they did
    runner = flow_runner(BINDING, sqlite_engine, commands=po.COMMANDS, check_schema=False)
    with sqlite_engine.begin() as conn:
        flow = runner.save_flow(conn, {"name": "Old", "start": "created"})
        runner.save_step(conn, {"flow_id": flow, "position": 1, "kind": "send", "title": "Send it"})
        hold = {"kind": "set", "title": "Hold", "field": "status", "value": "rejected"}
        runner.save_step(conn, {"flow_id": flow, "position": 3, **hold})
    with pytest.raises(errors.RowInvalid) as refused, sqlite_engine.begin() as conn:
        runner.save_step(
            conn,
            {"flow_id": flow, "position": 2, "kind": "send", "title": "Again", "on_failure": 3},
        )
    message = (
        "the table 'po_flow_step' has no column 'on_failure': add it (a nullable column, as "
        "flowrunner.tables declares it) to use it"
    )
    assert [e.message for e in refused.value.errors] == [message]
    guide = (Path(__file__).parent.parent / "docs" / "flows.md").read_text("utf-8")
    assert message in " ".join(guide.split())  # as the guide says it
