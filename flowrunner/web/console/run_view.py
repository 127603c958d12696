"""A run as a reader sees it: where it waits, its history in sentences, its diagram with
the run drawn over it, and its failure envelope, leaving out every step the reader may
not read (its lines, its waits, its box in the diagram)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.diagrams import model
from flowrunner.flows import snapshot, spelling
from flowrunner.history import flows
from flowrunner.store import flow_rows
from flowrunner.store import operations as ops
from flowrunner.web.console.page import Page

Reads = Callable[[Mapping[str, Any]], bool]


@dataclasses.dataclass(frozen=True)
class RunView:
    """One run, readable parts only."""

    run: ops.RunRow
    waits: tuple[str, ...]
    history: tuple[ops.LogRow, ...]
    diagram_html: str

    @property
    def failure(self) -> Mapping[str, Any] | None:
        """The run's sanitized error envelope, if it failed: ``code`` and ``message``
        first, the rest by name, a nested one (its cause) alike, whatever order the
        database kept it in."""
        return None if self.run.error is None else ordered(self.run.error)


FIRST = ("code", "message")


def ordered(fields: Mapping[str, Any]) -> dict[str, Any]:
    keys = [k for k in FIRST if k in fields] + sorted(k for k in fields if k not in FIRST)
    return {k: ordered(fields[k]) if isinstance(fields[k], Mapping) else fields[k] for k in keys}


def hidden_steps(run: ops.RunRow, reads: Reads) -> set[str]:
    """The ids (as text) of the run's steps the reader may not read."""
    try:
        snap = snapshot.FlowSnapshot.from_dict(run.snapshot)
    except (KeyError, TypeError, ValueError):
        return set()
    return {str(s.id) for s in snap.steps if not reads(model.step_row(snap.flow, s))}


def links(conn: sa.Connection, page: Page) -> model.Href:
    """Where a subflow step's box leads on this console: the page of the flow it runs
    (by name, among the flows of the reader's tenant) and the page of its child run."""
    column = page.runner.binding.tenant
    tenant = page.tenant
    ids = {
        spelling.name_key(flow.get("name")): flow["id"]
        for flow in flow_rows.all_flows(conn, page.runner.tables)
        if column is None or tenant is None or str(flow.get(column)) == str(tenant)
    }

    def href(what: str, key: object) -> str | None:
        if what == "run":
            return page.url(f"/run/{key}")
        found = ids.get(spelling.name_key(str(key)))
        return None if found is None else page.url(f"/flow/{found}")

    return href


def view(conn: sa.Connection, page: Page, run: ops.RunRow) -> RunView:
    """``run`` (from ``runner.runs``, its waits filled) as the page's reader may see it."""
    runner = page.runner
    reads = page.console.access.reads(page.reader)
    hidden = hidden_steps(run, reads)
    tz = runner.config.timezone
    waits = tuple(
        flows.waiting_sentence(w, tz) for w in run.waiting if str(w.step_id) not in hidden
    )
    lines = tuple(
        line
        for line in runner.operations.history(run.id, tenant=page.tenant)
        if line.step_id is None or str(line.step_id) not in hidden
    )
    try:
        drawn = runner.operations.diagram(
            conn, run.flow_id, run=run.id, can_read=reads, tenant=page.tenant
        )
    except errors.OperatorError as exc:
        if exc.code != "not_a_flow":
            raise
        return RunView(run, waits, lines, "")  # its program draws none: its history alone
    return RunView(run, waits, lines, drawn.html(document=False, href=links(conn, page)))
