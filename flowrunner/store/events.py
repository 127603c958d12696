"""What comes in and what goes out: events about records, and the notices outbox.

Events arrive in the application's own transaction and are read by the worker in
order of their ids. Notices are written in the step's own transaction, keyed by
``(run, step, pass)``, so a replayed run tells nobody twice; a deliverer reads the
undelivered ones and marks them delivered. A notice nobody can receive (its
recipient's column was empty) is kept as undeliverable, with its ``problem``: it is
never handed out for delivery. A notice whose rule names one of the binding's channels
is a deliverer's (``store.deliveries``): due at once, tried until sent or failed for good.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from flowrunner.foundations import shapes, sqltypes
from flowrunner.store import dialects, engine_tables, prepared

_R = TypeVar("_R")


@dataclass(frozen=True)
class EventRow:
    """One stored event about one record."""

    id: int
    tenant: str | None
    resource: str
    record_id: str
    name: str
    payload: shapes.JsonDict
    at: datetime
    txid: int = 0
    """The writing transaction's id on PostgreSQL (0 on SQLite): the feed's order is
    ``(txid, id)`` (``feed``)."""


class NoticeState(enum.StrEnum):
    """Where a notice in the outbox stands (``NoticeRow.state``)."""

    PENDING = "pending"
    """To deliver: not delivered yet, and someone to tell."""
    DELIVERED = "delivered"
    """The application marked it delivered."""
    UNDELIVERABLE = "undeliverable"
    """Nobody can be told (its recipient's column was empty): ``problem`` says why."""
    FAILED = "failed"
    """Its channel failed at every attempt: the deliverer gave up (``last_error`` says
    why); an operator's retry makes it due again."""


@dataclass(frozen=True)
class NoticeRow:
    """One notice in the outbox: what a notify step wrote, for the application to deliver."""

    id: int
    """The notice's id (``FlowRunner.mark_delivered`` takes it)."""
    tenant: str | None
    """The run's tenant; None on a binding without tenants."""
    run_id: int
    """The run whose notify step wrote it."""
    step_id: str
    """The notify step's id, as text."""
    pass_: int
    """Which pass through the step; one notice per (run, step, pass)."""
    audience: str
    """Whom it is for, as the step names them; the binding's notify rule of that audience."""
    recipient: str | None
    """The value of the rule's ``to`` column on the record (an address or a user id);
    None when that column was empty (the notice is then undeliverable)."""
    title: str | None
    """The rule's title, filled from the record (``{message}`` is the filled message)."""
    message: str
    """The step's message, its ``{column}`` placeholders filled from the record as the
    run saw it at the step."""
    email: bool
    """Whether the rule asks for an email."""
    at: datetime
    """When it was written (the runner's clock)."""
    delivered_at: datetime | None
    """When the application marked it delivered; None until then."""
    problem: str | None = None
    """Why nobody can be told, in a sentence (``the record's assignee is empty``);
    None for a notice to deliver."""
    deliverable: bool = True
    """False when there is nobody to tell (``problem`` says why): such a notice is never
    among ``notices(undelivered=True)`` and cannot be marked delivered."""
    channel: str | None = None
    """The binding's channel its notify rule names (``"mail"``): a deliverer sends it.
    None: the application delivers it itself."""
    attempts: int = 0
    """How many times a deliverer tried to send it."""
    next_attempt_at: datetime | None = None
    """When a deliverer may take it next; None when there is nothing to do."""
    last_error: str | None = None
    """Why the last attempt failed, one sanitized line; None when none did."""
    sent_at: datetime | None = None
    """When its channel sent it."""
    failed_at: datetime | None = None
    """When the deliverer gave up on it, after its attempts."""

    @property
    def state(self) -> NoticeState:
        """Pending, delivered, failed or undeliverable (the rule the outbox's filter
        applies)."""
        if self.problem is not None:
            return NoticeState.UNDELIVERABLE
        if self.delivered_at is not None:
            return NoticeState.DELIVERED
        if self.failed_at is not None:
            return NoticeState.FAILED
        return NoticeState.PENDING


def insert_event(
    conn: sa.Connection,
    *,
    tenant: object,
    resource: str,
    record_id: str,
    name: str,
    payload: shapes.Payload,
    at: datetime,
) -> int:
    """Store an event about a record; returns its id.

    Readers page through a record's events by id, so for each record ids must be
    visible in commit order. PostgreSQL assigns ids before commit; a transaction
    lock per record makes a second writer wait for the first to commit before it
    takes its id. (SQLite has one writer at a time already.) The event keeps its
    transaction's id for the feed across records (``feed``).
    """
    table = engine_tables.events
    dialects.lock_for_transaction(conn, f"event:{resource}:{record_id}")
    result = conn.execute(
        sa.insert(table)
        .values(
            tenant=tenant,
            resource=resource,
            record_id=str(record_id),
            name=name,
            payload=dict(payload),
            at=at,
            txid=dialects.writing_transaction(conn),
        )
        .returning(table.c.id)
    )
    return int(result.scalar_one())


def events_after(
    conn: sa.Connection,
    *,
    resource: str,
    record_id: str,
    after_id: int = 0,
    names: Iterable[str] | None = None,
    tenant: object = None,
    limit: int | None = None,
) -> list[EventRow]:
    """The record's events with ids above ``after_id``, oldest first, optionally by name."""
    table = engine_tables.events
    query = sa.select(table).where(
        table.c.resource == resource,
        table.c.record_id == str(record_id),
        table.c.id > after_id,
    )
    if names is not None:
        query = query.where(table.c.name.in_(list(names)))
    return _in_order(conn, EventRow, query, table, tenant, limit)


def feed(
    conn: sa.Connection,
    *,
    resource: str,
    after: tuple[int, int] = (0, 0),
    names: Iterable[str] | None = None,
    tenant: object = None,
    limit: int = 100,
) -> list[EventRow]:
    """The resource's events past ``after`` (a ``(txid, id)`` position), in feed order,
    at most ``limit``; of ``tenant`` and named ``names`` where given.

    The order is ``(txid, id)``. On PostgreSQL an event is handed out only once every
    transaction older than its own has ended (``dialects.settled_before``): ids and
    transaction ids are taken before commit, so a reader that went by them alone could
    pass an event whose transaction commits after it read. Below that line nothing new
    can appear, so a reader who continues from the last position it was handed never
    misses an event nor sees one twice. (SQLite has one writer at a time: ids are
    commit order, and every ``txid`` is 0.)
    """
    table = engine_tables.events
    query = sa.select(table).where(
        table.c.resource == resource,
        sa.tuple_(table.c.txid, table.c.id) > sa.tuple_(sa.literal(after[0]), sa.literal(after[1])),
    )
    settled = dialects.settled_before(conn)
    if settled is not None:
        query = query.where(table.c.txid < settled)
    if names is not None:
        query = query.where(table.c.name.in_(list(names)))
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    query = query.order_by(table.c.txid, table.c.id).limit(limit)
    return [engine_tables.from_row(EventRow, row) for row in conn.execute(query)]


def insert_notice(
    conn: sa.Connection,
    *,
    tenant: object,
    run_id: int,
    step_id: str,
    pass_: int,
    audience: str,
    recipient: str | None,
    title: str | None,
    message: str,
    email: bool = False,
    problem: str | None = None,
    channel: str | None = None,
    at: datetime,
) -> bool:
    """Put a notice in the outbox; False when this run's step already told it in this pass.

    ``problem`` (why nobody can be told) keeps the notice as undeliverable. ``channel``
    (the binding's channel its rule names) makes it a deliverer's, due at ``at``.
    """
    table = engine_tables.notices
    stmt = prepared.statement(
        ("insert_notice", conn.dialect.name),
        lambda: (
            dialects.insert_statement(conn, table)
            .on_conflict_do_nothing(index_elements=["run_id", "step_id", "pass"])
            .returning(table.c.id)
        ),
    )
    inserted = conn.execute(
        stmt,
        {
            "tenant": tenant,
            "run_id": run_id,
            "step_id": str(step_id),
            "pass": pass_,
            "audience": audience,
            "recipient": recipient,
            "title": title,
            "message": message,
            "email": bool(email),
            "problem": problem,
            "channel": channel,
            "next_attempt_at": at if channel is not None and problem is None else None,
            "at": at,
        },
    ).scalar_one_or_none()
    return inserted is not None


def notices(
    conn: sa.Connection,
    *,
    run_id: int | None = None,
    undelivered: bool = False,
    tenant: object = None,
    resource: str | None = None,
    limit: int | None = None,
) -> list[NoticeRow]:
    """Notices in the order they were written, optionally of one run or still to deliver.

    ``undelivered`` keeps to the notices the application should send: not delivered yet,
    deliverable (an undeliverable one has nobody to go to) and of no channel (a channel's
    are a deliverer's). ``resource`` keeps to the notices of that resource's runs (one
    runner's outbox).
    """
    table = engine_tables.notices
    query = sa.select(table)
    if resource is not None:
        runs = engine_tables.runs
        query = query.join(runs, runs.c.id == table.c.run_id).where(runs.c.resource == resource)
    if run_id is not None:
        query = query.where(table.c.run_id == run_id)
    if undelivered:
        query = query.where(
            table.c.delivered_at.is_(None), table.c.problem.is_(None), table.c.channel.is_(None)
        )
    return _in_order(conn, notice_row, query, table, tenant, limit)


def notice_row(**columns: Any) -> NoticeRow:
    return NoticeRow(**columns, deliverable=columns["problem"] is None)


def mark_delivered(
    conn: sa.Connection, *, notice_id: int, at: datetime, resource: str | None = None
) -> bool:
    """Record that a notice was delivered; False when it already was (or does not exist,
    is undeliverable, or is not of a run of ``resource``, where given)."""
    table = engine_tables.notices
    query = sa.update(table).where(
        table.c.id == notice_id, table.c.delivered_at.is_(None), table.c.problem.is_(None)
    )
    if resource is not None:
        runs = engine_tables.runs
        query = query.where(
            table.c.run_id.in_(sa.select(runs.c.id).where(runs.c.resource == resource))
        )
    # Delivered by the application: no deliverer takes it any more.
    result = conn.execute(query.values(delivered_at=at, next_attempt_at=None))
    return result.rowcount == 1


def _in_order(
    conn: sa.Connection,
    make: Callable[..., _R],
    query: sqltypes.Query,
    table: sa.Table,
    tenant: object,
    limit: int | None,
) -> list[_R]:
    """The records ``query`` finds in ``table``, of ``tenant`` if named, first ``limit`` by id."""
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    query = query.order_by(table.c.id)
    if limit is not None:
        query = query.limit(limit)
    return [engine_tables.from_row(make, row) for row in conn.execute(query)]
