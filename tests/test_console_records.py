"""A record's page over HTTP: its runs newest first with their flow, status, where each
waits and for what, each run's diagram with the run drawn over it and its history in
sentences; an operator starts a manual flow there (active manual flows only, the others
refused with the reason). On SQLite and PostgreSQL."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from console import OPERATOR, Session, console, refusal, said, text
from running import mount, order

from flowrunner import testing
from flowrunner.store import flow_rows


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return mount(any_engine, "purchase_orders")


@pytest.fixture
def ui(driver: testing.FlowDriver) -> Session:
    return console(driver, OPERATOR)


def runs_shown(page: str) -> list[tuple[str, str]]:
    """(run id, status) of each run block, in order."""
    return re.findall(
        r'<article class="run" id="run-\d+" data-run="(\d+)" data-status="(\w+)"', page
    )


def test_a_records_runs_newest_first_each_with_where_it_waits_its_diagram_and_history(
    driver: testing.FlowDriver, ui: Session
) -> None:
    driver.create(order(1))
    driver.update(1, priority="high")  # "Priority raised" tells the requester, and is done
    page = ui.get("/record/1")
    assert page.status_code == 200
    # The binding's words: the record by its number, the console by the resource's label.
    assert "<h1>PO-1</h1>" in page.text
    assert "<title>PO-1 · Purchase orders flows</title>" in page.text
    assert runs_shown(page.text) == [("2", "done"), ("1", "waiting")]
    said_there = text(page.text)
    assert "Run 2 · Priority raised done" in said_there
    assert "Run 1 · Big orders waiting" in said_there
    assert (
        "Waits at Manager approval (position 10) for the po decided event: 0 of 1 answered, "
        "waiting for manager@example.com; gives up at Mon 9 Mar 09:00" in said_there
    )
    # Each run's diagram is of its flow, the run drawn over it.
    figures = re.findall(r'<figure class="frd"[^>]*data-run="(\d+)" data-status="(\w+)"', page.text)
    assert figures == [("2", "done"), ("1", "waiting")]
    assert 'data-state="waiting"' in page.text
    # The history, in sentences; a line that names its step is not headed by it again.
    assert "Told ann (requester): Your order is now high priority." in said_there
    assert "Tell the requester : Told ann (requester)" in said_there
    assert "Started Tell the requester" in said_there
    assert "Tell the requester : Started" not in said_there
    assert said_there.index("Run 2") < said_there.index("Run 1")


def test_an_operator_starts_an_active_manual_flow_and_nothing_else(
    driver: testing.FlowDriver, ui: Session
) -> None:
    driver.create(order(1))
    page = ui.get("/record/1").text
    offered = re.findall(
        r'<option value="(\d+)">([^<]*)</option>', page.split('id="start-flow"')[1]
    )
    assert [name for _id, name in offered] == ["Resend"]  # the only active manual flow

    started = ui.post("/record/1/start", {"flow": offered[0][0]})
    page = ui.follow(started).text
    assert said(page) == "Started run 2."
    assert runs_shown(page)[0][0] == "2"
    [run, _big] = driver.runs(1)
    assert (run.flow_name, run.started_by) == ("Resend", "olga")

    # A flow that is not manual, or not active, is refused with the reason.
    refused = ui.post("/record/1/start", {"flow": "Big orders"})
    assert refused.status_code == 409
    assert refusal(refused.text) == (
        "flow 'Big orders' starts when a record is created; only manual flows are started "
        "by an operator"
    )
    with driver.runner.engine.begin() as conn:
        resend = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, "Resend")
        assert resend is not None
        driver.runner.save_flow(conn, {**resend, "active": False})
    page = ui.get("/record/1").text
    assert "No active manual flow." in text(page)
    refused = ui.post("/record/1/start", {"flow": "Resend"})
    assert refusal(refused.text) == "flow 'Resend' is inactive; make it active again to start it"
    assert len(driver.runs(1)) == 2


def test_a_record_that_is_not_there_is_unknown(ui: Session) -> None:
    assert ui.get("/record/404").status_code == 404
    assert refusal(ui.get("/record/404").text) == "there is no purchase_order '404'"
    assert ui.get("/record/not-a-number").status_code == 404
    assert ui.post("/record/404/start", {"flow": "Resend"}).status_code == 404
    lookup = ui.get("/record", id="7")
    assert lookup.status_code == 303 and lookup.headers["location"] == "/record/7"


def test_a_deleted_records_runs_are_still_shown_and_nothing_is_offered_to_start(
    driver: testing.FlowDriver, ui: Session
) -> None:
    driver.create(order(1))
    driver.delete(1)
    page = ui.get("/record/1")
    assert page.status_code == 200
    assert "This record no longer exists; its runs are kept." in text(page.text)
    assert "Start a flow" not in page.text
    assert [status for _id, status in runs_shown(page.text)] == [driver.runs(1)[0].status]
