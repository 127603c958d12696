"""Trying a flow on a record: the path it would take, the values it would set, the notices
and commands it would send — and nothing leaves the try. On SQLite and PostgreSQL.

The scenarios are the purchase-order sample's big order (25,000: the manager and finance
approve in parallel, reminded daily; after a week without answers it is rejected), as
a workflow designer would try them before saving.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import desk
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from running import T0, app, decide, mount, order, stored

from flowrunner import (
    Answer,
    Change,
    CommandContext,
    OperatorError,
    Refusal,
    RowInvalid,
    RunStatus,
    TryResult,
    testing,
)
from flowrunner.flows import snapshot
from flowrunner.history import flows

PO = app("purchase_orders")
WEEK = T0 + timedelta(days=7)


@pytest.fixture
def calls() -> Counter[str]:
    """How often each of the app's commands was called."""
    return Counter()


@pytest.fixture
def driver(any_engine: sa.Engine, calls: Counter[str]) -> testing.FlowDriver:
    """The purchase-order app with its own flows, every command counted when called, and
    order PO-1001 (25,000) stored without its flows started: the record a designer picks."""
    counted = {name: _counting(name, command, calls) for name, command in PO.COMMANDS.items()}
    driver = mount(any_engine, "purchase_orders", commands=counted)
    with driver.runner.engine.begin() as conn:
        conn.execute(sa.insert(PO.purchase_order).values(order(1001)))
    return driver


def _counting(
    name: str, command: Callable[[CommandContext], Any], calls: Counter[str]
) -> Callable[[CommandContext], Any]:
    def counted(ctx: CommandContext) -> Any:
        calls[name] += 1
        return command(ctx)

    return counted


def big_order(driver: testing.FlowDriver, *answers: Any, **options: Any) -> TryResult:
    """Try the saved flow 'Big orders' on PO-1001 from Monday 09:00."""
    return driver.runner.try_flow("Big orders", None, 1001, answers=answers, start=T0, **options)


def lines(result: TryResult, *whats: str) -> list[str]:
    """The path as 'step: sentence' lines (only the codes given, if any)."""
    return [
        f"{line.step or 'run'}: {line.sentence}"
        for line in result.lines
        if not whats or line.what in whats
    ]


def ran(result: TryResult) -> Counter[str]:
    return Counter(command.command for command in result.commands)


# -- the big order, as a designer tries it ------------------------------------------------


def test_nobody_answers_so_after_a_week_the_order_is_rejected_and_not_sent(
    driver: testing.FlowDriver, calls: Counter[str]
) -> None:
    result = big_order(driver, "nobody answers")

    assert result.path == (
        "Manager approval (10)",
        "Finance approval (10)",
        "Undecided after a week? (20)",
        "Reject it (30)",
        "Rejected? (40)",
        "Tell the requester it was rejected (50)",
        "Approved? (60)",
    )
    assert lines(result, "waiting", "timed_out", "condition", "set", "notice") == [
        "Manager approval: Asked manager@example.com for approval (must answer by Mon 9 Mar 09:00)",
        "Finance approval: Asked cfo@example.com and controller@example.com for approval "
        "(both must answer by Mon 9 Mar 09:00)",
        "Manager approval: Gave up after 1 week: 0 of 1 answered; "
        "no answer from manager@example.com",
        "Finance approval: Gave up after 1 week: 0 of 2 answered; "
        "no answer from cfo@example.com and controller@example.com",
        "Undecided after a week?: Went on: status is open",
        "Reject it: Set status to rejected",
        "Rejected?: Went on: status is rejected",
        "Tell the requester it was rejected: Would tell ann (requester): Your order was rejected.",
        "Approved?: Status is not approved: ended here",
    ]
    [rejected] = result.values
    assert (rejected.step, rejected.field, rejected.before, rejected.after, rejected.at) == (
        "Reject it",
        "status",
        "open",
        "rejected",
        WEEK,
    )
    [told] = result.notices
    assert (told.audience, told.recipient, told.title, told.at) == (
        "requester",
        "ann",
        "PO-1001: Your order was rejected.",
        WEEK,
    )
    # Asked, reminded daily for six days, the asks withdrawn when the waits gave up.
    assert ran(result) == {
        "request_approval": 2,
        "remind_approver": 12,
        "close_approval_requests": 2,
    }
    assert "send_purchase_order" not in ran(result)
    assert result.end.status == RunStatus.DONE
    assert result.end.at == WEEK
    assert result.end.sentence == (
        "Done on Mon 9 Mar 09:00: status is not approved, so the run ended at Approved?"
    )
    assert result.condition_held is True  # amount > 10000
    assert calls == {}


def test_the_manager_approves_after_a_day_and_finance_after_two_so_it_is_sent(
    driver: testing.FlowDriver, calls: Counter[str]
) -> None:
    result = big_order(
        driver,
        "manager approves after 1 day",
        "finance approves after 2 days",
        # What the app's own decide does once everyone approved: the try runs the flow,
        # not the app, so the designer says it.
        "status becomes approved after 2 days",
    )

    assert lines(result, "answered", "done", "condition", "notice", "command") == [
        "Manager approval: Would ask for Manager approval",
        "Finance approval: Would ask for Finance approval",
        "Manager approval: manager@example.com approved (1 of 1)",
        "Manager approval: Got the answers it needed (1 of 1)",
        "Finance approval: manager@example.com approved but was not asked: not counted",
        "Finance approval: cfo@example.com approved (1 of 2; waiting for controller@example.com)",
        "Finance approval: controller@example.com approved (2 of 2)",
        "Finance approval: Got the answers it needed (2 of 2)",
        "Undecided after a week?: Status is not open: went on at Rejected?",
        "Undecided after a week?: Finished Undecided after a week?",
        "Rejected?: Status is not rejected: went on at Approved?",
        "Rejected?: Finished Rejected?",
        "Approved?: Went on: status is approved",
        "Approved?: Finished Approved?",
        "Tell the requester: Would tell ann (requester): "
        "Your order was approved and goes to the supplier now.",
        "Tell the requester: Finished Tell the requester",
        "Send to supplier: Would send to supplier",
        "Send to supplier: Finished Send to supplier",
    ]
    assert result.values == ()  # the flow sets nothing; the approval was the app's
    assert [n.title for n in result.notices] == [
        "PO-1001: Your order was approved and goes to the supplier now."
    ]
    sent = [c for c in result.commands if c.command == "send_purchase_order"]
    assert [(c.step, c.at, c.sentence) for c in sent] == [
        ("Send to supplier", T0 + timedelta(days=2), "Would run send_purchase_order")
    ]
    asks = [c for c in result.commands if c.command == "request_approval"]
    assert [(c.inputs, c.answer) for c in asks] == [
        ({"approver": "manager@example.com"}, {"asked": ["manager@example.com"]}),
        (
            {"approver": "cfo@example.com, controller@example.com"},
            {"asked": ["cfo@example.com", "controller@example.com"]},
        ),
    ]
    assert result.end.status == RunStatus.DONE
    assert result.end.at == T0 + timedelta(days=2)
    assert calls == {}


def test_the_manager_rejecting_ends_both_waits_and_tells_the_requester(
    driver: testing.FlowDriver,
) -> None:
    result = big_order(driver, "manager rejects after 1 day", "status becomes rejected after 1 day")

    assert lines(result, "answered", "condition", "cancel") == [
        "Manager approval: manager@example.com rejected (1 of 1)",
        "Manager approval: Stopped waiting: manager@example.com rejected it",
        "Manager approval: Would withdraw the Manager approval requests",
        "Finance approval: manager@example.com rejected but was not asked: not counted",
        "Finance approval: Stopped waiting: manager@example.com rejected it",
        "Finance approval: Would withdraw the Finance approval requests",
        "Undecided after a week?: Status is not open: went on at Rejected?",
        "Rejected?: Went on: status is rejected",
        "Approved?: Status is not approved: ended here",
    ]
    assert [n.message for n in result.notices] == ["Your order was rejected."]
    assert "send_purchase_order" not in ran(result)


def test_typed_answers_try_exactly_as_the_lines_people_write(
    driver: testing.FlowDriver,
) -> None:
    written = big_order(
        driver,
        "manager@example.com approves after 1 day",
        "cfo@example.com approves after 2 days",
        "controller@example.com approves after 2 days",
        "status becomes approved after 2 days",
    )
    typed = big_order(
        driver,
        Answer(who="manager@example.com", says="approved", after="1 day"),
        Answer(who="cfo@example.com", says="approved", after=timedelta(days=2)),
        Answer(who="controller@example.com", says="approved", after="2 days"),
        Change(values={"status": "approved"}, after="48 hours"),
    )
    assert typed.to_dict() == written.to_dict()
    assert typed.end.status == RunStatus.DONE


def test_a_try_that_ends_first_says_where_the_run_waits(driver: testing.FlowDriver) -> None:
    result = big_order(driver, "cfo@example.com approves after 1 day", until="3 days")

    assert result.end.status == RunStatus.WAITING
    assert not result.end.ended
    assert result.end.at == T0 + timedelta(days=3)
    assert result.end.waiting == (
        "Waits at Manager approval (position 10) for the po decided event: 0 of 1 answered, "
        "waiting for manager@example.com; gives up at Mon 9 Mar 09:00",
        "Waits at Finance approval (position 10) for the po decided event: 1 of 2 answered, "
        "waiting for controller@example.com; gives up at Mon 9 Mar 09:00",
    )
    assert result.end.sentence.startswith("Still open when the try ends on Thu 5 Mar 09:00: waits")
    # Reminders on Tuesday, Wednesday and Thursday 09:00, the try's last moment.
    assert ran(result)["remind_approver"] == 6
    assert result.commands[-1].at == T0 + timedelta(days=3)


def test_a_command_the_script_refuses_fails_the_run_with_its_reason(
    driver: testing.FlowDriver, calls: Counter[str]
) -> None:
    result = driver.runner.try_flow(
        "Small orders",
        None,
        1001,
        answers=["send_purchase_order refuses because the supplier is closed"],
        start=T0,
    )

    [send] = [c for c in result.commands if c.command == "send_purchase_order"]
    assert send.refused == "the supplier is closed"
    assert send.sentence == "Would run send_purchase_order, refused: the supplier is closed"
    assert result.end.status == RunStatus.FAILED
    assert result.end.sentence == (
        "Failed on Mon 2 Mar 09:00: step 'Send to supplier' (send, position 2) failed: "
        "the command refused: the supplier is closed"
    )
    assert result.condition_held is False  # amount <= 10000 does not hold for 25,000
    typed = driver.runner.try_flow(
        "Small orders",
        None,
        1001,
        answers=[Refusal(command="send_purchase_order", reason="the supplier is closed")],
        start=T0,
    )
    assert typed.to_dict() == result.to_dict()
    assert calls == {}


def test_the_result_is_plain_json_for_the_console(driver: testing.FlowDriver) -> None:
    result = big_order(driver, "manager approves after 1 day", until="2 days")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["flow"] == "Big orders"
    assert data["record_id"] == "1001"
    assert data["started_at"] == "2026-03-02T09:00:00+00:00"
    assert data["end"]["status"] == "waiting"
    assert data["path"] == ["Manager approval (10)", "Finance approval (10)"]
    assert data["commands"][0] == {
        "at": "2026-03-02T09:00:00+00:00",
        "position": 10,
        "step": "Manager approval",
        "command": "request_approval",
        "inputs": {"approver": "manager@example.com"},
        "attempt": 1,
        "reminder": None,
        "cancel": False,
        "answer": {"asked": ["manager@example.com"]},
        "refused": None,
        "sentence": "Would run request_approval",
    }


# -- the same engine as a real run --------------------------------------------------------

# Each scenario as the real app lives it (the test driver's clock, the app's own decide)
# and as a designer writes it for a try.
SCENARIOS: dict[str, tuple[list[tuple[str, str, str]], list[str]]] = {
    "nobody answers": ([], []),
    "approved": (
        [
            ("1 day", "decide", "manager@example.com approved"),
            ("1 day", "decide", "cfo@example.com approved"),
            ("0 days", "decide", "controller@example.com approved"),
        ],
        [
            "manager approves after 1 day",
            "finance approves after 2 days",
            "status becomes approved after 2 days",
        ],
    ),
    "rejected": (
        [("1 day", "decide", "controller@example.com rejected")],
        ["controller@example.com rejects after 1 day", "status becomes rejected after 1 day"],
    ),
    "withdrawn": (
        [("1 day 2 hours", "update", "withdrawn")],
        ["status becomes withdrawn after 1 day 2 hours"],
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_try_takes_the_path_a_real_run_takes(driver: testing.FlowDriver, scenario: str) -> None:
    lived, written = SCENARIOS[scenario]
    tried = driver.runner.try_flow("Big orders", None, 1001, answers=written, start=T0)

    driver.create({**order(1), "number": "PO-1001"})  # as PO-1001, which the try took
    for after, action, what in lived:
        driver.advance(after)
        if action == "update":
            driver.update(1, status=what)
        else:
            who, decision = what.split()
            decide(driver, 1, who, decision)
    driver.advance("10 days")
    [run] = driver.runs(1)
    snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
    real = [
        (
            line.due_at or line.at,
            line.position,
            line.what,
            flows.sentence(line, snap, tried=True),
        )
        for line in driver.history(run.id)
    ]
    assert [(t.at, t.position, t.what, t.sentence) for t in tried.lines] == real
    assert [(n.recipient, n.title, n.message) for n in tried.notices] == [
        (n.recipient, n.title, n.message) for n in driver.notices(run.id)
    ]
    assert tried.end.status == run.status


# -- an edited flow, before it is saved ---------------------------------------------------


def edited_steps(**changes: Any) -> list[dict[str, Any]]:
    """The big-order flow's approval reshaped as a designer edits it: one approver, a
    two-day give-up, then the order is marked and the requester told."""
    approval = {
        "position": 10,
        "kind": "approval",
        "title": "Manager approval",
        "approver": "manager@example.com",
        "duration": "2 days",
        "condition": "event.decision = rejected",
        **changes,
    }
    return [
        approval,
        {"position": 20, "kind": "set", "title": "Mark it", "field": "priority", "value": "high"},
        {
            "position": 30,
            "kind": "notify",
            "title": "Tell",
            "audience": "requester",
            "message": "{number} waits for its manager.",
        },
    ]


def test_an_edited_flow_is_tried_as_edited_and_is_not_saved(
    driver: testing.FlowDriver, any_engine: sa.Engine
) -> None:
    before = everything(any_engine)
    flow = {"name": "Quick big orders", "start": "created", "condition": "amount > 10000"}
    result = driver.runner.try_flow(flow, edited_steps(), 1001, start=T0)

    assert lines(result, "timed_out", "set", "notice") == [
        "Manager approval: Gave up after 2 days: 0 of 1 answered; "
        "no answer from manager@example.com",
        "Mark it: Set priority to high",
        "Tell: Would tell ann (requester): PO-1001 waits for its manager.",
    ]
    assert [(v.field, v.before, v.after) for v in result.values] == [("priority", "normal", "high")]
    assert result.flow == "Quick big orders"
    assert everything(any_engine) == before


def test_an_edited_flow_with_a_bad_duration_is_refused_with_every_problem_and_nothing_runs(
    driver: testing.FlowDriver, any_engine: sa.Engine, calls: Counter[str]
) -> None:
    before = everything(any_engine)
    steps = edited_steps(duration="2 dayz", remind="1 dya")
    flow = {"name": "Quick big orders", "start": "created"}
    with pytest.raises(RowInvalid) as refused:
        driver.runner.try_flow(flow, steps, 1001, answers=["manager approves"], start=T0)

    problems = [(e.field, e.code) for e in refused.value.errors]
    assert problems == [("duration", "duration_invalid"), ("remind", "duration_invalid")]
    assert "'2 dayz' is not a duration" in str(refused.value)
    assert "step 'Manager approval' (approval, position 10)" in str(refused.value)
    assert refused.value.status_code == 422
    assert calls == {}
    assert everything(any_engine) == before


def test_an_edited_flow_named_as_another_flow_is_refused_as_a_save_would(
    driver: testing.FlowDriver,
) -> None:
    with pytest.raises(RowInvalid) as refused:
        driver.runner.try_flow({"name": "big ORDERS", "start": "created"}, [], 1001, start=T0)
    assert [(e.field, e.code) for e in refused.value.errors] == [("name", "name_taken")]


def test_an_edited_saved_flow_keeps_its_name(driver: testing.FlowDriver) -> None:
    with driver.runner.engine.connect() as conn:
        flow_id = conn.execute(
            sa.select(PO.po_flow.c.id).where(PO.po_flow.c.name == "Big orders")
        ).scalar_one()
    flow = {"id": flow_id, "name": "Big orders", "start": "created"}
    result = driver.runner.try_flow(flow, edited_steps(), 1001, start=T0)
    assert result.end.status == RunStatus.DONE


def test_a_saved_flow_whose_row_broke_fails_as_it_starts(driver: testing.FlowDriver) -> None:
    with driver.runner.engine.begin() as conn:
        flow_id = conn.execute(
            sa.select(PO.po_flow.c.id).where(PO.po_flow.c.name == "Small orders")
        ).scalar_one()
        # A row written around validation: a kind the binding does not have.
        conn.execute(
            sa.insert(PO.po_flow_step).values(
                flow_id=flow_id, position=3, kind="archive", title="Archive it"
            )
        )
    result = driver.runner.try_flow("Small orders", None, 1001, start=T0)
    assert result.end.status == RunStatus.FAILED
    assert result.end.sentence.startswith(
        "It would fail as it starts: flow 'Small orders', step 'Archive it' (archive, "
        "position 3): kind 'archive' is not in the binding"
    )
    assert result.lines == () and result.commands == ()


# -- nothing leaves the try ----------------------------------------------------------------


def everything(engine: sa.Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows (read by reflection, in a stable order); on SQLite the rowid
    counters too, on PostgreSQL every sequence's position."""
    metadata = sa.MetaData()
    metadata.reflect(engine)
    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for name, table in sorted(metadata.tables.items()):
            rows = conn.execute(sa.select(table)).all()
            found[name] = sorted((tuple(row) for row in rows), key=repr)
        if engine.dialect.name == "sqlite":
            # Kept only where a table has AUTOINCREMENT; a rowid is otherwise its max + 1.
            kept = sa.text("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'")
            if conn.execute(kept).scalar_one():
                counters = conn.execute(sa.text("SELECT name, seq FROM sqlite_sequence"))
                found["sqlite_sequence"] = sorted(tuple(row) for row in counters)
        else:
            names = conn.execute(
                sa.text(
                    "SELECT sequence_name FROM information_schema.sequences "
                    "WHERE sequence_schema = current_schema()"
                )
            ).scalars()
            found["sequences"] = [
                (name, *conn.execute(sa.text(f'SELECT last_value, is_called FROM "{name}"')).one())
                for name in sorted(names)
            ]
    return found


@pytest.fixture
def busy(driver: testing.FlowDriver) -> testing.FlowDriver:
    """The purchase-order app after some real work: orders approved, waiting, rejected,
    with their runs, history, events, notices, requests and reminders stored."""
    for n in (1, 2, 3):
        driver.create(order(n))
    driver.advance("1 day")
    with driver.runner.engine.begin() as conn:
        PO.decide(driver.runner, conn, 1, "manager@example.com", "approved")
        PO.decide(driver.runner, conn, 2, "controller@example.com", "rejected")
    driver.run_until_idle()
    return driver


def test_every_table_is_exactly_as_it_was_after_tries(
    busy: testing.FlowDriver, any_engine: sa.Engine, calls: Counter[str]
) -> None:
    before = everything(any_engine)
    assert before["flowrunner_runs"] and before["flowrunner_notices"]
    assert before["approval_request"] and before["flowrunner_events"]
    calls.clear()

    rejected = big_order(busy, "nobody answers")
    approved = big_order(
        busy,
        "manager approves after 1 day",
        "finance approves after 2 days",
        "status becomes approved after 2 days",
        "priority becomes high after 1 day",
    )
    # Order 3's own run waits at its approvals: the try of it sets and tells all the same.
    waiting = busy.runner.try_flow("Big orders", None, 3, start=T0, until="8 days")
    small = busy.runner.try_flow("Small orders", None, 3, start=T0)

    # Inside each try the record was written (its conditions read it) ...
    assert [v.after for v in rejected.values] == ["rejected"]
    assert [v.after for v in waiting.values] == ["rejected"]
    assert [v.after for v in small.values] == ["approved"]
    assert ran(approved)["send_purchase_order"] == 1
    # ... and nothing of it is left: not the record, not a run, a notice or a sequence.
    assert everything(any_engine) == before
    assert stored(busy, 1001)["status"] == "open"
    assert stored(busy, 3)["status"] == "open"
    assert calls == {}


LINES = st.one_of(
    st.builds(
        "{} {}{}".format,
        st.sampled_from(["manager", "finance", "cfo@example.com", "controller@example.com", "ol"]),
        st.sampled_from(["approves", "rejects", "answers"]),
        st.sampled_from(["", " after 1 hour", " after 1 day", " after 3 days", " after 8 days"]),
    ),
    st.builds(
        "{} becomes {} after {} hours".format,
        st.sampled_from(["status", "priority"]),
        st.sampled_from(["approved", "rejected", "withdrawn", "open", "high", "hold"]),
        st.integers(0, 240),
    ),
    st.sampled_from(["send_purchase_order refuses", "request_approval refuses", "nobody answers"]),
)


@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(LINES, max_size=6), days=st.integers(1, 20))
def test_any_script_leaves_every_table_as_it_was_and_calls_no_command(
    busy: testing.FlowDriver,
    any_engine: sa.Engine,
    calls: Counter[str],
    script: list[str],
    days: int,
) -> None:
    calls.clear()
    before = everything(any_engine)
    try:
        result = big_order(busy, *script, until=f"{days} days")
    except RowInvalid as refused:
        # Only what comes after the try ends is refused; nothing ran.
        assert {e.code for e in refused.errors} == {"answer_too_late"}
        assert everything(any_engine) == before
        return
    assert everything(any_engine) == before
    assert calls == {}
    moments = [line.at for line in result.lines]
    assert moments == sorted(moments)
    assert all(T0 <= at <= T0 + timedelta(days=days) for at in moments)
    assert result.end.ended or result.end.at == T0 + timedelta(days=days)


def test_a_try_that_breaks_half_way_leaves_nothing_either(
    busy: testing.FlowDriver, any_engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = everything(any_engine)
    from flowrunner.flows.trial import dry_run

    def broken(self: Any, effect: Any, at: Any) -> None:
        raise RuntimeError("the notice could not be shown")

    monkeypatch.setattr(dry_run._Try, "_notice", broken)
    with pytest.raises(RuntimeError):
        big_order(busy, "nobody answers")  # fails after its set step wrote the record
    assert everything(any_engine) == before


def test_the_counted_commands_are_called_by_a_real_run(
    driver: testing.FlowDriver, calls: Counter[str]
) -> None:
    # The counter the tries above rely on sees what a real run calls.
    driver.create({**order(7), "amount": 500})
    assert calls == {"send_purchase_order": 1}


# -- bad input -------------------------------------------------------------------------------


def test_a_script_with_mistakes_is_refused_with_every_one(driver: testing.FlowDriver) -> None:
    with pytest.raises(RowInvalid) as refused:
        big_order(
            driver,
            "manager approves after 2 dys",
            "manager approves after 40 days",
            "stauts becomes approved",
            "id becomes 7",
            "send_purchase_orders refuses",
            "po.decidd arrives",
            "the manager says yes",
        )
    assert [(e.field, e.code) for e in refused.value.errors] == [
        ("answers.0", "duration_invalid"),
        ("answers.1", "answer_too_late"),
        ("answers.2", "column_unknown"),
        ("answers.3", "column_not_changeable"),
        ("answers.4", "command_unknown"),
        ("answers.5", "event_unknown"),
        ("answers.6", "answer_unreadable"),
    ]
    messages = [e.message for e in refused.value.errors]
    assert messages[2] == "purchase_order has no column 'stauts' — did you mean 'status'?"
    assert "did you mean 'send_purchase_order'?" in messages[4]
    assert messages[5] == (
        "there is no event 'po.decidd' — did you mean 'po.decided'? (events: po.decided)"
    )


@pytest.mark.parametrize(
    ("options", "field", "code"),
    [
        ({"until": "0 days"}, "until", "duration_invalid"),
        ({"until": "forever"}, "until", "duration_invalid"),
        (
            {"answers": ["status becomes 'a status far too long for its column x'"]},
            "answers.0",
            "value_too_long",
        ),
        ({"answers": [Change(values={"amount": "lots"})]}, "answers.0", "value_invalid"),
    ],
)
def test_bad_options_are_refused_on_their_field(
    driver: testing.FlowDriver, options: dict[str, Any], field: str, code: str
) -> None:
    with pytest.raises(RowInvalid) as refused:
        driver.runner.try_flow("Big orders", None, 1001, start=T0, **options)
    assert [(e.field, e.code) for e in refused.value.errors] == [(field, code)]


def test_an_unknown_record_or_flow_is_refused_as_unknown(driver: testing.FlowDriver) -> None:
    with pytest.raises(OperatorError) as no_record:
        driver.runner.try_flow("Big orders", None, 404, start=T0)
    assert (no_record.value.status_code, no_record.value.code) == (404, "record_unknown")
    assert str(no_record.value) == "there is no purchase_order 404"
    with pytest.raises(OperatorError) as no_flow:
        driver.runner.try_flow("Huge orders", None, 1001, start=T0)
    assert (no_flow.value.status_code, no_flow.value.code) == (404, "flow_unknown")
    with pytest.raises(OperatorError) as no_key:
        driver.runner.try_flow("Big orders", None, "PO-1001", start=T0)
    assert no_key.value.code == "record_unknown"


# -- other kinds of steps and apps -----------------------------------------------------------


def test_an_event_that_arrives_ends_a_wait_for_it(any_engine: sa.Engine) -> None:
    tickets = mount(any_engine, "tickets")
    with tickets.runner.engine.begin() as conn:
        conn.execute(
            sa.insert(app("tickets").ticket).values(
                id=1, title="Printer", requester_id="ann", status="waiting"
            )
        )
    result = tickets.runner.try_flow(
        "Follow up",
        None,
        1,
        answers="ticket.replied arrives after 1 day\nstatus becomes open after 1 day",
        start=T0,
    )
    assert lines(result, "waiting", "arrived", "condition") == [
        "Requester replies: Waiting for the ticket replied event until Thu 5 Mar 09:00",
        "Requester replies: The ticket replied event arrived",
        "Still waiting?: Status is not waiting: ended here",
    ]
    assert result.end.at == T0 + timedelta(days=1)


def test_a_command_that_would_write_the_record_writes_nothing_in_a_try(
    any_engine: sa.Engine,
) -> None:
    tickets = mount(any_engine, "tickets")
    with tickets.runner.engine.begin() as conn:
        conn.execute(
            sa.insert(app("tickets").ticket).values(id=1, title="Printer", requester_id="ann")
        )
    result = tickets.runner.try_flow("Reassign to triage", None, 1, start=T0)
    [assign] = result.commands
    assert (assign.command, dict(assign.inputs)) == ("assign_ticket", {"assign_to": "triage"})
    # The command did not run, so the ticket has no assignee to tell.
    [notice] = result.notices
    assert notice.problem == "the record's assignee is empty"
    assert lines(result, "undeliverable") == [
        "Tell triage: Could not tell the assignee: the record's assignee is empty"
    ]


def test_a_tenant_tries_its_own_flows_on_its_own_records(any_engine: sa.Engine) -> None:
    runner = desk.runner(any_engine)
    with any_engine.begin() as conn:
        conn.execute(sa.insert(desk.ticket).values(id=1, tenant_id="acme", status="new"))
        conn.execute(sa.insert(desk.ticket).values(id=2, tenant_id="globex", status="new"))
        runner.save_flow(conn, {"name": "Triage", "start": "created", "tenant_id": "acme"})
    steps = [
        {"position": 1, "kind": "set", "field": "status", "value": "seen"},
        {"position": 2, "kind": "waitFor", "event": "desk.replied"},
        {"position": 3, "kind": "set", "field": "priority", "value": "replied"},
    ]
    flow = {"name": "Triage", "start": "created"}
    with pytest.raises(RowInvalid) as taken:
        runner.try_flow(flow, steps, 1, tenant="acme", start=T0)
    assert [e.code for e in taken.value.errors] == ["name_taken"]
    flow = {"name": "Triage again", "start": "created"}
    result = runner.try_flow(
        flow, steps, 1, tenant="acme", answers=["desk.replied arrives after 1 hour"], start=T0
    )
    assert [(v.field, v.after) for v in result.values] == [
        ("status", "seen"),
        ("priority", "replied"),
    ]
    assert result.tenant == "acme"
    with pytest.raises(OperatorError) as other:
        runner.try_flow(flow, steps, 2, tenant="acme", start=T0)
    assert other.value.status_code == 404
    with pytest.raises(OperatorError):
        runner.try_flow(flow, steps, 1, start=T0)  # which tenant's?


def test_a_refused_principal_is_shown_refused(any_engine: sa.Engine) -> None:
    granted = {"send_purchase_order": True}

    def authorize(principal: str, command: str) -> bool:
        return granted.get(command, True)

    driver = mount(any_engine, "purchase_orders", authorize=authorize)
    with driver.runner.engine.begin() as conn:
        conn.execute(sa.insert(PO.purchase_order).values(order(1001)))
    granted["send_purchase_order"] = False  # revoked after the runner was mounted
    result = driver.runner.try_flow("Small orders", None, 1001, start=T0)
    [send] = [c for c in result.commands if c.command == "send_purchase_order"]
    assert send.refused == (
        "principal 'automation' is not allowed to run command 'send_purchase_order'"
    )
    assert result.end.status == RunStatus.FAILED
