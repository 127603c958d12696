"""Helpers for tests of the store itself: runs inserted directly, query plans, and
threads that contend at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from flowrunner.store import operations as ops

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def new_run(
    conn: sa.Connection,
    record_id: str = "1",
    *,
    resource: str = "po",
    tenant: str | None = None,
    due_at: datetime | None = None,
    **values: Any,
) -> int:
    """Insert a waiting run of flow "Approve" (``f1``) on a record; due at ``due_at`` if given.

    ``values`` replace any other column ``ops.insert_run`` takes.
    """
    run_id = ops.insert_run(
        conn,
        **{
            "tenant": tenant,
            "resource": resource,
            "record_id": record_id,
            "flow_id": "f1",
            "flow_name": "Approve",
            "start_key": f"created:{record_id}",
            "snapshot": {},
            "digest": "d",
            "state": {},
            "status": "waiting",
            "now": T0,
            **values,
        },
    )
    assert run_id is not None
    if due_at is not None:
        ops.set_due(conn, run_id=run_id, due_at=due_at, tenant=tenant)
    return run_id


def explain(conn: sa.Connection, query: sa.Select[Any]) -> str:
    """The database's plan for ``query``, as text."""
    compiled = query.compile(conn)
    if conn.dialect.name == "sqlite":
        values = tuple(
            v.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(v, datetime) else v
            for v in (compiled.params[name] for name in compiled.positiontup or ())
        )
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), values)
        return "\n".join(str(row[-1]) for row in rows)
    rows = conn.exec_driver_sql("EXPLAIN " + str(compiled), compiled.params)
    return "\n".join(str(row[0]) for row in rows)


def at_once(work: Callable[[str], object], count: int) -> None:
    """Call ``work("w0")`` … ``work(f"w{count - 1}")``, each in a thread, all released together.

    Whatever any thread raised fails the test: a thread must not hide a failure.
    """
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(owner: str) -> None:
        try:
            barrier.wait()
            work(owner)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
