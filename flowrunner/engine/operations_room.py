"""The Operations room: runs across records found by what an operator asks, the header's
counts, the journal and the notices outbox, and where each run stands in words.

What an operator types — a status (``failed``, ``stuck``), a flow's name in any case or
its id, a record, an age (``older_than="2d"``, a start date) — is read here, once, for
the console and the command line alike (``run_filter``); what cannot be used is refused
with every problem at once (``RowInvalid``, one ``FieldError`` per field). The store
finds the runs (``flowrunner.store.listing``); each open run comes back with where it
waits (``RunRow.waiting``).

What operators do to the runs they found — one action on many runs, each refused with
its reason where it does not apply — is ``flowrunner.engine.actions.act``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from flowrunner import binding, errors
from flowrunner.engine import actions
from flowrunner.engine.mounted import program_of
from flowrunner.flows import spelling
from flowrunner.foundations import durations, ids, payloads, statuses
from flowrunner.history import flows, runs
from flowrunner.store import flow_rows, listing
from flowrunner.store import operations as ops

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

STATUSES: tuple[str, ...] = (*(str(status) for status in statuses.RunStatus), listing.STUCK)
"""The words a status filter takes: the run statuses, and ``stuck``."""

DEFAULT_LIMIT = 50
"""How many rows a page holds unless asked otherwise (at most ``listing.MAX_LIMIT``)."""

Moment = datetime | date | str | None
"""A moment as an operator gives it: a datetime, a date (its midnight on the runner's
wall clock), or ISO text (``2026-03-01``, ``2026-03-01T09:00``, ``...+01:00``)."""

Age = str | durations.Duration | timedelta | None
"""An age as an operator gives it: ``2d``, ``3 hours``, ``P1W``, or a timedelta."""


# -- reading what an operator asks ----------------------------------------------------


def run_filter(
    mounted: Mounted,
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
    error: str | None = None,
    areas: Iterable[str] | None = None,
) -> listing.RunFilter:
    """The store's filter for what an operator asked; ``RowInvalid`` naming each field
    that cannot be used (an unknown status or flow, an age or moment that does not read).

    ``older_than``/``newer_than`` count back from the runner's clock: runs started
    before (after) that moment. ``stuck_after`` (default ``listing.STUCK_AFTER``, 15
    minutes) is how long due work may go unclaimed, or a lease stay run out, before a
    run is stuck; a ``listing.Stuck`` sets the two apart. ``error``: runs whose error
    (the reason they failed or ended) holds this text, in any case. ``areas``: the
    Operations room's areas whose runs are kept — ``workflows`` (flows, code workflows,
    timers), ``jobs``, or both (None: every run). Blank text (a form's empty field) asks
    for nothing.
    """
    status, flow, record, error = _blank(status), _blank(flow), _blank(record), _blank(error)
    started_after, started_before = _blank(started_after), _blank(started_before)
    older_than, newer_than, stuck_after = (
        _blank(older_than),
        _blank(newer_than),
        _blank(stuck_after),
    )
    problems: list[errors.FieldError] = []
    now = mounted.clock()
    tz = mounted.config.timezone

    def check(name: str, read: Any, *args: Any) -> Any:
        try:
            return read(*args)
        except _Unusable as exc:
            problems.append(errors.FieldError(name, exc.message, exc.code))
            return None

    wanted = check("status", _statuses, status) or ()
    record_id = None if record is None else check("record", _record, mounted, record)
    after = check("started_after", _moment, started_after, tz)
    before = check("started_before", _moment, started_before, tz)
    old = check("older_than", _back, older_than, now, tz)
    new = check("newer_than", _back, newer_than, now, tz)
    stuck = check("stuck_after", _stuck, stuck_after, now, tz)
    error_text = None if error is None else check("error", _error_text, error)
    jobs = None if areas is None else check("areas", _jobs, areas)
    flow_ids: tuple[str, ...] = ()
    flow_name = None
    if flow is not None:
        found = check("flow", _flow, mounted, flow, tenant)
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
        error=error_text,
        jobs=jobs,
    )


def _jobs(areas: Iterable[str]) -> bool | None:
    """Which runs ``areas`` keep: only jobs' (True), none of them (False), or all (None)."""
    given = {areas} if isinstance(areas, str) else set(areas)
    workflows, jobs = "workflows" in given, "jobs" in given
    if not workflows and not jobs:
        raise _Unusable(
            "name the areas whose runs to list: workflows, jobs or both", "areas_unknown"
        )
    return None if workflows and jobs else jobs


def _blank(given: Any) -> Any:
    """None for text with nothing in it (and a list of such); else as given."""
    if isinstance(given, str):
        return given if given.strip() else None
    if isinstance(given, list | tuple):
        kept = [item for item in given if not (isinstance(item, str) and not item.strip())]
        return kept or None
    return given


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


def _error_text(given: object) -> str:
    text = str(given).strip()
    problem = payloads.text_problem(text)
    if problem is not None:
        raise _Unusable(f"the error's text {problem}", "error_invalid")
    return text


def _record(mounted: Mounted, record: object) -> str:
    try:
        return str(mounted.tables.key_value(record))
    except errors.RecordRejected as exc:
        raise _Unusable(str(exc), "record_invalid") from None


def _moment(given: Moment, tz: Any) -> datetime | None:
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


def _flow(mounted: Mounted, flow: object, tenant: object) -> tuple[tuple[str, ...], str]:
    """The ids of the flow an operator names (by name in any case, or id) and the name to
    find runs of flows since renamed or deleted by."""
    text = str(flow).strip()
    with mounted.engine.connect() as conn:
        found = flow_rows.flow_by_name_or_id(conn, mounted.tables, text, tenant)
        if found is not None:
            return (str(found["id"]),), text
        if ops.run_flow_names(conn, resource=mounted.binding.resource, tenant=tenant, name=text):
            return (), text
        column = mounted.binding.tenant
        known = [
            str(row["name"])
            for row in flow_rows.all_flows(conn, mounted.tables)
            if row.get("name") and (column is None or str(row.get(column)) == str(tenant))
        ]
    raise _Unusable(
        f"there is no flow '{text}'{spelling.did_you_mean(text, known)}", "flow_unknown"
    )


def page_args(before_id: object, limit: object) -> tuple[int | None, int]:
    """A page's ``before_id`` and ``limit`` as typed, read; ``RowInvalid`` naming each
    that cannot be used."""
    return _page_args(before_id, limit)


def _page_args(before_id: object, limit: object) -> tuple[int | None, int]:
    problems = []
    before = None
    if before_id is not None:
        try:
            before = ids.read(before_id)
        except ids.NotAnId as exc:
            problems.append(errors.FieldError("before_id", str(exc), "id_invalid"))
    count = ids.id_or_none(limit)
    if count is None or count > listing.MAX_LIMIT:
        count = DEFAULT_LIMIT
        problems.append(
            errors.FieldError(
                "limit",
                f"a page holds 1 to {listing.MAX_LIMIT} rows, not {ids.shown(limit)}",
                "limit_invalid",
            )
        )
    if problems:
        raise errors.RowInvalid(problems)
    return before, count


# -- finding -----------------------------------------------------------------------------


def list_runs(
    mounted: Mounted,
    where: listing.RunFilter,
    *,
    tenant: object,
    before_id: object = None,
    limit: object = DEFAULT_LIMIT,
) -> listing.RunPage:
    """One page of the runs ``where`` keeps, newest first, each open one with where it
    waits, and which are stuck (``page.stuck``)."""
    before, count = _page_args(before_id, limit)
    with mounted.engine.connect() as conn:
        page = ops.find_runs(
            conn,
            resource=mounted.binding.resource,
            tenant=tenant,
            where=where,
            now=mounted.clock(),
            before_id=before,
            limit=count,
        )
    shown = tuple(standing(mounted, run) for run in page.rows)
    return listing.RunPage(shown, page.next_before, page.stuck)


def count_runs(mounted: Mounted, where: listing.RunFilter, *, tenant: object) -> dict[str, int]:
    """How many runs ``where`` keeps have each status, and how many are stuck."""
    with mounted.engine.connect() as conn:
        return ops.count_runs(
            conn, resource=mounted.binding.resource, tenant=tenant, where=where, now=mounted.clock()
        )


def get_run(mounted: Mounted, run_id: int, *, tenant: binding.Tenant) -> ops.RunRow:
    """One run, with where it waits; ``OperatorError`` (404) when it is not this runner's
    (or the tenant's)."""
    with mounted.engine.connect() as conn:
        run = actions.run_for_operator(mounted, conn, run_id, tenant)
    return standing(mounted, run)


def standing(mounted: Mounted, run: ops.RunRow) -> ops.RunRow:
    """The run with where it waits (``run.waiting``), as its program says; an ended run,
    or one of a program this runner lacks, as it is."""
    if run.status in statuses.ENDED or not run.state:
        return run
    program = mounted.programs.get(program_of(run.snapshot))
    if program is None:
        return run
    return dataclasses.replace(run, waiting=program.waiting(mounted, run))


def is_stuck(mounted: Mounted, run: ops.RunRow, stuck_after: Age | listing.Stuck = None) -> bool:
    """Whether the run is stuck (``run_filter`` says when; 15 minutes by default)."""
    if run.ended:
        return False
    rule = _stuck(_blank(stuck_after), mounted.clock(), mounted.config.timezone)
    with mounted.engine.connect() as conn:
        found = ops.stuck_among(
            conn,
            resource=mounted.binding.resource,
            run_ids=[run.id],
            rule=rule or listing.Stuck(),
            now=mounted.clock(),
        )
    return run.id in found


def journal(
    mounted: Mounted,
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
    with mounted.engine.connect() as conn:
        return ops.journal_page(
            conn,
            resource=mounted.binding.resource,
            tenant=tenant,
            run_id=run_id,
            operator=operator,
            action=action,
            before_id=before,
            limit=count,
        )


# The words the console's outbox shows, read as the states they name.
NOTICE_WORDS = {"waiting": "pending", "sent": "delivered"}


def outbox(
    mounted: Mounted,
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
            said = str(state).strip().casefold()
            wanted = ops.NoticeState(NOTICE_WORDS.get(said, said))
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
    with mounted.engine.connect() as conn:
        return ops.outbox_page(
            conn,
            resource=mounted.binding.resource,
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
        "fork": "forked",
    }
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    if entry.action in EDITS:
        return _edit_sentence(entry, detail)
    if entry.action == "job_run":
        return f"{entry.operator} ran job '{detail.get('job', '?')}' now (run {entry.run_id})"
    if entry.action in ("job_pause", "job_resume"):
        verb = "paused" if entry.action == "job_pause" else "resumed"
        return f"{entry.operator} {verb} job '{detail.get('job', '?')}'"
    if entry.action == "job_backfill":
        return (
            f"{entry.operator} backfilled job '{detail.get('job', '?')}' from "
            f"{detail.get('from', '?')} to {detail.get('to', '?')}: {detail.get('slots', 0)} "
            f"slots, {detail.get('started', 0)} started"
        )
    if entry.action == "notice_retry":
        return (
            f"{entry.operator} sent notice {detail.get('notice', '?')} again "
            f"(run {entry.run_id}, through {detail.get('channel', '?')})"
        )
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
    if detail.get("forked_as") is not None:
        said += f" from '{detail.get('from', '?')}' as run {detail['forked_as']}"
    if detail.get("reason"):
        said += f": {detail['reason']}"
    return said


# -- in words ------------------------------------------------------------------------


def where_it_stands(run: ops.RunRow, tz: tzinfo | None = None) -> str:
    """Where a run stands in words: where it waits and for what, or why it ended.

    A list's column (``flowrunner runs list``, the console's Operations room).
    """
    if run.waiting:
        return "; ".join(flows.waiting_sentence(w, tz) for w in run.waiting)
    if run.restarted_as is not None:
        return f"restarted as run {run.restarted_as}"
    if run.status == "running":
        return "due to start" if not run.state else "running"
    next_at = run.state.get("next_at") if run.status == "waiting" else None
    if isinstance(next_at, str) and next_at:
        # A program's run that keeps when it runs next (a job's, a job at times' slot).
        return f"runs at {flows.when(next_at, tz)}"
    return runs.reason(run.reason)


def age(passed: timedelta) -> str:
    """A time passed, roughly: ``3d 4h``, ``2h 5m``, ``40s``."""
    seconds = max(0, int(passed.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes else f"{seconds}s"
