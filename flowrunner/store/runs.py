"""Runs and their history: starting a run once per change, saving its state, reading it back.

A run row holds the snapshot it executes and the interpreter's state. Saves are
optimistic: each names the version it read and bumps it, so a save from a worker
that fell behind (its lease taken over, or an operator's cancel in between) is
refused with ``errors.LeaseLost`` instead of overwriting newer state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.sql.dml import ReturningInsert

from flowrunner import errors
from flowrunner.flows.interpreter import waits
from flowrunner.foundations import sanitize, shapes, sqltypes, statuses
from flowrunner.foundations.shapes import StepKind
from flowrunner.store import dialects, due, engine_tables, prepared, wakeups


@dataclass(frozen=True)
class RunRow:
    """One run as stored: one flow executing on one record."""

    id: int
    """The run's id."""
    tenant: str | None
    """The tenant the run's record belongs to; None on a binding without tenants."""
    resource: str
    """The table of the record the run is on (the binding's resource)."""
    record_id: str
    """The record's key, as text."""
    flow_id: str
    """The id of the flow row the run started from, as text."""
    flow_name: str
    """The flow's name when the run started."""
    start_key: str
    """What started it: ``created:<record>``, ``updated:<change>`` (the change's identity),
    ``manual:<uuid>``, or ``restart:<run>`` (an operator restarted that failed run)."""
    snapshot: dict[str, object]
    """The flow and its steps as the run executes them (``FlowSnapshot.to_dict``)."""
    digest: str
    """The snapshot's content hash."""
    status: statuses.RunStatus
    """``running``, ``waiting``, ``done``, ``failed`` or ``cancelled``."""
    state: dict[str, object]
    """Where the run is (``RunState.to_dict``); empty before its first step."""
    version: int
    """Bumped by every save; a save names the version it read."""
    started_at: datetime
    """When the run started."""
    updated_at: datetime
    """When the run was last saved."""
    ended_at: datetime | None
    """When it ended; None while it has not."""
    error: dict[str, object] | None
    """The sanitized error envelope of a failed run (``code``, ``message``, ...)."""
    reason: str | None
    """Why it is as it is, in a sentence (why it failed, who cancelled it)."""
    started_by: str | None
    """Who started it: the runner's principal, or the operator of a manual start."""
    event_floor: int | None = None
    """Events about the record with ids up to this were stored before the run began."""
    restarted_as: int | None = None
    """The run an operator started again in this failed run's place, if any."""
    waiting: tuple[waits.Waiting, ...] = ()
    """The steps the run waits at and for what (a time, an event and the answers counted,
    a command); empty once it ended or failed. Filled by ``runner.runs()``."""

    @property
    def ended(self) -> bool:
        return self.status in statuses.ENDED


@dataclass(frozen=True)
class LogRow:
    """One line of a run's history."""

    id: int
    """The line's id; a run's lines are in the order of their ids."""
    run_id: int
    """The run the line is about."""
    tenant: str | None
    """The run's tenant; None on a binding without tenants."""
    at: datetime
    """When it happened (the runner's clock)."""
    position: int | None
    """The step's position in its flow; None for a line about the whole run."""
    step_id: str | None
    """The step's id, as text; None for a line about the whole run."""
    title: str | None
    """The step's title."""
    kind: StepKind | None
    """The step's kind: a built-in one (``set``, ``wait``, ``notify``, ...) or the binding's."""
    pass_: int | None
    """Which pass through the step (a flow that loops back passes a step again)."""
    what: str
    """The code programs read: ``started``, ``waiting``, ``answered``, ``done``, ...
    (``flowrunner.history.flows.CODES`` lists them all)."""
    detail: object
    """What the sentence is made from, sanitized: a mapping of plain values
    (``{"who": "bob", "received": 2, "needed": 3}``); a short text on older lines."""
    due_at: datetime | None = None
    """When it happened on the flow's own clock; ``at`` is when a worker did it."""
    sentence: str = ""
    """The line in the flow's own words (``bob approved (2 of 3)``). Filled by
    ``runner.history()``; rendered when read, so every line has one, old lines too."""

    @property
    def late(self) -> bool:
        """Whether a worker did it more than a minute after it was due (show both times)."""
        return self.due_at is not None and self.at - self.due_at > LATE


# How far apart a history line's two times may be before both are worth showing.
LATE = timedelta(minutes=1)


def checkpointed(
    run: RunRow, *, version: int, state: dict[str, object], status: statuses.RunStatus
) -> RunRow:
    """``run`` as a checkpoint left it: its new version, state and status.

    What ``dataclasses.replace`` gives, made directly (a copy of its fields, three of
    them new): ``replace`` rebuilds it through ``__init__``, field by field, several
    times the cost, at every command of every run.
    """
    saved = object.__new__(RunRow)
    fields = saved.__dict__
    fields.update(run.__dict__)
    fields["version"] = version
    fields["state"] = state
    fields["status"] = status
    return saved


def run_row(row: sqltypes.ResultRow) -> RunRow:
    return engine_tables.from_row(RunRow, row, status=statuses.RunStatus(row.status))


def _status(status: str) -> str:
    """The status as the plain word stored (never an enum's repr); ValueError if none."""
    try:
        return statuses.RunStatus(status).value
    except ValueError:
        known = ", ".join(statuses.RunStatus)
        raise ValueError(f"a run's status is one of {known}: {status!r}") from None


def _error(error: shapes.Payload | None) -> shapes.JsonDict | None:
    return None if error is None else sanitize.sanitize_fields(error)


def _reason(reason: str | None) -> str | None:
    return None if reason is None else sanitize.sanitize_text(reason)


def insert_run(
    conn: sa.Connection,
    *,
    tenant: object,
    resource: str,
    record_id: str,
    flow_id: str,
    flow_name: str,
    start_key: str,
    snapshot: shapes.Payload,
    digest: str,
    state: shapes.Payload,
    status: str = statuses.RunStatus.RUNNING,
    now: datetime,
    started_by: str | None = None,
    reason: str | None = None,
    error: shapes.Payload | None = None,
    due_at: datetime | None = None,
) -> int | None:
    """Start a run; its id, or None when this flow already started for ``start_key``.

    ``start_key`` (``created:<record>``, ``updated:<change>``, ``manual:<uuid>``,
    ``restart:<run>``) is unique per resource and flow: the guard that starts a flow
    once per change. With ``due_at`` the run is due then (``due.set_due``): on
    PostgreSQL in the same statement.
    """
    status = _status(status)
    ended = status in statuses.ENDED
    together = due_at is not None and conn.dialect.name == "postgresql"
    stmt = prepared.compiled(
        conn,
        ("insert_run", ended, together),
        lambda: _run_insert_due(conn, ended) if together else _run_insert(conn, ended),
    )
    run_id = stmt.execute(
        conn,
        {
            "p_tenant": tenant,
            "p_resource": resource,
            "p_record": str(record_id),
            "p_flow": str(flow_id),
            "p_flow_name": flow_name,
            "p_start_key": start_key,
            "p_snapshot": dict(snapshot),
            "p_digest": digest,
            "p_status": status,
            "p_state": dict(state),
            "p_now": now,
            "p_error": _error(error),
            "p_reason": _reason(reason),
            "p_started_by": started_by,
            "p_due": due_at,
        },
    ).scalar_one_or_none()
    if run_id is None:
        return None
    if due_at is not None and not together:
        due.set_due(conn, run_id=run_id, due_at=due_at, tenant=tenant)
    return int(run_id)


def insert_runs(
    conn: sa.Connection,
    *,
    tenant: object,
    resource: str,
    flow_id: str,
    flow_name: str,
    snapshot: shapes.Payload,
    digest: str,
    now: datetime,
    started_by: str | None,
    starts: Sequence[tuple[str, str]],
) -> list[int]:
    """Start a run of the same flow (its snapshot, due now) on each ``(record_id,
    start_key)`` of ``starts``; the ids of the runs started (a start key that started one
    already starts none), as ``insert_run`` does one at a time.

    On PostgreSQL they are sent as one batch, with their due rows and one wake, and the
    runs this call started are read back by their start time; elsewhere one by one.
    """
    if not starts:
        return []
    shared = {
        "p_tenant": tenant,
        "p_resource": resource,
        "p_flow": str(flow_id),
        "p_flow_name": flow_name,
        "p_snapshot": dict(snapshot),
        "p_digest": digest,
        "p_status": statuses.RunStatus.RUNNING.value,
        "p_state": {},
        "p_now": now,
        "p_error": None,
        "p_reason": None,
        "p_started_by": started_by,
        "p_due": now,
    }
    if conn.dialect.name != "postgresql":
        found = [
            insert_run(
                conn,
                tenant=tenant,
                resource=resource,
                record_id=record_id,
                flow_id=flow_id,
                flow_name=flow_name,
                start_key=start_key,
                snapshot=snapshot,
                digest=digest,
                state={},
                now=now,
                started_by=started_by,
                due_at=now,
            )
            for record_id, start_key in starts
        ]
        return [run_id for run_id in found if run_id is not None]
    stmt = prepared.compiled(
        conn, ("insert_runs",), lambda: _run_insert_due(conn, False), many=True
    )
    stmt.execute_many(
        conn,
        {
            "p_record": [str(record_id) for record_id, _ in starts],
            "p_start_key": [start_key for _, start_key in starts],
        },
        shared=shared,
    )
    table = engine_tables.runs
    started = conn.execute(
        sa.select(table.c.id)
        .where(
            table.c.resource == resource,
            table.c.flow_id == str(flow_id),
            table.c.start_key.in_([start_key for _, start_key in starts]),
            table.c.started_at == now,  # started by this call, not by an earlier one
        )
        .order_by(table.c.id)
    )
    return [int(run_id) for run_id in started.scalars()]


def _run_insert_due(conn: sa.Connection, ended: bool) -> sqltypes.Query:
    """``_run_insert`` with the new run's due row, in one statement (PostgreSQL)."""
    table = engine_tables.runs
    started = _run_insert(conn, ended).returning(table.c.tenant, table.c.resource).cte("started")
    query = sa.select(started.c.id).add_cte(due.first_due(started).cte("first_due"))
    # The run is due: idle workers look at once, when the start commits.
    woken_by = wakeups.wake(conn.dialect, started.c.resource)
    return query if woken_by is None else query.add_columns(woken_by)


def _run_insert(conn: sa.Connection, ended: bool) -> ReturningInsert[int]:
    """``insert_run``'s statement: the run, unless its start key started one already."""
    table = engine_tables.runs
    events = engine_tables.events
    now = prepared.param("p_now", table.c.started_at)
    # The run listens from its start: events about the record stored up to now (in this
    # transaction too) are from before it; the floor is read in the insert itself.
    floor = sa.select(sa.func.coalesce(sa.func.max(events.c.id), 0)).where(
        events.c.resource == sa.bindparam("p_resource"),
        events.c.record_id == sa.bindparam("p_record"),
    )
    return (
        dialects.insert_statement(conn, table)
        .values(
            event_floor=floor.scalar_subquery(),
            tenant=prepared.param("p_tenant", table.c.tenant),
            resource=sa.bindparam("p_resource"),
            record_id=sa.bindparam("p_record"),
            flow_id=sa.bindparam("p_flow"),
            flow_name=sa.bindparam("p_flow_name"),
            start_key=sa.bindparam("p_start_key"),
            snapshot=prepared.param("p_snapshot", table.c.snapshot),
            digest=sa.bindparam("p_digest"),
            status=sa.bindparam("p_status"),
            state=prepared.param("p_state", table.c.state),
            version=1,
            started_at=now,
            updated_at=now,
            ended_at=now if ended else None,
            error=prepared.param("p_error", table.c.error),
            reason=sa.bindparam("p_reason"),
            started_by=sa.bindparam("p_started_by"),
        )
        .on_conflict_do_nothing(index_elements=["resource", "flow_id", "start_key"])
        .returning(table.c.id)
    )


def find_run(conn: sa.Connection, run_id: int) -> RunRow | None:
    """The run, or None when there is none with this id."""
    table = engine_tables.runs

    def build() -> sqltypes.Query:
        return sa.select(table).where(table.c.id == sa.bindparam("p_run", type_=table.c.id.type))

    if dialects.is_sqlite(conn):
        # Every worker's step reads its run: compiled once, each value converted by its type.
        found = prepared.compiled(conn, "find_run", build, typed=True).fetch(
            conn, {"p_run": run_id}
        )
        if not found:
            return None
        fields = found[0]
        fields["status"] = statuses.RunStatus(fields["status"])
        return RunRow(**fields)
    row = conn.execute(prepared.statement("find_run", build), {"p_run": run_id}).one_or_none()
    return None if row is None else run_row(row)


def records_of_runs(
    conn: sa.Connection, run_ids: Sequence[int], *, batch: int = 500
) -> dict[int, str]:
    """The record each of these runs is about, by run id (a run there is none of is left
    out)."""
    table = engine_tables.runs
    found: dict[int, str] = {}
    ids = list(dict.fromkeys(run_ids))
    for start in range(0, len(ids), batch):
        query = sa.select(table.c.id, table.c.record_id).where(
            table.c.id.in_(ids[start : start + batch])
        )
        found.update({int(row.id): str(row.record_id) for row in conn.execute(query)})
    return found


def find_started(
    conn: sa.Connection, *, resource: str, flow_id: str, start_key: str
) -> RunRow | None:
    """The run ``start_key`` started of ``flow_id`` on ``resource``, or None."""
    table = engine_tables.runs
    row = conn.execute(
        sa.select(table).where(
            table.c.resource == resource,
            table.c.flow_id == flow_id,
            table.c.start_key == start_key,
        )
    ).one_or_none()
    return None if row is None else run_row(row)


def runs_started_with(
    conn: sa.Connection, *, resource: str, flow_id: str, prefix: str, open_only: bool = True
) -> list[RunRow]:
    """The runs of ``flow_id`` whose start key begins with ``prefix`` (not yet ended, with
    ``open_only``), oldest first."""
    table = engine_tables.runs
    query = sa.select(table).where(
        table.c.resource == resource,
        table.c.flow_id == flow_id,
        table.c.start_key.startswith(prefix, autoescape=True),
    )
    if open_only:
        query = query.where(table.c.ended_at.is_(None))
    return [run_row(row) for row in conn.execute(query.order_by(table.c.id))]


def load_run(conn: sa.Connection, run_id: int) -> RunRow:
    """The run; ``errors.OperatorError`` when there is none with this id."""
    run = find_run(conn, run_id)
    if run is None:
        raise errors.OperatorError(f"there is no run {run_id}", status_code=404, code="run_unknown")
    return run


def save_run(
    conn: sa.Connection,
    run_id: int,
    *,
    expected_version: int,
    state: shapes.Payload,
    status: str,
    now: datetime,
    error: shapes.Payload | None = None,
    reason: str | None = None,
) -> int:
    """Save the run's new state over the version that was read; returns the new version.

    Raises ``errors.LeaseLost`` when the stored version is no longer
    ``expected_version``: someone else saved the run since it was read.
    """
    status = _status(status)
    ended = status in statuses.ENDED
    result = prepared.compiled(conn, ("save_run", ended), lambda: saving(ended)).execute(
        conn,
        saving_values(
            run_id,
            expected_version=expected_version,
            state=state,
            status=status,
            now=now,
            error=error,
            reason=reason,
        ),
    )
    if result.rowcount != 1:
        raise changed(run_id, expected_version)
    return expected_version + 1


def saving(ended: bool, *, keeps_status: bool = False) -> sa.Update:
    """``save_run``'s statement, its values named as ``saving_values`` names them;
    ``keeps_status``: the status left as the row holds it (``p_status`` unused)."""
    table = engine_tables.runs
    at = prepared.param("p_now", table.c.updated_at)
    status = {} if keeps_status else {"status": prepared.param("p_status", table.c.status)}
    return (
        sa.update(table)
        .where(table.c.id == sa.bindparam("p_run"), table.c.version == sa.bindparam("p_ver"))
        .values(
            state=prepared.param("p_state", table.c.state),
            **status,
            version=table.c.version + 1,
            updated_at=at,
            # Keep the first end time if an ended run is saved again; reopen on retry.
            ended_at=sa.func.coalesce(table.c.ended_at, at) if ended else None,
            error=prepared.param("p_error", table.c.error),
            reason=prepared.param("p_reason", table.c.reason),
        )
    )


def saving_values(
    run_id: int,
    *,
    expected_version: int,
    state: shapes.Payload,
    status: str,
    now: datetime,
    error: shapes.Payload | None = None,
    reason: str | None = None,
) -> shapes.JsonDict:
    return {
        "p_run": run_id,
        "p_ver": expected_version,
        "p_state": dict(state),
        "p_status": _status(status),
        "p_now": now,
        "p_error": _error(error),
        "p_reason": _reason(reason),
    }


def changed(run_id: int, expected_version: int) -> errors.LeaseLost:
    """The refusal of a save over a version that is no longer the stored one."""
    return errors.LeaseLost(
        f"run {run_id} changed since version {expected_version} was read; this save was refused"
    )


def mark_restarted(
    conn: sa.Connection, run_id: int, *, expected_version: int, restarted_as: int, now: datetime
) -> bool:
    """Point the failed run ``run_id`` at the run it was restarted as; whether it was done.

    Fenced like a save: False when the run changed since ``expected_version`` was read
    (an operator retried it meanwhile), is no longer failed, or was restarted already.
    """
    table = engine_tables.runs
    result = conn.execute(
        sa.update(table)
        .where(
            table.c.id == run_id,
            table.c.version == expected_version,
            table.c.status == statuses.RunStatus.FAILED.value,
            table.c.restarted_as.is_(None),
        )
        .values(restarted_as=restarted_as, version=table.c.version + 1, updated_at=now)
    )
    return result.rowcount == 1


def runs_for_record(
    conn: sa.Connection, *, resource: str, record_id: str, tenant: object = None
) -> list[RunRow]:
    """Every run of one record, newest first."""
    table = engine_tables.runs
    query = sa.select(table).where(
        table.c.resource == resource, table.c.record_id == str(record_id)
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    return [run_row(row) for row in conn.execute(query.order_by(table.c.id.desc()))]


def list_runs(
    conn: sa.Connection,
    *,
    status: str | None = None,
    tenant: object = None,
    resource: str | None = None,
    limit: int = 100,
    before_id: int | None = None,
) -> list[RunRow]:
    """Runs, newest first, optionally of one status, tenant or resource; page with ``before_id``."""
    table = engine_tables.runs
    query = sa.select(table)
    if status is not None:
        query = query.where(table.c.status == _status(status))
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    if resource is not None:
        query = query.where(table.c.resource == resource)
    if before_id is not None:
        query = query.where(table.c.id < before_id)
    return [run_row(row) for row in conn.execute(query.order_by(table.c.id.desc()).limit(limit))]


@dataclass(frozen=True)
class OpenRuns:
    """How many runs of one flow have not ended, on one snapshot of its rows."""

    flow_id: str
    """The flow row's id, as text (as runs keep it)."""
    digest: str
    """The snapshot's content hash: runs on the flow's rows as they are now share it."""
    count: int
    """How many of its runs have not ended (running or waiting)."""
    oldest: datetime
    """When the oldest of them started."""


def open_runs(
    conn: sa.Connection, *, resource: str, tenant: object = None, flow_id: str | None = None
) -> list[OpenRuns]:
    """The resource's runs that have not ended, counted by flow and snapshot (by digest).

    On a tenant binding ``tenant`` keeps to that tenant's runs; ``flow_id`` to one flow's.
    """
    table = engine_tables.runs
    query = (
        sa.select(
            table.c.flow_id,
            table.c.digest,
            sa.func.count().label("open_count"),
            sa.func.min(table.c.started_at).label("oldest"),
        )
        .where(
            table.c.resource == resource,
            table.c.status.in_(sorted(str(s) for s in statuses.OPEN)),
        )
        .group_by(table.c.flow_id, table.c.digest)
        .order_by(table.c.flow_id, sa.func.min(table.c.started_at))
    )
    if tenant is not None:
        query = query.where(table.c.tenant == tenant)
    if flow_id is not None:
        query = query.where(table.c.flow_id == str(flow_id))
    return [
        OpenRuns(
            flow_id=row.flow_id,
            digest=row.digest,
            count=int(row.open_count),
            oldest=row.oldest,  # min() keeps the column's type: aware UTC
        )
        for row in conn.execute(query)
    ]


def append_log(
    conn: sa.Connection,
    *,
    run_id: int,
    at: datetime,
    what: str,
    position: int | None = None,
    step_id: str | None = None,
    title: str | None = None,
    kind: StepKind | None = None,
    pass_: int | None = None,
    detail: object = None,
    tenant: object = None,
) -> int:
    """Add a line to the run's history (in the step's transaction); returns its id.

    The detail is sanitized: history is shown to operators and may reach logs.
    """
    table = engine_tables.step_log
    # Without a tenant given, the line takes its run's, in the same statement.
    owner: object = (
        tenant
        if tenant is not None
        else sa.select(engine_tables.runs.c.tenant)
        .where(engine_tables.runs.c.id == run_id)
        .scalar_subquery()
    )
    result = conn.execute(
        sa.insert(table)
        .values(
            run_id=run_id,
            tenant=owner,
            at=at,
            position=position,
            step_id=step_id,
            title=title,
            kind=kind,
            what=what,
            detail=None if detail is None else sanitize.sanitize_value(detail),
            **{"pass": pass_},
        )
        .returning(table.c.id)
    )
    return int(result.scalar_one())


@dataclass(frozen=True)
class LogLine:
    """One history line to write, for ``append_logs``."""

    what: str
    position: int | None = None
    step_id: str | None = None
    title: str | None = None
    kind: StepKind | None = None
    pass_: int | None = None
    detail: object = None
    due_at: datetime | None = None


def append_logs(
    conn: sa.Connection, *, run_id: int, at: datetime, tenant: object, lines: list[LogLine]
) -> None:
    """Add several lines to the run's history in one statement (the worker's step)."""
    if not lines:
        return
    table = engine_tables.step_log
    columns = ("run_id", "tenant", "at", "position", "step_id", "title", "kind", "what")
    insert = prepared.compiled(
        conn,
        "append_logs",
        lambda: sa.insert(table).values(
            {
                name: sa.bindparam(name, type_=table.c[name].type)
                for name in (*columns, "detail", "pass", "due_at")
            }
        ),
        many=True,
    )
    insert.execute_many(
        conn,
        {
            "position": [line.position for line in lines],
            "step_id": [line.step_id for line in lines],
            "title": [line.title for line in lines],
            "kind": [line.kind for line in lines],
            "what": [line.what for line in lines],
            "detail": [
                None if line.detail is None else sanitize.sanitize_value(line.detail)
                for line in lines
            ],
            "pass": [line.pass_ for line in lines],
            "due_at": [line.due_at for line in lines],
        },
        shared={"run_id": run_id, "tenant": tenant, "at": at},
    )


def append_to_runs(
    conn: sa.Connection, *, run_ids: list[int], at: datetime, tenant: object, line: LogLine
) -> None:
    """Add the same history line to each of ``run_ids``, in one statement (the runs a
    scheduled flow started in one batch)."""
    if not run_ids:
        return
    table = engine_tables.step_log
    detail = None if line.detail is None else sanitize.sanitize_value(line.detail)
    values = {
        "tenant": tenant,
        "at": at,
        "position": line.position,
        "step_id": line.step_id,
        "title": line.title,
        "kind": line.kind,
        "what": line.what,
        "detail": detail,
        "pass": line.pass_,
        "due_at": line.due_at,
    }
    conn.execute(sa.insert(table), [{**values, "run_id": run_id} for run_id in run_ids])


def run_history(conn: sa.Connection, run_id: int) -> list[LogRow]:
    """The run's history, in the order it happened."""
    table = engine_tables.step_log
    rows = conn.execute(sa.select(table).where(table.c.run_id == run_id).order_by(table.c.id))
    return [engine_tables.from_row(LogRow, row) for row in rows]
