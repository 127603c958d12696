"""A flow's published versions as stored (``flowrunner_flow_versions``), and the runs that
started on each.

A version is immutable once written: its number (1, 2, … per flow of a resource), the
snapshot its runs start on (``FlowSnapshot.to_dict``) and that snapshot's digest, when
and by whom it was published, and a note. A run names its version by its ``digest``;
when several versions share one (a roll back publishes an earlier version's rows again),
a run belongs to the latest of them published when it started (``version_of_run``).
Every statement runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowrunner.foundations import sanitize, shapes, statuses
from flowrunner.store import dialects, engine_tables


@dataclass(frozen=True)
class VersionRow:
    """One published version of a flow."""

    flow_id: str
    """The flow's id, as text."""
    number: int
    """1 for the flow's first version, then one more for each publish."""
    digest: str
    """The digest of the snapshot its runs start on (a run's ``digest``)."""
    snapshot: shapes.JsonDict
    """The flow and its steps as its runs start on them (``FlowSnapshot.to_dict``)."""
    published_at: datetime
    published_by: str | None
    """Who published it; None for a version published by a save (``publish="on_save"``)."""
    note: str
    tenant: str | None = None
    waiting: int = 0
    """How many open runs started on it (filled in by ``versions_of``)."""


def _row(row: sa.Row[tuple[object, ...]]) -> VersionRow:
    m = row._mapping
    return VersionRow(
        flow_id=str(m["flow_id"]),
        number=int(m["number"]),
        digest=str(m["digest"]),
        snapshot=dict(m["snapshot"]),
        published_at=m["published_at"],
        published_by=m["published_by"],
        note=str(m["note"]),
        tenant=m["tenant"],
    )


def insert_version(
    conn: sa.Connection,
    *,
    resource: str,
    flow_id: object,
    tenant: object,
    snapshot: shapes.JsonDict,
    digest: str,
    at: datetime,
    by: str | None,
    note: str,
) -> int | None:
    """Publish the next version of the flow; its number, or None when another publish of
    the same flow took that number first (its transaction then committed before ours)."""
    table = engine_tables.flow_versions
    latest = conn.execute(
        sa.select(sa.func.max(table.c.number)).where(
            table.c.resource == resource, table.c.flow_id == str(flow_id)
        )
    ).scalar()
    number = int(latest or 0) + 1
    stmt = (
        dialects.insert_statement(conn, table)
        .values(
            tenant=None if tenant is None else str(tenant),
            resource=resource,
            flow_id=str(flow_id),
            number=number,
            digest=digest,
            snapshot=snapshot,
            published_at=at,
            published_by=None if by is None else sanitize.sanitize_text(by, 200),
            note=sanitize.sanitize_text(note, 2000),
        )
        .on_conflict_do_nothing()
        .returning(table.c.number)
    )
    written = conn.execute(stmt).first()
    return None if written is None else int(written[0])


def versions_of(conn: sa.Connection, resource: str, flow_id: object) -> list[VersionRow]:
    """Every version of the flow, first to latest, each with the open runs started on it."""
    table = engine_tables.flow_versions
    rows = [
        _row(row)
        for row in conn.execute(
            sa.select(table)
            .where(table.c.resource == resource, table.c.flow_id == str(flow_id))
            .order_by(table.c.number)
        )
    ]
    counts: dict[int, int] = {}
    for digest, started_at in open_runs(conn, resource, flow_id):
        number = version_of_run(rows, digest, started_at)
        if number is not None:
            counts[number] = counts.get(number, 0) + 1
    return [_with_waiting(row, counts.get(row.number, 0)) for row in rows]


def _with_waiting(row: VersionRow, waiting: int) -> VersionRow:
    return VersionRow(**{**row.__dict__, "waiting": waiting})


def version(conn: sa.Connection, resource: str, flow_id: object, number: int) -> VersionRow | None:
    table = engine_tables.flow_versions
    found = conn.execute(
        sa.select(table).where(
            table.c.resource == resource,
            table.c.flow_id == str(flow_id),
            table.c.number == number,
        )
    ).first()
    return None if found is None else _row(found)


def latest(conn: sa.Connection, resource: str, flow_ids: Sequence[object]) -> dict[str, VersionRow]:
    """The latest version of each of the flows that has one, by flow id (text)."""
    if not flow_ids:
        return {}
    table = engine_tables.flow_versions
    ids = sorted({str(flow_id) for flow_id in flow_ids})
    newest = (
        sa.select(table.c.flow_id, sa.func.max(table.c.number).label("number"))
        .where(table.c.resource == resource, table.c.flow_id.in_(ids))
        .group_by(table.c.flow_id)
        .subquery()
    )
    query = sa.select(table).join(
        newest,
        sa.and_(
            table.c.flow_id == newest.c.flow_id,
            table.c.number == newest.c.number,
            table.c.resource == resource,
        ),
    )
    return {row.flow_id: row for row in map(_row, conn.execute(query))}


def kept(conn: sa.Connection) -> bool:
    """Whether the database has the versions' table (the engine's tables are made by
    ``flowrunner migrate``; a flows file can be read and written before)."""
    return sa.inspect(conn).has_table(engine_tables.flow_versions.name)


def marker(conn: sa.Connection, resource: str) -> object:
    """A value that changes whenever a version of the resource's flows is published."""
    table = engine_tables.flow_versions
    return conn.execute(
        sa.select(sa.func.max(table.c.id)).where(table.c.resource == resource)
    ).scalar()


def open_runs(conn: sa.Connection, resource: str, flow_id: object) -> list[tuple[str, datetime]]:
    """(digest, started at) of each open run of the flow."""
    runs = engine_tables.runs
    query = sa.select(runs.c.digest, runs.c.started_at).where(
        runs.c.resource == resource,
        runs.c.flow_id == str(flow_id),
        runs.c.status.in_([str(s) for s in statuses.OPEN]),
    )
    return [(str(digest), at) for digest, at in conn.execute(query)]


def version_of_run(versions: Sequence[VersionRow], digest: str, started_at: datetime) -> int | None:
    """The version a run of ``digest`` started on: the latest with that digest published
    by its start (or the first with it, for a run started before versions were kept)."""
    same = [v for v in versions if v.digest == digest]
    if not same:
        return None
    before = [v for v in same if v.published_at <= started_at]
    return (before or same[:1])[-1].number


@dataclass(frozen=True)
class OpenRun:
    """An open run as a move reads it: what it waits at, and the row version it read."""

    id: int
    tenant: str | None
    record_id: str
    digest: str
    state: shapes.JsonDict
    version: int
    started_at: datetime
    started_by: str | None = None
    """``run 7`` for a subflow's child, which its snapshot names its parent in."""


def open_runs_of(conn: sa.Connection, resource: str, flow_id: object, digest: str) -> list[OpenRun]:
    """The open runs of the flow that run the snapshot ``digest``, oldest first (without
    the snapshot each keeps: its digest names it)."""
    runs = engine_tables.runs
    query = (
        sa.select(
            runs.c.id,
            runs.c.tenant,
            runs.c.record_id,
            runs.c.digest,
            runs.c.state,
            runs.c.version,
            runs.c.started_at,
            runs.c.started_by,
        )
        .where(
            runs.c.resource == resource,
            runs.c.flow_id == str(flow_id),
            runs.c.digest == digest,
            runs.c.status.in_([str(s) for s in statuses.OPEN]),
        )
        .order_by(runs.c.id)
    )
    return [
        OpenRun(int(i), t, str(r), str(d), dict(st or {}), int(v), at, by)
        for i, t, r, d, st, v, at, by in conn.execute(query)
    ]


@dataclass(frozen=True)
class Move:
    """One run to move: its id, tenant and record, the row version read, its new state."""

    run_id: int
    tenant: str | None
    record_id: str
    expected_version: int
    state: shapes.JsonDict


def move_runs(
    conn: sa.Connection,
    moves: Sequence[Move],
    *,
    snapshot: shapes.JsonDict,
    digest: str,
    now: datetime,
    by: str,
    resource: str,
    detail: shapes.JsonDict,
) -> set[int]:
    """Give each run another version's snapshot and its state as it stands there, over
    the row version that was read, with a history line and a journal entry each: a few
    statements for many runs. The ids of the runs moved (one saved since was not)."""
    if not moves:
        return set()
    runs, log, journal = engine_tables.runs, engine_tables.step_log, engine_tables.journal
    conn.execute(
        sa.update(runs)
        .where(runs.c.id == sa.bindparam("b_id"), runs.c.version == sa.bindparam("b_version"))
        .values(
            snapshot=sa.bindparam("b_snapshot", type_=runs.c.snapshot.type),
            digest=digest,
            state=sa.bindparam("b_state", type_=runs.c.state.type),
            version=runs.c.version + 1,
            updated_at=now,
        ),
        [
            {
                "b_id": m.run_id,
                "b_version": m.expected_version,
                "b_snapshot": snapshot,
                "b_state": m.state,
            }
            for m in moves
        ],
    )
    read = {m.run_id: m.expected_version for m in moves}
    moved = {
        int(run_id)
        for run_id, version in conn.execute(
            sa.select(runs.c.id, runs.c.version).where(
                runs.c.id.in_(list(read)), runs.c.digest == digest
            )
        )
        if version == read[int(run_id)] + 1
    }
    done = [m for m in moves if m.run_id in moved]
    if done:
        what = "moved"  # the history line's code: "olga moved the run from version 1 to 2"
        said = sanitize.sanitize_value(detail)
        conn.execute(
            sa.insert(log),
            [
                {
                    "run_id": m.run_id,
                    "tenant": m.tenant,
                    "at": now,
                    "what": what,
                    "detail": said,
                }
                for m in done
            ],
        )
        conn.execute(
            sa.insert(journal),
            [
                {
                    "at": now,
                    "operator": sanitize.sanitize_text(by, 200),
                    "action": "move",
                    "tenant": m.tenant,
                    "run_id": m.run_id,
                    "resource": resource,
                    "record_id": m.record_id,
                    "detail": said,
                }
                for m in done
            ],
        )
    return moved
