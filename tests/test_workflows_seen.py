"""A code workflow's runs are seen as a flow's are: drawn as their recorded steps so far
(HTML, SVG, Mermaid), on the record's page of the console with where they wait and their
history, and in the Operations room. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from console import OPERATOR, console, text
from running import mount

from flowrunner import testing
from flowrunner.workflows import OnEvent, Workflows


def desk(engine: sa.Engine) -> testing.FlowDriver:
    workflows = Workflows()

    @workflows.define(start=OnEvent("ticket.replied"), run_as="desk")
    async def follow_up(w: Any, start: Any) -> None:
        await w.run("assign", "assign_ticket", input={"assign_to": "triage"})
        await w.wait_for("answer", "ticket.replied", match=lambda e: "answer" in e, timeout="1 day")
        await w.sleep("cool off", "2 days")

    driver = mount(engine, "tickets", flows="[]", workflows=workflows)
    driver.create({"id": 1, "title": "Printer on fire", "requester_id": "ann"})
    driver.emit("ticket.replied", {"ticket": 1})
    return driver


def test_a_workflows_run_is_drawn_as_its_recorded_steps_so_far(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    (run,) = driver.runs(1)
    with driver.runner.engine.connect() as conn:
        drawn = driver.runner.diagram(conn, "follow_up", run=run.id)
    columns = [
        (c.boxes[0].title, c.state, c.boxes[0].run and c.boxes[0].run.state)
        for c in drawn.picture.columns
    ]
    assert columns == [("assign", "done", "done"), ("answer", "current", "waiting")]
    page = drawn.html()
    assert "assign_ticket" in page and "ticket.replied" in page and "Waits at answer" in page
    assert "cool off" not in page  # nothing is drawn ahead of what the run recorded
    assert "assign" in drawn.svg()
    assert drawn.mermaid().startswith("flowchart LR")
    driver.emit("ticket.replied", {"ticket": 1, "answer": "yes"})
    driver.advance("2 days")
    with driver.runner.engine.connect() as conn:
        done = driver.runner.diagram(conn, "follow_up", run=run.id).picture
    assert [c.boxes[0].title for c in done.columns] == ["assign", "answer", "cool off"]
    assert done.run is not None and done.run.status == "done"


def test_the_console_shows_a_workflows_run_on_its_records_page(any_engine: sa.Engine) -> None:
    driver = desk(any_engine)
    ui = console(driver, OPERATOR)
    page = ui.get("/record/1")
    assert page.status_code == 200, page.text[:2000]
    said = text(page.text)
    assert "follow_up waiting" in said
    assert (
        "Waits at answer (position 2) for the ticket replied event; gives up at Tue 3 Mar 09:00"
        in said
    )
    assert "Ran assign ticket (assign)" in said
    assert re.search(r'<figure class="frd"[^>]*data-run="1"', page.text)
    room = ui.get("/ops")
    assert room.status_code == 200 and "follow_up" in text(room.text)
