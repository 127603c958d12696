"""What the Operations room reads: runs across records, the operator journal, the
notices outbox — filtered, newest first, a page at a time, always of one resource.

Pages are keyset pages: each asks for the rows with ids below the last one shown
(``before_id``), so a page costs the same however deep it is and a run started
meanwhile never shifts one onto the next page twice. Every query is of one runner's
resource, and of one tenant when a tenant is named (the runner always names it on a
tenant binding).

**Stuck** is not a status a run holds but a finding about one that has not ended and
that no worker holds: its due work was due more than ``Stuck.due_missed`` ago (no worker
claimed it), or its lease ran out more than ``Stuck.lease_expired`` ago without being
given back (a worker died mid-step and none took the run over). A run whose lease a
worker still holds — a long command, its heartbeat renewing the lease — is never stuck.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

import sqlalchemy as sa

from flowrunner.foundations import payloads, sqltypes, statuses
from flowrunner.store import dialects, engine_tables, leases
from flowrunner.store.events import NoticeRow, NoticeState
from flowrunner.store.events import notice_row as notice_row
from flowrunner.store.ledger import JournalRow
from flowrunner.store.runs import RunRow
from flowrunner.store.runs import run_row as run_row

_R = TypeVar("_R")

STUCK = "stuck"
"""The word that asks for stuck runs where a status is asked for."""

# How long due work may go unclaimed, or a lease stay run out, before a run is stuck: a
# serving worker claims due work within seconds and a dead worker's runs within one
# lease (30 seconds), so a quarter of an hour means no worker is serving the runs.
STUCK_AFTER = timedelta(minutes=15)

MAX_LIMIT = 500
"""The most rows one page holds."""


@dataclass(frozen=True)
class Stuck:
    """When a run that has not ended, and that no worker holds, counts as stuck."""

    due_missed: timedelta = STUCK_AFTER
    """Its due row (a timer, a wake-up, a retry, a claim's expiry) was due this long ago."""
    lease_expired: timedelta = STUCK_AFTER
    """Its lease ran out this long ago without the worker giving it back."""


@dataclass(frozen=True)
class NotActed:
    """Runs the journal says no operator did ``action`` to at or after ``since``."""

    action: str
    since: datetime


@dataclass(frozen=True)
class ErrorGroup:
    """Failed (or stuck) runs that share one error, and how many they are."""

    status: str
    """``failed`` or ``stuck``."""
    error: str
    """The error as the runs keep it (sanitized when stored); empty when none was said."""
    count: int
    """How many runs have it."""
    newest_id: int
    """The newest of them."""


JOB_RUNS = "job:"
"""What the flow id of a job's run begins with (``jobs.runs.flow_id``)."""


@dataclass(frozen=True)
class RunFilter:
    """Which runs, as the store reads it (``flowrunner.engine.operations_room`` builds it from
    what an operator typed). Every field left empty keeps every run."""

    statuses: tuple[str, ...] = ()
    """Run statuses and/or ``stuck``; a run matching any of them is kept."""
    flow_ids: tuple[str, ...] = ()
    """The flows' ids (as runs keep them, text) ..."""
    flow_name: str | None = None
    """... or a name the flow had when the run started, in any case; with ``flow_ids``,
    a run of either is kept. Both empty: any flow."""
    record_id: str | None = None
    """One record's runs (its key as runs keep it)."""
    started_after: datetime | None = None
    """Runs started at or after this moment."""
    started_before: datetime | None = None
    """Runs started before this moment."""
    stuck: Stuck = field(default_factory=Stuck)
    """What ``stuck`` means."""
    error: str | None = None
    """Runs whose error — the reason they failed or ended, as stored (sanitized) — holds
    this text, in any case."""
    at_most_id: int | None = None
    """Runs with this id or a lower one: the runs there were when a count was confirmed."""
    not_acted: NotActed | None = None
    """Runs no operator did this action to since this moment (a confirmed action posted
    twice acts once)."""
    jobs: bool | None = None
    """Only the runs of jobs (True), none of them (False), or either (None): what an
    Operations room reader's areas open."""

    @property
    def flow_given(self) -> bool:
        return bool(self.flow_ids) or self.flow_name is not None


@dataclass(frozen=True)
class Page(Generic[_R]):
    """One page of rows, newest first."""

    rows: tuple[_R, ...]
    """The rows shown, newest (highest id) first."""
    next_before: int | None
    """The ``before_id`` that asks for the next page; None on the last page."""

    def __iter__(self) -> Iterator[_R]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass(frozen=True)
class RunPage(Page[RunRow]):
    """A page of runs, and which of them are stuck."""

    stuck: frozenset[int] = frozenset()
    """The ids of the page's runs that are stuck (``where.stuck`` says when)."""


def find_runs(
    conn: sa.Connection,
    *,
    resource: str,
    tenant: object,
    where: RunFilter,
    now: datetime,
    before_id: int | None = None,
    limit: int = 50,
) -> RunPage:
    """Runs of ``resource`` (of ``tenant`` if named) that ``where`` keeps, newest first:
    up to ``limit`` with ids below ``before_id``, and which of them are stuck."""
    table = engine_tables.runs
    query = sa.select(table).where(*_run_conditions(conn, resource, tenant, where, now))
    if before_id is not None:
        query = query.where(table.c.id < before_id)
    page = _page(conn, query.order_by(table.c.id.desc()), run_row, limit)
    open_ids = [run.id for run in page.rows if not run.ended]
    stuck = stuck_among(conn, resource=resource, run_ids=open_ids, rule=where.stuck, now=now)
    return RunPage(page.rows, page.next_before, stuck)


def stuck_among(
    conn: sa.Connection, *, resource: str, run_ids: Sequence[int], rule: Stuck, now: datetime
) -> frozenset[int]:
    """Which of these runs of ``resource`` are stuck."""
    if not run_ids:
        return frozenset()
    table = engine_tables.runs
    query = sa.select(table.c.id).where(
        table.c.id.in_(list(run_ids)), _stuck(conn, rule, now, resource)
    )
    return frozenset(int(run_id) for run_id in conn.execute(query).scalars())


def count_runs(
    conn: sa.Connection, *, resource: str, tenant: object, where: RunFilter, now: datetime
) -> dict[str, int]:
    """How many runs ``where`` keeps (its ``statuses`` aside) have each status, and how
    many are stuck: ``{"running": 2, "waiting": 40, ..., "stuck": 1}``, every word there."""
    table = engine_tables.runs
    every = dataclasses.replace(where, statuses=())
    conditions = _run_conditions(conn, resource, tenant, every, now)
    counts = {str(status): 0 for status in statuses.RunStatus}
    query = sa.select(table.c.status, sa.func.count()).where(*conditions).group_by(table.c.status)
    for status, number in conn.execute(query):
        counts[str(status)] = int(number)
    stuck = sa.select(sa.func.count()).select_from(table)
    stuck = stuck.where(*conditions, _stuck(conn, where.stuck, now, resource))
    counts[STUCK] = int(conn.execute(stuck).scalar_one())
    return counts


def count_matching(
    conn: sa.Connection, *, resource: str, tenant: object, where: RunFilter, now: datetime
) -> tuple[int, int | None]:
    """How many runs ``where`` keeps (its statuses too), and the highest id among them."""
    table = engine_tables.runs
    query = sa.select(sa.func.count(), sa.func.max(table.c.id)).where(
        *_run_conditions(conn, resource, tenant, where, now)
    )
    number, highest = conn.execute(query).one()
    return int(number), None if highest is None else int(highest)


def error_groups(
    conn: sa.Connection,
    *,
    resource: str,
    tenant: object,
    where: RunFilter,
    now: datetime,
    limit: int = 20,
) -> list[ErrorGroup]:
    """The failed runs and the stuck runs ``where`` keeps (its statuses aside), grouped by
    their error, most runs first: ``300 failed: the gateway refused: timeout``."""
    table = engine_tables.runs
    key = sa.func.coalesce(error_text(table), "")
    found: list[ErrorGroup] = []
    for status in (str(statuses.RunStatus.FAILED), STUCK):
        asked = dataclasses.replace(where, statuses=(status,))
        number = sa.func.count()
        query = (
            sa.select(key.label("error"), number.label("number"), sa.func.max(table.c.id))
            .where(*_run_conditions(conn, resource, tenant, asked, now))
            .group_by(key)
            .order_by(number.desc(), key)
            .limit(max(1, min(int(limit), MAX_LIMIT)))
        )
        for error, count, newest in conn.execute(query):
            found.append(ErrorGroup(status, str(error), int(count), int(newest)))
    found.sort(key=lambda group: -group.count)
    return found[:limit]


def error_text(table: sa.Table) -> sqltypes.Expression:
    """A run's error as text: the reason it failed or ended, else its error's message."""
    message = table.c.error["message"].as_string()
    return sa.func.coalesce(table.c.reason, message)


def run_flow_names(conn: sa.Connection, *, resource: str, tenant: object, name: str) -> bool:
    """Whether any run of ``resource`` (of ``tenant``) started from a flow of this name,
    in any case."""
    table = engine_tables.runs
    if payloads.text_problem(name) is not None:
        return False  # a name no run can hold (a NUL), never sent: PostgreSQL refuses it
    query = sa.select(table.c.id).where(
        table.c.resource == resource, _flow_named(table.c.flow_name, name)
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    return conn.execute(query.limit(1)).first() is not None


def _flow_named(column: sqltypes.Expression, name: str) -> sa.ColumnElement[bool]:
    # lower() folds ASCII on SQLite and every letter on PostgreSQL: a run's name as it
    # was when it started; the flows as they are now are matched by id, in Python's rule.
    return sa.func.lower(sa.func.trim(column)) == name.strip().lower()


def _run_conditions(
    conn: sa.Connection, resource: str, tenant: object, where: RunFilter, now: datetime
) -> list[sa.ColumnElement[bool]]:
    table = engine_tables.runs
    # One resource's runs are often all the runs: read newest first, not by resource.
    found: list[sa.ColumnElement[bool]] = [dialects.likely(conn, table.c.resource == resource)]
    if tenant is not None:
        found.append(table.c.tenant == tenant)
    if where.record_id is not None:
        found.append(table.c.record_id == where.record_id)
    if where.flow_given:
        by: list[sa.ColumnElement[bool]] = []
        if where.flow_ids:
            by.append(table.c.flow_id.in_(list(where.flow_ids)))
        if where.flow_name is not None:
            by.append(_flow_named(table.c.flow_name, where.flow_name))
        found.append(sa.or_(*by))
    if where.started_after is not None:
        found.append(table.c.started_at >= where.started_after)
    if where.started_before is not None:
        found.append(table.c.started_at < where.started_before)
    if where.error is not None:
        said = sa.func.lower(sa.func.coalesce(error_text(table), ""))
        found.append(said.contains(where.error.strip().lower(), autoescape=True))
    if where.jobs is not None:
        of_a_job = table.c.flow_id.startswith(JOB_RUNS, autoescape=True)
        found.append(of_a_job if where.jobs else ~of_a_job)
    if where.at_most_id is not None:
        found.append(table.c.id <= where.at_most_id)
    if where.not_acted is not None:
        journal = engine_tables.journal
        found.append(
            ~sa.exists().where(
                journal.c.run_id == table.c.id,
                journal.c.action == where.not_acted.action,
                journal.c.at >= where.not_acted.since,
            )
        )
    if where.statuses:
        plain = [s for s in where.statuses if s != STUCK]
        wanted: list[sa.ColumnElement[bool]] = []
        if plain:
            wanted.append(table.c.status.in_(plain))
        if STUCK in where.statuses:
            wanted.append(_stuck(conn, where.stuck, now, resource))
        found.append(sa.or_(*wanted))
    return found


def _stuck(
    conn: sa.Connection, rule: Stuck, now: datetime, resource: str
) -> sa.ColumnElement[bool]:
    """The runs that have not ended, that no worker holds, and whose work was long missed.

    Found from what was missed — due rows long due (by the due index), leases long run
    out — so the cost grows with the runs that are stuck, not with the runs that wait.
    """
    runs, due, held = engine_tables.runs, engine_tables.due, engine_tables.leases
    # Leases are judged by the database's clock on PostgreSQL, due rows by the caller's.
    clock = dialects.database_clock(conn)
    lease_now: datetime | sa.ColumnElement[datetime] = now if clock is None else clock
    lease_cutoff: datetime | sa.ColumnElement[datetime] = (
        now - rule.lease_expired
        if clock is None
        else clock - sa.literal(rule.lease_expired, sa.Interval())
    )
    missed = sa.select(due.c.run_id).where(
        due.c.resource == resource, due.c.due_at <= now - rule.due_missed
    )
    prefix = leases.RUN_LEASE
    # A lease given back expires at the epoch's start; one that ran out expires later.
    lapsed = sa.select(
        sa.cast(sa.func.substr(held.c.name, len(prefix) + 1), engine_tables.Id)
    ).where(
        held.c.name.startswith(prefix, autoescape=True),
        held.c.expires_at > dialects.epoch_start(),
        held.c.expires_at <= lease_cutoff,
    )
    live = sa.exists().where(
        held.c.name == sa.literal(prefix) + sa.cast(runs.c.id, sa.Text),
        held.c.expires_at > lease_now,
    )
    open_ = [str(status) for status in statuses.OPEN]
    return sa.and_(runs.c.id.in_(sa.union(missed, lapsed)), runs.c.status.in_(open_), ~live)


def journal_page(
    conn: sa.Connection,
    *,
    resource: str,
    tenant: object,
    run_id: int | None = None,
    operator: str | None = None,
    action: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> Page[JournalRow]:
    """Operators' actions on ``resource``'s runs (of ``tenant`` if named), newest first."""
    table = engine_tables.journal
    query = sa.select(table).where(table.c.resource == resource)
    for column, value in (
        (table.c.tenant, tenant),
        (table.c.run_id, run_id),
        (table.c.operator, operator),
        (table.c.action, action),
    ):
        if value is not None:
            query = query.where(column == value)
    if before_id is not None:
        query = query.where(table.c.id < before_id)
    return _page(conn, query.order_by(table.c.id.desc()), _journal_row, limit)


def outbox_page(
    conn: sa.Connection,
    *,
    resource: str,
    tenant: object,
    state: NoticeState | None = None,
    run_id: int | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> Page[NoticeRow]:
    """The notices ``resource``'s runs wrote (of ``tenant`` if named), in one state or
    all, newest first."""
    table, runs = engine_tables.notices, engine_tables.runs
    query = (
        sa.select(table).join(runs, runs.c.id == table.c.run_id).where(runs.c.resource == resource)
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    if run_id is not None:
        query = query.where(table.c.run_id == run_id)
    if state == NoticeState.PENDING:
        query = query.where(
            table.c.delivered_at.is_(None), table.c.problem.is_(None), table.c.failed_at.is_(None)
        )
    elif state == NoticeState.FAILED:
        query = query.where(
            table.c.failed_at.is_not(None),
            table.c.delivered_at.is_(None),
            table.c.problem.is_(None),
        )
    elif state == NoticeState.DELIVERED:
        query = query.where(table.c.delivered_at.is_not(None), table.c.problem.is_(None))
    elif state == NoticeState.UNDELIVERABLE:
        query = query.where(table.c.problem.is_not(None))
    if before_id is not None:
        query = query.where(table.c.id < before_id)
    return _page(conn, query.order_by(table.c.id.desc()), _notice_row, limit)


def _journal_row(row: sqltypes.ResultRow) -> JournalRow:
    return engine_tables.from_row(JournalRow, row)


def _notice_row(row: sqltypes.ResultRow) -> NoticeRow:
    return engine_tables.from_row(notice_row, row)


def _page(
    conn: sa.Connection, query: sqltypes.Query, make: Callable[[sqltypes.ResultRow], _R], limit: int
) -> Page[_R]:
    """The first ``limit`` rows of ``query`` (ordered by id, descending), read with one
    more: when it is there, the page's last id is where the next page begins."""
    limit = max(1, min(int(limit), MAX_LIMIT))
    rows: Sequence[sqltypes.ResultRow] = conn.execute(query.limit(limit + 1)).all()
    shown = tuple(make(row) for row in rows[:limit])
    return Page(shown, int(rows[limit - 1].id) if len(rows) > limit else None)


def page_of(
    conn: sa.Connection, query: sqltypes.Query, make: Callable[[sqltypes.ResultRow], _R], limit: int
) -> Page[_R]:
    """One page of ``query``'s rows, newest first, as the listings here read theirs (for
    the store's other tables: ``store.callbacks``)."""
    return _page(conn, query, make, limit)
