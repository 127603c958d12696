"""Fault paths and escalations drawn: a step's fault path is a way of its own, below the
columns and red, labelled "if it fails", from the step to its ``on_failure`` column; a
run that took it draws it taken and the step failed ("went on at position 40"); a step
that escalates says so among its facts, and a run waiting at it says when it tells whom
(or that it told them). The same in HTML, SVG and Mermaid.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from drawn import figure, having, mermaid_nodes, svg_texts, svg_tree, text
from running import mount
from test_runs_faults import BINDING, FLOWS, order, supplier

from flowrunner import diagrams, testing
from flowrunner.diagrams import model
from flowrunner.flows import snapshot


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.FlowDriver]:
    """The purchasing app with a fault path and an escalation: order 2 was refused by
    the supplier, order 6 waits for finance two days and an hour in."""
    folder = tmp_path_factory.mktemp("drawn")
    engine = sa.create_engine(f"sqlite:///{folder}/faults.db")
    found = mount(
        engine,
        "purchase_orders",
        flows=FLOWS,
        binding=BINDING,
        commands={"send_purchase_order": supplier},
    )
    found.create(order(2, priority="hold"))
    found.create(order(6, amount=25000, approver="mia@example.com"))
    found.advance("2 days 1 hour")
    yield found
    engine.dispose()


def drawn(driver: testing.FlowDriver, flow: str, record: int | None = None) -> diagrams.Diagram:
    run = None if record is None else driver.runs(record)[0].id
    with driver.runner.engine.connect() as conn:
        return driver.runner.diagram(conn, flow, run=run)


def test_a_fault_path_is_a_way_of_its_own_from_the_step_to_its_on_failure(
    driver: testing.FlowDriver,
) -> None:
    picture = drawn(driver, "Send or say why").picture
    send = picture.columns[0].boxes[0]
    [fault] = [w for w in picture.ways if w.how == "fault"]
    assert (fault.source, fault.target, fault.label, fault.step) == (0, 3, "if it fails", send.key)
    assert fault.below and not fault.back
    # It has a track of its own beside the branch's other way.
    [other] = [w for w in picture.ways if w.how == "other"]
    assert {fault.track, other.track} == {0, 1} and picture.tracks == 2


def test_the_html_draws_it_below_the_columns_in_red(driver: testing.FlowDriver) -> None:
    fig = figure(drawn(driver, "Send or say why"))
    [fault] = having(fig, "frd-fault")
    assert "frd-other" in fault.get("class", "")
    assert (fault.get("data-how"), fault.get("data-from"), fault.get("data-to")) == (
        "fault",
        "0",
        "3",
    )
    assert fault.get("aria-label") == "if it fails → 40"
    assert text(fault) == "if it fails → 40"
    style = fig.find("style")
    assert style is not None
    assert ".frd-fault" in text(style) and "--frd-fault:#b91c1c" in text(style)


def test_the_svg_and_mermaid_draw_it_too(driver: testing.FlowDriver) -> None:
    diagram = drawn(driver, "Send or say why")
    labels = list(svg_texts(svg_tree(diagram)))
    assert labels.count("if it fails → 40") == 2  # wide and narrow
    assert diagram.svg().count('stroke="#b91c1c"') >= 2
    lines = diagram.mermaid().splitlines()
    assert '  s1 -.->|"if it fails"| p3' in lines
    fault = next(i for i, w in enumerate(diagram.picture.ways) if w.how == "fault")
    assert f"  linkStyle {fault} stroke-width:2px,stroke:#b91c1c" in lines


def test_a_run_that_took_it_draws_it_taken_and_the_step_failed(
    driver: testing.FlowDriver,
) -> None:
    diagram = drawn(driver, "Send or say why", 2)
    picture = diagram.picture
    taken = {(w.source, w.target, w.how) for w in picture.ways if w.taken}
    assert taken == {(-1, 0, "next"), (0, 3, "fault"), (3, 4, "next"), (4, None, "next")}
    states = [(c.position, c.state) for c in picture.columns]
    assert states == [(10, "done"), (20, "skipped"), (30, "skipped"), (40, "done"), (50, "done")]
    send = picture.columns[0].boxes[0].run
    assert send is not None
    assert (send.state, send.details[-1]) == ("failed", "went on at position 40")
    assert "went on at position 40" in mermaid_nodes(diagram.mermaid())["s1"]
    fault = next(i for i, w in enumerate(picture.ways) if w.how == "fault")
    assert f"  linkStyle {fault} stroke-width:3px,stroke:#b91c1c" in diagram.mermaid()
    [way] = having(figure(diagram), "frd-fault")
    assert "frd-way-taken" in way.get("class", "") and way.get("data-taken") == "1"


def test_an_escalation_is_a_fact_of_its_step_and_a_detail_of_its_wait(
    driver: testing.FlowDriver,
) -> None:
    flow = drawn(driver, "Big orders").picture
    facts = {f.name: f.value for f in flow.columns[0].boxes[0].facts}
    assert facts["escalates"] == "to manager after 2 days"
    run = drawn(driver, "Big orders", 6)
    approval = run.picture.columns[0].boxes[0].run
    assert approval is not None and approval.state == "waiting"
    assert approval.details[-1] == "told manager"
    assert "escalates: to manager after 2 days" in mermaid_nodes(run.mermaid())["s1"]


def test_before_it_escalates_the_wait_says_when() -> None:
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "Wait", "start": "manual"},
        [
            {
                "id": 1,
                "position": 1,
                "kind": "waitFor",
                "title": "Reply",
                "event": "po.decided",
                "escalate": "1 day",
                "escalate_to": "manager",
            }
        ],
    )
    box = model.build(snap).columns[0].boxes[0]
    assert [(f.name, f.value) for f in box.facts] == [
        ("event", "po.decided"),
        ("escalates", "to manager after 1 day"),
    ]


def test_a_step_that_cannot_be_read_takes_its_fault_path_out_of_the_drawing() -> None:
    snap = snapshot.FlowSnapshot.build(
        {"id": 1, "name": "Hidden", "start": "manual"},
        [
            {"id": 1, "position": 1, "kind": "send", "title": "Secret send", "on_failure": 2},
            {"id": 2, "position": 2, "kind": "notify", "audience": "x", "message": "y"},
        ],
    )
    seen = model.build(snap)
    hidden = model.build(snap, can_read=lambda row: row["kind"] != "send")
    assert [w.how for w in seen.ways].count("fault") == 1
    assert [w.how for w in hidden.ways].count("fault") == 0
