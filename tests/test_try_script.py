"""A try's script: lines as people write them, read into answers, changes and refusals
(``try_script``), and resolved against a flow into the events and writes a try makes
(``try_plan``). Pure: no database."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixtures.purchase_orders import app as po
from fixtures.tickets import app as tickets
from flowrunner import Answer, Change, Refusal, RowInvalid
from flowrunner.binding import FlowBinding
from flowrunner.flows import snapshot
from flowrunner.flows.trial import plan as try_plan
from flowrunner.flows.trial import script

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
BIG_ORDERS = [
    {
        "id": 1,
        "position": 10,
        "kind": "approval",
        "title": "Manager approval",
        "approver": "manager@example.com",
        "condition": "event.decision = rejected or status = withdrawn",
        "duration": "1 week",
    },
    {
        "id": 2,
        "position": 10,
        "kind": "approval",
        "title": "Finance approval",
        "approver": "cfo@example.com, controller@example.com",
        "mode": "all",
        "condition": "event.decision = rejected or status = withdrawn",
    },
    {"id": 3, "position": 20, "kind": "send", "title": "Send to supplier"},
]


def setting(
    steps: list[dict[str, Any]] = BIG_ORDERS, binding: FlowBinding = po.binding
) -> try_plan.Setting:
    metadata = {"purchase_order": po.metadata, "ticket": tickets.metadata}[binding.resource]
    snap = snapshot.FlowSnapshot.build({"id": 1, "name": "Big orders", "start": "created"}, steps)
    return try_plan.Setting(
        binding=binding,
        snap=snap,
        columns=binding.check(metadata).resource_columns,
        record_id=1001,
        tenant=None,
        start=T0,
        end=T0 + timedelta(days=30),
    )


def plan(*items: Any, steps: list[dict[str, Any]] = BIG_ORDERS) -> try_plan.Plan:
    return try_plan.resolve(list(items), setting(steps))


def sent(result: try_plan.Plan) -> list[tuple[datetime, str, dict[str, Any]]]:
    """Each event the plan sends: when, which, and its payload."""
    return [
        (h.at, h.event, dict(payload))
        for h in result.happenings
        if isinstance(h, try_plan.Arrival)
        for payload in h.payloads
    ]


# -- reading lines -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "item"),
    [
        ("bob approves after 2 days", Answer(who="bob", says="approved", after="2 days")),
        ("Bob REJECTS", Answer(who="Bob", says="rejected")),
        ("'Ann Lee' denies after 1 hour", Answer(who="Ann Lee", says="denied", after="1 hour")),
        ("bob answers", Answer(who="bob")),
        (
            "bob answers with decision = withdrawn, note = 'too, dear' after 3 days",
            Answer(
                who="bob",
                fields={"decision": "withdrawn", "note": "too, dear"},
                after="3 days",
            ),
        ),
        ("ticket.replied arrives after 1 day", Answer(event="ticket.replied", after="1 day")),
        (
            "status becomes 'on hold' after 1 day",
            Change(values={"status": "'on hold'"}, after="1 day", written=True),
        ),
        ("status   becomes withdrawn", Change(values={"status": "withdrawn"}, written=True)),
        ("send_purchase_order refuses", Refusal(command="send_purchase_order")),
        (
            "send_purchase_order refuses because the supplier is closed",
            Refusal(command="send_purchase_order", reason="the supplier is closed"),
        ),
        ("nobody answers", None),
        ("No one answers", None),
        ("", None),
        ("   ", None),
        ("# the manager is away", None),
    ],
)
def test_each_form_of_line_reads_as_its_item(line: str, item: script.Item | None) -> None:
    assert script.read(line) == item


@pytest.mark.parametrize(
    ("line", "code", "said"),
    [
        ("bob approves after 2 dys", "duration_invalid", "'2 dys' is not a duration"),
        ("bob approves after -1 day", "duration_invalid", "cannot have a sign"),
        ("the manager says yes", "answer_unreadable", "is not a line a try reads"),
        ("bob approved after 1 day", "answer_unreadable", "is not a line a try reads"),
        ("bob answers with decision", "field_invalid", "'decision' is not a field"),
        ("bob answers with 1x = 2", "field_invalid", "'1x = 2' is not a field"),
        ("send_purchase_order refuses after 1 day", "answer_unreadable", "leave out 'after'"),
    ],
)
def test_a_line_that_cannot_be_read_says_what_to_write(line: str, code: str, said: str) -> None:
    with pytest.raises(script.Unreadable) as refused:
        script.read(line)
    assert refused.value.code == code
    assert said in refused.value.message
    assert refused.value.code in script.CODES


@given(st.text(max_size=80))
def test_any_text_reads_as_an_item_or_a_sentence_never_a_crash(text: str) -> None:
    try:
        script.read(text)
    except script.Unreadable as refused:
        assert refused.code in script.CODES
        assert refused.message


@given(st.lists(st.text(max_size=40), max_size=5))
def test_any_script_resolves_or_is_refused_with_every_problem_on_its_line(
    lines: list[str],
) -> None:
    try:
        try_plan.resolve(lines, setting())
    except RowInvalid as refused:
        assert refused.errors
        for problem in refused.errors:
            assert problem.field.startswith("answers.")
            assert problem.code in script.CODES or problem.code.startswith("value_")


def test_the_past_form_of_a_verb_is_the_regular_one() -> None:
    verbs = ("approves", "rejects", "denies", "vetoes", "signs", "agrees", "okays")
    assert [script.past(v) for v in verbs] == [
        "approved",
        "rejected",
        "denied",
        "vetoed",
        "signed",
        "agreed",
        "okayed",
    ]


# -- resolving against a flow --------------------------------------------------------------


def test_an_answer_is_the_kinds_event_naming_the_record_who_and_what() -> None:
    assert sent(plan("manager@example.com approves after 1 day")) == [
        (
            T0 + timedelta(days=1),
            "po.decided",
            {"order": 1001, "approver": "manager@example.com", "decision": "approved"},
        )
    ]


def test_a_step_title_stands_for_everyone_that_step_asks() -> None:
    assert sent(plan("finance rejects after 2 days", "Manager approves")) == [
        (
            T0,
            "po.decided",
            {"order": 1001, "approver": "manager@example.com", "decision": "approved"},
        ),
        (
            T0 + timedelta(days=2),
            "po.decided",
            {"order": 1001, "approver": "cfo@example.com", "decision": "rejected"},
        ),
        (
            T0 + timedelta(days=2),
            "po.decided",
            {"order": 1001, "approver": "controller@example.com", "decision": "rejected"},
        ),
    ]


def test_someone_not_asked_answers_as_themselves() -> None:
    [(_, _, payload)] = sent(plan("Olga approves"))
    assert payload["approver"] == "Olga"


def test_a_name_is_matched_as_the_step_spells_it() -> None:
    [(_, _, payload)] = sent(plan("CFO@example.com approves"))
    assert payload["approver"] == "cfo@example.com"


def test_the_asked_come_from_the_input_column_named_as_the_answerer_field() -> None:
    kind = po.binding.kinds["approval"]
    snap = setting().snap
    assert [try_plan.asked_by(step, kind) for step in snap.steps[:2]] == [
        ("manager@example.com",),
        ("cfo@example.com", "controller@example.com"),
    ]
    assert try_plan.asked_by(snap.steps[2], po.binding.kinds["send"]) is None


def test_items_happen_in_time_order_and_in_script_order_at_one_moment() -> None:
    result = plan(
        "status becomes approved after 2 days",
        "cfo@example.com approves after 2 days",
        "manager@example.com approves after 1 day",
    )
    assert [type(h).__name__ for h in result.happenings] == ["Arrival", "Writing", "Arrival"]
    [first, second, third] = result.happenings
    assert first.at == T0 + timedelta(days=1)
    assert second.at == third.at == T0 + timedelta(days=2)


def test_a_changes_values_fit_their_columns_as_a_set_steps_would() -> None:
    result = plan(
        Change(values={"amount": "12000.50", "needed_by": date(2026, 4, 1)}),
        Change(values={"status": "on hold", "approver": None}, after=timedelta(hours=1)),
        "amount becomes 99.5",
        "needed_by becomes today() + 2 days",
    )
    writings = [dict(h.values) for h in result.happenings if isinstance(h, try_plan.Writing)]
    assert writings == [
        {"amount": Decimal("12000.50"), "needed_by": date(2026, 4, 1)},
        {"amount": Decimal("99.5")},
        {"needed_by": date(2026, 3, 4)},
        {"status": "on hold", "approver": None},
    ]


def test_refusals_are_kept_by_command() -> None:
    result = plan("send_purchase_order refuses because closed", Refusal("remind_approver"))
    assert result.refusals == {
        "send_purchase_order": "closed",
        "remind_approver": "it refused in the try",
    }


def test_an_event_that_names_nobody_takes_no_name() -> None:
    steps = [{"id": 1, "position": 1, "kind": "waitFor", "event": "ticket.replied"}]
    with pytest.raises(RowInvalid) as refused:
        try_plan.resolve(["ann replies"], setting(steps, tickets.binding))
    [problem] = refused.value.errors
    assert (problem.field, problem.code) == ("answers.0", "who_unknown")
    assert problem.message == (
        "ticket.replied does not say who answered: write 'ticket.replied arrives' "
        "(with its fields), without a name"
    )
    arrived = try_plan.resolve(
        ["ticket.replied arrives with mood = happy"], setting(steps, tickets.binding)
    )
    assert sent(arrived) == [(T0, "ticket.replied", {"mood": "happy", "ticket": 1001})]


def test_a_flow_that_waits_for_nothing_takes_no_answer() -> None:
    steps = [{"id": 1, "position": 1, "kind": "send", "title": "Send"}]
    with pytest.raises(RowInvalid) as refused:
        plan("bob approves", steps=steps)
    assert [e.code for e in refused.value.errors] == ["event_not_awaited"]


def test_a_verb_where_the_steps_read_several_fields_asks_which() -> None:
    steps = [
        {
            "id": 1,
            "position": 1,
            "kind": "approval",
            "approver": "bob",
            "condition": "event.decision = rejected or event.reason = late",
        }
    ]
    with pytest.raises(RowInvalid) as refused:
        plan("bob rejects", steps=steps)
    [problem] = refused.value.errors
    assert problem.code == "answer_ambiguous"
    assert "say which — e.g. 'with decision = rejected'" in problem.message
    assert sent(plan("bob answers with reason = late", steps=steps))[0][2]["reason"] == "late"


def test_a_verb_no_step_reads_is_only_an_answer() -> None:
    steps = [{"id": 1, "position": 1, "kind": "approval", "approver": "bob"}]
    assert sent(plan("bob approves", steps=steps)) == [
        (T0, "po.decided", {"order": 1001, "approver": "bob"})
    ]


def test_an_answer_past_the_end_of_the_try_is_refused() -> None:
    with pytest.raises(RowInvalid) as refused:
        plan(Answer(who="bob", after=timedelta(days=31)), Answer(who="bob", after="31 days"))
    assert [e.code for e in refused.value.errors] == ["answer_too_late", "answer_too_late"]
    assert refused.value.errors[1].message == (
        "after 31 days is after the try ends: try the flow for longer (until)"
    )


def test_an_answers_fields_must_be_plain() -> None:
    with pytest.raises(RowInvalid) as refused:
        plan(Answer(who="bob", fields={"score": float("nan")}))
    assert [e.code for e in refused.value.errors] == ["field_invalid"]


def test_an_answer_names_its_event_where_the_steps_wait_for_several() -> None:
    binding = FlowBinding(
        resource="purchase_order",
        flows_table="po_flow",
        steps_table="po_flow_step",
        events={"po.decided": "order", "po.paid": "order"},
        kinds=dict(po.binding.kinds),
        set_columns=["status"],
    )
    steps = [*BIG_ORDERS, {"id": 4, "position": 30, "kind": "waitFor", "event": "po.paid"}]
    with pytest.raises(RowInvalid) as refused:
        try_plan.resolve(["bob approves"], setting(steps, binding))
    [problem] = refused.value.errors
    assert (problem.code, problem.message) == (
        "event_ambiguous",
        "the flow's steps wait for po.decided and po.paid: say which — "
        "'po.decided arrives with ...'",
    )
    named = try_plan.resolve(
        [Answer(who="bob", says="approved", event="po.decided"), "po.paid arrives after 1 day"],
        setting(steps, binding),
    )
    assert sent(named) == [
        (T0, "po.decided", {"order": 1001, "approver": "bob", "decision": "approved"}),
        (T0 + timedelta(days=1), "po.paid", {"order": 1001}),
    ]
