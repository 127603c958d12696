"""A subflow step drawn: a box that names the flow it runs and links to it — and, in a
run, to the child run it started — on the lending desk (``tests/lending.py``).

A standalone drawing names them; the console links them to their pages. Through the
real engine on SQLite and PostgreSQL, and the console's pages.
"""

from __future__ import annotations

import re

import lending
import pytest
import sqlalchemy as sa
from console import BOTH, console, text

from flowrunner import testing


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    return lending.mount(any_engine)


def links(page: str) -> list[str]:
    """What each subflow box's line says, with the addresses it links to."""
    found = []
    for line in re.findall(r'<p class="frd-link">(.*?)</p>', page, re.S):
        hrefs = re.findall(r'href="([^"]+)"', line)
        found.append(" ".join([text(line), *hrefs]))
    return found


def flow_ids(driver: testing.FlowDriver) -> dict[str, int]:
    with driver.runner.engine.connect() as conn:
        rows = conn.execute(sa.select(lending.application_flow)).mappings().all()
    return {str(row["name"]): int(row["id"]) for row in rows}


def test_a_subflow_box_names_the_flow_it_runs(driver: testing.FlowDriver) -> None:
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "Open guaranteed account")
    [box] = drawn.picture.columns[0].boxes
    assert (box.mark.label, box.title) == ("Subflow", "Check the guarantor")
    assert [(f.name, f.value) for f in box.facts] == [
        ("runs", "Credit check"),
        ("on the record in", "guarantor_id"),
        ("duration", "3 days"),
    ]
    assert links(drawn.html()) == ["Runs Credit check"]
    assert '[["Subflow · Check the guarantor' in drawn.mermaid()
    assert "Credit check" in drawn.svg()


def test_a_run_links_to_its_child_run_while_it_waits_and_after(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(1))
    found = {run.flow_name: run for run in driver.runs(1)}
    account, check = found["Open account"], found["Credit check"]
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "Open account", run=account.id)
    box = drawn.picture.columns[0].boxes[0]
    assert box.run is not None
    assert box.run.text == f"Waiting for subflow Credit check (run {check.id})"
    page = drawn.html(href=lambda what, key: f"/{what}/{key}")
    assert links(page) == [f"Runs Credit check · run {check.id} /flow/Credit check /run/{check.id}"]

    lending.decide(driver, 1)
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "Open account", run=account.id)
    box = drawn.picture.columns[0].boxes[0]
    assert box.run is not None and box.run.details == ("its subflow ended",)
    assert links(drawn.html()) == [f"Runs Credit check · run {check.id}"]


def test_the_console_links_a_subflow_to_its_flow_and_its_child_run(
    driver: testing.FlowDriver,
) -> None:
    driver.create(lending.applicant(1))
    found = {run.flow_name: run for run in driver.runs(1)}
    account, check = found["Open account"], found["Credit check"]
    ids = flow_ids(driver)
    ui = console(driver, BOTH)
    page = ui.get(f"/flow/{ids['Open account']}").text
    assert links(page) == [f"Runs Credit check /flow/{ids['Credit check']}"]
    assert '<option value="subflow">subflow — runs a manual flow and waits until it ends' in page
    page = ui.get(f"/run/{account.id}").text
    assert links(page) == [
        f"Runs Credit check · run {check.id} /flow/{ids['Credit check']} /run/{check.id}"
    ]
    child = ui.get(f"/run/{check.id}")
    assert child.status_code == 200
    assert f"Started by run {account.id} at its step 'Check credit'" in text(child.text)
