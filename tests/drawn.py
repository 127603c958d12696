"""Helpers for tests of diagrams: the fixture flows as snapshots, and each rendering read
back as a tree (the HTML figure and the SVG are well-formed XML) or as Mermaid lines."""

from __future__ import annotations

import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import sqlalchemy as sa
from running import app, decide, mount

from flowrunner import diagrams, testing
from flowrunner.flows import files, snapshot
from flowrunner.flows.interpreter.config import InterpreterConfig, KindConfig

SVG_NS = "{http://www.w3.org/2000/svg}"


def fixture_snapshots(name: str) -> dict[str, snapshot.FlowSnapshot]:
    """The flows of a fixture app's flows file, by name, as a run would keep them."""
    module = app(name)
    found = {}
    step_id = 0
    for flow_id, doc in enumerate(files.read_file(module.FLOWS_FILE), start=1):
        rows = []
        for step in doc.steps:
            step_id += 1
            rows.append({**step, "id": step_id, "flow_id": flow_id})
        found[doc.flow["name"]] = snapshot.FlowSnapshot.build({**doc.flow, "id": flow_id}, rows)
    return found


def config(*names: str) -> InterpreterConfig:
    """What a runner of the named fixture apps knows of their kinds (``FlowRunner.config``)."""
    kinds = {
        name: KindConfig(
            name=name, command=kind.command, inputs=tuple(kind.input), wait_for=kind.wait_for
        )
        for app_name in names
        for name, kind in app(app_name).binding.kinds.items()
    }
    return InterpreterConfig(kinds=kinds)


def figure(diagram: diagrams.Diagram) -> ET.Element:
    """The HTML ``<figure>`` as a tree (its entities decoded, as a browser reads them)."""
    return ET.fromstring(diagram.html(document=False))


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def having(root: ET.Element, name: str) -> list[ET.Element]:
    """Every element under ``root`` with the class ``name``, in document order."""
    return [e for e in root.iter() if name in classes(e)]


def text(element: ET.Element) -> str:
    return "".join(element.itertext())


def columns(fig: ET.Element) -> list[ET.Element]:
    return having(fig, "frd-col")


def titles(column: ET.Element) -> list[str]:
    return [text(t) for t in having(column, "frd-title")]


def other_ways(fig: ET.Element) -> list[dict[str, str]]:
    return [dict(e.attrib) for e in having(fig, "frd-other")]


def next_ways(fig: ET.Element) -> list[dict[str, str]]:
    return [dict(e.attrib) for e in having(fig, "frd-next")]


def svg_tree(diagram: diagrams.Diagram) -> ET.Element:
    return ET.fromstring(diagram.svg().encode("utf-8"))


def svg_texts(root: ET.Element) -> Iterator[str]:
    """Each ``<text>`` of the SVG, its lines joined by spaces."""
    for element in root.iter(f"{SVG_NS}text"):
        yield " ".join(t for t in element.itertext())


_ENTITY = re.compile(r"#(\d+);")


def mermaid_decoded(label: str) -> str:
    """A Mermaid label's text as Mermaid shows it: entity codes back to characters."""
    return _ENTITY.sub(lambda m: chr(int(m.group(1))), label)


_NODE = re.compile(r'^\s+(s\d+)(\[\[|\[/|\[\\|\(\[|\{|>)"(.*)"(\]\]|/\]|\\\]|\]\)|\}|\])$')


def mermaid_nodes(text: str) -> dict[str, list[str]]:
    """Each step node of a Mermaid text: its id -> the lines of its label, decoded."""
    found = {}
    for line in text.splitlines():
        match = _NODE.match(line)
        if match:
            found[match.group(1)] = [mermaid_decoded(p) for p in match.group(3).split("<br/>")]
    return found


# -- runs the docs and the browser tests draw -------------------------------------------


def waiting_order(driver: testing.FlowDriver) -> None:
    """A big order: the finance approver cfo@example.com said yes an hour in."""
    driver.create({"id": 1, "number": "PO-1", "requester_id": "ann", "amount": 25000})
    driver.advance("1 hour")
    decide(driver, 1, "cfo@example.com")


def nudged_ticket(driver: testing.FlowDriver) -> None:
    """A ticket waiting for its requester, who has not answered in five days."""
    driver.create({"id": 1, "title": "T1", "requester_id": "ann"})
    driver.update(1, status="waiting")
    driver.advance("5 days")


STORIES = {"waiting": ("purchase_orders", waiting_order), "nudged": ("tickets", nudged_ticket)}


def drawn_run(app_name: str, flow: str, story: str) -> diagrams.Diagram:
    """The diagram of the run a story leaves (``STORIES``), on a SQLite file of its own."""
    expected_app, tell = STORIES[story]
    assert app_name == expected_app, f"story {story} is told with {expected_app}"
    with tempfile.TemporaryDirectory() as folder:
        engine = sa.create_engine(f"sqlite:///{folder}/story.db")
        try:
            driver = mount(engine, app_name)
            tell(driver)
            run = next(r.id for r in driver.runs(1) if r.flow_name == flow)
            with driver.runner.engine.connect() as conn:
                return driver.runner.diagram(conn, flow, run=run)
        finally:
            engine.dispose()
