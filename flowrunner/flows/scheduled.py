"""Flows that start on a schedule: at each slot of a flow's ``schedule`` (cron fields on
a named zone's wall clock, ``0 6 * * mon Europe/Berlin``), one run for every record the
flow's condition holds for — once per (flow, slot, record), however many workers serve.

Each such flow has one run of its own, the *schedule's run* (program ``schedule``,
started ``schedule`` with the flow id ``schedule:ID``, on the flow's tenant), due at the
flow's next slot. Claimed, it takes the latest slot due — slots missed while no worker
served are skipped, as a job at times skips them, and its history line says from when —
and starts the matching records' runs a page at a time (``BATCH`` records, in key order,
each page its own transaction): after each page it saves where it got to and is due
again at once, so a slot over many records is many short transactions, and a worker that
stops mid-slot leaves the rest to the next one. Its lease makes it one worker at a
time; each record's run has the start key ``schedule:SLOT:RECORD``, so a page done twice
(a worker that lost its lease) starts nobody twice.

The schedule's run is made when the flow is saved through the runner
(``runner.save_flow``), and by each worker before its first claim and then once a
minute of its clock (``Mounted.ticking``): a flow written around the runner (an import,
SQL of its own) is seen within a minute, its slots counted from then. An edit of the
schedule wakes the run, which reads the flow again (a new schedule's slots count from
then, as do those of a flow made active again): a flow made inactive, or no longer
starting on a schedule, starts nothing and waits until it is saved again; a flow
deleted ends its schedule's run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from flowrunner import errors
from flowrunner.engine import claimed
from flowrunner.engine.mounted import Claimed, Mounted, Program, Stepping, record_tenant
from flowrunner.flows import starts
from flowrunner.foundations import statuses
from flowrunner.jobs import schedules
from flowrunner.store import dialects, flow_rows, records
from flowrunner.store import operations as ops

PROGRAM = "schedule"  # the program a schedule's run names (``engine.mounted.program_of``)
START_KEY = "schedule"  # the one start key of a flow's schedule's run
BATCH = 1000  # the records one transaction of a slot starts at most
WAITING = statuses.RunStatus.WAITING


def run_flow_id(flow_id: object) -> str:
    """What a flow's schedule's run keeps as its flow id: ``schedule:ID``."""
    return f"{PROGRAM}:{flow_id}"


def schedule_of(flow: Mapping[str, object]) -> schedules.Schedule | None:
    """The slots of an active flow that starts on a schedule; None for any other flow,
    and for a schedule that can no longer be read (written around the runner)."""
    if flow.get("start") != "schedule" or flow.get("active") in (False, 0):
        return None
    text = flow.get("schedule")
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return schedules.flow_schedule(text)
    except errors.BindingError:
        return None


def next_slots(flow: Mapping[str, object], after: datetime, count: int = 3) -> list[datetime]:
    """The flow's next ``count`` slots after ``after`` (UTC); none for a flow that does
    not start on a schedule, or is inactive."""
    found = schedule_of(flow)
    slots: list[datetime] = []
    if found is None:
        return slots
    moment = after
    for _ in range(count):
        try:
            moment = found.next_slot(moment)
        except errors.BindingError:
            break
        slots.append(moment)
    return slots


class Schedules(Program):
    """The ``schedule`` program of one runner: makes each scheduled flow's run, keeps it
    in step with the flow's row, and starts a slot's runs when it is claimed."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted
        # Each scheduled flow's schedule and tenant as this runner last saw them.
        self.seen: dict[str, tuple[object, object]] | None = None

    def tick(self, now: datetime) -> None:
        """Make the run of each scheduled flow that has none yet, and wake the runs whose
        flow changed since the last look (all of them at a worker's first look): one
        statement when nothing changed."""
        mounted = self.mounted
        if "schedule" not in mounted.tables.flows.c:
            return  # a flows table from before schedules: no flow starts on one
        with dialects.begin(mounted.engine) as conn:
            flows = flow_rows.scheduled_flows(conn, mounted.tables)
            current = {str(f["id"]): (f.get("schedule"), f.get("tenant")) for f in flows}
            seen = self.seen or {}
            for flow in flows:
                if self.seen is None or seen.get(str(flow["id"])) != current[str(flow["id"])]:
                    self.ensure(conn, flow, now)
        self.seen = current

    def ensure(self, conn: sa.Connection, flow: Mapping[str, object], now: datetime) -> None:
        """Make the flow's schedule's run, due at its next slot after ``now``; a run
        there already is woken, to read the flow again."""
        mounted = self.mounted
        tenant = flow.get("tenant") if "tenant" in flow else _tenant(mounted, flow)
        found = schedule_of({"start": "schedule", **flow})
        first = None if found is None else found.next_slot(now)
        snapshot = {"program": PROGRAM, "flow": flow["id"]}
        run_id = ops.insert_run(
            conn,
            tenant=tenant,
            resource=mounted.binding.resource,
            record_id="",
            flow_id=run_flow_id(flow["id"]),
            flow_name=str(flow.get("name") or ""),
            start_key=START_KEY,
            snapshot=snapshot,
            digest=hashlib.sha256(json.dumps(snapshot, default=str).encode()).hexdigest(),
            state={
                "last": now.isoformat(),
                "next_at": None if first is None else first.isoformat(),
                "schedule": flow.get("schedule"),
                **({"idle": True} if found is None else {}),
            },
            status=WAITING,
            now=now,
            started_by=mounted.run_as,
            due_at=first,
        )
        if run_id is not None:
            if found is not None and first is not None:
                detail = {
                    "every": found.every,
                    "timezone": found.timezone,
                    "first": first.isoformat(),
                }
                line = ops.LogLine("job_scheduled", kind=PROGRAM, detail=detail)
                ops.append_logs(conn, run_id=run_id, at=now, tenant=tenant, lines=[line])
            return
        run = ops.find_started(
            conn,
            resource=mounted.binding.resource,
            flow_id=run_flow_id(flow["id"]),
            start_key=START_KEY,
        )
        if run is not None and not run.ended:
            ops.wake_run(conn, run_id=run.id, now=now)

    def saved(self, conn: sa.Connection, flow_id: object) -> None:
        """A flow was saved through the runner in ``conn``'s transaction: a flow that
        starts on a schedule has its run from now on (its slots counted from now)."""
        flow = flow_rows.flow_by_id(conn, self.mounted.tables, flow_id)
        if flow is not None and flow.get("start") == "schedule":
            self.ensure(conn, flow, self.mounted.clock())

    def step(self, claimed: Claimed) -> Stepping:
        return _SlotStep(claimed, self)


def mount(mounted: Mounted) -> Schedules:
    """Register the ``schedule`` program on a runner, with its tick on each worker."""
    program = Schedules(mounted)
    mounted.programs[PROGRAM] = program
    mounted.ticking.append(program.tick)
    return program


def of(mounted: Mounted) -> Schedules | None:
    """The runner's ``schedule`` program, if it is mounted."""
    found = mounted.programs.get(PROGRAM)
    return found if isinstance(found, Schedules) else None


def _tenant(mounted: Mounted, flow: Mapping[str, object]) -> object:
    return None if mounted.tables.tenant is None else flow.get(mounted.tables.tenant)


class _SlotStep(claimed.ClaimedStep):
    """One claimed schedule's run: wait for the next slot, or start one page of a slot."""

    def __init__(self, claimed: Claimed, program: Schedules) -> None:
        super().__init__(claimed)
        self.program = program

    def advance(self) -> None:
        run, conn, now = self.run, self.conn, self.now
        if run.status in statuses.ENDED:
            ops.set_due(conn, run_id=run.id, due_at=None, tenant=run.tenant)
            self.give_up_lease(forget=True)
            return
        flow = flow_rows.flow_by_id(conn, self.mounted.tables, run.snapshot.get("flow"))
        if flow is None:
            self.save(
                state=run.state,
                status=statuses.RunStatus.DONE,
                due_at=None,
                reason=f"flow {run.flow_name!r} was deleted: its schedule starts nothing more",
            )
            return
        state = dict(run.state)
        found = schedule_of(flow)
        last = _moment(state.get("last")) or run.started_at
        if state.get("slot") is None:
            if found is None:  # inactive, or no longer on a schedule: until saved again
                state.update(idle=True, next_at=None)
                self.save(state=state, status=WAITING, due_at=None)
                return
            if state.pop("idle", None) or state.get("schedule") != flow.get("schedule"):
                # Woken as it starts again, or by a new schedule: its slots count from now.
                last = now
                state.update(last=now.isoformat(), schedule=flow.get("schedule"))
            slot = found.latest_slot(last, now)
            if slot is None:
                following = found.next_slot(last)
                state["next_at"] = following.isoformat()
                self.save(state=state, status=WAITING, due_at=following)
                return
            first = found.next_slot(last)
            state.update(
                slot=slot.isoformat(),
                after=None,
                started=0,
                every=found.every,
                timezone=found.timezone,
                missed_from=None if first == slot else first.isoformat(),
            )
        self._page(flow, state, found)

    def _page(
        self,
        flow: Mapping[str, object],
        state: dict[str, Any],
        found: schedules.Schedule | None,
    ) -> None:
        """Start the runs of the slot's next page of records; the slot ends with a page
        shorter than ``BATCH``."""
        mounted, conn, now, run = self.mounted, self.conn, self.now, self.run
        slot = str(state["slot"])
        tenant = _tenant(mounted, flow)
        startable = [
            s
            for s in starts.startable(mounted, conn, "schedule", tenant)
            if str(s.flow["id"]) == str(flow["id"])
        ]
        problem = None
        if not startable:
            problem = "the flow is inactive, or its latest version does not start on a schedule"
        elif startable[0].problem is not None:
            problem = startable[0].problem
        elif startable[0].snapshot.flow.condition and startable[0].condition is None:
            problem = "its condition can no longer be read against the records"
        page: list[dict[str, Any]] = []
        if problem is None:
            chosen = startable[0]
            clause = (
                None
                if chosen.condition is None
                else chosen.condition.to_sql(mounted.tables.resource, now)
            )
            owner = None if tenant is None else mounted.tables.tenant_value(tenant)
            page = records.records_after(
                conn, mounted.tables, clause, owner, after=state.get("after"), batch=BATCH
            )
            keys = [mounted.record_id(record) for record in page]
            started = ops.insert_runs(
                conn,
                tenant=record_tenant(mounted.binding, page[0]) if page else None,
                resource=mounted.binding.resource,
                flow_id=str(chosen.flow["id"]),
                flow_name=str(chosen.flow.get("name") or ""),
                snapshot=chosen.stored,
                digest=chosen.snapshot.digest,
                now=now,
                started_by=mounted.run_as,
                starts=[(key, f"schedule:{slot}:{key}") for key in keys],
            )
            detail = {"slot": slot, "timezone": state.get("timezone"), "every": state.get("every")}
            line = ops.LogLine("schedule_started", kind=PROGRAM, detail=detail)
            ops.append_to_runs(conn, run_ids=started, at=now, tenant=run.tenant, line=line)
            state["started"] = int(state.get("started") or 0) + len(started)
            if page:
                state["after"] = _plain(page[-1][mounted.tables.key])
        if len(page) == BATCH:
            # The next page at once, due at the slot: before the runs it just started
            # (due now), so the workers finish starting the slot before stepping them.
            self.save(state=state, status=WAITING, due_at=min(now, _moment(slot) or now))
            return
        detail = {
            "slot": slot,
            "timezone": state.get("timezone"),
            "every": state.get("every"),
            "started": state.get("started", 0),
        }
        if state.get("missed_from"):
            detail["missed_from"] = state["missed_from"]
        if problem is not None:
            detail["problem"] = problem
        self.log("schedule_slot", kind=PROGRAM, title=run.flow_name, detail=detail)
        done = _moment(slot) or now
        following = None if found is None else found.next_slot(done)
        self.save(
            state={
                "last": slot,
                "ran": slot,
                "started": state.get("started", 0),
                "next_at": None if following is None else following.isoformat(),
                "schedule": state.get("schedule", flow.get("schedule")),
            },
            status=WAITING,
            due_at=following,
        )


def _plain(value: object) -> object:
    """A record key as the run's JSON state keeps it (compared again as the column's)."""
    return value if isinstance(value, int | str) and not isinstance(value, bool) else str(value)


def _moment(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
