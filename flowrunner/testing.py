"""A test driver: the real engine on a real database, with a clock that moves only when told.

Use it in your own tests::

    driver = FlowDriver(runner, start=datetime(2026, 1, 5, 9, tzinfo=UTC))
    driver.create({"id": 1, "status": "open", "due_at": ...})
    driver.run_until_idle()
    driver.advance("2 days")          # moves the clock and runs what became due
    assert driver.runs(1)[0].status == "done"
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from flowrunner import binding, errors
from flowrunner.engine import worker
from flowrunner.engine.mounted import record_tenant
from flowrunner.foundations import durations
from flowrunner.runner import FlowRunner
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops


class FlowDriver:
    """Drives one runner: records, events and time, each followed by the work it makes due.

    The driver replaces the runner's clock; time moves only through ``advance`` and
    ``advance_to``. ``run_until_idle`` runs the real worker until nothing is due now.
    Jobs mounted on the runner (``flowrunner.Jobs``) run on the same clock: an event's
    planned jobs and a job at times' slots fall due as it moves (``run=False`` stands
    for a stop: only the latest missed slot runs after it).
    """

    def __init__(
        self,
        runner: FlowRunner,
        *,
        start: datetime | None = None,
        batch: int = 1,
        max_rounds: int = 10_000,
    ) -> None:
        self.runner = runner
        self._now = (start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)).astimezone(UTC)
        runner.clock = lambda: self.now
        self.worker = worker.Worker(runner, batch=batch)
        self.max_rounds = max_rounds

    @property
    def now(self) -> datetime:
        """The runner's clock. Setting it later moves time for the leases too: on
        PostgreSQL, whose own clock judges leases, they are brought nearer their end."""
        return self._now

    @now.setter
    def now(self, moment: datetime) -> None:
        passed = moment - self._now
        self._now = moment
        if passed > timedelta(0):
            ops.age_leases(self.runner.engine, by=passed)

    # -- time ------------------------------------------------------------------------------

    def advance(self, by: str | timedelta, *, run: bool = True) -> int:
        """Move the clock forward (``"2 days"`` or a timedelta), running due work on the way.

        Work falls due in order: the clock stops at each due time between now and the
        target, so a timer set by one step is honoured before a later one.
        """
        if isinstance(by, str):
            target = durations.parse_duration(by).add_to(self.now)
        else:
            target = self.now + by
        return self.advance_to(target, run=run)

    def advance_to(self, moment: datetime, *, run: bool = True) -> int:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        if moment < self.now:
            raise ValueError("the test clock only moves forward")
        done = 0
        if run:
            done += self.run_until_idle()
            while True:
                due = self.next_due()
                if due is None or due > moment:
                    break
                self.now = max(self.now, due)
                done += self.run_until_idle()
        self.now = moment
        if run:
            done += self.run_until_idle()
        return done

    def next_due(self) -> datetime | None:
        """The earliest due time of this runner's runs (other resources' are not ours)."""
        with self.runner.engine.connect() as conn:
            return ops.next_due(conn, resource=self.runner.binding.resource)

    def run_until_idle(self) -> int:
        """Run the worker until nothing is due at the current time; returns runs advanced."""
        total = 0
        for _ in range(self.max_rounds):
            claimed = self.worker.run_due(limit=100)
            total += claimed
            if claimed == 0:
                return total
        raise RuntimeError(f"work was still due after {self.max_rounds} rounds: a loop?")

    # -- records and events -------------------------------------------------------------------

    def create(self, record: Mapping[str, Any], *, run: bool = True) -> list[int]:
        """Insert a record and start its flows, in one transaction, as an application would."""
        record_tenant(self.runner.binding, record)
        with dialects.begin(self.runner.engine) as conn:
            records.insert_record(conn, self.runner.tables, record)
            started = self.runner.record_created(conn, self._read(conn, record))
        if run:
            self.run_until_idle()
        return started

    def update(self, record_id: Any, *, run: bool = True, **changes: Any) -> list[int]:
        """Change a record's columns and tell the runner, in one transaction."""
        tenant = changes.pop("tenant", None)
        with dialects.begin(self.runner.engine) as conn:
            before = records.load_record(conn, self.runner.tables, record_id, tenant)
            if before is None:
                raise errors.OperatorError(f"there is no record {record_id!r}")
            records.write_fields(conn, self.runner.tables, record_id, tenant, changes)
            after = records.load_record(conn, self.runner.tables, record_id, tenant)
            assert after is not None
            started = self.runner.record_updated(conn, before, after)
        if run:
            self.run_until_idle()
        return started

    def delete(self, record_id: Any, *, tenant: Any = None, run: bool = True) -> None:
        with dialects.begin(self.runner.engine) as conn:
            records.delete_record(conn, self.runner.tables, record_id)
            self.runner.record_deleted(conn, record_id, tenant=tenant)
        if run:
            self.run_until_idle()

    def emit(self, name: str, payload: Mapping[str, Any], *, run: bool = True) -> int:
        with dialects.begin(self.runner.engine) as conn:
            event_id = self.runner.emit(conn, name, payload)
        if run:
            self.run_until_idle()
        return event_id

    def start_workflow(
        self,
        name: str,
        start: Mapping[str, Any] | None = None,
        *,
        operator: str = "test",
        run: bool = True,
        **options: Any,
    ) -> int:
        """Start the manual code workflow ``name`` (``FlowRunner.start_workflow``: ``record``,
        ``key``, ``tenant``), then run what it made due; the run's id."""
        run_id = self.runner.start_workflow(name, start, operator=operator, **options)
        if run:
            self.run_until_idle()
        return run_id

    def _read(self, conn: sa.Connection, record: Mapping[str, Any]) -> dict[str, Any]:
        tenant = record.get(self.runner.binding.tenant) if self.runner.binding.tenant else None
        stored = records.load_record(
            conn, self.runner.tables, record[self.runner.binding.key], tenant
        )
        return stored if stored is not None else dict(record)

    # -- looking ----------------------------------------------------------------------------------

    def record(self, record_id: Any, *, tenant: Any = None) -> dict[str, Any] | None:
        with self.runner.engine.connect() as conn:
            return records.load_record(conn, self.runner.tables, record_id, tenant)

    def runs(
        self, record_id: binding.RecordId, *, tenant: binding.Tenant = None
    ) -> list[ops.RunRow]:
        """The record's runs, newest first, each open one with where it waits (``waiting``)."""
        return self.runner.runs(record_id, tenant=tenant)

    def history(self, run_id: int, *, tenant: binding.Tenant = None) -> list[ops.LogRow]:
        """The run's history in order, each line with its ``sentence``."""
        return self.runner.history(run_id, tenant=tenant)

    def notices(self, run_id: int | None = None) -> list[ops.NoticeRow]:
        """Every notice this runner's runs wrote (of one run, if given), across tenants."""
        with self.runner.engine.connect() as conn:
            return list(ops.notices(conn, run_id=run_id, resource=self.runner.binding.resource))
