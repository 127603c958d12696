"""A run's own page (its failure envelope, where it waits, its history and diagram) and
the operator's actions on it: cancel, retry, redrive and restart, each asking for
confirmation first, each done by the runner (journaled with the reader's name) or
refused with the runner's reason."""

from __future__ import annotations

from starlette.responses import Response

from flowrunner import errors, operating
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
    """The run, of this runner's resource and the reader's tenant, its waits filled in."""
    try:
        key = int(run_id)
    except ValueError:
        raise errors.OperatorError(
            f"there is no run {run_id!r}", status_code=404, code="run_unknown"
        ) from None
    with page.reading() as conn:
        stored = operating.run_for_operator(page.runner, conn, key, page.tenant)
    # runner.runs() fills in where an open run waits.
    for run in page.runner.runs(stored.record_id, tenant=page.tenant):
        if run.id == stored.id:
            return run
    return stored  # pragma: no cover - the run was just read


def run_page(page: Page, *, refused: str | None = None) -> Response:
    run = load(page, page.params["run_id"])
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
    """One action on one run: a confirmation first, then the runner's answer."""
    action = page.params["action"]
    if action not in RUN_ACTIONS:
        raise errors.OperatorError(
            f"there is no action {action!r}: {', '.join(RUN_ACTIONS)}", status_code=404
        )
    run = load(page, page.params["run_id"])
    if not page.console.access.may(page.reader, action, run):
        raise access.Refused(f"{page.reader.name} may not {action} run {run.id}", 403)
    if page.form.get("confirmed") != "yes":
        return page.render(
            "confirm_action.html",
            action=action,
            words=WORDS,
            explained=EXPLAINED[action],
            runs=[run],
            target=page.url(f"/run/{run.id}/{action}"),
            takes_reason=action in ("cancel", "restart"),
        )
    reason = page.form.get("reason").strip()
    try:
        said = do(page, action, run.id, reason)
    except errors.OperatorError as exc:
        if exc.status_code == 404:
            raise
        return run_page(page, refused=str(exc))
    return page.redirect(f"/run/{run.id}", said=said)


def do(page: Page, action: str, run_id: int, reason: str = "") -> str:
    """Do ``action`` on the run as the reader; what was done, in a sentence.

    ``OperatorError`` with the runner's sentence when the action does not apply.
    """
    runner, who, tenant = page.runner, page.reader.name, page.tenant
    if action == "cancel":
        runner.cancel(run_id, operator=who, reason=reason, tenant=tenant)
        return f"Run {run_id} cancelled."
    if action == "retry":
        runner.retry(run_id, operator=who, tenant=tenant)
        return f"Run {run_id} retried: its failed step runs again."
    if action == "redrive":
        runner.redrive(run_id, operator=who, tenant=tenant)
        return f"Run {run_id} redriven: it is due now."
    new_id = runner.restart(run_id, operator=who, reason=reason, tenant=tenant)
    return f"Run {run_id} restarted as run {new_id}."


ROUTES = [
    ("GET", "/run/{run_id}", run_page),
    ("POST", "/run/{run_id}/{action}", act),
]
