"""The Operations room: runs across records filtered by status (stuck too), flow, record
and age, a page at a time; one action on many runs, confirmed first and each run's
outcome said; the operator journal; the notices outbox.

What the filters take is read by the runner (``FlowRunner.list_runs``), so a filter that
cannot be used comes back with its sentence beside its field. On a tenant binding every
list is the reader's tenant's.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from starlette.responses import Response

from flowrunner import errors
from flowrunner.engine import actions, bulk, operations_room
from flowrunner.engine.operations import RunQuery
from flowrunner.flows.editor import TenantRows
from flowrunner.foundations import ids, statuses
from flowrunner.store import listing
from flowrunner.store import operations as ops
from flowrunner.web.console import access, record_pages, refresh, run_view, runs_pages
from flowrunner.web.console.page import Page
from flowrunner.web.console.rows_form import Problems

FILTERS = ("status", "flow", "record", "error", "older_than", "newer_than")
# Each group of failed (stuck) runs offers the action that sets them going again.
GROUP_ACTIONS = {"failed": "retry", "stuck": "redrive"}
PAGE_SIZE = 25


def _filters(page: Page) -> dict[str, str]:
    return {name: page.query.get(name, "").strip() for name in FILTERS}


def _runs_refused(page: Page) -> Response | None:
    """A refusal when the reader's roles open neither area whose runs the room lists."""
    if page.areas & {"workflows", "jobs"}:
        return None
    return page.outside("workflows")


def runs_room(page: Page) -> Response:
    closed = _runs_refused(page)
    if closed is not None:
        return closed
    given = _filters(page)
    asked: dict[str, Any] = {k: v for k, v in given.items() if v}
    asked["areas"] = page.console.access.run_areas(page.reader)
    if "record" in asked:  # its key, or what people know it by (PO-3299)
        asked["record"] = record_pages.key_for(page, asked["record"])
    before = page.query.get("before") or None
    problems = Problems()
    counts: dict[str, int] = {}
    groups: list[listing.ErrorGroup] = []
    rows: tuple[ops.RunRow, ...] = ()
    stuck: frozenset[int] = frozenset()
    next_before: int | None = None
    try:
        found = page.runner.list_runs(
            **asked, tenant=page.tenant, before_id=before, limit=PAGE_SIZE
        )
        others = {k: v for k, v in asked.items() if k != "status"}
        counts = page.runner.count_runs(**others, tenant=page.tenant)
        groups = page.runner.operations.error_groups(RunQuery(**others), tenant=page.tenant)
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
        said = operations_room.where_it_stands(dataclasses.replace(run, waiting=readable), tz)
        unread = [
            run_view.hidden_wait_sentence(w, tz) for w in run.waiting if str(w.step_id) in hidden
        ]
        # A wait the reader may not read says what it waits for, not where.
        stands[run.id] = "; ".join([*([said] if readable or not unread else []), *unread])
    with page.reading() as conn:
        flows = [str(f["name"]) for f in TenantRows(page.runner.mounted).flows(conn, page.tenant)]
        records = run_view.records_named(conn, page, [run.record_id for run in rows])
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
        records=records,
        stuck=stuck,
        next_before=next_before,
        before=before,
        flows=flows,
        actions=may_act,
        words=runs_pages.WORDS,
        here=page.url("/ops", **given, before=before),
        groups=[g for g in groups if GROUP_ACTIONS[g.status] in may_act],
        group_actions=GROUP_ACTIONS,
        matched=_matched(counts, given["status"]),
        refresh=refresh.of(page, "/ops", **given, before=before),
    )


def act_on_many(page: Page) -> Response:
    """One action on the ticked runs: the confirmation (each run's dry-run outcome),
    then each run's outcome."""
    closed = _runs_refused(page)
    if closed is not None:
        return closed
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


def _matched(counts: dict[str, int], status: str) -> int:
    """How many runs the filter matches, from the counts by status."""
    if status:
        return counts.get(status.casefold(), 0)
    return sum(counts.get(str(word), 0) for word in statuses.RunStatus)


def act_on_all(page: Page) -> Response:
    """One action on every run a filter matches: the count to confirm first ("Retry 300
    runs?"), then the action done in batches, each run journaled under the reader's name,
    and the runs refused listed with their sentences. The confirmation carries the count
    (the highest run id, the moment): posted twice, it acts on each run once."""
    action = page.form.get("action")
    if action not in runs_pages.RUN_ACTIONS:
        return page.refusal(f"choose an action: {', '.join(runs_pages.RUN_ACTIONS)}", status=422)
    if not page.console.access.may(page.reader, action, None):
        return page.refusal(f"{page.reader.name} may not {action} runs", status=403)
    given = {name: page.form.get(name).strip() for name in FILTERS}
    query = RunQuery(
        **{name: value or None for name, value in given.items()},
        areas=page.console.access.run_areas(page.reader),
    )
    back = page.url("/ops", **given)
    try:
        if page.form.get("confirmed") != "yes":
            counted = page.runner.operations.count_matching(action, query, tenant=page.tenant)
            return page.render(
                "confirm_all.html",
                status=200 if counted.count else 409,
                action=action,
                words=runs_pages.WORDS,
                explained=runs_pages.EXPLAINED[action],
                counted=counted,
                given=given,
                described=_described(given),
                back=back,
                takes_reason=action in ("cancel", "restart"),
            )
        counted = _counted(page, action)
        reader = page.reader.name

        def allowed(run: ops.RunRow) -> str | None:
            if page.console.access.may(page.reader, action, run):
                return None
            return f"{reader} may not {action} run {run.id}"

        acted = page.runner.operations.act_on_matching(
            counted,
            query,
            operator=reader,
            reason=page.form.get("reason").strip(),
            tenant=page.tenant,
            allowed=allowed,
        )
    except errors.RowInvalid as refused:
        return page.refusal(str(refused), status=422)
    names = page.runner.operations.run_record_names(
        [o.run_id for o in acted.outcomes], tenant=page.tenant
    )
    return page.render(
        "ops_all_done.html",
        action=action,
        words=runs_pages.WORDS,
        acted=acted,
        names=names,
        described=_described(given),
        back=back,
    )


def _counted(page: Page, action: str) -> bulk.Counted:
    """The count the reader confirmed, as the confirmation page wrote it."""
    number = ids.id_or_none(page.form.get("count"))
    highest = ids.id_or_none(page.form.get("highest"))
    try:
        at = datetime.fromisoformat(page.form.get("counted_at"))
    except ValueError:
        at = None
    if number is None or highest is None or at is None or at.tzinfo is None:
        raise errors.RowInvalid(
            [
                errors.FieldError(
                    "count", "the confirmation is incomplete: count the runs again", "count_invalid"
                )
            ]
        )
    return bulk.Counted(actions.action_of(action), number, highest, at)


def _described(given: dict[str, str]) -> list[tuple[str, str]]:
    """The filter in words, field by field: ``[("status", "failed"), ("error", "gateway")]``."""
    names = {
        "status": "status",
        "flow": "flow",
        "record": "record",
        "error": "error holds",
        "older_than": "started before … ago",
        "newer_than": "started within",
    }
    return [(names[name], value) for name, value in given.items() if value]


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
    names = page.runner.operations.run_record_names(
        [o.run_id for o in outcomes], tenant=page.tenant
    )
    return page.render(
        "ops_done.html",
        status=status,
        action=action,
        words=runs_pages.WORDS,
        outcomes=outcomes,
        names=names,
        summary=actions.summary(outcomes),
        back=back,
    )


def journal(page: Page) -> Response:
    if not page.areas:
        return page.refusal(
            f"{page.reader.name} may not see the journal: none of their roles opens an area "
            "of the Operations room",
            status=403,
        )
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


NOTICE_STATES = ("pending", "delivered", "failed", "undeliverable")
# What the outbox's tabs say: a notice waits, was sent, failed, or has nobody to go to.
NOTICE_WORDS = {
    "pending": "waiting",
    "delivered": "sent",
    "failed": "failed",
    "undeliverable": "undeliverable",
}


def notices(page: Page, *, refused: str | None = None) -> Response:
    closed = page.outside("deliveries")
    if closed is not None:
        return closed
    state = page.query.get("state") or None
    before = page.query.get("before") or None
    try:
        found = page.runner.operations.outbox(
            state, tenant=page.tenant, before_id=before, limit=PAGE_SIZE
        )
    except errors.RowInvalid as refusal:
        return page.refusal(str(refusal), status=422)
    reads = page.console.access.reads(page.reader)
    hidden: dict[int, set[str]] = {}
    retries: set[int] = set()
    shown = []
    for notice in found:
        if notice.run_id not in hidden:
            run = page.runner.operations.get_run(notice.run_id, tenant=page.tenant)
            hidden[notice.run_id] = run_view.hidden_steps(run, reads)
            if page.console.access.may(page.reader, "retry", run):
                retries.add(notice.run_id)
        if str(notice.step_id) not in hidden[notice.run_id]:
            shown.append(notice)
    return page.render(
        "notices.html",
        status=409 if refused else 200,
        notices=shown,
        state=state,
        states=NOTICE_STATES,
        words=NOTICE_WORDS,
        may_retry=retries,
        refused=refused,
        next_before=found.next_before,
    )


def retry_notice(page: Page) -> Response:
    """Send a failed notice again: due at once, its attempts ahead of it, journaled
    under the reader's name."""
    notice = page.runner.operations.get_notice(page.params["notice_id"], tenant=page.tenant)
    run = page.runner.operations.get_run(notice.run_id, tenant=page.tenant)
    if not page.console.access.may(page.reader, "retry", run):
        raise access.Refused(f"{page.reader.name} may not send notice {notice.id} again", 403)
    try:
        again = page.runner.operations.retry_notice(
            notice.id, operator=page.reader.name, tenant=page.tenant
        )
    except errors.OperatorError as exc:
        if exc.status_code != 409:
            raise
        return notices(page, refused=str(exc))
    # To the waiting notices, where it now is.
    return page.redirect(
        "/ops/notices",
        said=f"Notice {again.id} will be sent again through {again.channel}.",
        state="pending",
    )


ROUTES = [
    ("GET", "/ops", runs_room),
    ("POST", "/ops/act", act_on_many),
    ("POST", "/ops/act-all", act_on_all),
    ("GET", "/ops/journal", journal),
    ("GET", "/ops/notices", notices),
    ("POST", "/ops/notices/{notice_id}/retry", retry_notice),
]
