"""A run's own page (its failure envelope, where it waits, its history and diagram) and
the operator's actions on it: cancel, retry, redrive and restart, each asking for
confirmation first, each done by the runner (journaled with the reader's name) or
refused with the runner's reason."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.responses import Response

from flowrunner import errors
from flowrunner.engine import actions
from flowrunner.store import listing
from flowrunner.store import operations as ops
from flowrunner.web.console import access, run_view
from flowrunner.web.console.page import Page

RUN_ACTIONS = ("cancel", "retry", "redrive", "restart")

WORDS = {
    "cancel": "Cancel",
    "retry": "Retry",
    "redrive": "Redrive",
    "restart": "Restart",
}
EXPLAINED = {
    "cancel": "The run stops for good; its waiting steps are told (their cancel commands run).",
    "retry": "The failed step runs again, and the run goes on from there.",
    "redrive": "The run is made due now and its lease freed, so a worker takes it at once.",
    "restart": "A new run of the flow starts on the same record, on the flow's rows as they "
    "are now; this run stays failed and points at it.",
}


def load(page: Page, run_id: str) -> ops.RunRow:
    """The run, of this runner's resource and the reader's tenant, with where it waits."""
    return page.runner.operations.get_run(run_id, tenant=page.tenant)


def run_page(page: Page, *, refused: str | None = None) -> Response:
    run = load(page, page.params["run_id"])
    if page.console.access.authority is not None and run.flow_id.startswith(listing.JOB_RUNS):
        closed = page.outside("jobs")  # a job's run is the jobs area's
        if closed is not None:
            return closed
    with page.reading() as conn:
        shown = run_view.view(conn, page, run)
    return page.render(
        "run.html",
        status=409 if refused else 200,
        view=shown,
        actions=[a for a in RUN_ACTIONS if page.console.access.may(page.reader, a, run)],
        words=WORDS,
        refused=refused,
    )


def act(page: Page) -> Response:
    """One action on one run: a confirmation first (saying whether it applies), then
    the runner's answer."""
    action = page.params["action"]
    if action not in RUN_ACTIONS:
        raise errors.OperatorError(
            f"there is no action {action!r}: {', '.join(RUN_ACTIONS)}",
            status_code=404,
            code="action_unknown",
        )
    run = load(page, page.params["run_id"])
    if not page.console.access.may(page.reader, action, run):
        raise access.Refused(f"{page.reader.name} may not {action} run {run.id}", 403)
    reason = page.form.get("reason").strip()
    if page.form.get("confirmed") != "yes":
        return confirm(page, action, [run], page.url(f"/run/{run.id}/{action}"))
    [outcome] = page.runner.operations.act(
        action, [run.id], operator=page.reader.name, reason=reason, tenant=page.tenant
    )
    if not outcome.done:
        return run_page(page, refused=outcome.sentence)
    return page.redirect(f"/run/{run.id}", said=said(outcome.sentence))


def confirm(
    page: Page,
    action: str,
    runs: list[ops.RunRow],
    target: str,
    *,
    back: str | None = None,
    refused: Sequence[actions.Outcome] = (),
) -> Response:
    """The page that asks before ``action``: what it does, and run by run whether it
    applies (the runner's dry run: done and rolled back) or why not. ``refused``: runs
    refused before the runner was asked (unknown, not the reader's to act on)."""
    would = page.runner.operations.act(
        action,
        [run.id for run in runs],
        operator=page.reader.name,
        tenant=page.tenant,
        dry_run=True,
    )
    applies = [o.run_id for o in would if o.done]
    with page.reading() as conn:
        records = run_view.records_named(conn, page, [run.record_id for run in runs])
    return page.render(
        "confirm_action.html",
        status=200 if applies else 409,
        action=action,
        words=WORDS,
        explained=EXPLAINED[action],
        outcomes=[*would, *refused],
        runs={run.id: run for run in runs},
        records=records,
        applies=applies,
        target=target,
        back=back or page.url(f"/run/{runs[0].id}"),
        takes_reason=action in ("cancel", "restart"),
    )


def said(sentence: str) -> str:
    """An outcome's sentence as the page says it: ``Run 12 cancelled.``"""
    return sentence[:1].upper() + sentence[1:] + "."


ROUTES = [
    ("GET", "/run/{run_id}", run_page),
    ("POST", "/run/{run_id}/{action}", act),
]
