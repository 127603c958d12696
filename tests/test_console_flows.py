"""The console's flow pages over HTTP, as a business user edits flows in a browser: the
list with what is running on which version, a flow's diagram and its rows as a table,
each save judged as the API judges it (the 422's sentences beside their fields, nothing
saved), checks as one types, steps moved with their gotos, YAML in and out, and every
edit journaled with the editor's name. On SQLite and PostgreSQL."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from console import (
    EDITOR,
    Session,
    console,
    diagram_titles,
    errors_beside,
    field_value,
    refusal,
    rows,
    said,
    text,
)
from running import mount, order

from flowrunner import testing
from flowrunner.engine import operations_room
from flowrunner.store import flow_rows


@pytest.fixture
def driver(any_engine: sa.Engine) -> testing.FlowDriver:
    """The purchase-order app with its flows."""
    return mount(any_engine, "purchase_orders")


@pytest.fixture
def ui(driver: testing.FlowDriver) -> Session:
    return console(driver, EDITOR)


def flow_id(driver: testing.FlowDriver, name: str) -> int:
    with driver.runner.engine.connect() as conn:
        found = flow_rows.flow_by_name_or_id(conn, driver.runner.tables, name)
    assert found is not None
    return int(found["id"])


def steps(driver: testing.FlowDriver, name: str) -> list[dict[str, Any]]:
    with driver.runner.engine.connect() as conn:
        return flow_rows.steps_of_flow(conn, driver.runner.tables, flow_id(driver, name))


def journal(driver: testing.FlowDriver) -> list[str]:
    return [operations_room.journal_sentence(e) for e in driver.runner.journal()]


def test_the_list_shows_each_flow_and_how_many_runs_go_on_and_on_which_version(
    driver: testing.FlowDriver, ui: Session
) -> None:
    driver.create(order(1))  # a big order: its approvals wait
    driver.create(order(2))
    big = flow_id(driver, "Big orders")
    page = ui.get("/")
    assert page.status_code == 200
    assert rows(page.text, "flow") == [
        str(flow_id(driver, n)) for n in ("Big orders", "Small orders", "Priority raised", "Resend")
    ]
    line = re.search(rf'<tr data-flow="{big}">(.*?)</tr>', page.text, re.S)
    assert line is not None
    assert "waiting 2 — 2 on the current rows" in text(line.group(1))

    # An edit makes a new version: the two runs go on, on the older one.
    saved = ui.post(f"/flow/{big}", {"condition": "amount > 20000"})
    assert said(ui.follow(saved).text) == "Flow saved."
    line = re.search(rf'<tr data-flow="{big}">(.*?)</tr>', ui.get("/").text, re.S)
    assert line is not None and "waiting 2 — 2 on an older version" in text(line.group(1))
    driver.create(order(3))
    flow_page = ui.get(f"/flow/{big}").text
    what_changes = re.search(r'id="what-changes"[^>]*>(.*?)</p>', flow_page, re.S)
    assert what_changes is not None
    assert text(what_changes.group(1)) == (
        "A save changes only the runs that start after it: the 3 runs going on now keep "
        "the rows they started with (2 of them on an older version)."
    )


def test_a_new_flow_with_a_bad_condition_is_refused_beside_the_field_and_not_saved(
    driver: testing.FlowDriver, ui: Session
) -> None:
    before = len(flow_rows.all_flows(driver.runner.engine.connect(), driver.runner.tables))
    page = ui.post("/flows", {"name": "Rush", "start": "created", "condition": "amount >"})
    assert page.status_code == 422
    assert errors_beside(page.text, "new-flow", "condition") == [
        "the condition cannot be read: line 1, column 9: expected a value after '>', "
        "found end of text"
    ]
    assert field_value(page.text, "new-flow", "name") == "Rush"  # what was typed stays
    with driver.runner.engine.connect() as conn:
        assert len(flow_rows.all_flows(conn, driver.runner.tables)) == before

    created = ui.post(
        "/flows", {"name": "Rush", "start": "created", "condition": "priority = high"}
    )
    page = ui.follow(created)
    assert said(page.text) == "Flow 'Rush' created."
    assert "<h1>Rush</h1>" in page.text
    assert journal(driver)[0] == "ann created the flow 'Rush'"


def test_a_step_with_a_bad_duration_says_so_beside_it_and_once_fixed_the_diagram_shows_it(
    driver: testing.FlowDriver, ui: Session
) -> None:
    small = flow_id(driver, "Small orders")
    page = ui.post(
        f"/flow/{small}/steps",
        {"position": "3", "kind": "wait", "title": "Cool off", "duration": "2 dayz"},
    )
    assert page.status_code == 422
    assert errors_beside(page.text, "new-step", "duration") == [
        "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'"
    ]
    assert "Cool off" not in diagram_titles(page.text)
    assert [s["title"] for s in steps(driver, "Small orders")] == ["Approve", "Send to supplier"]

    page = ui.follow(
        ui.post(
            f"/flow/{small}/steps",
            {"position": "3", "kind": "wait", "title": "Cool off", "duration": "2 days"},
        )
    )
    assert said(page.text) == "Step added."
    assert diagram_titles(page.text) == ["Approve", "Send to supplier", "Cool off"]
    assert (
        steps(driver, "Small orders")[-1] | {"duration": "2 days"}
        == steps(driver, "Small orders")[-1]
    )
    assert journal(driver)[0] == "ann added a step to 'Small orders' (Cool off)"


def test_every_problem_of_a_step_is_beside_its_own_field(
    driver: testing.FlowDriver, ui: Session
) -> None:
    small = flow_id(driver, "Small orders")
    [approve, _send] = steps(driver, "Small orders")
    form = f"step-{approve['id']}"
    page = ui.post(
        f"/flow/{small}/step/{approve['id']}",
        {"position": "1", "kind": "set", "title": "Approve", "field": "amount", "value": ""},
    )
    assert page.status_code == 422
    assert errors_beside(page.text, form, "value") == ["a set step needs 'value'"]
    assert errors_beside(page.text, form, "field") == [
        "'amount' is not a column a set step may write (status, priority)"
    ]
    # Nothing was saved: the stored row is as it was.
    assert steps(driver, "Small orders")[0] == approve


def test_a_kind_changed_shows_the_new_kinds_columns_with_what_they_need(
    driver: testing.FlowDriver, ui: Session
) -> None:
    small = flow_id(driver, "Small orders")
    [approve, _send] = steps(driver, "Small orders")
    form = f"step-{approve['id']}"
    page = ui.post(
        f"/flow/{small}/step/{approve['id']}",
        {"position": "1", "kind": "notify", "title": "Approve", "field": "status", "value": "x"},
    )
    assert page.status_code == 422
    # The columns the new kind needs appear, each with its sentence.
    assert errors_beside(page.text, form, "audience") == ["a notify step needs 'audience'"]
    assert errors_beside(page.text, form, "message") == ["a notify step needs 'message'"]
    assert errors_beside(page.text, form, "field")  # no longer read by a notify step


def test_a_flow_row_refused_keeps_what_was_typed_and_the_stored_row(
    driver: testing.FlowDriver, ui: Session
) -> None:
    resend = flow_id(driver, "Resend")
    page = ui.post(f"/flow/{resend}", {"name": "Resend", "start": "manual", "changes": "status"})
    assert page.status_code == 422
    assert errors_beside(page.text, "flow", "changes") == [
        "only a flow that starts on 'updated' can name the column an update changes"
    ]
    assert field_value(page.text, "flow", "changes") == "status"
    with driver.runner.engine.connect() as conn:
        assert flow_rows.flow_by_id(conn, driver.runner.tables, resend)["changes"] is None  # type: ignore[index]


def test_moving_a_step_moves_its_position_and_the_goto_that_named_it(
    driver: testing.FlowDriver, ui: Session
) -> None:
    big = flow_id(driver, "Big orders")
    before = {s["title"]: (s["position"], s["goto"]) for s in steps(driver, "Big orders")}
    assert before["Rejected?"] == (40, 60) and before["Approved?"] == (60, None)
    tell = next(s for s in steps(driver, "Big orders") if s["title"] == "Tell the requester")
    page = ui.follow(ui.post(f"/flow/{big}/step/{tell['id']}/move", {"by": "up"}))
    assert said(page.text) == "Step moved."
    after = {s["title"]: (s["position"], s["goto"]) for s in steps(driver, "Big orders")}
    # "Tell the requester" (70) and "Approved?" (60) traded places; the branch at 40 that
    # jumped to "Approved?" still does.
    assert after["Tell the requester"] == (60, None)
    assert after["Approved?"] == (70, None)
    assert after["Rejected?"] == (40, 70)
    assert "ann moved a step of 'Big orders' (Tell the requester)" in journal(driver)


def test_a_move_that_breaks_the_flow_is_refused_with_the_reason_and_nothing_moves(
    driver: testing.FlowDriver, ui: Session
) -> None:
    big = flow_id(driver, "Big orders")
    before = steps(driver, "Big orders")
    # The two approvals share position 10: moving one up gives it its own position, and
    # the flow is renumbered; moving the first step of the flow up does nothing.
    manager = next(s for s in before if s["title"] == "Manager approval")
    page = ui.follow(ui.post(f"/flow/{big}/step/{manager['id']}/move", {"by": "up"}))
    assert said(page.text) == "Step moved."
    after = {s["title"]: s["position"] for s in steps(driver, "Big orders")}
    assert after["Manager approval"] == 10 and after["Finance approval"] == 20
    assert after["Send to supplier"] == 90  # nine positions now, 10 to 90
    page = ui.follow(ui.post(f"/flow/{big}/step/{manager['id']}/move", {"by": "up"}))
    assert said(page.text) == "The step is already first."

    # A loop keeps its pause: moving the pause out of it is refused, the flow judged whole.
    made = ui.post("/flows", {"name": "Chase", "start": "manual"})
    chase = int(made.headers["location"].rsplit("/", 1)[1])
    for row in (
        {"position": "10", "kind": "set", "title": "Mark", "field": "status", "value": "open"},
        {"position": "20", "kind": "wait", "title": "Pause", "duration": "1 day"},
        {
            "position": "30",
            "kind": "branch",
            "title": "Again?",
            "condition": "status = open",
            "goto": "10",
        },
    ):
        assert ui.post(f"/flow/{chase}/steps", row).status_code == 303
    stored = steps(driver, "Chase")
    pause = next(s for s in stored if s["title"] == "Pause")
    page = ui.post(f"/flow/{chase}/step/{pause['id']}/move", {"by": "up"})
    assert page.status_code == 422
    assert "Nothing was saved" in text(page.text)
    assert "positions 20–30 loop with nothing that waits" in text(page.text)
    assert steps(driver, "Chase") == stored


def test_a_step_a_goto_needs_cannot_be_deleted_and_says_why(
    driver: testing.FlowDriver, ui: Session
) -> None:
    big = flow_id(driver, "Big orders")
    approved = next(s for s in steps(driver, "Big orders") if s["title"] == "Approved?")
    page = ui.post(f"/flow/{big}/step/{approved['id']}/delete")
    assert page.status_code == 422
    assert "goto" in text(page.text) and "Nothing was saved" in text(page.text)
    assert approved in steps(driver, "Big orders")
    small = flow_id(driver, "Small orders")
    [approve, send] = steps(driver, "Small orders")
    page = ui.follow(ui.post(f"/flow/{small}/step/{send['id']}/delete"))
    assert said(page.text) == "Step deleted."
    assert steps(driver, "Small orders") == [approve]


def test_deleting_a_flow_asks_first_and_its_runs_go_on(
    driver: testing.FlowDriver, ui: Session
) -> None:
    driver.create(order(1))
    big = flow_id(driver, "Big orders")
    asked = ui.post(f"/flow/{big}/delete")
    assert asked.status_code == 200
    assert "Delete the flow Big orders?" in text(asked.text)
    assert "The 1 run going on now keep the rows they started with" in text(asked.text)
    assert flow_id(driver, "Big orders") == big  # not yet
    page = ui.follow(ui.post(f"/flow/{big}/delete", {"confirmed": "yes"}))
    assert said(page.text) == "Flow 'Big orders' deleted; its runs keep their rows."
    assert ui.get(f"/flow/{big}").status_code == 404
    [run] = driver.runs(1)
    assert run.status == "waiting"


def test_conditions_and_durations_are_judged_as_they_are_typed(ui: Session) -> None:
    def check(column: str, kind: str, typed: str) -> dict[str, Any]:
        answer = ui.get("/check", column=column, kind=kind, text=typed)
        assert answer.status_code == 200
        result: dict[str, Any] = answer.json()
        return result

    assert check("condition", "flow", "amount > 10000") == {"ok": True}
    assert check("condition", "flow", "  amount >") == {
        "ok": False,
        "message": "the condition cannot be read: line 1, column 9: expected a value "
        "after '>', found end of text",
        "line": 1,
        "column": 11,  # under the text as typed, its leading blanks counted
    }
    # An approval's condition may read the event; a flow's may not.
    assert check("condition", "approval", "event.decision = rejected") == {"ok": True}
    assert check("condition", "flow", "event.decision = rejected")["ok"] is False
    assert check("duration", "wait", "2 dayz") == {
        "ok": False,
        "message": "'2 dayz' is not a duration — write e.g. '2 days' or '30 minutes'",
        "line": 1,
        "column": 3,
    }
    assert check("duration", "until", "-4 hours") == {"ok": True}
    assert check("duration", "wait", "-4 hours")["ok"] is False
    assert check("remind", "approval", "0 days")["message"] == (
        "'0 days' must be longer than nothing, e.g. '1 day'"
    )
    assert ui.get("/check", column="title", text="x").status_code == 422


def test_flows_go_out_and_come_back_as_yaml(driver: testing.FlowDriver, ui: Session) -> None:
    exported = ui.get("/export.yaml")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"] == 'attachment; filename="flows.yaml"'
    document = yaml.safe_load(exported.text)
    assert [f["name"] for f in document["flows"]] == [
        "Big orders",
        "Small orders",
        "Priority raised",
        "Resend",
    ]
    one = ui.get(f"/flow/{flow_id(driver, 'Resend')}/export.yaml")
    assert yaml.safe_load(one.text)["flows"][0]["steps"] == [
        {"position": 1, "kind": "send", "title": "Send again"}
    ]

    # Back in, under other names: created; again with replace: replaced.
    renamed = exported.text.replace("name: ", "name: Copy of ")
    page = ui.follow(ui.post("/import", {"yaml": renamed}))
    assert said(page.text) == "Imported 4 flows with 13 steps."
    assert len(rows(page.text, "flow")) == 8
    page = ui.follow(ui.post("/import", {"yaml": renamed, "replace": "yes"}))
    assert len(rows(page.text, "flow")) == 8
    assert journal(driver)[0].startswith("ann imported flows: 'Copy of Big orders'")

    # An upload works as the text does.
    uploaded = ui.post(
        "/import",
        files={"file": ("one.yaml", one.text.replace("Resend", "Resend twice"), "text/yaml")},
    )
    assert said(ui.follow(uploaded).text) == "Imported 1 flows with 1 steps."


def test_a_bad_file_is_refused_whole_with_every_problem_by_row(
    driver: testing.FlowDriver, ui: Session
) -> None:
    bad = """
flows:
  - name: Fine
    start: manual
  - name: Broken
    start: whenever
    steps:
      - {position: 1, kind: wait, duration: 2 dayz}
"""
    page = ui.post("/import", {"yaml": bad})
    assert page.status_code == 422
    problems = re.findall(r"<li>(.*?)</li>", page.text.split('id="import"')[0])
    assert any("start:" in p and "whenever" in text(p) for p in problems)
    assert any("duration:" in p and "2 dayz" in text(p) for p in problems)
    assert "Fine" not in rows(ui.get("/").text, "flow")
    with driver.runner.engine.connect() as conn:
        assert "Fine" not in [f["name"] for f in flow_rows.all_flows(conn, driver.runner.tables)]
    unreadable = ui.post("/import", {"yaml": "flows: [unclosed"})
    assert unreadable.status_code == 422
    assert "the file cannot be read" in text(unreadable.text)


def test_text_typed_into_a_flow_is_shown_as_text_never_as_markup(
    driver: testing.FlowDriver, ui: Session
) -> None:
    name = '<script>alert("x")</script>'
    page = ui.follow(ui.post("/flows", {"name": name, "start": "manual"}))
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text
    assert "<script>alert" not in ui.get("/").text


def test_a_flow_of_no_one_is_unknown(ui: Session) -> None:
    assert ui.get("/flow/999").status_code == 404
    assert ui.get("/flow/abc").status_code == 422
    assert refusal(ui.get("/flow/abc").text) == (
        "'abc' is not a flow's id: give a whole number from 1 to 9223372036854775807"
    )
    assert refusal(ui.get("/flow/999").text) == "there is no flow '999'"
    assert ui.post("/flow/999/steps", {"position": "1", "kind": "wait"}).status_code == 404
