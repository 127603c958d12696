"""Operations: what operators see and do with one runner's runs.

A record's runs and a run's history; operators' actions on one run or many (cancel,
retry, redrive, restart — each journaled); runs across records found by a ``RunQuery``
(the Operations room), the journal and the notices outbox, a page at a time; a flow's
or a run's diagram; pruning old history. ``runner.operations`` is one; the runner's
methods of the same names are these.

    page = runner.operations.list_runs(RunQuery(status="failed", older_than="2d"))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable
from datetime import timedelta
from typing import TypedDict

import sqlalchemy as sa

from flowrunner import diagrams, errors
from flowrunner.binding import RecordId, Tenant
from flowrunner.engine import actions, bulk, drawings, operations_room, record_names
from flowrunner.engine.mounted import Mounted
from flowrunner.foundations import durations, ids
from flowrunner.history import flows as history_lines
from flowrunner.store import dialects, listing, retention
from flowrunner.store import operations as ops


@dataclasses.dataclass(frozen=True)
class RunQuery:
    """Which runs an operator asks for, across records (every field optional).

    ``status``: ``running``, ``waiting``, ``done``, ``failed``, ``cancelled`` or
    ``stuck`` (or several) — stuck: not ended, held by no worker, its due work missed or
    its lease run out more than ``stuck_after`` ago (15 minutes). ``flow``: a name in any
    case, or an id. ``record``: a record's key. ``older_than`` / ``newer_than``
    (``"2d"``) and ``started_after`` / ``started_before`` (a date or moment): when it
    started. ``error``: text the run's error (the reason it failed or ended) holds, in
    any case. ``areas``: only the runs of these Operations room areas (``workflows``,
    ``jobs``). What cannot be used is refused with ``RowInvalid`` naming each field.
    """

    status: str | Iterable[str] | None = None
    flow: object = None
    record: RecordId | None = None
    started_after: operations_room.Moment = None
    started_before: operations_room.Moment = None
    older_than: operations_room.Age = None
    newer_than: operations_room.Age = None
    stuck_after: operations_room.Age | listing.Stuck = None
    error: str | None = None
    areas: Collection[str] | None = None


class RunFilters(TypedDict, total=False):
    """``RunQuery``'s fields as keywords (``runner.list_runs(status="failed")``)."""

    status: str | Iterable[str] | None
    flow: object
    record: RecordId | None
    started_after: operations_room.Moment
    started_before: operations_room.Moment
    older_than: operations_room.Age
    newer_than: operations_room.Age
    stuck_after: operations_room.Age | listing.Stuck
    error: str | None
    areas: Collection[str] | None


class Operations:
    """Operators' view of one runner's runs, and their actions on them."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    # -- one record's runs, one run ---------------------------------------------------------

    def runs(self, record_id: RecordId, *, tenant: Tenant = None) -> list[ops.RunRow]:
        """The record's runs, newest first (with a tenant binding: of that tenant's record).

        Each open run says where it stands in ``run.waiting``: the steps it waits at and
        for what (``Waiting``: a time, an event and the answers counted so far, a
        command's answer or its next attempt).
        """
        m = self.mounted
        owner = m.need_tenant(tenant)
        key = m.operator_key(record_id)
        with m.engine.connect() as conn:
            found = ops.runs_for_record(
                conn, resource=m.binding.resource, record_id=key, tenant=owner
            )
        return [operations_room.standing(m, run) for run in found]

    def get_run(self, run_id: object, *, tenant: Tenant = None) -> ops.RunRow:
        """One run with where it waits; ``OperatorError`` (404) for a run of another
        resource or tenant, or none."""
        m = self.mounted
        return operations_room.get_run(m, m.run_id(run_id), tenant=m.need_tenant(tenant))

    def history(self, run_id: object, *, tenant: Tenant = None) -> list[ops.LogRow]:
        """What happened in the run, step by step, in order; each line with its
        ``sentence`` as the run's program says it (``Program.sentence``: a flow's in the
        flow's own words), times on the runner's time zone.

        A run of another runner's resource (or another tenant's) is refused as unknown.
        """
        m = self.mounted
        key = m.run_id(run_id)
        with m.engine.connect() as conn:
            run = actions.run_for_operator(m, conn, key, m.need_tenant(tenant))
            lines = ops.run_history(conn, key)
            # The records its lines name (a subflow's), by the binding's record_label.
            named = [line.detail.get("record") for line in lines if isinstance(line.detail, dict)]
            names = record_names.read(m, conn, [r for r in named if r is not None], run.tenant)
        said = actions.program(m, run).sentence
        shown = history_lines.one_line_each(lines)  # one line per reminder
        return [dataclasses.replace(line, sentence=said(m, run, line, names)) for line in shown]

    def run_record_names(self, run_ids: Iterable[int], *, tenant: Tenant = None) -> dict[int, str]:
        """How people name the records of these runs (the binding's ``record_label``), by
        run id: for lines about many runs (``PO-3299: run 12 cancelled``); a run whose
        record has no name is left out."""
        m = self.mounted
        with m.engine.connect() as conn:
            return record_names.of_runs(m, conn, run_ids, m.need_tenant(tenant))

    def record_names(
        self, record_ids: Iterable[object], *, tenant: Tenant = None
    ) -> dict[str, str]:
        """How people name these records (the binding's ``record_label`` filled from
        each: ``PO-3299``), by id as text; a record it cannot name is left out."""
        m = self.mounted
        with m.engine.connect() as conn:
            return record_names.read(m, conn, record_ids, m.need_tenant(tenant))

    def diagram(
        self,
        conn: sa.Connection,
        flow: object,
        run: object = None,
        can_read: diagrams.CanRead | None = None,
        *,
        tenant: Tenant = None,
    ) -> diagrams.Diagram:
        """The diagram of ``flow`` (its name or id), with ``.html()``, ``.svg()``, ``.mermaid()``.

        Without ``run``: the flow's rows as they are now. With ``run`` (an id): that run of
        the flow drawn over the snapshot it started with (what is done and when, where it
        waits and for what, what is ahead, the way it went). ``can_read(step_row)`` says
        whether the reader may see a step; one they cannot is not drawn. ``OperatorError``
        (404) for an unknown flow, or a run that is not one of this flow's (or of the tenant).

            with runner.engine.connect() as conn:
                page = runner.diagram(conn, "Big orders", run=7).html()
        """
        m = self.mounted
        run_id = None if run is None else m.run_id(run)
        return drawings.diagram(
            m, conn, flow, run=run_id, can_read=can_read, tenant=m.need_tenant(tenant)
        )

    # -- operators' actions ----------------------------------------------------------------

    def cancel(
        self, run_id: object, *, operator: str, reason: str = "", tenant: Tenant = None
    ) -> None:
        """Cancel a run that has not ended; journaled with the operator's name."""
        m = self.mounted
        actions.cancel(m, m.run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def retry(
        self, run_id: object, *, operator: str, reason: str = "", tenant: Tenant = None
    ) -> None:
        """Run a failed run's failed step again; journaled (with ``reason``, when given)."""
        m = self.mounted
        actions.retry(m, m.run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def redrive(
        self, run_id: object, *, operator: str, reason: str = "", tenant: Tenant = None
    ) -> None:
        """Make a stuck run due now and free its lease; journaled (with ``reason``)."""
        m = self.mounted
        actions.redrive(m, m.run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def restart(
        self, run_id: object, *, operator: str, reason: str = "", tenant: Tenant = None
    ) -> int:
        """Start a failed run's flow again as a new run on the same record; its id.

        The new run takes the flow's rows as they are now. The old run stays failed and
        points at the new one (``RunRow.restarted_as``); journaled with the operator's
        name. Refused (``OperatorError``, a sentence) for a run that has not failed, one
        already restarted, and a flow deleted, inactive or broken.
        """
        m = self.mounted
        return actions.restart(m, m.run_id(run_id), operator=operator, reason=reason, tenant=tenant)

    def act(
        self,
        action: str,
        run_ids: Iterable[object],
        *,
        operator: str,
        reason: str = "",
        tenant: Tenant = None,
        dry_run: bool = False,
    ) -> list[actions.Outcome]:
        """``cancel``, ``retry``, ``redrive`` or ``restart`` each run, each in its own
        transaction; one ``Outcome`` per run: done, or refused with the reason (the others
        go on). ``dry_run``: what would be done, nothing kept."""
        return actions.act(
            self.mounted,
            action,
            run_ids,
            operator=operator,
            reason=reason,
            tenant=tenant,
            dry_run=dry_run,
        )

    # -- one action over everything a filter matches -----------------------------------------

    def error_groups(
        self, query: RunQuery = RunQuery(), *, tenant: Tenant = None
    ) -> list[listing.ErrorGroup]:
        """The failed and the stuck runs ``query`` matches (its ``status`` aside), grouped
        by their error, most runs first: ``ErrorGroup("failed", "the gateway refused:
        timeout", 300, ...)``."""
        m = self.mounted
        owner = m.need_tenant(tenant)
        return bulk.error_groups(m, self._filter(query, owner), tenant=owner)

    def count_matching(
        self, action: str, query: RunQuery = RunQuery(), *, tenant: Tenant = None
    ) -> bulk.Counted:
        """How many runs ``query`` matches now, for an operator to confirm ``action`` on
        (``act_on_matching`` takes it)."""
        m = self.mounted
        owner = m.need_tenant(tenant)
        return bulk.count(m, action, self._filter(query, owner), tenant=owner)

    def act_on_matching(
        self,
        counted: bulk.Counted,
        query: RunQuery = RunQuery(),
        *,
        operator: str,
        reason: str = "",
        tenant: Tenant = None,
        dry_run: bool = False,
        allowed: Callable[[ops.RunRow], str | None] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> bulk.Acted:
        """The counted action done to the runs ``query`` matches, a batch at a time, each
        run in its own transaction, journaled under ``operator``; none started since the
        count, none given the action since (a confirmation posted twice acts once). A run
        it does not apply to any more is refused with its sentence; the others go on.

            counted = runner.operations.count_matching("retry", RunQuery(error="gateway"))
            acted = runner.operations.act_on_matching(counted, RunQuery(error="gateway"),
                                                      operator="olga")
        """
        m = self.mounted
        owner = m.need_tenant(tenant)
        return bulk.act_on_matching(
            m,
            counted,
            self._filter(query, owner),
            operator=operator,
            reason=reason,
            tenant=owner,
            dry_run=dry_run,
            allowed=allowed,
            progress=progress,
        )

    def _filter(self, query: RunQuery, tenant: object) -> listing.RunFilter:
        return operations_room.run_filter(self.mounted, tenant=tenant, **dataclasses.asdict(query))

    # -- the Operations room: runs across records, the journal, the outbox ------------------

    def list_runs(
        self,
        query: RunQuery = RunQuery(),
        *,
        tenant: Tenant = None,
        before_id: object = None,
        limit: object = operations_room.DEFAULT_LIMIT,
    ) -> listing.RunPage:
        """Runs across records that ``query`` matches, newest first, a page at a time;
        each open run with where it waits (``run.waiting``), the stuck ones' ids in
        ``page.stuck``. On a tenant binding, only the ``tenant``'s. ``before_id``: the
        page's ``next_before``."""
        m = self.mounted
        owner = m.need_tenant(tenant)
        where = operations_room.run_filter(m, tenant=owner, **dataclasses.asdict(query))
        return operations_room.list_runs(m, where, tenant=owner, before_id=before_id, limit=limit)

    def count_runs(self, query: RunQuery = RunQuery(), *, tenant: Tenant = None) -> dict[str, int]:
        """How many runs ``query`` matches have each status, and how many are stuck (its
        ``status`` aside): ``{"running": 0, "waiting": 12, "done": 40, "failed": 2,
        "cancelled": 1, "stuck": 1}``."""
        m = self.mounted
        owner = m.need_tenant(tenant)
        filters = dataclasses.asdict(dataclasses.replace(query, status=None))
        where = operations_room.run_filter(m, tenant=owner, **filters)
        return operations_room.count_runs(m, where, tenant=owner)

    def journal(
        self,
        *,
        run_id: object = None,
        operator: str | None = None,
        action: str | None = None,
        tenant: Tenant = None,
        before_id: object = None,
        limit: object = operations_room.DEFAULT_LIMIT,
    ) -> listing.Page[ops.JournalRow]:
        """Operators' actions on this resource's runs, newest first, a page at a time
        (``operations_room.journal_sentence`` says each in words)."""
        m = self.mounted
        return operations_room.journal(
            m,
            tenant=m.need_tenant(tenant),
            run_id=None if run_id is None else m.run_id(run_id),
            operator=operator,
            action=action,
            before_id=before_id,
            limit=limit,
        )

    def outbox(
        self,
        state: str | None = None,
        *,
        run_id: object = None,
        tenant: Tenant = None,
        before_id: object = None,
        limit: object = operations_room.DEFAULT_LIMIT,
    ) -> listing.Page[ops.NoticeRow]:
        """The notices outbox, newest first, a page at a time: ``pending`` (to deliver),
        ``delivered``, ``undeliverable`` (``notice.problem`` says why), or all."""
        m = self.mounted
        return operations_room.outbox(
            m,
            state,
            tenant=m.need_tenant(tenant),
            run_id=None if run_id is None else m.run_id(run_id),
            before_id=before_id,
            limit=limit,
        )

    def deliveries(
        self,
        *,
        refused: bool | None = None,
        endpoint: str | None = None,
        tenant: Tenant = None,
        no_tenant: bool = False,
        before_id: object = None,
        limit: object = operations_room.DEFAULT_LIMIT,
    ) -> listing.Page[ops.CallbackRow]:
        """What each signed callback was answered, newest first, a page at a time: the
        receipts and the refusals (``refused=True`` the refusals only, ``False`` the
        receipts only), of one inbound ``endpoint`` if named (the names answered so far:
        ``delivery_endpoints``). Answers alike within a minute share a row (``count``).
        On a tenant binding they are ``tenant``'s; ``no_tenant=True`` lists instead those
        refused before their body was read, which name no tenant (forged, too large).
        """
        m = self.mounted
        before, count = operations_room.page_args(before_id, limit)
        whose = None if no_tenant and m.binding.tenant else m.need_tenant(tenant)
        with m.engine.connect() as conn:
            return ops.callbacks_page(
                conn,
                resource=m.binding.resource,
                tenant=whose,
                no_tenant=no_tenant,
                refused=refused,
                endpoint=endpoint,
                before_id=before,
                limit=count,
            )

    def delivery_endpoints(self, *, tenant: Tenant = None) -> list[str]:
        """The inbound endpoints that have answered a callback (that are still kept), by
        name: what the Deliveries page offers to filter by, whether or not this process
        mounted them (a server-only module may have)."""
        m = self.mounted
        with m.engine.connect() as conn:
            return ops.callback_endpoints(
                conn, resource=m.binding.resource, tenant=m.need_tenant(tenant)
            )

    # -- notices and pruning ---------------------------------------------------------------

    def notices(self, *, undelivered: bool = False, tenant: Tenant = None) -> list[ops.NoticeRow]:
        """The notices outbox: what notify steps of this resource's runs wrote, for your
        mailer to deliver.

        ``undelivered=True`` gives the notices to deliver now: not delivered yet,
        deliverable, and of a rule naming no channel (a channel's notices are the
        deliverer's: ``flowrunner deliver``). A notice whose recipient's column was
        empty is kept with ``deliverable`` False and its ``problem`` (``the record's
        assignee is empty``); it is listed only without ``undelivered``.
        """
        m = self.mounted
        with m.engine.connect() as conn:
            return list(
                ops.notices(
                    conn,
                    undelivered=undelivered,
                    tenant=m.need_tenant(tenant),
                    resource=m.binding.resource,
                )
            )

    def mark_delivered(self, notice_id: int) -> bool:
        """Record that a notice was delivered; False if it already was (or is
        undeliverable, or is not one of this resource's notices)."""
        m = self.mounted
        with dialects.begin(m.engine) as conn:
            return ops.mark_delivered(
                conn, notice_id=notice_id, at=m.clock(), resource=m.binding.resource
            )

    def get_notice(self, notice_id: object, *, tenant: Tenant = None) -> ops.NoticeRow:
        """One notice of this runner's outbox; ``OperatorError`` when there is none (404:
        none of this runner's, or another tenant's; 422: not an id)."""
        m = self.mounted
        wanted = _notice_id(notice_id)
        with m.engine.connect() as conn:
            found = ops.get_notice(
                conn, notice_id=wanted, resource=m.binding.resource, tenant=m.need_tenant(tenant)
            )
        if found is None:
            raise errors.OperatorError(
                f"there is no notice {wanted}", status_code=404, code="notice_unknown"
            )
        return found

    def retry_notice(
        self, notice_id: object, *, operator: str, tenant: Tenant = None
    ) -> ops.NoticeRow:
        """Send again a notice whose channel failed at every attempt: due at once, with
        all its attempts ahead of it, journaled under ``operator``'s name. Returns the
        notice as it is now; ``OperatorError`` (with why) when it has not failed (404
        when it is none of this runner's, or another tenant's)."""
        m = self.mounted
        found = self.get_notice(notice_id, tenant=tenant)
        now = m.clock()
        with dialects.begin(m.engine) as conn:
            if not ops.retry_notice(conn, notice_id=found.id, at=now):
                raise errors.OperatorError(
                    f"notice {found.id} is {found.state}: only a notice whose channel failed "
                    "at every attempt is sent again"
                )
            ops.journal(
                conn,
                operator=operator,
                action="notice_retry",
                at=now,
                tenant=found.tenant,
                run_id=found.run_id,
                resource=m.binding.resource,
                detail={"notice": found.id, "channel": found.channel},
            )
        return self.get_notice(found.id, tenant=tenant)

    def prune(
        self,
        *,
        older_than: str | durations.Duration | timedelta,
        dry_run: bool = False,
        include_failed: bool = False,
        batch: int = retention.BATCH,
        progress: retention.Progress | None = None,
    ) -> ops.Pruned:
        """Delete this resource's history older than ``older_than`` (``"90d"``); the counts.

        Goes: runs that ended done or cancelled (failed too with ``include_failed``) before
        the cutoff, with their history lines and notices (delivered, or undeliverable);
        events no run may still read; completed idempotency records; the answers given to
        signed callbacks. Kept: open runs, notices still to deliver and their runs, the
        journal. In batches of ``batch`` rows, each its own transaction, so workers go on
        meanwhile; ``dry_run`` counts and deletes nothing. Rules: ``flowrunner.store.retention``.
        """
        m = self.mounted
        before = retention.cutoff(m.clock(), older_than, m.config.timezone)
        return ops.prune(
            m.engine,
            before=before,
            resource=m.binding.resource,
            include_failed=include_failed,
            batch=batch,
            dry_run=dry_run,
            progress=progress,
        )


__all__ = ["Operations", "RunFilters", "RunQuery"]


def _notice_id(given: object) -> int:
    """A notice's id as an operator gives it; else ``OperatorError`` (422)."""
    try:
        return ids.read(given, "notice")
    except ids.NotAnId as exc:
        raise errors.OperatorError(
            f"there is no notice {exc.shown}: a notice's id is {ids.EXPECTED}",
            status_code=422,
            code="id_invalid",
        ) from None
