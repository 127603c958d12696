"""Using the runner from an application built on SQLAlchemy's ``AsyncEngine``.

The runner is synchronous: mount it on a synchronous engine for the same database
(its own pool), then from async code

- inside your own async transaction, so the event or the new record's runs commit with
  your change: ``await conn.run_sync(runner.emit, "po.decided", payload)``
  (``record_created``, ``record_updated``, ``save_flow``… likewise);
- for what opens its own connections (``runs``, ``history``, ``notices``, ``run_due``):
  ``await asyncio.to_thread(runner.runs, 7)``, off the event loop.

On SQLite (aiosqlite) hand the async engine to ``prepare`` once, before its first
connection: it takes the same transaction handling as the runner's engine, without
which a savepoint that opens a transaction commits when released (so an event emitted
first in a transaction would outlive its rollback). On PostgreSQL it changes nothing.
``docs/web.md`` shows a whole app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrunner.store import dialects

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


def prepare(engine: AsyncEngine) -> AsyncEngine:
    """``engine``, ready for the runner's calls through ``run_sync`` (returned as given)."""
    dialects.prepare_engine(engine.sync_engine)
    return engine


__all__ = ["prepare"]
