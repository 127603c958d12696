"""What a reader may see: a step they cannot read is not drawn in any format; its lane
closes up, and a branch pointing at its position still points there.

Text from the rows is escaped everywhere: a title with ``<script>`` is text on the page, in
the SVG and in the Mermaid label, for any text at all (hypothesis).
"""

from __future__ import annotations

import html.parser
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from drawn import (
    SVG_NS,
    columns,
    config,
    figure,
    fixture_snapshots,
    having,
    mermaid_nodes,
    next_ways,
    other_ways,
    text,
    titles,
)
from hypothesis import given
from hypothesis import strategies as st

from flowrunner import diagrams
from flowrunner.flows import snapshot

ORDERS = fixture_snapshots("purchase_orders")
PO = config("purchase_orders")


def without(*hidden: str) -> diagrams.CanRead:
    def can_read(row: Mapping[str, Any]) -> bool:
        return row["title"] not in hidden

    return can_read


def every_format(drawn: diagrams.Diagram) -> str:
    return drawn.html() + drawn.svg() + drawn.mermaid()


def test_a_step_the_reader_cannot_read_is_not_drawn_and_its_lane_closes_up() -> None:
    drawn = diagrams.flow_diagram(
        ORDERS["Big orders"], config=PO, can_read=without("Manager approval")
    )
    first = columns(figure(drawn))[0]
    assert titles(first) == ["Finance approval"]
    assert [s.get("data-lane") for s in having(first, "frd-step")] == ["0"]
    everything = every_format(drawn)
    assert "Manager approval" not in everything
    assert "manager@example.com" not in everything  # nor any of its columns


def test_a_branch_pointing_at_a_hidden_step_points_at_its_position() -> None:
    # Nobody may read the step at 40, where Undecided after a week? goes when it does not hold.
    drawn = diagrams.flow_diagram(ORDERS["Big orders"], config=PO, can_read=without("Rejected?"))
    fig = figure(drawn)
    column = next(c for c in columns(fig) if c.get("data-position") == "40")
    assert having(column, "frd-step") == [] and text(column).endswith("—")
    others = [(w["data-from"], w["data-target"]) for w in other_ways(fig)]
    assert others == [("1", "40"), ("5", "end")]
    # The hidden branch's own ways are not drawn: its column goes on, unlabelled.
    assert next(w for w in next_ways(fig) if w["data-from"] == "3").get("data-how") == "next"
    assert text(next(e for e in having(fig, "frd-next") if e.get("data-from") == "3")) == ""
    assert "Rejected?" not in every_format(drawn)
    assert "status = rejected" not in every_format(drawn)


def test_can_read_is_given_the_step_row() -> None:
    seen: list[dict[str, Any]] = []

    def can_read(row: Mapping[str, Any]) -> bool:
        seen.append(dict(row))
        return row.get("audience") != "requester"

    drawn = diagrams.flow_diagram(ORDERS["Big orders"], config=PO, can_read=can_read)
    tell = next(r for r in seen if r["title"] == "Tell the requester")
    assert tell == {
        "id": tell["id"],
        "flow_id": ORDERS["Big orders"].flow.id,
        "position": 70,
        "kind": "notify",
        "title": "Tell the requester",
        "audience": "requester",
        "message": "Your order was approved and goes to the supplier now.",
    }
    assert len(seen) == 9
    assert [titles(c) for c in columns(figure(drawn))][6] == []


HOSTILE = '<script>alert("x")</script> & "quotes" #35; `tick` ]] "} %% end'


def hostile_flow(title: str = HOSTILE, message: str = HOSTILE) -> snapshot.FlowSnapshot:
    return snapshot.FlowSnapshot.build(
        {"id": 1, "name": f"Flow {title}", "start": "manual", "condition": title},
        [
            {"id": 1, "position": 1, "kind": "branch", "title": title, "condition": title},
            {"id": 2, "position": 2, "kind": "notify", "title": title, "audience": "x"}
            | {"message": message},
        ],
    )


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


def test_a_title_with_a_script_renders_as_text_in_every_format() -> None:
    drawn = diagrams.flow_diagram(hostile_flow())
    page = drawn.html()
    assert "<script" not in page and "&lt;script&gt;" in page
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert titles(columns(figure(drawn))[0]) == [HOSTILE]  # the browser shows it as written
    svg = drawn.svg()
    assert "<script" not in svg
    root = ET.fromstring(svg.encode())
    assert not [e for e in root.iter() if e.tag.removeprefix(SVG_NS) not in SVG_TAGS]
    mermaid = drawn.mermaid()
    assert "<script" not in mermaid
    assert mermaid_nodes(mermaid)["s1"][0] == f"Branch · {' '.join(HOSTILE.split())}"


SVG_TAGS = {"svg", "title", "style", "rect", "g", "path", "text", "tspan", "circle"}

# Every line Mermaid gets, by the grammar the renderer writes: labels are one quoted string
# holding no quote, so nothing written in a row can end a label or start a statement.
LABEL = r'"[^"\n]*"'
MERMAID_LINE = re.compile(
    "|".join(
        [
            r"flowchart LR",
            r"  %% [^\n]*",
            rf"  (start|finish)\(\[{LABEL}\]\)",
            rf"  subgraph p\d+\[{LABEL}\]",
            r"    direction TB",
            r"  end",
            rf"    p\d+_none\[{LABEL}\]",
            rf"    s\d+(\[\[{LABEL}\]\]|\[/{LABEL}/\]|\[\\{LABEL}\\\]|\(\[{LABEL}\]\)|"
            rf"\{{{LABEL}\}}|>{LABEL}\]|\[/{LABEL}\\\])",
            rf"  (start|p\d+|s\d+) (-->|-\.->)(\|{LABEL}\|)? (p\d+|finish)",
            r"  classDef \w+ [\w:#,\-. ]+",
            r"  class [\w,]+ \w+",
            r"  linkStyle [\d,]+ [\w:#,\-. ]+",
        ]
    )
)


def mermaid_lines_keep_their_grammar(text: str) -> None:
    for line in text.splitlines():
        assert MERMAID_LINE.fullmatch(line), f"not a line the renderer writes: {line!r}"


@given(
    title=st.text(min_size=1, max_size=60).filter(lambda t: t.strip() != ""),
    message=st.text(min_size=1, max_size=120).filter(lambda t: t.strip() != ""),
)
def test_any_text_in_a_row_stays_text_in_every_format(title: str, message: str) -> None:
    snap = hostile_flow(title, message)
    drawn = diagrams.flow_diagram(snap)
    cleaned = diagrams.model.clean(title)
    expected = cleaned if cleaned.strip() else "Branch"  # a blank title: called by its kind
    fig = figure(drawn)  # well-formed: nothing written could open or close an element
    assert titles(columns(fig)[0]) == [expected]
    facts = [text(d) for d in having(fig, "frd-facts")[1].iter("dd")]
    assert facts[1] == diagrams.model.clean(message)
    root = ET.fromstring(drawn.svg().encode())
    assert {e.tag.removeprefix(SVG_NS) for e in root.iter()} <= SVG_TAGS
    mermaid = drawn.mermaid()
    mermaid_lines_keep_their_grammar(mermaid)
    assert mermaid_nodes(mermaid)["s1"][0] == " ".join(f"Branch · {expected}".split())


def test_the_fixture_flows_keep_the_mermaid_grammar() -> None:
    for name, snap in {**ORDERS, **fixture_snapshots("tickets")}.items():
        drawn = diagrams.flow_diagram(snap, config=config("purchase_orders", "tickets"))
        mermaid_lines_keep_their_grammar(drawn.mermaid())
        assert name in drawn.mermaid()


def test_two_diagrams_of_one_flow_for_two_readers_can_share_a_page() -> None:
    everyone = diagrams.flow_diagram(ORDERS["Big orders"], config=PO)
    some = diagrams.flow_diagram(ORDERS["Big orders"], config=PO, can_read=without("Reject it"))
    ids = {figure(d).get("id") for d in (everyone, some, everyone)}
    assert len(ids) == 2  # the same drawing keeps its id; another reader's has its own
    for drawn in (everyone, some):
        scope = figure(drawn).get("id")
        assert f"@container {str(scope).replace('-', '_')} " in drawn.html()
        assert f"#{scope} .frd-grid" in drawn.html()  # its narrow layout is its own
