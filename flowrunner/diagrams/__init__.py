"""Diagrams of a flow, and of a record's run over its flow: HTML, SVG and Mermaid.

``flow_diagram(snapshot)`` draws a flow as its snapshot holds it; with ``run=`` it draws
the run over its own snapshot. Pure: the runner (``FlowRunner.diagram``) reads the rows,
the run and its history, and hands them here. ``model`` holds what is drawn, ``progress``
reads a run into it, and ``html``, ``svg`` and ``mermaid`` render it.

>>> from flowrunner.flows import snapshot
>>> snap = snapshot.FlowSnapshot.build(
...     {"id": 1, "name": "Welcome", "start": "created"},
...     [{"id": 1, "position": 1, "kind": "notify", "title": "Say <hi>",
...       "audience": "requester", "message": "Welcome!"}])
>>> diagram = flow_diagram(snap)
>>> "Say &lt;hi&gt;" in diagram.html(), "Say &lt;hi&gt;" in diagram.svg()
(True, True)
>>> print(diagram.mermaid().splitlines()[0])
flowchart LR
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from flowrunner.diagrams import html, mermaid, model, progress, recorded, svg
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.foundations import shapes

CanRead = model.CanRead
Href = model.Href
RunInput = progress.RunInput


class Diagram:
    """A drawn flow (or run) with its three renderings; ``picture`` holds what is drawn."""

    def __init__(self, picture: model.Picture) -> None:
        self.picture = picture

    def html(self, *, document: bool = True, href: Href | None = None) -> str:
        """Self-contained HTML: a whole page, or (``document=False``) the ``<figure>`` alone.

        ``href(what, key)`` gives the address a subflow step's box links to: of the flow it
        runs (``("flow", name)``) and of the child run (``("run", id)``); None, or
        without ``href``, the box names them without a link."""
        if document:
            return html.document(self.picture, href)
        return html.fragment(self.picture, href)

    def svg(self) -> str:
        """A standalone SVG document (wide, and down the page in a narrow window)."""
        return svg.render(self.picture)

    def mermaid(self) -> str:
        """Mermaid flowchart text, for Markdown documents."""
        return mermaid.render(self.picture)

    def render(self, format: str) -> str:
        """The rendering named ``html``, ``svg`` or ``mermaid``."""
        if format == "html":
            return self.html()
        if format == "svg":
            return self.svg()
        if format == "mermaid":
            return self.mermaid()
        raise ValueError(f"a diagram is drawn as html, svg or mermaid, not {format!r}")

    def __repr__(self) -> str:
        run = f", run {self.picture.run.id}" if self.picture.run is not None else ""
        return f"<Diagram of {self.picture.flow_name!r}{run}>"


FORMATS = ("html", "svg", "mermaid")


def flow_diagram(
    snap: snapshot.FlowSnapshot,
    *,
    config: config_mod.InterpreterConfig | None = None,
    can_read: CanRead | None = None,
    run: RunInput | None = None,
) -> Diagram:
    """The diagram of the flow ``snap`` holds, or of ``run`` over it (its own snapshot).

    ``config`` is what the runner knows of the application (``FlowRunner.config``: what
    an app kind waits for, its input columns); ``can_read(step_row)`` says whether the
    reader may see a step: one they cannot is not drawn.
    """
    config = config or config_mod.InterpreterConfig()
    picture = model.build(snap, kinds=config.kinds, can_read=can_read)
    if run is not None:
        picture = progress.overlay(picture, snap, run, config)
    return Diagram(picture)


__all__ = ["FORMATS", "CanRead", "Diagram", "Href", "RunInput", "flow_diagram"]


def workflow_diagram(
    name: str,
    version: object,
    state: shapes.Payload,
    *,
    run_id: int,
    status: str,
    reason: str | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    zone: tzinfo | None = None,
) -> Diagram:
    """A code workflow's run drawn as its recorded steps so far (``recorded.picture``),
    its moments on the wall clock ``zone`` (None: UTC)."""
    return Diagram(
        recorded.picture(
            name,
            version,
            state,
            run_id=run_id,
            status=status,
            reason=reason,
            started_at=started_at,
            ended_at=ended_at,
            zone=zone,
        )
    )
