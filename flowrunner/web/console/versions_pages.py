"""A flow's versions in the console: the draft and what it changes, publish with a note,
the list of versions, two versions compared side by side, roll back, and the runs of
an old version moved to a new one — the dry run shown first.

Every change goes through the runner's ``publishing`` service, so it is checked and
journaled as on the command line; publishing and rolling back are an editor's (the
``can_edit`` hook, on the flow), moving runs an operator's (``can_operate``, ``move``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.responses import Response

from flowrunner import diagrams, errors
from flowrunner.flows import publishing
from flowrunner.flows.snapshot import FlowSnapshot
from flowrunner.flows.versions import Change
from flowrunner.web.console.page import Page


@dataclasses.dataclass(frozen=True)
class Draft:
    """The flow's rows against its latest version: what a publish would change."""

    latest: int | None
    changes: tuple[Change, ...]
    explicit: bool

    @property
    def sentence(self) -> str:
        if self.latest is None:
            if self.explicit:
                return "Never published: no run starts until it is."
            return "No version yet: the rows become version 1 when a run first starts on them."
        if not self.changes:
            return f"The rows are version {self.latest}."
        count = len(self.changes)
        noun = "change" if count == 1 else "changes"
        if self.explicit:
            return f"{count} {noun} not published: runs start on version {self.latest}."
        return f"{count} {noun} since version {self.latest}, which runs use from their next start."


def draft_of(page: Page, flow_id: Any) -> Draft:
    """Where the reader's flow ``flow_id`` stands against its published versions."""
    service = page.runner.publishing
    known = service.versions(flow_id, tenant=page.tenant)
    explicit = page.runner.binding.publish == "explicit"
    if not known:
        return Draft(None, (), explicit)
    compared = service.compare(flow_id, known[-1].number, publishing.DRAFT, tenant=page.tenant)
    return Draft(known[-1].number, compared.changes, explicit)


def _flow(page: Page) -> dict[str, Any]:
    from flowrunner.flows.editor import TenantRows

    with page.reading() as conn:
        return TenantRows(page.runner.mounted).flow(conn, page.params["flow_id"], page.tenant)


def _may_edit(page: Page, flow: dict[str, Any]) -> None:
    if not page.console.access.may_edit(page.reader, flow):
        raise errors.OperatorError(
            f"{page.reader.name} may not publish or roll back {flow.get('name')!r}",
            status_code=403,
            code="not_allowed",
        )


def _number(page: Page, name: str, given: str | None) -> int | None:
    """A version number from the query or the form; None when not given."""
    if given is None or given == "":
        return None
    if not given.isdigit() or not 0 < int(given) < 2**31:
        raise errors.OperatorError(
            f"{name} must be a version number, not {given!r}", status_code=422, code="bad_version"
        )
    return int(given)


def _drawn(page: Page, snap: FlowSnapshot) -> str:
    drawn = diagrams.flow_diagram(
        snap, config=page.runner.config, can_read=page.console.access.reads(page.reader)
    )
    return drawn.html(document=False)


# -- the versions page ------------------------------------------------------------------


def versions_page(page: Page) -> Response:
    flow = _flow(page)
    known = page.runner.publishing.versions(flow["id"], tenant=page.tenant)
    return page.render(
        "versions.html",
        flow=flow,
        versions=list(reversed(known)),
        draft=draft_of(page, flow["id"]),
        may_edit=page.console.access.may_edit(page.reader, flow),
        may_move=page.console.access.may(page.reader, "move", None),
    )


def publish(page: Page) -> Response:
    flow = _flow(page)
    _may_edit(page, flow)
    note = (page.form.get("note") or "").strip()
    with page.writing() as conn:
        version = page.runner.publishing.publish(
            conn, flow["id"], by=page.reader.name, note=note, tenant=page.tenant
        )
    return page.redirect(
        f"/flow/{flow['id']}/versions", said=f"Published version {version.number}."
    )


# -- comparing ----------------------------------------------------------------------------


def compare_page(page: Page) -> Response:
    flow = _flow(page)
    before = page.query.get("a") or "1"
    after = page.query.get("b") or publishing.DRAFT
    for name, given in (("a", before), ("b", after)):
        if given != publishing.DRAFT:
            _number(page, name, given)
    service = page.runner.publishing
    compared = service.compare(flow["id"], before, after, tenant=page.tenant)
    kept = service.snapshots(flow["id"], before, after, tenant=page.tenant)
    sides = [
        (_label(which), _drawn(page, snap))
        for which, snap in zip((before, after), kept, strict=True)
    ]
    return page.render("compare.html", flow=flow, compared=compared, sides=sides)


def _label(which: str) -> str:
    return "The draft (the rows as they are)" if which == publishing.DRAFT else f"Version {which}"


# -- rolling back -------------------------------------------------------------------------


def rollback_page(page: Page) -> Response:
    flow = _flow(page)
    _may_edit(page, flow)
    to = _number(page, "to", page.query.get("to"))
    if to is None:
        raise errors.OperatorError("say which version to roll back to", status_code=422)
    compared = page.runner.publishing.compare(flow["id"], publishing.DRAFT, to, tenant=page.tenant)
    return page.render("rollback.html", flow=flow, to=to, compared=compared)


def roll_back(page: Page) -> Response:
    flow = _flow(page)
    _may_edit(page, flow)
    to = _number(page, "to", page.form.get("to"))
    if to is None or page.form.get("confirmed") != "yes":
        raise errors.OperatorError("a roll back needs its version, confirmed", status_code=422)
    with page.writing() as conn:
        version = page.runner.publishing.roll_back(
            conn,
            flow["id"],
            to,
            by=page.reader.name,
            note=(page.form.get("note") or "").strip(),
            tenant=page.tenant,
        )
    return page.redirect(
        f"/flow/{flow['id']}/versions",
        said=f"Published version {version.number}: the rows of version {to}.",
    )


# -- moving runs ----------------------------------------------------------------------------


def _may_move(page: Page) -> None:
    if not page.console.access.may(page.reader, "move", None):
        raise errors.OperatorError(
            f"{page.reader.name} may not move runs", status_code=403, code="not_allowed"
        )


def move_page(page: Page) -> Response:
    """The dry run: which runs of version ``from`` would move, which not and why."""
    flow = _flow(page)
    _may_move(page)
    source = _number(page, "from", page.query.get("from"))
    target = _number(page, "to", page.query.get("to"))
    if source is None:
        raise errors.OperatorError("say which version's runs to move", status_code=422)
    outcomes = page.runner.publishing.move_runs(
        flow["id"],
        from_version=source,
        to_version=target,
        by=page.reader.name,
        tenant=page.tenant,
    )
    return page.render(
        "move.html", flow=flow, source=source, target=target, outcomes=outcomes, done=False
    )


def move(page: Page) -> Response:
    flow = _flow(page)
    _may_move(page)
    source = _number(page, "from", page.form.get("from"))
    target = _number(page, "to", page.form.get("to"))
    if source is None or page.form.get("confirmed") != "yes":
        raise errors.OperatorError("a move needs its version, confirmed", status_code=422)
    outcomes = page.runner.publishing.move_runs(
        flow["id"],
        from_version=source,
        to_version=target,
        by=page.reader.name,
        dry_run=False,
        tenant=page.tenant,
    )
    return page.render(
        "move.html", flow=flow, source=source, target=target, outcomes=outcomes, done=True
    )


ROUTES = [
    ("GET", "/flow/{flow_id}/versions", versions_page),
    ("POST", "/flow/{flow_id}/publish", publish),
    ("GET", "/flow/{flow_id}/compare", compare_page),
    ("GET", "/flow/{flow_id}/rollback", rollback_page),
    ("POST", "/flow/{flow_id}/rollback", roll_back),
    ("GET", "/flow/{flow_id}/move", move_page),
    ("POST", "/flow/{flow_id}/move", move),
]
