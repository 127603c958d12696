"""The calendars a runner's flows count business time on, with the holidays the
application keeps in its own table, and the waiting runs moved when that table changes.

A run counts business time (``2 business days``) on one calendar
(``FlowBinding.calendar_of``): the one its flow names, else its tenant's
(``calendar_for``), else the binding's default — with the rows of the holidays table
that are that calendar's and that tenant's added to its holidays. The pure interpreter
receives it in the run's configuration (``config_for``) and reads no table.

Every worker reads the holidays table before it claims (``watch``; at most once per
``every`` of the runner's clock). When the rows changed since its last read, it makes
the resource's waiting flow runs due at once: each is advanced on the calendar as it is
now, which counts its business times again from where they began (``lanes.replan``) and
saves the due time that follows — later for a holiday added, earlier for one taken away.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime, timedelta

import sqlalchemy as sa

from flowrunner import calendars
from flowrunner.binding import FlowBinding, Tenant
from flowrunner.flows import snapshot
from flowrunner.flows.interpreter import config as config_mod
from flowrunner.store import dialects
from flowrunner.store import holidays as holiday_rows

# A made calendar's key: the calendar its flow names, and the tenant.
Made = tuple[str | None, str | None]
# How often (on the runner's clock) a worker reads the holidays table again.
EVERY = timedelta(seconds=10)


class BusinessCalendars:
    """One runner's calendars: the binding's, with the holidays table's rows."""

    def __init__(self, binding: FlowBinding, engine: sa.Engine, *, every: timedelta = EVERY):
        self.binding = binding
        self.engine = engine
        self.every = every
        self.table = (
            None
            if binding.holidays_table is None
            else holiday_rows.reflect(engine, binding.holidays_table, binding.tenant)
        )
        self._rows: tuple[holiday_rows.Holiday, ...] | None = None
        self._read_at: datetime | None = None
        # (flow's calendar, tenant) -> (the binding's calendar, it with the table's days)
        self._made: dict[Made, tuple[calendars.Calendar, calendars.Calendar]] = {}
        self._lock = threading.Lock()

    def config_for(
        self, config: config_mod.InterpreterConfig, snap: snapshot.FlowSnapshot, tenant: Tenant
    ) -> config_mod.InterpreterConfig:
        """``config`` with the calendar the run of ``snap`` counts business time on."""
        calendar = self.calendar(snap.flow.calendar, tenant)
        return config if calendar is None else dataclasses.replace(config, calendar=calendar)

    def calendar(self, name: str | None, tenant: Tenant) -> calendars.Calendar | None:
        """The calendar of a flow naming ``name`` (None: none) for ``tenant``, with the
        holidays table's days that are its own; None when no calendar applies."""
        base = self.binding.calendar_of(name, tenant)
        if base is None or self.table is None:
            return base
        owner = None if tenant is None else str(tenant)
        key = (name, owner)
        with self._lock:
            made = self._made.get(key)
        if made is not None and made[0] == base:
            return made[1]
        rows = self.holidays()
        days = [
            row.day
            for row in rows
            if row.calendar in (None, base.name) and row.tenant in (None, owner)
        ]
        calendar = base.with_holidays(days)
        with self._lock:
            self._made[key] = (base, calendar)
        return calendar

    def holidays(self) -> tuple[holiday_rows.Holiday, ...]:
        """The holidays table's rows as last read (read now if never)."""
        with self._lock:
            rows = self._rows
        if rows is None:
            with self.engine.connect() as conn:
                rows = self._read(conn)
            with self._lock:
                self._rows = rows
        return rows

    def watch(self, now: datetime) -> int:
        """Read the holidays table again (once per ``every``); when it changed, make the
        waiting flow runs due now. How many were made due."""
        if self.table is None:
            return 0
        with self._lock:
            if self._read_at is not None and self._read_at <= now < self._read_at + self.every:
                return 0
            self._read_at = now
        with dialects.begin(self.engine) as conn:
            rows = self._read(conn)
            with self._lock:
                before, self._rows = self._rows, rows
                if before != rows:
                    self._made.clear()
            if before is None or before == rows:
                return 0
            return holiday_rows.wake_waiting(conn, resource=self.binding.resource, now=now)

    def _read(self, conn: sa.Connection) -> tuple[holiday_rows.Holiday, ...]:
        assert self.table is not None
        return holiday_rows.read(conn, self.table, self.binding.tenant)
