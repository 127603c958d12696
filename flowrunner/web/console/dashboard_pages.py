"""A flow's dashboard: its runs started and ended per day over the last 30 days, how long
they took to finish (the median and the 95th percentile) and how long they stayed at
each step, where its runs wait now and how many are late or failed at each step drawn
on the flow's diagram, and the steps that gave up (their deadlines breached).

Charts are SVG drawn here (``charts``), each with its figures as a table under it. On a
tenant binding every figure counts the reader's tenant's runs only; a step the reader
may not read is in no chart, table or box.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from starlette.responses import Response

from flowrunner.diagrams import Diagram, marks, model
from flowrunner.engine import operations_room
from flowrunner.flows.editor import TenantRows
from flowrunner.store import dashboard
from flowrunner.store import flow_rows as flow_rows_store
from flowrunner.web.console import charts, run_view
from flowrunner.web.console.page import Page

DAYS = 30


@dataclasses.dataclass(frozen=True)
class Figures:
    """What the dashboard shows of one flow, as the store counted it."""

    labels: tuple[str, ...]
    days: tuple[date, ...]
    started: list[int]
    ended: list[int]
    statuses: dict[str, int]
    finish: dashboard.Spread
    steps: list[dashboard.StepFigures]
    now: list[dashboard.PositionNow]


def day_bounds(today: date, tz: Any, count: int = DAYS) -> dashboard.Days:
    """The last ``count`` days up to ``today`` on the wall clock ``tz``, as UTC bounds."""
    first = today - timedelta(days=count - 1)
    midnights = [
        datetime.combine(first + timedelta(days=n), time(0), tzinfo=tz or UTC).astimezone(UTC)
        for n in range(count + 1)
    ]
    return dashboard.Days(tuple(midnights))


def figures(page: Page, flow_id: str) -> Figures:
    """The flow's figures for the page's reader (their tenant's runs only)."""
    runner = page.runner
    tz = runner.config.timezone
    now = runner.clock()
    today = now.astimezone(tz or UTC).date()
    days = day_bounds(today, tz)
    scope = dashboard.Scope(runner.binding.resource, flow_id, page.tenant)
    with page.reading() as conn:
        started, ended = dashboard.per_day(conn, scope, days)
        statuses = dashboard.by_status(conn, scope, days.since)
        finish = dashboard.finish_times(conn, scope, days.since)
        steps = dashboard.step_times(conn, scope, days.since)
        where = dashboard.where_now(conn, scope, now)
    shown_days = tuple(today - timedelta(days=DAYS - 1 - n) for n in range(DAYS))
    labels = tuple(f"{d.day} {d:%b}" for d in shown_days)
    return Figures(labels, shown_days, started, ended, statuses, finish, steps, where)


def took(seconds: float | None) -> str:
    """Seconds as the dashboard shows them: ``2d 4h``, ``3h 5m``, ``40s``; ``–`` for none."""
    if seconds is None:
        return "–"
    return operations_room.age(timedelta(seconds=seconds))


def counted(picture: model.Picture, found: Figures) -> model.Picture:
    """The flow's picture with each step's counts on its box: how many runs wait at its
    position now (how many late), how many failed there, how many passes gave up, and
    how long a pass takes (median)."""
    at = {p.position: p for p in found.now}
    by_step = {s.step_id: s for s in found.steps}
    columns = []
    for column in picture.columns:
        now = at.get(column.position)
        boxes = []
        for lane, box in enumerate(column.boxes):
            step = by_step.get(str(box.step_id))
            here = now if lane == 0 else None
            boxes.append(dataclasses.replace(box, run=_box_counts(here, step)))
        columns.append(dataclasses.replace(column, boxes=tuple(boxes)))
    return dataclasses.replace(picture, columns=tuple(columns))


def _box_counts(
    now: dashboard.PositionNow | None, step: dashboard.StepFigures | None
) -> model.StepRun:
    waiting = now.waiting if now else 0
    late = now.late if now else 0
    failed = now.failed if now else 0
    gave_up = step.gave_up if step else 0
    text = f"{waiting} waiting" + (f", {late} late" if late else "")
    details = []
    if failed:
        details.append(f"{failed} failed here")
    if gave_up:
        details.append(f"{gave_up} gave up")
    if step is not None and step.time.count:
        details.append(f"median {took(step.time.median)} over {step.time.count} passes")
    state = "failed" if failed else "timed_out" if late else "waiting" if waiting else "ahead"
    assert state in marks.STATES
    return model.StepRun(state, text, tuple(details))


def flow_dashboard(page: Page) -> Response:
    flow_id = page.params["flow_id"]
    reads = page.console.access.reads(page.reader)
    with page.reading() as conn:
        flow = TenantRows(page.runner.mounted).flow(conn, flow_id, page.tenant)
        all_steps = flow_rows_store.steps_of_flow(conn, page.runner.tables, flow["id"])
        drawn = page.runner.operations.diagram(conn, flow["id"], can_read=reads, tenant=page.tenant)
        href = run_view.links(conn, page)
    hidden = {str(s["id"]) for s in all_steps if not reads(s)}
    found = figures(page, str(flow["id"]))
    found = dataclasses.replace(found, steps=[s for s in found.steps if s.step_id not in hidden])
    readable_positions = {c.position for c in drawn.picture.columns if c.boxes}
    hidden_positions = {int(s["position"]) for s in all_steps if str(s["id"]) in hidden}
    now = [
        p
        for p in found.now
        if p.position in readable_positions or p.position not in hidden_positions
    ]
    found = dataclasses.replace(found, now=now)
    diagram_html = Diagram(counted(drawn.picture, found)).html(document=False, href=href)
    per_day = charts.per_day_chart(
        found.labels, found.started, found.ended, title="Runs started and ended per day"
    )
    steps_chart = charts.bars_chart(
        [
            (s.title or f"step {s.step_id}", (s.time.median or 0, s.time.p95 or 0))
            for s in found.steps
        ],
        (("median", charts.STARTED), ("95th", charts.LATE)),
        title="Time spent at each step",
        name="step-times",
        shown=[(took(s.time.median), took(s.time.p95)) for s in found.steps],
    )
    breaches = [s for s in found.steps if s.gave_up]
    breaches_chart = charts.bars_chart(
        [(s.title or f"step {s.step_id}", (s.gave_up,)) for s in breaches],
        (("gave up", charts.FAILED),),
        title="Steps that gave up",
        name="breaches",
    )
    titles = {
        str(s["position"]): str(s.get("title") or "")
        for s in all_steps
        if str(s["id"]) not in hidden
    }
    return page.render(
        "dashboard.html",
        flow=flow,
        found=found,
        days=list(zip(found.labels, found.days, found.started, found.ended, strict=True)),
        per_day=per_day,
        steps_chart=steps_chart,
        breaches=breaches,
        breaches_chart=breaches_chart,
        diagram_html=diagram_html,
        titles=titles,
        took=took,
        sampled=dashboard.RUNS if sum(found.statuses.values()) > dashboard.RUNS else None,
    )


ROUTES = [("GET", "/flow/{flow_id}/dashboard", flow_dashboard)]
