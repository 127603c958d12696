"""The shape a flow's rows make, as each diagram draws it: positions as columns, steps sharing
one as lanes, the ways between them, each step's kind and the key facts of its columns.

Pure: the fixture flows' rows as snapshots, drawn without a database.
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest
from drawn import (
    SVG_NS,
    classes,
    columns,
    config,
    figure,
    fixture_snapshots,
    having,
    mermaid_nodes,
    next_ways,
    other_ways,
    svg_texts,
    svg_tree,
    text,
    titles,
)

from flowrunner import diagrams
from flowrunner.diagrams import marks, model
from flowrunner.flows import snapshot

ORDERS = fixture_snapshots("purchase_orders")
TICKETS = fixture_snapshots("tickets")
PO = config("purchase_orders")
DESK = config("tickets")


def big_orders() -> diagrams.Diagram:
    return diagrams.flow_diagram(ORDERS["Big orders"], config=PO)


def test_each_position_is_a_column_left_to_right_and_its_steps_are_lanes() -> None:
    fig = figure(big_orders())
    found = [(c.get("data-position"), titles(c)) for c in columns(fig)]
    assert found == [
        ("10", ["Manager approval", "Finance approval"]),
        ("20", ["Undecided after a week?"]),
        ("30", ["Reject it"]),
        ("40", ["Rejected?"]),
        ("50", ["Tell the requester it was rejected"]),
        ("60", ["Approved?"]),
        ("70", ["Tell the requester"]),
        ("80", ["Send to supplier"]),
    ]
    lanes = [s.get("data-lane") for s in having(columns(fig)[0], "frd-step")]
    assert lanes == ["0", "1"]
    # Left to right: each column's grid track comes after the one before.
    tracks = [int(c.get("style", "").split("--at:")[1]) for c in columns(fig)]
    assert tracks == sorted(tracks) and len(set(tracks)) == len(tracks)


def test_a_connector_joins_each_column_to_the_next_from_start_to_end() -> None:
    fig = figure(big_orders())
    ways = [(w["data-from"], w["data-to"]) for w in next_ways(fig)]
    # -1 is the start mark; 8 (one past the last of 8 columns) the end mark.
    assert ways == [(str(i - 1), str(i)) for i in range(9)]
    labels = {(w["data-from"], text_of(fig, w)) for w in next_ways(fig) if text_of(fig, w)}
    # A branch goes on when its condition holds.
    assert labels == {("1", "yes"), ("3", "yes"), ("5", "yes")}


def text_of(fig: ET.Element, attrs: dict[str, str]) -> str:
    found = [e for e in having(fig, "frd-next") if dict(e.attrib) == attrs]
    return text(found[0])


def test_a_branch_other_way_goes_to_its_goto_or_to_the_end() -> None:
    fig = figure(big_orders())
    others = [
        (w["data-from"], w["data-target"], w["data-dir"], w["aria-label"]) for w in other_ways(fig)
    ]
    assert others == [
        ("1", "40", "forward", "no → 40"),  # Undecided after a week? else to position 40
        ("3", "60", "forward", "no → 60"),  # Rejected? else to position 60
        ("5", "end", "forward", "no → end"),  # Approved? else the run ends
    ]
    # Ways that meet at a column are drawn on different tracks, so they do not overlap.
    assert [w["data-track"] for w in other_ways(fig)] == ["0", "1", "0"]


def test_a_goto_back_is_drawn_back_to_its_column() -> None:
    drawn = diagrams.flow_diagram(TICKETS["Follow up"], config=DESK)
    fig = figure(drawn)
    others = {(w["data-from"], w["data-target"], w["data-dir"]) for w in other_ways(fig)}
    # Still waiting? (position 2) ends the run otherwise; Answered? (5) goes back to 3.
    assert others == {("1", "end", "forward"), ("4", "3", "back")}
    picture = drawn.picture
    spans = [(w.source, w.end_index(len(picture.columns)), w.track) for w in picture.ways]
    assert (1, 6, 0) in spans and (4, 2, 1) in spans  # overlapping: two tracks


def test_tracks_never_overlap_for_any_branches() -> None:
    # Every position a branch going back to the first, and one going to the end.
    rows = [
        {"id": p, "position": p, "kind": "branch", "condition": "status = open", "goto": 1}
        for p in range(1, 7)
    ] + [{"id": 9, "position": 9, "kind": "branch", "condition": "status = open"}]
    picture = model.build(snapshot.FlowSnapshot.build({"id": 1, "name": "Loops"}, rows))
    count = len(picture.columns)
    by_track: dict[int, list[tuple[int, int]]] = {}
    for way in picture.ways:
        if way.how == "other":
            low, high = sorted((way.source, way.end_index(count)))
            by_track.setdefault(way.track, []).append((low, high))
    for spans in by_track.values():
        spans.sort()
        for (_, high), (low, _) in itertools.pairwise(spans):
            assert high < low, f"two ways share a track: {spans}"
    assert picture.tracks == len(by_track)


def test_each_kind_has_its_label_and_a_mark_of_its_own() -> None:
    fig = figure(big_orders())
    seen = {
        (s.get("data-kind"), s.get("data-mark"), text(having(s, "frd-kind")[0]))
        for s in having(fig, "frd-step")
    }
    assert seen == {
        ("approval", "app", "Aapproval"),  # an app kind: by its name, its initial in a hexagon
        ("branch", "branch", "Branch"),
        ("set", "set", "Set"),
        ("notify", "notify", "Notify"),
        ("send", "app", "Ssend"),
    }
    builtin = [marks.mark(k) for k in ("set", "wait", "until", "branch", "waitFor", "notify")]
    assert len({m.paths for m in builtin}) == 6 and len({m.colour for m in builtin}) == 6
    assert len({m.label for m in builtin}) == 6
    assert marks.mark("approval").letter != marks.mark("send").letter


def facts_of(drawn: diagrams.Diagram, title: str) -> list[tuple[str, str]]:
    box = next(b for c in drawn.picture.columns for b in c.boxes if b.title == title)
    return [(f.name, f.value) for f in box.facts]


def test_each_step_shows_the_key_facts_of_its_columns() -> None:
    assert facts_of(big_orders(), "Finance approval") == [
        ("approver", "cfo@example.com, controller@example.com"),
        ("waits for", "po.decided"),
        ("mode", "all"),
        ("condition", "event.decision = rejected or status = withdrawn"),
        ("duration", "1 week"),
        ("remind", "1 day"),
    ]
    assert facts_of(big_orders(), "Reject it") == [("field", "status"), ("value", "rejected")]
    assert facts_of(big_orders(), "Undecided after a week?") == [
        ("condition", "status = open"),
        ("goto", "40"),
    ]
    follow = diagrams.flow_diagram(TICKETS["Follow up"], config=DESK)
    assert facts_of(follow, "Requester replies") == [
        ("event", "ticket.replied"),
        ("duration", "3 days"),
    ]
    assert facts_of(follow, "Nudge the requester") == [
        ("audience", "requester"),
        ("message", "We are still waiting for your answer."),
    ]
    sla = diagrams.flow_diagram(TICKETS["SLA warning"], config=DESK)
    assert facts_of(sla, "Four hours before due") == [("field", "due_at"), ("duration", "-4 hours")]
    # The facts are on the page, each with its column's name.
    fig = figure(big_orders())
    finance = having(columns(fig)[0], "frd-step")[1]
    assert [text(d) for d in finance.iter("dt")][:3] == ["approver", "waits for", "mode"]


def test_the_svg_draws_the_same_columns_lanes_and_ways() -> None:
    root = svg_tree(big_orders())
    wide = next(e for e in root if "frs-wide" in classes(e))
    narrow = next(e for e in root if "frs-narrow" in classes(e))
    for drawing in (wide, narrow):
        positions = [e.get("data-position") for e in having(drawing, "frs-col")]
        assert positions == ["10", "20", "30", "40", "50", "60", "70", "80"]
        steps = [(s.get("data-kind"), s.get("data-lane")) for s in having(drawing, "frs-step")]
        assert steps[:2] == [("approval", "0"), ("approval", "1")]
        assert len(having(drawing, "frs-other")) == 3
        words = list(svg_texts(drawing))
        assert {"no → 40", "no → 60", "no → end"} <= set(words)
    assert root.tag == f"{SVG_NS}svg"
    assert "@media (max-width:" in root.findtext(f"{SVG_NS}style", "")


def test_the_mermaid_text_has_a_subgraph_per_position_and_the_ways() -> None:
    text = big_orders().mermaid()
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "flowchart LR"
    heads = [line for line in lines if line.startswith("subgraph ")]
    assert heads == [f'subgraph p{i}["Position {p}"]' for i, p in enumerate(range(10, 90, 10))]
    assert 's3 -->|"yes"| p2' in lines and 's3 -.->|"no"| p3' in lines
    assert 's7 -.->|"no"| finish' in lines and "p7 --> finish" in lines
    nodes = mermaid_nodes(text)
    assert nodes["s1"][0] == "approval · Manager approval"
    assert nodes["s3"][0] == "Branch · Undecided after a week?"
    shapes = {line.split('"')[0] for line in lines if line.startswith(("s3{", "s4[", "s1["))}
    assert shapes == {"s1[[", "s3{", "s4[/"}


def test_a_flow_with_no_steps_is_drawn_as_such() -> None:
    drawn = diagrams.flow_diagram(snapshot.FlowSnapshot.build({"id": 1, "name": "Empty"}, []))
    assert "This flow has no steps." in drawn.html()
    assert columns(figure(drawn)) == []
    assert [(w.source, w.target) for w in drawn.picture.ways] == [(-1, None)]
    ET.fromstring(drawn.svg().encode())
    assert "start --> finish" in drawn.mermaid()


@pytest.mark.parametrize("name", sorted(ORDERS))
def test_every_fixture_flow_renders_in_every_format(name: str) -> None:
    drawn = diagrams.flow_diagram(ORDERS[name], config=PO)
    for format_ in diagrams.FORMATS:
        assert drawn.render(format_)
    with pytest.raises(ValueError, match="html, svg or mermaid"):
        drawn.render("png")
