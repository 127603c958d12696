"""The Operations room: runs across records filtered by status (stuck too), flow, record
and age, a page at a time; one action on many runs, confirmed first and each run's
outcome said; the operator journal; the notices outbox.

What the filters take is read by the runner (``FlowRunner.list_runs``), so a filter that
cannot be used comes back with its sentence beside its field. On a tenant binding every
list is the reader's tenant's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.responses import Response

from flowrunner import errors
from flowrunner.engine import actions, operations_room
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import ids
from flowrunner.store import operations as ops
from flowrunner.web.console import refresh, run_view, runs_pages
from flowrunner.web.console.page import Page
from flowrunner.web.console.rows_form import Problems

FILTERS = ("status", "flow", "record", "older_than", "newer_than")
PAGE_SIZE = 25


def _filters(page: Page) -> dict[str, str]:
    return {name: page.query.get(name, "").strip() for name in FILTERS}


def runs_room(page: Page) -> Response:
    given = _filters(page)
    asked: dict[str, Any] = {k: v for k, v in given.items() if v}
    before = page.query.get("before") or None
    problems = Problems()
    counts: dict[str, int] = {}
    rows: tuple[ops.RunRow, ...] = ()
    stuck: frozenset[int] = frozenset()
    next_before: int | None = None
    try:
        found = page.runner.list_runs(
            **asked, tenant=page.tenant, before_id=before, limit=PAGE_SIZE
        )
        counts = page.runner.count_runs(
            **{k: v for k, v in asked.items() if k != "status"}, tenant=page.tenant
        )
        rows, stuck, next_before = found.rows, found.stuck, found.next_before
    except errors.RowInvalid as refused:
        problems = Problems.of(refused, FILTERS)
    reads = page.console.access.reads(page.reader)
    tz = page.runner.config.timezone
    stands = {}
    for run in rows:
        # Where it stands, in the words flowrunner runs list uses, its hidden waits left out.
        hidden = run_view.hidden_steps(run, reads)
        readable = tuple(w for w in run.waiting if str(w.step_id) not in hidden)
        stands[run.id] = operations_room.where_it_stands(
            dataclasses.replace(run, waiting=readable), tz
        )
    with page.reading() as conn:
        flows = [str(f["name"]) for f in TenantRows(page.runner.mounted).flows(conn, page.tenant)]
    may_act = [a for a in runs_pages.RUN_ACTIONS if page.console.access.may(page.reader, a, None)]
    return page.render(
        "ops.html",
        status=422 if problems else 200,
        given=given,
        problems=problems,
        counts=counts,
        statuses=operations_room.STATUSES,
        runs=rows,
        stands=stands,
        stuck=stuck,
        next_before=next_before,
        before=before,
        flows=flows,
        actions=may_act,
        words=runs_pages.WORDS,
        here=page.url("/ops", **given, before=before),
        refresh=refresh.of(page, "/ops", **given, before=before),
    )


def act_on_many(page: Page) -> Response:
    """One action on the ticked runs: the confirmation (each run's dry-run outcome),
    then each run's outcome."""
    action = page.form.get("action")
    if action not in runs_pages.RUN_ACTIONS:
        return page.refusal(f"choose an action: {', '.join(runs_pages.RUN_ACTIONS)}", status=422)
    back = _back(page)
    ids = list(dict.fromkeys(page.form.getlist("run")))
    if not ids:
        return page.refusal("tick the runs to act on first", status=422)
    runs: list[ops.RunRow] = []
    refused: list[actions.Outcome] = []
    for given in ids:
        try:
            run = page.runner.operations.get_run(given, tenant=page.tenant)
        except errors.OperatorError as exc:
            refused.append(_refusal(given, action, str(exc), exc.code))
            continue
        if page.console.access.may(page.reader, action, run):
            runs.append(run)
        else:
            message = f"{page.reader.name} may not {action} run {run.id}"
            refused.append(_refusal(run.id, action, message, "not_allowed"))
    if page.form.get("confirmed") != "yes":
        if not runs:
            return _outcomes(page, action, refused, back, status=409)
        return runs_pages.confirm(
            page, action, runs, page.url("/ops/act"), back=back, refused=refused
        )
    done = page.runner.operations.act(
        action,
        [run.id for run in runs],
        operator=page.reader.name,
        reason=page.form.get("reason").strip(),
        tenant=page.tenant,
    )
    return _outcomes(page, action, [*done, *refused], back)


def _refusal(run_id: Any, action: str, message: str, code: str) -> actions.Outcome:
    key = ids.id_or_none(run_id) or 0
    return actions.Outcome(key, actions.Action(action), False, refusal=message, code=code)


def _back(page: Page) -> str:
    """Where the list the action came from is (only a path of this console)."""
    back = page.form.get("back")
    root = page.url("")
    return back if back.startswith(f"{root}/") and "//" not in back else page.url("/ops")


def _outcomes(
    page: Page,
    action: str,
    outcomes: list[actions.Outcome],
    back: str,
    *,
    status: int = 200,
) -> Response:
    return page.render(
        "ops_done.html",
        status=status,
        action=action,
        words=runs_pages.WORDS,
        outcomes=outcomes,
        summary=actions.summary(outcomes),
        back=back,
    )


def journal(page: Page) -> Response:
    before = page.query.get("before") or None
    try:
        entries = page.runner.operations.journal(
            tenant=page.tenant, before_id=before, limit=PAGE_SIZE
        )
    except errors.RowInvalid as refused:
        return page.refusal(str(refused), status=422)
    return page.render(
        "journal.html",
        entries=[(e, operations_room.journal_sentence(e)) for e in entries],
        next_before=entries.next_before,
    )


NOTICE_STATES = ("pending", "delivered", "undeliverable")


def notices(page: Page) -> Response:
    state = page.query.get("state") or None
    before = page.query.get("before") or None
    try:
        found = page.runner.operations.outbox(
            state, tenant=page.tenant, before_id=before, limit=PAGE_SIZE
        )
    except errors.RowInvalid as refused:
        return page.refusal(str(refused), status=422)
    reads = page.console.access.reads(page.reader)
    hidden: dict[int, set[str]] = {}
    shown = []
    for notice in found:
        if notice.run_id not in hidden:
            run = page.runner.operations.get_run(notice.run_id, tenant=page.tenant)
            hidden[notice.run_id] = run_view.hidden_steps(run, reads)
        if str(notice.step_id) not in hidden[notice.run_id]:
            shown.append(notice)
    return page.render(
        "notices.html",
        notices=shown,
        state=state,
        states=NOTICE_STATES,
        next_before=found.next_before,
    )


ROUTES = [
    ("GET", "/ops", runs_room),
    ("POST", "/ops/act", act_on_many),
    ("GET", "/ops/journal", journal),
    ("GET", "/ops/notices", notices),
]
