"""Step and flow rows, kind by kind: valid rows pass, invalid ones name field and problem."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.purchase_orders import app as po
from flowrunner import errors, query
from flowrunner.binding import FlowBinding, Kind
from flowrunner.flows import validation

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)
# The flow the rows belong to already has steps at positions 1 and 5.
SIBLINGS = [
    {"id": 100, "flow_id": 1, "position": 1, "kind": "wait", "duration": "1 day"},
    {"id": 101, "flow_id": 1, "position": 5, "kind": "send"},
]
LONG = "x" * 501
KINDS = "set, wait, until, branch, waitFor, notify, subflow, approval, send"


def found(row: dict[str, Any], binding: FlowBinding = BINDING) -> list[tuple[str, str, str]]:
    full = {"flow_id": 1, "position": 3, **row}
    problems = validation.errors_for_step_row(binding, full, COLUMNS, siblings=SIBLINGS)
    return [(e.field, e.code, e.message) for e in problems]


VALID: dict[str, list[dict[str, Any]]] = {
    "set": [
        {"kind": "set", "field": "status", "value": "approved"},
        {"kind": "set", "field": "priority", "value": "'very high'", "title": "Raise"},
        {"kind": "set", "field": "status", "value": "null"},
    ],
    "wait": [
        {"kind": "wait", "duration": "2 days"},
        {"kind": "wait", "duration": "P1DT2H"},
        {"kind": "wait", "duration": " 30 minutes ", "title": "  "},
    ],
    "until": [
        {"kind": "until", "field": "created_at"},
        {"kind": "until", "field": "created_at", "duration": "-4 hours"},
        {"kind": "until", "field": "needed_by", "duration": "+1 day"},
    ],
    "branch": [
        {"kind": "branch", "condition": "amount > 1000"},
        {"kind": "branch", "condition": "status in (open, 'on hold')", "goto": 1},
        {"kind": "branch", "condition": "approver is null", "goto": "5"},
    ],
    "waitFor": [
        {"kind": "waitFor", "event": "po.decided"},
        {"kind": "waitFor", "event": "po.decided", "duration": "1 week"},
    ],
    "notify": [
        {"kind": "notify", "audience": "requester", "message": "Approved."},
        {"kind": "notify", "audience": "requester", "message": "y" * 500},
    ],
    "approval": [
        {"kind": "approval", "approver": "ann@example.com"},
        {
            "kind": "approval",
            "approver": "ann@example.com, bob@example.com",
            "mode": "all",
            "remind": "1 day",
            "condition": "event.decision = rejected",
            "duration": "1 week",
        },
        {"kind": "approval", "approver": "ann", "mode": "60%"},
        {"kind": "approval", "approver": "ann", "mode": "2"},
    ],
    "send": [{"kind": "send"}, {"kind": "send", "title": "Send to supplier"}],
}


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=f"{k}-{i}") for k, rows in VALID.items() for i, r in enumerate(rows)]
)
def test_valid_rows_are_accepted(row: dict[str, Any]) -> None:
    assert found(row) == []


INVALID: list[tuple[dict[str, Any], tuple[str, str, str | None]]] = [
    # set
    (
        {"kind": "set", "field": "amount", "value": "3"},
        (
            "field",
            "field_not_settable",
            "'amount' is not a column a set step may write (status, priority)",
        ),
    ),
    (
        {"kind": "set", "field": "stauts", "value": "x"},
        (
            "field",
            "field_not_settable",
            "'stauts' is not a column a set step may write (status, priority)"
            " — did you mean 'status'?",
        ),
    ),
    (
        # value: no, unquoted in a YAML file
        {"kind": "set", "field": "status", "value": False},
        (
            "value",
            "value_invalid",
            "'false' cannot be written to 'status': the field holds text, and false is not "
            "text — to write the word, put it in quotes ('false'); in a YAML file, yes, no, "
            "on and off without quotes are read as true and false too",
        ),
    ),
    ({"kind": "set", "field": "status"}, ("value", "column_required", "a set step needs 'value'")),
    (
        {"kind": "set", "field": "status", "value": "x", "duration": "1 day"},
        ("duration", "column_not_read", "a set step does not read 'duration'; leave it empty"),
    ),
    # wait
    (
        {"kind": "wait", "duration": "2 dayz"},
        (
            "duration",
            "duration_invalid",
            "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        ),
    ),
    (
        {"kind": "wait", "duration": "0 minutes"},
        (
            "duration",
            "duration_not_positive",
            "'0 minutes' must be longer than nothing, e.g. '1 day'",
        ),
    ),
    ({"kind": "wait"}, ("duration", "column_required", "a wait step needs 'duration'")),
    (
        {"kind": "wait", "duration": "1 day", "goto": 1},
        ("goto", "column_not_read", "a wait step does not read 'goto'; leave it empty"),
    ),
    # until
    (
        {"kind": "until", "field": "status"},
        (
            "field",
            "field_not_date",
            "'status' is not a date or timestamp column of purchase_order "
            "(needed_by, created_at, updated_at, sent_at)",
        ),
    ),
    (
        {"kind": "until", "field": "needed"},
        (
            "field",
            "field_not_date",
            "'needed' is not a date or timestamp column of purchase_order "
            "(needed_by, created_at, updated_at, sent_at) — did you mean 'needed_by'?",
        ),
    ),
    (
        {"kind": "until", "duration": "1 day"},
        ("field", "column_required", "an until step needs 'field'"),
    ),
    (
        {"kind": "until", "field": "created_at", "value": "x"},
        ("value", "column_not_read", "an until step does not read 'value'; leave it empty"),
    ),
    # branch
    ({"kind": "branch"}, ("condition", "column_required", "a branch step needs 'condition'")),
    (
        {"kind": "branch", "condition": "amount > 1", "goto": 4},
        ("goto", "goto_unknown", "there is no step at position 4 in this flow"),
    ),
    (
        {"kind": "branch", "condition": "amount > 1", "goto": "later"},
        ("goto", "type_invalid", "'later' is not a whole number"),
    ),
    (
        {"kind": "branch", "condition": "amount > 1", "message": "hi"},
        ("message", "column_not_read", "a branch step does not read 'message'; leave it empty"),
    ),
    # waitFor
    (
        {"kind": "waitFor", "event": "po.sent"},
        ("event", "event_unknown", "'po.sent' is not one of the binding's events (po.decided)"),
    ),
    ({"kind": "waitFor"}, ("event", "column_required", "a waitFor step needs 'event'")),
    (
        {"kind": "waitFor", "event": "po.decided", "mode": "all"},
        ("mode", "column_not_read", "a waitFor step does not read 'mode'; leave it empty"),
    ),
    # notify
    (
        {"kind": "notify", "audience": "boss", "message": "hi"},
        (
            "audience",
            "audience_unknown",
            "'boss' is not an audience of the notify rules (requester)",
        ),
    ),
    (
        {"kind": "notify", "audience": "requester", "message": LONG},
        ("message", "message_too_long", "a message has at most 500 characters; this one has 501"),
    ),
    (
        {"kind": "notify", "audience": "requester"},
        ("message", "column_required", "a notify step needs 'message'"),
    ),
    # app kinds
    ({"kind": "approval"}, ("approver", "column_required", "an approval step needs 'approver'")),
    (
        {"kind": "approval", "approver": "ann", "mode": "most"},
        (
            "mode",
            "mode_invalid",
            "'most' is not a mode — write any, all, a number of events like 2, or a share like 60%",
        ),
    ),
    (
        {"kind": "approval", "approver": "ann", "mode": "120%"},
        (
            "mode",
            "mode_invalid",
            "'120%' is not a mode — write any, all, a number of events like 2, or a share like 60%",
        ),
    ),
    (
        {"kind": "approval", "approver": "ann", "remind": "-1 day"},
        ("remind", "duration_invalid", None),
    ),
    (
        {"kind": "send", "mode": "all"},
        (
            "mode",
            "column_not_read",
            "kind 'send' does not wait, so its steps have no 'mode'; leave it empty",
        ),
    ),
    (
        {"kind": "send", "approver": "ann"},
        ("approver", "column_not_read", "a send step does not read 'approver'; leave it empty"),
    ),
    # every kind
    (
        {"kind": "approve"},
        (
            "kind",
            "kind_unknown",
            f"kind 'approve' is not in the binding — use one of {KINDS}; did you mean 'approval'?",
        ),
    ),
    ({"kind": " "}, ("kind", "column_required", "a step needs a kind")),
    (
        {"kind": "send", "position": -1},
        ("position", "position_invalid", "a position is a whole number of 0 or more"),
    ),
    (
        {"kind": "send", "position": "two"},
        ("position", "type_invalid", "'two' is not a whole number"),
    ),
    (
        {"kind": "send", "color": "red"},
        ("color", "column_unknown", "'color' is not a column of this table"),
    ),
    (
        {"kind": "wait", "duration": "1 day", "titel": "Pause"},
        (
            "titel",
            "column_unknown",
            "'titel' is not a column of this table — did you mean 'title'?",
        ),
    ),
]


@pytest.mark.parametrize(
    ("row", "expected"), INVALID, ids=[f"{r['kind'].strip() or 'blank'}-{e[1]}" for r, e in INVALID]
)
def test_invalid_rows_name_the_field_and_problem(
    row: dict[str, Any], expected: tuple[str, str, str | None]
) -> None:
    problems = found(row)
    field, code, message = expected
    matching = [p for p in problems if p[0] == field and p[1] == code]
    assert matching, problems
    if message is not None:
        assert matching[0][2] == message


def test_condition_problems_carry_the_position() -> None:
    (problem,) = found({"kind": "branch", "condition": "amount >"})
    assert problem[:2] == ("condition", "condition_invalid")
    assert problem[2].startswith("the condition cannot be read: line 1, column ")
    (problem,) = found({"kind": "branch", "condition": "colour = red"})
    assert "colour" in problem[2]
    (problem,) = found({"kind": "approval", "approver": "a", "condition": "event.decision ="})
    assert problem[:2] == ("condition", "condition_invalid")
    # A branch has no event to read.
    (problem,) = found({"kind": "branch", "condition": "event.decision = rejected"})
    assert problem[:2] == ("condition", "condition_invalid")


def test_value_must_fit_the_field() -> None:
    binding = FlowBinding(
        **{**BINDING.model_dump(), "set_columns": ["status", "amount", "sent_at"]}
    )
    assert found({"kind": "set", "field": "amount", "value": "12.5"}, binding) == []
    assert found({"kind": "set", "field": "sent_at", "value": "now()"}, binding) == []
    (problem,) = found({"kind": "set", "field": "amount", "value": "lots"}, binding)
    assert problem[:2] == ("value", "value_invalid")
    assert problem[2].startswith("'lots' cannot be written to 'amount': ")
    (problem,) = found({"kind": "set", "field": "status", "value": "on hold"}, binding)
    assert problem[2] == (
        "'on hold' cannot be written to 'status': text with spaces goes in quotes — "
        "write 'on hold' with the quotes"
    )
    assert found({"kind": "set", "field": "status", "value": "'on hold'"}, binding) == []


def test_remind_needs_a_kind_that_reminds() -> None:
    binding = FlowBinding(
        **{
            **BINDING.model_dump(),
            "kinds": {"review": Kind(command="review", input=["reviewer"], wait_for="po.decided")},
        }
    )
    assert found({"kind": "review", "reviewer": "x", "remind": "1 day"}, binding) == [
        (
            "remind",
            "remind_unavailable",
            "kind 'review' has no remind command, so its steps cannot remind; leave 'remind' empty",
        )
    ]


def test_every_problem_of_a_row_is_reported_at_once() -> None:
    row = {
        "flow_id": 1,
        "position": "x",
        "kind": "notify",
        "audience": "boss",
        "message": LONG,
        "duration": "2 dayz",
        "goto": 3,
    }
    with pytest.raises(errors.RowInvalid) as caught:
        validation.validate_step_row(BINDING, row, COLUMNS, siblings=SIBLINGS)
    codes = sorted((e.field, e.code) for e in caught.value.errors)
    assert codes == [
        ("audience", "audience_unknown"),
        ("duration", "column_not_read"),
        ("goto", "column_not_read"),
        ("message", "message_too_long"),
        ("position", "type_invalid"),
    ]
    assert caught.value.status_code == 422
    detail = caught.value.to_dict()["detail"]
    assert {
        "loc": ["body", "audience"],
        "msg": "'boss' is not an audience of the notify rules (requester)",
        "type": "audience_unknown",
    } in detail
    assert "step (notify, position x)" in str(caught.value)


FLOW_INVALID: list[tuple[dict[str, Any], tuple[str, str, str | None]]] = [
    ({"start": "created"}, ("name", "column_required", "a flow needs a name")),
    (
        {"name": "n" * 201, "start": "created"},
        ("name", "name_too_long", "a flow's name has at most 200 characters"),
    ),
    (
        {"name": "A"},
        (
            "start",
            "column_required",
            "say when the flow starts: created, updated, manual or schedule",
        ),
    ),
    (
        {"name": "A", "start": "sometimes"},
        (
            "start",
            "start_invalid",
            "'sometimes' is not a start — write created, updated, manual or schedule",
        ),
    ),
    (
        {"name": "A", "start": "created", "changes": "status"},
        (
            "changes",
            "changes_without_update",
            "only a flow that starts on 'updated' can name the column an update changes",
        ),
    ),
    (
        {"name": "A", "start": "updated", "changes": "colour"},
        ("changes", "column_unknown", "'colour' is not a column of purchase_order"),
    ),
    (
        {"name": "A", "start": "created", "condition": "amount >"},
        ("condition", "condition_invalid", None),
    ),
    (
        {"name": "A", "start": "created", "active": "maybe"},
        ("active", "type_invalid", "'maybe' is not true or false"),
    ),
    (
        {"name": "Big orders", "start": "created"},
        ("name", "name_taken", "there is already a flow named 'Big orders'"),
    ),
]


@pytest.mark.parametrize(("row", "expected"), FLOW_INVALID, ids=[e[1] for _, e in FLOW_INVALID])
def test_invalid_flow_rows(row: dict[str, Any], expected: tuple[str, str, str | None]) -> None:
    existing = [{"id": 1, "name": "Big orders", "start": "created"}]
    problems = validation.errors_for_flow_row(BINDING, row, COLUMNS, existing=existing)
    field, code, message = expected
    matching = [p for p in problems if p.field == field and p.code == code]
    assert matching, problems
    if message is not None:
        assert matching[0].message == message


def test_valid_flow_rows() -> None:
    existing = [{"id": 1, "name": "Big orders", "start": "created"}]
    rows: list[dict[str, Any]] = [
        {"name": "Small", "start": "created", "condition": "amount <= 10000"},
        {"name": "Changed", "start": "updated", "changes": "priority", "active": "false"},
        {"name": "By hand", "start": "manual", "active": True},
        {"id": 1, "name": "Big orders", "start": "created"},  # an update keeps its own name
    ]
    for row in rows:
        assert validation.errors_for_flow_row(BINDING, row, COLUMNS, existing=existing) == []
