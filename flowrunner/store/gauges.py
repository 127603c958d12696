"""What a metrics scrape reads of one runner's tables: cheap counts, each one statement on
an index (``engine.metrics``).

Runs by flow and status read the runs' ``(resource, status, started_at)`` index; the
oldest due run is one ``min`` on the due index; notices waiting and failed are counted
over the runner's runs. None of them locks a row: a scrape never holds up a worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa

from flowrunner.foundations import sqltypes
from flowrunner.store import dialects, engine_tables


@dataclass(frozen=True)
class Gauges:
    """One runner's counts at ``now``: runs by ``(flow id, flow, status)``, the oldest due run's
    age in seconds (0 when nothing is due), notices waiting to be delivered and notices
    that cannot be (a recipient's column empty, or every attempt failed)."""

    runs: dict[tuple[str, str, str], int] = field(default_factory=dict)
    oldest_due_seconds: float = 0.0
    due: int = 0
    notices_waiting: int = 0
    notices_failed: int = 0


def read(conn: sa.Connection, *, resource: str, now: datetime) -> Gauges:
    """The counts of ``resource``'s runs at ``now``."""
    runs = engine_tables.runs
    by_status = conn.execute(
        sa.select(runs.c.flow_id, runs.c.flow_name, runs.c.status, sa.func.count())
        .where(runs.c.resource == resource)
        .group_by(runs.c.flow_id, runs.c.flow_name, runs.c.status)
    ).all()
    due = engine_tables.due
    oldest, count = conn.execute(
        sa.select(sa.func.min(due.c.due_at), sa.func.count()).where(
            due.c.resource == resource, due.c.due_at <= now
        )
    ).one()
    # min() loses the column type on SQLite; read it back through it.
    since = sqltypes.UTCDateTime().process_result_value(oldest, conn.dialect)
    notices = engine_tables.notices
    undelivered = (
        sa.select(
            sa.func.count().filter(notices.c.problem.is_(None), notices.c.failed_at.is_(None)),
            sa.func.count().filter(
                sa.or_(notices.c.problem.is_not(None), notices.c.failed_at.is_not(None))
            ),
        )
        .select_from(notices.join(runs, runs.c.id == notices.c.run_id))
        .where(runs.c.resource == resource, notices.c.delivered_at.is_(None))
    )
    waiting, failed = conn.execute(undelivered).one()
    return Gauges(
        runs={(str(i), str(flow), str(status)): int(n) for i, flow, status, n in by_status},
        oldest_due_seconds=0.0 if since is None else max(0.0, (now - since).total_seconds()),
        due=int(count),
        notices_waiting=int(waiting),
        notices_failed=int(failed),
    )


# How long a scrape or a readiness check waits for the database before it answers.
PATIENCE = timedelta(seconds=2)


@contextmanager
def scraping(engine: sa.Engine, patience: timedelta = PATIENCE) -> Iterator[sa.Connection]:
    """A connection for ``read``: it takes no write lock (on SQLite too) and waits at
    most ``patience`` for one another holds."""
    with (
        dialects.connected(engine, immediate=False) as conn,
        dialects.waiting_at_most(conn, patience),
    ):
        yield conn


def writable(engine: sa.Engine, patience: timedelta = PATIENCE) -> None:
    """Raise unless a worker could claim now: the database answers and, within
    ``patience``, grants a transaction that writes (SQLite's write lock taken and given
    back at once; nothing is written)."""
    with dialects.connected(engine) as conn, dialects.waiting_at_most(conn, patience):
        transaction = conn.begin()
        try:
            due = engine_tables.due
            conn.execute(sa.select(due.c.run_id).limit(1)).all()
        finally:
            transaction.rollback()
