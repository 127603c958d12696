"""Notices delivered through channels: claimed by a deliverer, then sent or failed.

A notice whose rule names a channel is due at ``next_attempt_at``. ``claim_notices``
takes the due ones of one resource the way ``claims.claim_due`` takes runs: it moves
each one's ``next_attempt_at`` to the claim's end and counts the attempt, so a deliverer
that dies leaves it due again when its claim runs out, and two deliverers never take
the same notice at once (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite: one writer at
a time). That end is the claim's fence: what the deliverer records afterwards
(``record_sent``, ``record_failure``, ``hand_back_notices``) is written only while the
notice still holds it, so a late deliverer whose claim ran out changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowrunner.store import dialects, engine_tables
from flowrunner.store.events import NoticeRow, notice_row


@dataclass(frozen=True)
class Held:
    """A notice a deliverer holds: the notice (its ``attempts`` counting this one) and
    the end of the claim, which fences what the deliverer records."""

    notice: NoticeRow
    until: datetime


def claim_notices(
    conn: sa.Connection, *, resource: str, now: datetime, until: datetime, limit: int
) -> list[Held]:
    """Take up to ``limit`` notices of ``resource``'s runs due at ``now``, oldest due
    first, each held until ``until`` with one more attempt counted."""
    if limit <= 0:
        return []
    table, runs = engine_tables.notices, engine_tables.runs
    picking = (
        sa.select(table.c.id)
        .join(runs, runs.c.id == table.c.run_id)
        .where(table.c.next_attempt_at <= now, runs.c.resource == resource)
        .order_by(table.c.next_attempt_at, table.c.id)
        .limit(limit)
    )
    picking = dialects.skip_locked(conn, picking, of=table)
    taken = conn.execute(
        sa.update(table)
        .where(table.c.id.in_(picking.scalar_subquery()))
        .values(attempts=table.c.attempts + 1, next_attempt_at=until)
        .returning(*table.c)
    )
    held = [Held(engine_tables.from_row(notice_row, row), until) for row in taken]
    return sorted(held, key=lambda h: h.notice.id)


def _fenced(held: Held) -> sa.Update:
    table = engine_tables.notices
    return sa.update(table).where(
        table.c.id == held.notice.id,
        table.c.next_attempt_at == held.until,
        table.c.delivered_at.is_(None),
    )


def record_sent(conn: sa.Connection, held: Held, *, at: datetime) -> bool:
    """The notice was sent at ``at``: delivered, nothing more to do. False when the
    claim ran out meanwhile (another deliverer holds it now)."""
    result = conn.execute(
        _fenced(held).values(sent_at=at, delivered_at=at, next_attempt_at=None, last_error=None)
    )
    return result.rowcount == 1


def record_failure(
    conn: sa.Connection, held: Held, *, error: str, retry_at: datetime | None, at: datetime
) -> bool:
    """The attempt failed with ``error`` (one sanitized line): tried again at
    ``retry_at``, or failed for good at ``at`` when it is None. False when the claim
    ran out meanwhile."""
    values: dict[str, object] = {"last_error": error, "next_attempt_at": retry_at}
    if retry_at is None:
        values["failed_at"] = at
    return conn.execute(_fenced(held).values(values)).rowcount == 1


def hand_back_notices(conn: sa.Connection, held: Sequence[Held], *, at: datetime) -> int:
    """Notices claimed but not tried (the deliverer is stopping): due again at ``at``,
    the attempt not counted. How many were handed back."""
    table = engine_tables.notices
    back = 0
    for one in held:
        # The claim counted the attempt (so ``attempts`` is at least 1): it is taken back.
        result = conn.execute(
            _fenced(one).values(next_attempt_at=at, attempts=table.c.attempts - 1)
        )
        back += result.rowcount
    return back


def get_notice(
    conn: sa.Connection, *, notice_id: int, resource: str, tenant: object
) -> NoticeRow | None:
    """One notice of ``resource``'s runs (of ``tenant``, where named), or None."""
    table, runs = engine_tables.notices, engine_tables.runs
    query = (
        sa.select(table)
        .join(runs, runs.c.id == table.c.run_id)
        .where(table.c.id == notice_id, runs.c.resource == resource)
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    row = conn.execute(query).first()
    return None if row is None else engine_tables.from_row(notice_row, row)


def retry_notice(conn: sa.Connection, *, notice_id: int, at: datetime) -> bool:
    """A failed notice due again at ``at``, with all its attempts ahead of it (its last
    error kept until it is sent). False unless it had failed for good."""
    table = engine_tables.notices
    result = conn.execute(
        sa.update(table)
        .where(
            table.c.id == notice_id,
            table.c.failed_at.is_not(None),
            table.c.delivered_at.is_(None),
            table.c.channel.is_not(None),
        )
        .values(failed_at=None, attempts=0, next_attempt_at=at)
    )
    return result.rowcount == 1


def waiting_count(conn: sa.Connection, *, resource: str, now: datetime) -> int:
    """How many of ``resource``'s notices a deliverer may take at ``now``."""
    table, runs = engine_tables.notices, engine_tables.runs
    query = (
        sa.select(sa.func.count())
        .select_from(table.join(runs, runs.c.id == table.c.run_id))
        .where(table.c.next_attempt_at <= now, runs.c.resource == resource)
    )
    return int(conn.execute(query).scalar_one())
