"""The Operations room's questions, asked of a desk whose runs are in every state: runs
across records by status (stuck too), flow, record and age, a page at a time, the counts
of its header, the journal and the outbox. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
import room
import sqlalchemy as sa
from running import T0, mount

from flowrunner import OperatorError, RowInvalid, testing
from flowrunner.engine import operations_room
from flowrunner.history import flows
from flowrunner.runner import FlowRunner
from flowrunner.store import dialects
from flowrunner.store import operations as ops


@pytest.fixture
def desk(any_engine: sa.Engine) -> testing.FlowDriver:
    return room.desk(any_engine)


def ids(page: ops.Page[ops.RunRow]) -> list[int]:
    return [run.id for run in page]


def test_every_run_newest_first_each_open_one_saying_where_it_waits(
    desk: testing.FlowDriver,
) -> None:
    page = desk.runner.list_runs()
    assert ids(page) == [5, 4, 3, 2, 1] and page.next_before is None
    assert page.stuck == {5}
    assert [(run.record_id, run.flow_name, run.status) for run in page] == [
        ("5", "Listen", "running"),
        ("4", "Listen", "cancelled"),
        ("3", "Hand over", "failed"),
        ("2", "Listen", "waiting"),
        ("1", "Quick", "done"),
    ]
    waiting = {run.id: run.waiting for run in page}
    assert [flows.waiting_sentence(w) for w in waiting[2]] == [
        "Waits at Reply (position 2) for the ticket replied event; gives up at Wed 7 Apr 09:00"
    ]
    assert waiting[1] == waiting[3] == waiting[4] == ()


@pytest.mark.parametrize(
    ("status", "found"),
    [
        ("running", [5]),
        ("waiting", [2]),
        ("done", [1]),
        ("failed", [3]),
        ("cancelled", [4]),
        ("stuck", [5]),
        (" FAILED ", [3]),
        (["failed", "stuck"], [5, 3]),
        (["waiting", "done", "waiting"], [2, 1]),
    ],
)
def test_each_status_finds_its_runs(
    desk: testing.FlowDriver, status: str | list[str], found: list[int]
) -> None:
    assert ids(desk.runner.list_runs(status=status)) == found


def test_the_header_counts_every_status_and_the_stuck_runs(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    assert runner.count_runs() == {
        "running": 1,
        "waiting": 1,
        "done": 1,
        "failed": 1,
        "cancelled": 1,
        "stuck": 1,
    }
    # The other filters apply to the counts too.
    assert runner.count_runs(flow="listen") == {
        "running": 1,
        "waiting": 1,
        "done": 0,
        "failed": 0,
        "cancelled": 1,
        "stuck": 1,
    }


def test_a_run_no_worker_took_for_a_quarter_of_an_hour_is_stuck_and_a_redrive_frees_it(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=room.FLOWS)
    driver.create(room.ticket(1, "listen"), run=False)
    runner = driver.runner
    driver.advance(timedelta(minutes=14), run=False)
    assert ids(runner.list_runs(status="stuck")) == []
    assert ids(runner.list_runs(status="stuck", stuck_after="10 minutes")) == [1]
    driver.advance(timedelta(minutes=2), run=False)
    assert ids(runner.list_runs(status="stuck")) == [1]
    assert operations_room.is_stuck(runner.mounted, runner.get_run(1))
    assert not operations_room.is_stuck(runner.mounted, runner.get_run(1), stuck_after="1 hour")

    runner.redrive(1, operator="olga", reason="no worker was serving")
    assert ids(runner.list_runs(status="stuck")) == []
    assert runner.history(1)[-1].sentence == (
        "olga redrove the run: it is due again now (no worker was serving)"
    )
    driver.run_until_idle()
    assert [run.status for run in runner.list_runs()] == ["waiting"]


def test_a_worker_that_died_holding_its_run_leaves_it_stuck_one_still_working_does_not(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "tickets", flows=room.FLOWS)
    for n in (1, 2, 3):
        driver.create(room.ticket(n, "listen"), run=False)
    runner = driver.runner
    ttl = timedelta(seconds=30)
    claims = ops.claim_due(
        runner.engine, now=driver.now, owner="worker:gone", limit=3, ttl=ttl, resource="ticket"
    )
    assert sorted(claim.run_id for claim in claims) == [1, 2, 3]
    # Run 3 has no due row left: its lease alone tells that its worker is gone.
    with dialects.begin(runner.engine) as conn:
        ops.set_due(conn, run_id=3, due_at=None)
    # Run 2's worker is alive: its heartbeat keeps renewing the lease while a command runs.
    [working] = [claim for claim in claims if claim.run_id == 2]
    with dialects.begin(runner.engine) as conn:
        assert ops.refresh_lease(
            conn,
            name=ops.run_lease(2),
            owner="worker:gone",
            epoch=working.epoch,
            now=driver.now,
            ttl=timedelta(hours=1),
        )
    driver.advance(timedelta(minutes=10), run=False)
    assert ids(runner.list_runs(status="stuck")) == []
    driver.advance(timedelta(minutes=10), run=False)
    # Runs 1 and 3's lease ran out 19.5 minutes ago and nobody took them over; run 2 is
    # held.
    assert ids(runner.list_runs(status="stuck")) == [3, 1]
    assert runner.count_runs()["stuck"] == 2


def test_a_flow_is_named_in_any_case_or_by_id_also_after_it_was_renamed_or_deleted(
    desk: testing.FlowDriver,
) -> None:
    runner = desk.runner
    assert ids(runner.list_runs(flow="LISTEN")) == [5, 4, 2]
    assert ids(runner.list_runs(flow=" hand over ")) == [3]
    listen = runs_flow_id(runner, 2)
    assert ids(runner.list_runs(flow=listen)) == [5, 4, 2]
    assert ids(runner.list_runs(flow=int(listen))) == [5, 4, 2]

    with runner.engine.begin() as conn:
        runner.save_flow(conn, {"id": int(listen), "name": "Await a reply", "start": "created"})
        runner.delete_flow(conn, int(runs_flow_id(runner, 1)))
    assert ids(runner.list_runs(flow="await a REPLY")) == [5, 4, 2]  # the flow as it is now
    assert ids(runner.list_runs(flow="listen")) == [5, 4, 2]  # the name its runs started by
    assert ids(runner.list_runs(flow="Quick")) == [1]  # a deleted flow's runs

    with pytest.raises(RowInvalid) as refused:
        runner.list_runs(flow="Hand ovr")
    [problem] = refused.value.errors
    assert (problem.field, problem.code) == ("flow", "flow_unknown")
    assert problem.message == "there is no flow 'Hand ovr' — did you mean 'Hand over'?"


def runs_flow_id(runner: FlowRunner, run_id: int) -> str:
    return runner.get_run(run_id).flow_id


def test_a_records_runs_and_runs_by_age(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    assert desk.now == T0 + timedelta(days=4, hours=1)
    assert ids(runner.list_runs(record=3)) == [3]
    assert ids(runner.list_runs(record="3")) == [3]
    assert ids(runner.list_runs(record=42)) == []
    # Now is Fri 6 Mar 10:00; the runs started at 09:00 from Mon 2 Mar to Fri 6 Mar.
    assert ids(runner.list_runs(older_than="2 days")) == [3, 2, 1]
    assert ids(runner.list_runs(older_than="2d 2h")) == [2, 1]
    assert ids(runner.list_runs(newer_than="1 day 2 hours")) == [5, 4]
    assert ids(runner.list_runs(older_than=timedelta(days=3))) == [2, 1]
    assert ids(runner.list_runs(started_after="2026-03-03", started_before="2026-03-05")) == [3, 2]
    assert ids(runner.list_runs(started_after="2026-03-04T09:00:00+00:00")) == [5, 4, 3]
    assert ids(runner.list_runs(status="waiting", older_than="1d")) == [2]


def test_what_cannot_be_used_is_refused_naming_every_field(desk: testing.FlowDriver) -> None:
    with pytest.raises(RowInvalid) as refused:
        desk.runner.list_runs(
            status="stuk",
            record="x",
            older_than="2 dayz",
            started_after="yesterday",
            limit=0,
        )
    found = {error.field: (error.code, error.message) for error in refused.value.errors}
    assert found["status"] == (
        "status_unknown",
        "there is no status 'stuk' — did you mean 'stuck'? "
        "(statuses: running, waiting, done, failed, cancelled, stuck)",
    )
    assert found["record"][0] == "record_invalid" and "whole number" in found["record"][1]
    assert found["older_than"] == (
        "duration_invalid",
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
    )
    assert found["started_after"][0] == "moment_invalid"
    with pytest.raises(RowInvalid) as refused:
        desk.runner.list_runs(limit=501, before_id="x")
    assert {(e.field, e.code) for e in refused.value.errors} == {
        ("limit", "limit_invalid"),
        ("before_id", "id_invalid"),
    }


def test_pages_follow_one_another_without_a_gap_or_a_repeat(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    for limit in range(1, 7):
        seen: list[int] = []
        before = None
        while True:
            page = runner.list_runs(limit=limit, before_id=before)
            assert len(page) <= limit
            seen += ids(page)
            if page.next_before is None:
                break
            before = page.next_before
            assert before == seen[-1]
        assert seen == [5, 4, 3, 2, 1], limit

    first = runner.list_runs(limit=2)
    desk.create(room.ticket(6, "open"))  # a run started meanwhile is not on a later page
    second = runner.list_runs(limit=2, before_id=first.next_before)
    assert (ids(first), ids(second)) == ([5, 4], [3, 2])
    assert ids(runner.list_runs(limit=2)) == [6, 5]


def test_a_run_shows_its_failure_envelope(desk: testing.FlowDriver) -> None:
    run = desk.runner.get_run("3")
    assert run.status == "failed" and run.error is not None
    assert run.error["code"] == "command.refused"
    assert run.error["message"] == (
        "step 'Hand over' (assign, position 2) failed: the command refused: the desk said no"
    )
    with pytest.raises(OperatorError) as unknown:
        desk.runner.get_run(99)
    assert (unknown.value.status_code, unknown.value.code) == (404, "run_unknown")


def test_the_outbox_by_state_newest_first(desk: testing.FlowDriver) -> None:
    runner = desk.runner

    def notices(state: str | None) -> list[tuple[int, str]]:
        return [(n.run_id, n.state) for n in runner.outbox(state)]

    assert notices(None) == [
        (4, "pending"),
        (3, "undeliverable"),
        (2, "pending"),
        (1, "delivered"),
    ]
    assert notices("pending") == [(4, "pending"), (2, "pending")]
    assert notices("Delivered") == [(1, "delivered")]
    [undeliverable] = runner.outbox("undeliverable")
    assert (undeliverable.problem, undeliverable.deliverable) == (
        "the record's assignee is empty",
        False,
    )
    page = runner.outbox(limit=3)
    assert [n.run_id for n in page] == [4, 3, 2]
    assert [n.run_id for n in runner.outbox(before_id=page.next_before)] == [1]
    assert [n.run_id for n in runner.outbox(run_id=2)] == [2]
    # The console's words for them read too: a notice waits, or was sent.
    assert [n.run_id for n in runner.outbox("waiting")] == [4, 2]
    assert [n.run_id for n in runner.outbox("sent")] == [1]
    with pytest.raises(
        RowInvalid, match="a notice is pending, delivered, undeliverable, failed, not 'lost'"
    ):
        runner.outbox("lost")


def test_the_journal_newest_first_in_sentences(desk: testing.FlowDriver) -> None:
    runner = desk.runner
    runner.act("restart", [3], operator="bob", reason="desk reopened")
    runner.act("redrive", [5], operator="olga")
    entries = runner.journal()
    assert [operations_room.journal_sentence(e) for e in entries] == [
        "olga redrove run 5 (ticket 5)",
        "bob restarted run 3 (ticket 3) as run 6: desk reopened",
        "olga cancelled run 4 (ticket 4): duplicate",
    ]
    assert [e.action for e in runner.journal(operator="olga")] == ["redrive", "cancel"]
    assert [e.run_id for e in runner.journal(action="restart")] == [3]
    assert [e.run_id for e in runner.journal(run_id=4)] == [4]
    first = runner.journal(limit=2)
    assert [e.run_id for e in runner.journal(before_id=first.next_before)] == [4]


def test_a_forms_empty_fields_ask_for_nothing(desk: testing.FlowDriver) -> None:
    everything = ids(desk.runner.list_runs())
    blank = desk.runner.list_runs(
        status=["", " "], flow="", record=" ", older_than="", started_after="", stuck_after=""
    )
    assert ids(blank) == everything == [5, 4, 3, 2, 1]


def test_where_each_run_stands_in_words(desk: testing.FlowDriver) -> None:
    said = {run.id: operations_room.where_it_stands(run) for run in desk.runner.list_runs()}
    assert said == {
        5: "due to start",
        4: "cancelled by olga: duplicate",
        3: "Hand over failed: the command refused: the desk said no",
        2: "Waits at Reply (position 2) for the ticket replied event; gives up at Wed 7 Apr 09:00",
        1: "the flow ended after its last step",
    }
    [restarted] = desk.runner.act("restart", [3], operator="bob")
    assert restarted.done
    assert operations_room.where_it_stands(desk.runner.get_run(3)) == "restarted as run 6"
    assert [operations_room.age(timedelta(seconds=s)) for s in (0, 59, 61, 3600, 3660)] == [
        "0s",
        "59s",
        "1m",
        "1h",
        "1h 1m",
    ]
    assert operations_room.age(timedelta(days=2, hours=3, minutes=4)) == "2d 3h"
