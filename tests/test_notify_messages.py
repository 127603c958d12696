"""A notify step's message names the record's columns: checked when saved, checked again
when a run loads its flow, filled in by the pure interpreter — and a notice nobody can
receive is told as undeliverable. (The same on real databases: ``test_notices.py``.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_interpreter_driver import Sim, columns

from fixtures.purchase_orders import app as po
from flowrunner import errors, query
from flowrunner.binding import NotifyRule
from flowrunner.flows import snapshot, validation
from flowrunner.flows.interpreter import effects

BINDING = po.binding
COLUMNS = query.column_types(po.purchase_order)
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "flows.md"


def refused(message: str, binding_columns: dict[str, Any] = COLUMNS) -> list[tuple[str, str]]:
    row = {"flow_id": 1, "position": 1, "kind": "notify", "audience": "requester"}
    found = validation.errors_for_step_row(BINDING, {**row, "message": message}, binding_columns)
    return [(e.code, e.message) for e in found if e.field == "message"]


# -- when saved ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "Order {number} for {amount} is {status}.",
        "{number}",
        "No placeholders at all.",
        "Braces themselves: {{number}} and }}.",
        "Twice: {number} {number}",
    ],
)
def test_a_message_naming_the_orders_columns_is_accepted(message: str) -> None:
    assert refused(message) == []


def test_each_unknown_column_is_named_with_the_columns_to_use() -> None:
    known = ", ".join(COLUMNS)
    assert refused("{budget} for {number} by {boss} and {budget}") == [
        (
            "message_unknown_column",
            f"{{budget}} is not a column of purchase_order — use one of: {known}",
        ),
        (
            "message_unknown_column",
            f"{{boss}} is not a column of purchase_order — use one of: {known}",
        ),
    ]


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        (
            "Order {number",
            "a brace has no partner — write {column} for a value, and {{ or }} for a brace itself",
        ),
        (
            "Order } closed",
            "a brace has no partner — write {column} for a value, and {{ or }} for a brace itself",
        ),
        ("{number.upper}", "{number.upper} is not a plain column name — write just {number}"),
        (
            "{number.__class__.__init__.__globals__}",
            "{number.__class__.__init__.__globals__} is not a plain column name"
            " — write just {number}",
        ),
        ("{number[0]}", "{number[0]} is not a plain column name — write just {number}"),
        ("{number!r}", "{number!r} is not a plain column name — write just {number}"),
        ("{amount:>10}", "{amount:>10} is not a plain column name — write just {amount}"),
        ("{amount:{number}}", "{amount:{number}} is not a plain column name — write just {amount}"),
        ("{}", "{} names no column — write a column's name in the braces, e.g. {number}"),
        ("{0}", "{0} is not a plain column name — write just {number}"),
        ("{ number }", "{ number } is not a plain column name — write just {number}"),
    ],
)
def test_a_message_that_is_not_a_safe_template_is_refused(message: str, sentence: str) -> None:
    assert refused(message) == [("message_invalid", sentence)]


def test_a_column_holding_a_secret_may_not_be_told() -> None:
    with_secrets = {
        **COLUMNS,
        "card_number": query.ColumnType.TEXT,
        "api_token": query.ColumnType.TEXT,
    }
    assert refused("{number}: {card_number} {api_token}", with_secrets) == [
        ("message_secret_column", "{card_number} holds a secret, which a message may not tell"),
        ("message_secret_column", "{api_token} holds a secret, which a message may not tell"),
    ]
    # Nor are they offered among the columns to use.
    [(_, sentence)] = refused("{budget}", with_secrets)
    assert "card_number" not in sentence and "api_token" not in sentence and "number" in sentence


def test_a_long_message_is_refused_for_its_length_and_its_placeholders_alike() -> None:
    assert [code for code, _ in refused("{budget}" + "x" * 500)] == [
        "message_too_long",
        "message_unknown_column",
    ]


def test_the_guides_examples_are_what_people_are_told() -> None:
    table = GUIDE.read_text(encoding="utf-8").split("## Every problem a row can have")[1]
    example = {
        code: text
        for code, text in re.findall(r"^\| `(message_[a-z_]+)` \| [^|]+ \| `(.+)` \|$", table, re.M)
    }
    assert refused("{amount:>10}") == [("message_invalid", example["message_invalid"])]
    with_card = {**COLUMNS, "card_number": query.ColumnType.TEXT}
    assert refused("{card_number}", with_card) == [
        ("message_secret_column", example["message_secret_column"])
    ]
    [(code, sentence)] = refused("{budget}")
    assert code == "message_unknown_column"
    assert sentence.startswith(example["message_unknown_column"].removesuffix("…"))


def test_a_notify_rules_title_is_held_to_the_same_safe_templates() -> None:
    assert NotifyRule(audience="requester", to="requester_id", title="{number}: {message}")
    with pytest.raises(errors.BindingError, match=r"write just \{number\}"):
        NotifyRule(audience="requester", to="requester_id", title="{number:>10}: {message}")


# -- when a run loads its flow ------------------------------------------------------------------


def test_a_message_whose_column_was_dropped_is_named_at_load() -> None:
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "Regional", "start": "created"},
        [
            {
                "id": 1,
                "flow_id": 1,
                "position": 1,
                "kind": "notify",
                "title": "Tell",
                "audience": "requester",
                "message": "Your order for {region} was received.",
            },
        ],
    )
    assert validation.check(snap, BINDING, COLUMNS) is None
    without_region = {name: kind for name, kind in COLUMNS.items() if name != "region"}
    sentence = validation.check(snap, BINDING, without_region)
    assert sentence == (
        "flow 'Regional', step 'Tell' (notify, position 1): {region} is not a column of "
        f"purchase_order — use one of: {', '.join(without_region)}"
    )


# -- when the step runs (the pure interpreter) ---------------------------------------------------


def notify(message: str, audience: str = "requester") -> dict[str, Any]:
    return {
        "position": 2,
        "kind": "notify",
        "title": "Tell",
        "audience": audience,
        "message": message,
    }


def test_the_message_is_filled_from_the_record_as_the_step_sees_it() -> None:
    sim = Sim(
        [
            {"position": 1, "kind": "set", "field": "status", "value": "approved"},
            notify("PO {id} is {status} ({amount}, approved: {approved})."),
        ]
    )
    sim.run()
    told = "PO 42 is approved (100, approved: )."
    assert sim.of(effects.Notify) == [
        effects.Notify(
            step_id=2,
            pass_=1,
            audience="requester",
            message=told,
            recipient="ann",
            title=f"PO 42: {told}",
        )
    ]
    [line] = sim.logs("notice")
    assert line.detail == {"audience": "requester", "recipient": "ann", "message": told}
    assert sim.logs("undeliverable") == []


def test_an_empty_recipient_is_told_as_undeliverable_and_the_run_goes_on() -> None:
    sim = Sim(
        [
            notify("PO {id} arrived.", audience="buyer"),
            {"position": 3, "kind": "set", "field": "status", "value": "seen"},
        ]
    )
    sim.run()
    [notice] = sim.of(effects.Notify)
    assert (notice.recipient, notice.message, notice.email) == (None, "PO 42 arrived.", True)
    assert (notice.deliverable, notice.problem) == (False, "the record's buyer_id is empty")
    [line] = sim.logs("undeliverable")
    assert line.detail == {
        "audience": "buyer",
        "to": "buyer_id",
        "why": "empty",
        "message": "PO 42 arrived.",
    }
    assert sim.logs("notice") == []
    assert sim.status == "done" and sim.record is not None and sim.record["status"] == "seen"


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("For {budget}", "its message cannot be used: {budget} is not a column of the record"),
        ("{id.__class__}", "its message cannot be used: {id.__class__} is not a plain column name"),
    ],
)
def test_a_message_written_around_validation_fails_the_run(message: str, problem: str) -> None:
    sim = Sim([notify(message)])
    sim.run()
    assert sim.status == "failed"
    assert problem in (sim.reason or "")
    assert sim.of(effects.Notify) == []
    if "budget" in message:
        assert f"use one of: {', '.join(columns())}" in (sim.reason or "")
