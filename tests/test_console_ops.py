"""The Operations room over HTTP, on a desk whose runs are in every state (``room.desk``):
runs across records filtered by status (stuck too), flow, record and age, a page at a
time; a run's page with its failure envelope; cancel, retry, redrive and restart, one or
many, each asked for confirmation and each refused with the reason where it does not
apply; the journal with each operator's name; the notices outbox. On SQLite and
PostgreSQL."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2
import pytest
import room
import sqlalchemy as sa
from console import OPERATOR, Session, console, errors_beside, refusal, rows, said, text
from running import mount, order

from flowrunner import testing


@pytest.fixture
def desk(any_engine: sa.Engine) -> testing.FlowDriver:
    return room.desk(any_engine)


@pytest.fixture
def ui(desk: testing.FlowDriver) -> Session:
    return console(desk, OPERATOR)


def outcomes(page: str) -> list[str]:
    return [text(m) for m in re.findall(r'<li data-run="\d+" class="\w+">(.*?)</li>', page, re.S)]


@pytest.mark.parametrize(
    ("asked", "shown"),
    [
        ({}, ["5", "4", "3", "2", "1"]),
        ({"status": "failed"}, ["3"]),
        ({"status": "waiting"}, ["2"]),
        ({"status": "stuck"}, ["5"]),
        ({"flow": "LISTEN"}, ["5", "4", "2"]),
        ({"record": "3"}, ["3"]),
        ({"older_than": "2 days"}, ["3", "2", "1"]),
        ({"newer_than": "1 day", "flow": "listen"}, ["5"]),
    ],
)
def test_runs_across_records_by_status_flow_record_and_age(
    ui: Session, asked: dict[str, str], shown: list[str]
) -> None:
    page = ui.get("/ops", **asked)
    assert page.status_code == 200
    assert rows(page.text, "run") == shown


def test_the_room_counts_each_status_and_says_where_each_open_run_stands(ui: Session) -> None:
    page = ui.get("/ops").text
    counts = re.search(r'<p class="counts">(.*?)</p>', page, re.S)
    assert counts is not None
    assert text(counts.group(1)) == "running 1 waiting 1 done 1 failed 1 cancelled 1 stuck 1"
    line = re.search(r'<tr data-run="2" data-status="waiting">(.*?)</tr>', page, re.S)
    assert line is not None
    assert "Waits at Reply (position 2) for the ticket replied event" in text(line.group(1))
    failed = re.search(r'<tr data-run="3" data-status="failed">(.*?)</tr>', page, re.S)
    assert failed is not None and "the desk said no" in text(failed.group(1))
    stuck = re.search(r'<tr data-run="5" data-status="running">(.*?)</tr>', page, re.S)
    assert stuck is not None
    assert "running stuck due to start" in text(stuck.group(1))


def test_a_filter_that_cannot_be_used_says_why_beside_it(ui: Session) -> None:
    page = ui.get("/ops", status="faild", flow="Lisen", older_than="2 dayz")
    assert page.status_code == 422
    assert "did you mean 'failed'?" in text(page.text)
    assert errors_beside(page.text, "filter", "flow") == [
        "there is no flow 'Lisen' — did you mean 'Listen'?"
    ]
    assert errors_beside(page.text, "filter", "older_than") == [
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"
    ]
    assert rows(page.text, "run") == []


def test_the_room_goes_a_page_at_a_time(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "tickets", flows=room.FLOWS)
    for n in range(1, 31):
        driver.create(room.ticket(n, "open"))
    ui = console(driver, OPERATOR)
    first = ui.get("/ops", status="done")
    assert rows(first.text, "run") == [str(n) for n in range(30, 5, -1)]
    older = re.search(r'<a href="(/ops\?[^"]+)">Older runs', first.text)
    assert older is not None and "before=6" in older.group(1)
    second = ui.client.get(older.group(1).replace("&amp;", "&"))
    assert rows(second.text, "run") == ["5", "4", "3", "2", "1"]
    assert "Older runs" not in second.text and "Newest" in second.text


def test_a_failed_runs_page_shows_its_failure_envelope(ui: Session) -> None:
    page = ui.get("/run/3")
    assert page.status_code == 200
    envelope = re.search(r'<div class="envelope"[^>]*>(.*?)</div>\s*<details', page.text, re.S)
    assert envelope is not None
    said_there = text(envelope.group(1))
    assert said_there.startswith(
        "code command.refused message Hand over failed: the command refused: the desk said no"
    )
    assert "cause code command_refused message the desk said no kind" in said_there
    assert said_there.endswith("position 2 step_id 5")  # the rest by name
    # Whether a retry can help is said once, above the envelope, as its cause says it.
    assert "retryable" not in said_there
    retrying = re.findall(r'<p class="retrying">(.*?)</p>', page.text)
    assert retrying == [
        "Retrying will not help until what it failed on is put right: the desk said no."
    ]
    reason = re.findall(r'<p class="reason">(.*?)</p>', page.text)
    assert reason == ["Hand over failed: the command refused: the desk said no"]
    assert "Retry…" in page.text and "Restart…" in page.text


def test_a_failed_run_retried_after_confirmation_moves_on(any_engine: sa.Engine) -> None:
    driver = mount(any_engine, "purchase_orders")
    on_hold = {"id": 9, "number": "PO-9", "requester_id": "ann", "amount": 50, "priority": "hold"}
    driver.create(on_hold)
    [run] = driver.runs(9)
    assert run.status == "failed"
    ui = console(driver, OPERATOR)
    asked = ui.post(f"/run/{run.id}/retry")
    assert asked.status_code == 200
    assert "The failed step runs again" in text(asked.text)
    assert driver.runs(9)[0].status == "failed"  # nothing yet
    driver.update(9, priority="normal")
    page = ui.follow(ui.post(f"/run/{run.id}/retry", {"confirmed": "yes"}))
    assert said(page.text) == f"Run {run.id} retried: its failed step runs again."
    driver.run_until_idle()
    page = ui.get(f"/run/{run.id}")
    assert 'data-status="done"' in page.text
    assert "olga retried" in text(ui.get("/ops/journal").text)


def test_an_action_that_does_not_apply_is_refused_with_the_reason(ui: Session) -> None:
    asked = ui.post("/run/2/retry")
    assert asked.status_code == 409
    assert outcomes(asked.text) == [
        "Run 2 · Listen on ticket 2 · waiting Refused: run 2 has not failed (waiting)"
    ]
    assert "Retry applies to none of them." in text(asked.text)
    # Sent anyway (a page left open while the run changed): the runner refuses it.
    done = ui.post("/run/1/cancel", {"confirmed": "yes"})
    assert done.status_code == 409
    assert refusal(done.text) == "run 1 has already ended (done)"
    assert ui.post("/run/1/pause").status_code == 404


def test_one_action_on_many_runs_confirmed_then_each_runs_outcome(
    desk: testing.FlowDriver, ui: Session
) -> None:
    back = "/ops?flow=Listen"
    asked = ui.post("/ops/act", {"action": "cancel", "run": ["2", "4", "5"], "back": back})
    assert asked.status_code == 200
    assert outcomes(asked.text) == [
        "Run 2 · Listen on ticket 2 · waiting",
        "Run 4 · Listen on ticket 4 · cancelled Refused: run 4 has already ended (cancelled)",
        "Run 5 · Listen on ticket 5 · running",
    ]
    assert "Cancel 2 runs" in text(asked.text)
    assert [r.status for r in desk.runs(2)] == ["waiting"]  # asking did nothing
    confirm = re.search(r'<form class="stack"(.*?)</form>', asked.text, re.S)
    assert confirm is not None
    assert re.findall(r'name="run" value="(\d+)"', confirm.group(1)) == ["2", "5"]

    done = ui.post(
        "/ops/act",
        {"action": "cancel", "run": ["2", "5"], "confirmed": "yes", "reason": "spam", "back": back},
    )
    assert done.status_code == 200
    assert "Cancel: 2 done, 0 refused" in text(done.text)
    assert outcomes(done.text) == ["run 2 cancelled", "run 5 cancelled"]
    assert f'href="{back}"' in done.text
    assert [desk.runs(n)[0].status for n in (2, 5)] == ["cancelled", "cancelled"]
    journal = text(ui.get("/ops/journal").text)
    assert "olga cancelled run 5 (ticket 5): spam" in journal
    assert journal.index("run 5") < journal.index("olga cancelled run 4")  # newest first


def test_a_stuck_run_redriven_is_taken_by_the_next_worker(
    desk: testing.FlowDriver, ui: Session
) -> None:
    assert rows(ui.get("/ops", status="stuck").text, "run") == ["5"]
    page = ui.follow(ui.post("/run/5/redrive", {"confirmed": "yes"}))
    assert said(page.text) == "Run 5 redriven: due now, its lease freed."
    desk.run_until_idle()
    assert rows(ui.get("/ops", status="stuck").text, "run") == []
    assert desk.runs(5)[0].status == "waiting"


def test_a_failed_run_restarted_points_at_its_new_run(
    desk: testing.FlowDriver, ui: Session
) -> None:
    page = ui.post("/ops/act", {"action": "restart", "run": ["3"], "confirmed": "yes"})
    assert outcomes(page.text) == ["run 3 restarted as run 6 → run 6"]
    run_page = ui.get("/run/3").text
    assert 'Restarted as <a href="/run/6">run 6</a>' in run_page
    again = ui.post("/ops/act", {"action": "restart", "run": ["3"]})
    assert again.status_code == 409
    assert "run 3 was already restarted as run 6" in text(again.text)


def test_runs_nobody_ticked_or_an_unknown_action_are_refused(ui: Session) -> None:
    assert ui.post("/ops/act", {"action": "cancel"}).status_code == 422
    assert ui.post("/ops/act", {"action": "explode", "run": ["1"]}).status_code == 422
    unknown = ui.post("/ops/act", {"action": "cancel", "run": ["77"]})
    assert unknown.status_code == 409
    assert outcomes(unknown.text) == ["there is no run 77"]


def test_the_outbox_by_state(ui: Session) -> None:
    every = ui.get("/ops/notices")
    assert every.status_code == 200
    states = dict(re.findall(r'<tr data-notice="(\d+)" data-state="(\w+)">', every.text))
    assert sorted(states.values()) == ["delivered", "pending", "pending", "undeliverable"]
    pending = ui.get("/ops/notices", state="pending")
    assert len(rows(pending.text, "notice")) == 2
    undeliverable = ui.get("/ops/notices", state="undeliverable").text
    assert "undeliverable: the record's assignee is empty" in text(undeliverable)
    assert ui.get("/ops/notices", state="lost").status_code == 422


def test_actions_on_a_purchase_order_are_journaled_with_the_operators_name(
    any_engine: sa.Engine,
) -> None:
    driver = mount(any_engine, "purchase_orders")
    driver.create(order(1))
    ui = console(driver, OPERATOR)
    ui.post("/run/1/cancel", {"confirmed": "yes", "reason": "duplicate"})
    entries = re.findall(r'<li data-action="(\w+)">(.*?)</li>', ui.get("/ops/journal").text, re.S)
    assert [(action, text(said_)) for action, said_ in entries] == [
        ("cancel", "Mon 2 Mar 09:00 UTC olga cancelled run 1 (purchase_order 1): duplicate")
    ]


def test_a_second_console_of_the_process_compiles_no_page_again_and_keeps_its_own_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    berlin = mount(
        sa.create_engine(f"sqlite:///{tmp_path / 'berlin.db'}"),
        "purchase_orders",
        timezone=ZoneInfo("Europe/Berlin"),
    )
    utc = mount(sa.create_engine(f"sqlite:///{tmp_path / 'utc.db'}"), "purchase_orders")
    for desk in (berlin, utc):
        desk.create(order(1))
    first = console(berlin, OPERATOR).get("/ops")
    compiled: list[str] = []
    compile_ = jinja2.Environment._compile

    def counted(env: jinja2.Environment, source: str, filename: str) -> Any:
        compiled.append(filename)
        return compile_(env, source, filename)

    monkeypatch.setattr(jinja2.Environment, "_compile", counted)
    second = console(utc, OPERATOR).get("/ops")
    assert compiled == []
    assert "CET" in text(first.text) and "CET" not in text(second.text)
    assert "UTC" in text(second.text)
