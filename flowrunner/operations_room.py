"""The Operations room: runs across records, found by what an operator asks, and the
operators' actions on many runs at once.

What an operator types — a status (``failed``, ``stuck``), a flow's name in any case or
its id, a record, an age (``older_than="2d"``, a start date) — is read here, once, for
the console and the command line alike (``run_filter``); what cannot be used is refused
with every problem at once (``RowInvalid``, one ``FieldError`` per field). The store
finds the runs (``flowrunner.store.listing``); each open run comes back with where it
waits (``RunRow.waiting``).

``act`` does one action (cancel, retry, redrive, restart) to many runs, each in its own
transaction: a run the action does not apply to is refused with its reason, and the
others go on. The outcomes say, run by run, what was done.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from flowrunner import binding, durations, errors, operating, spelling, statuses
from flowrunner.store import flow_rows, listing
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.runner import FlowRunner

STATUSES: tuple[str, ...] = (*(str(status) for status in statuses.RunStatus), listing.STUCK)
"""The words a status filter takes: the run statuses, and ``stuck``."""

DEFAULT_LIMIT = 50
"""How many rows a page holds unless asked otherwise (at most ``listing.MAX_LIMIT``)."""

Moment = datetime | date | str | None
"""A moment as an operator gives it: a datetime, a date (its midnight on the runner's
wall clock), or ISO text (``2026-03-01``, ``2026-03-01T09:00``, ``...+01:00``)."""

Age = str | durations.Duration | timedelta | None
"""An age as an operator gives it: ``2d``, ``3 hours``, ``P1W``, or a timedelta."""


class Action(enum.StrEnum):
    """What an operator does to a run."""

    CANCEL = "cancel"
    """End a run that has not ended; its waiting steps are told."""
    RETRY = "retry"
    """Run a failed run's failed step again."""
    REDRIVE = "redrive"
    """Make a run that has not ended due now, and free its lease (a stuck run goes on)."""
    RESTART = "restart"
    """Start a failed run's flow again as a new run on the same record."""


# How each action reads once done, and before (a dry run).
_DONE = {
    Action.CANCEL: "cancelled",
    Action.RETRY: "retried: its failed step runs again",
    Action.REDRIVE: "redriven: due now, its lease freed",
    Action.RESTART: "restarted",
}
_WOULD = {
    Action.CANCEL: "would be cancelled",
    Action.RETRY: "would be retried",
    Action.REDRIVE: "would be redriven",
    Action.RESTART: "would be restarted as a new run",
}


@dataclass(frozen=True)
class Outcome:
    """What one action did to one run: done, or refused with the reason."""

    run_id: int
    """The run acted on."""
    action: Action
    """What was asked."""
    done: bool
    """Whether the action was done (with ``dry_run``: whether it would be)."""
    refusal: str | None = None
    """Why not, in a sentence naming the run (``run 12 has already ended (done)``)."""
    code: str | None = None
    """The refusal's stable code for programs (``run_ended``, ``run_not_failed``,
    ``run_restarted``, ``run_unknown``, ``flow_deleted``, ...)."""
    restarted_as: int | None = None
    """A restart's new run (None on a dry run, whose new run was rolled back)."""
    dry_run: bool = False
    """True when nothing was kept: the outcome says what the action would do."""

    @property
    def sentence(self) -> str:
        """The outcome on one line: ``run 12 cancelled``, or the refusal."""
        if not self.done:
            return self.refusal or f"run {self.run_id} was refused"
        if self.dry_run:
            return f"run {self.run_id} {_WOULD[self.action]}"
        said = f"run {self.run_id} {_DONE[self.action]}"
        if self.restarted_as is not None:
            said += f" as run {self.restarted_as}"
        return said


# -- reading what an operator asks ----------------------------------------------------


def run_filter(
    runner: FlowRunner,
    *,
    tenant: object,
    status: str | Iterable[str] | None = None,
    flow: object = None,
    record: object = None,
    started_after: Moment = None,
    started_before: Moment = None,
    older_than: Age = None,
    newer_than: Age = None,
    stuck_after: Age | listing.Stuck = None,
) -> listing.RunFilter:
    """The store's filter for what an operator asked; ``RowInvalid`` naming each field
    that cannot be used (an unknown status or flow, an age or moment that does not read).

    ``older_than``/``newer_than`` count back from the runner's clock: runs started
    before (after) that moment. ``stuck_after`` (default ``listing.STUCK_AFTER``, 15
    minutes) is how long due work may go unclaimed, or a lease stay run out, before a
    run is stuck; a ``listing.Stuck`` sets the two apart.
    """
    problems: list[errors.FieldError] = []
    now = runner.clock()
    tz = runner.config.timezone

    def check(name: str, read: Any, *args: Any) -> Any:
        try:
            return read(*args)
        except _Unusable as exc:
            problems.append(errors.FieldError(name, exc.message, exc.code))
            return None

    wanted = check("status", _statuses, status) or ()
    record_id = None if record is None else check("record", _record, runner, record)
    after = check("started_after", _moment, started_after, tz, "started_after")
    before = check("started_before", _moment, started_before, tz, "started_before")
    old = check("older_than", _back, older_than, now, tz)
    new = check("newer_than", _back, newer_than, now, tz)
    stuck = check("stuck_after", _stuck, stuck_after, now, tz)
    flow_ids: tuple[str, ...] = ()
    flow_name = None
    if flow is not None:
        found = check("flow", _flow, runner, flow, tenant)
        if found is not None:
            flow_ids, flow_name = found
    if problems:
        raise errors.RowInvalid(problems)
    if old is not None:
        before = old if before is None else min(before, old)
    if new is not None:
        after = new if after is None else max(after, new)
    return listing.RunFilter(
        statuses=tuple(wanted),
        flow_ids=flow_ids,
        flow_name=flow_name,
        record_id=record_id,
        started_after=after,
        started_before=before,
        stuck=stuck or listing.Stuck(),
    )


class _Unusable(Exception):
    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _statuses(given: str | Iterable[str] | None) -> tuple[str, ...]:
    if given is None:
        return ()
    words = [given] if isinstance(given, str) else list(given)
    found: list[str] = []
    for word in words:
        key = str(word).strip().casefold()
        if key not in STATUSES:
            hint = spelling.did_you_mean(str(word), STATUSES)
            known = ", ".join(STATUSES)
            raise _Unusable(
                f"there is no status '{word}'{hint} (statuses: {known})", "status_unknown"
            )
        if key not in found:
            found.append(key)
    return tuple(found)


def _record(runner: FlowRunner, record: object) -> str:
    try:
        return str(runner.tables.key_value(record))
    except errors.RecordRejected as exc:
        raise _Unusable(str(exc), "record_invalid") from None


def _moment(given: Moment, tz: Any, name: str) -> datetime | None:
    if given is None:
        return None
    if isinstance(given, str):
        text = given.strip()
        try:
            given = datetime.fromisoformat(text)
        except ValueError:
            raise _Unusable(
                f"'{text}' is not a date or a moment — write e.g. 2026-03-01 or 2026-03-01T09:00",
                "moment_invalid",
            ) from None
    if not isinstance(given, datetime):
        given = datetime.combine(given, time(0))
    if given.tzinfo is None:
        given = given.replace(tzinfo=tz or UTC)
    return given.astimezone(UTC)


def _back(given: Age, now: datetime, tz: Any) -> datetime | None:
    """The moment ``given`` before ``now`` (on the runner's wall clock)."""
    if given is None:
        return None
    if isinstance(given, timedelta):
        return now - given
    try:
        age = durations.parse_duration(given) if isinstance(given, str) else given
    except errors.DurationError as exc:
        raise _Unusable(exc.message, exc.code) from None
    return age.subtract_from(now, tz)


def _stuck(given: Age | listing.Stuck, now: datetime, tz: Any) -> listing.Stuck | None:
    if given is None or isinstance(given, listing.Stuck):
        return given
    since = _back(given, now, tz)
    assert since is not None
    after = now - since
    return listing.Stuck(due_missed=after, lease_expired=after)


def _flow(runner: FlowRunner, flow: object, tenant: object) -> tuple[tuple[str, ...], str]:
    """The ids of the flow an operator names (by name in any case, or id) and the name to
    find runs of flows since renamed or deleted by."""
    text = str(flow).strip()
    if not text:
        raise _Unusable("name a flow, or leave the flow out", "flow_unknown")
    with runner.engine.connect() as conn:
        found = flow_rows.flow_by_name_or_id(conn, runner.tables, text, tenant)
        if found is not None:
            return (str(found["id"]),), text
        if ops.run_flow_names(conn, resource=runner.binding.resource, tenant=tenant, name=text):
            return (), text
        column = runner.binding.tenant
        known = [
            str(row["name"])
            for row in flow_rows.all_flows(conn, runner.tables)
            if row.get("name") and (column is None or str(row.get(column)) == str(tenant))
        ]
    raise _Unusable(
        f"there is no flow '{text}'{spelling.did_you_mean(text, known)}", "flow_unknown"
    )


def _page_args(before_id: object, limit: object) -> tuple[int | None, int]:
    problems = []
    before = None
    if before_id is not None:
        try:
            before = _whole(before_id)
        except ValueError:
            problems.append(
                errors.FieldError(
                    "before_id",
                    f"'{before_id}' is not a row's id: give a whole number",
                    "id_invalid",
                )
            )
    try:
        count = _whole(limit)
        if not 1 <= count <= listing.MAX_LIMIT:
            raise ValueError
    except ValueError:
        count = DEFAULT_LIMIT
        problems.append(
            errors.FieldError(
                "limit",
                f"a page holds 1 to {listing.MAX_LIMIT} rows, not '{limit}'",
                "limit_invalid",
            )
        )
    if problems:
        raise errors.RowInvalid(problems)
    return before, count


def _whole(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError
    return int(text)


# -- finding -----------------------------------------------------------------------------


def list_runs(
    runner: FlowRunner,
    where: listing.RunFilter,
    *,
    tenant: object,
    before_id: object = None,
    limit: object = DEFAULT_LIMIT,
) -> listing.Page[ops.RunRow]:
    """One page of the runs ``where`` keeps, newest first, each open one with where it
    waits."""
    before, count = _page_args(before_id, limit)
    with runner.engine.connect() as conn:
        page = ops.find_runs(
            conn,
            resource=runner.binding.resource,
            tenant=tenant,
            where=where,
            now=runner.clock(),
            before_id=before,
            limit=count,
        )
    return listing.Page(tuple(runner._standing(run) for run in page.rows), page.next_before)


def count_runs(runner: FlowRunner, where: listing.RunFilter, *, tenant: object) -> dict[str, int]:
    """How many runs ``where`` keeps have each status, and how many are stuck."""
    with runner.engine.connect() as conn:
        return ops.count_runs(
            conn, resource=runner.binding.resource, tenant=tenant, where=where, now=runner.clock()
        )


def get_run(runner: FlowRunner, run_id: int, *, tenant: binding.Tenant) -> ops.RunRow:
    """One run, with where it waits; ``OperatorError`` (404) when it is not this runner's
    (or the tenant's)."""
    with runner.engine.connect() as conn:
        run = operating.run_for_operator(runner, conn, run_id, tenant)
    return runner._standing(run)


def journal(
    runner: FlowRunner,
    *,
    tenant: object,
    run_id: int | None = None,
    operator: str | None = None,
    action: str | None = None,
    before_id: object = None,
    limit: object = DEFAULT_LIMIT,
) -> listing.Page[ops.JournalRow]:
    """One page of operators' actions on this runner's runs, newest first."""
    before, count = _page_args(before_id, limit)
    with runner.engine.connect() as conn:
        return ops.journal_page(
            conn,
            resource=runner.binding.resource,
            tenant=tenant,
            run_id=run_id,
            operator=operator,
            action=action,
            before_id=before,
            limit=count,
        )


def outbox(
    runner: FlowRunner,
    state: str | ops.NoticeState | None,
    *,
    tenant: object,
    run_id: int | None = None,
    before_id: object = None,
    limit: object = DEFAULT_LIMIT,
) -> listing.Page[ops.NoticeRow]:
    """One page of the notices this runner's runs wrote, in one state or all, newest
    first."""
    wanted = None
    if state is not None:
        try:
            wanted = ops.NoticeState(str(state).strip().casefold())
        except ValueError:
            known = ", ".join(ops.NoticeState)
            hint = spelling.did_you_mean(str(state), list(ops.NoticeState))
            raise errors.RowInvalid(
                [
                    errors.FieldError(
                        "state",
                        f"a notice is {known}, not '{state}'{hint}",
                        "state_unknown",
                    )
                ]
            ) from None
    before, count = _page_args(before_id, limit)
    with runner.engine.connect() as conn:
        return ops.outbox_page(
            conn,
            resource=runner.binding.resource,
            tenant=tenant,
            state=wanted,
            run_id=run_id,
            before_id=before,
            limit=count,
        )


# What the console journals of a flow's rows edited in a browser (flowrunner.web.console).
EDITS = {
    "flow.create": "created the flow",
    "flow.save": "changed the flow",
    "flow.delete": "deleted the flow",
    "step.add": "added a step to",
    "step.save": "changed a step of",
    "step.move": "moved a step of",
    "step.delete": "deleted a step of",
    "flows.import": "imported flows",
}


def _edit_sentence(entry: ops.JournalRow, detail: dict[str, Any]) -> str:
    """``ann changed a step of 'Big orders' (Manager approval)``."""
    said = f"{entry.operator} {EDITS[entry.action]}"
    if detail.get("flow"):
        said += f" '{detail['flow']}'"
    if detail.get("title"):
        said += f" ({detail['title']})"
    named = [*(detail.get("created") or []), *(detail.get("replaced") or [])]
    if named:
        said += ": " + ", ".join(f"'{name}'" for name in named)
    return said


def journal_sentence(entry: ops.JournalRow) -> str:
    """One journal entry as a sentence: ``olga cancelled run 12 (ticket 7): merged``."""
    verbs = {
        "cancel": "cancelled",
        "retry": "retried",
        "redrive": "redrove",
        "restart": "restarted",
        "start": "started",
    }
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.action in EDITS:
        return _edit_sentence(entry, detail)
    verb = verbs.get(entry.action, entry.action)
    said = f"{entry.operator} {verb}"
    if entry.action == "start" and detail.get("flow"):
        said += f" flow '{detail['flow']}'"
    if entry.run_id is not None:
        said += f" run {entry.run_id}"
    if entry.record_id is not None:
        said += f" ({entry.resource or 'record'} {entry.record_id})"
    if detail.get("restarted_as") is not None:
        said += f" as run {detail['restarted_as']}"
    if detail.get("reason"):
        said += f": {detail['reason']}"
    return said


# -- acting on many ----------------------------------------------------------------------


def action_of(action: str | Action) -> Action:
    """The action an operator names, in any case; ``OperatorError`` naming the actions."""
    try:
        return Action(str(action).strip().casefold())
    except ValueError:
        known = ", ".join(Action)
        hint = spelling.did_you_mean(str(action), list(Action))
        raise errors.OperatorError(
            f"there is no action '{action}'{hint} (actions: {known})", code="action_unknown"
        ) from None


def act(
    runner: FlowRunner,
    action: str | Action,
    run_ids: Iterable[object],
    *,
    operator: str,
    reason: str = "",
    tenant: object = None,
    dry_run: bool = False,
) -> list[Outcome]:
    """Do ``action`` to each run, each in its own transaction; one ``Outcome`` per run, in
    the order given (a run named twice is acted on once).

    A run the action does not apply to — ended, not failed, another tenant's, unknown —
    is refused with the reason and the rest go on: nothing is all or nothing. Refused
    before anything is done (``OperatorError``): an unknown action, no operator, no
    tenant on a tenant binding, a run id that is not a number. ``dry_run`` does each
    action and rolls it back: the outcomes say what would be done, nothing is kept.
    """
    chosen = action_of(action)
    who = (operator or "").strip()
    if not who:
        raise errors.OperatorError(
            "name the operator: every action is journaled with who did it",
            code="operator_missing",
        )
    owner = runner._need_tenant(tenant)
    ids: list[int] = []
    for given in run_ids:
        run_id = runner._run_id(given)
        if run_id not in ids:
            ids.append(run_id)
    return [_act_on(runner, chosen, run_id, who, reason, owner, dry_run) for run_id in ids]


def _act_on(
    runner: FlowRunner,
    action: Action,
    run_id: int,
    operator: str,
    reason: str,
    tenant: object,
    dry_run: bool,
) -> Outcome:
    try:
        new = _do(runner, action, run_id, operator, reason, tenant, dry_run)
    except errors.OperatorError as exc:
        return Outcome(run_id, action, False, str(exc), exc.code, dry_run=dry_run)
    except errors.LeaseLost:
        # Saved over by a worker or another operator between the read and the write.
        return Outcome(
            run_id,
            action,
            False,
            f"run {run_id} changed while it was being acted on; look at it again",
            "run_changed",
            dry_run=dry_run,
        )
    return Outcome(run_id, action, True, restarted_as=None if dry_run else new, dry_run=dry_run)


def _do(
    runner: FlowRunner,
    action: Action,
    run_id: int,
    operator: str,
    reason: str,
    tenant: object,
    dry_run: bool,
) -> int | None:
    args: dict[str, Any] = {
        "operator": operator,
        "reason": reason,
        "tenant": tenant,
        "dry_run": dry_run,
    }
    if action == Action.CANCEL:
        operating.cancel(runner, run_id, **args)
    elif action == Action.RETRY:
        operating.retry(runner, run_id, **args)
    elif action == Action.REDRIVE:
        operating.redrive(runner, run_id, **args)
    else:
        return operating.restart(runner, run_id, **args)
    return None


def summary(outcomes: Sequence[Outcome]) -> str:
    """``3 done, 1 refused`` (``would be done`` on a dry run)."""
    done = sum(1 for outcome in outcomes if outcome.done)
    dry = any(outcome.dry_run for outcome in outcomes)
    verb = "would be done" if dry else "done"
    return f"{done} {verb}, {len(outcomes) - done} refused"
