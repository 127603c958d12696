"""Starting runs: a flow's snapshot, its load check, and the run row with its first due time.

Also what makes a record's change one change however often it is reported
(``change_of``), and the ways to start a run besides a record's change: an operator
starting a manual flow, an operator restarting a failed run, and records that existed
before their flows (``flowrunner flows start``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlalchemy as sa

from flowrunner import binding, errors, query
from flowrunner.engine.mounted import Mounted, forget_oldest, record_tenant
from flowrunner.flows import snapshot
from flowrunner.foundations import payloads, statuses
from flowrunner.foundations.shapes import Tenant
from flowrunner.store import app_tables, dialects, flow_rows, flow_versions, records
from flowrunner.store import operations as ops


def start_run(
    mounted: Mounted,
    conn: sa.Connection,
    flow: Mapping[str, object],
    record: Mapping[str, object],
    start_key: str,
    started_by: str,
    now: datetime,
    steps: list[dict[str, object]] | None = None,
) -> int | None:
    """Insert the run of ``flow`` on ``record`` with its snapshot, due now; None if the
    ``start_key`` already started one. A snapshot that fails its load check starts the
    run failed, with the sentence naming the broken row. ``steps``: the flow's step rows,
    when the caller has read them already."""
    if steps is None:
        steps = flow_rows.steps_of_flow(conn, mounted.tables, flow["id"])
    found = _startable(mounted, flow, steps, record_tenant(mounted.binding, record))
    return _start(mounted, conn, found, record, start_key, started_by, now)


@dataclass(frozen=True)
class Startable:
    """An active flow as a runner keeps it between starts: its row, the snapshot a run of
    it executes (with the load check's sentence, if it fails it) and its condition."""

    flow: Mapping[str, object]
    snapshot: snapshot.FlowSnapshot
    stored: dict[str, Any]
    """The snapshot as the run row keeps it (``FlowSnapshot.to_dict``)."""
    problem: str | None
    condition: query.Condition | None
    """None: the flow has no condition, or one that no longer parses — a run starts,
    and fails with a sentence naming it, rather than silently never starting."""

    def matches(self, record: Mapping[str, object], now: datetime) -> bool:
        if self.condition is None:
            return True
        try:
            return self.condition.matches(record, now)
        except errors.QueryError:
            return True


def _startable(
    mounted: Mounted,
    flow: Mapping[str, object],
    steps: list[dict[str, object]],
    tenant: object,
) -> Startable:
    snap = snapshot.FlowSnapshot.build({**flow, "tenant": tenant}, steps)
    return _from_snapshot(mounted, flow, snap)


def _start(
    mounted: Mounted,
    conn: sa.Connection,
    found: Startable,
    record: Mapping[str, object],
    start_key: str,
    started_by: str,
    now: datetime,
    origin: Mapping[str, object] | None = None,
) -> int | None:
    """Insert the run of ``found`` on ``record``, due now (see ``start_run``); ``origin``
    is kept in its snapshot beside the flow (a child's parent)."""
    tenant = record_tenant(mounted.binding, record)
    problem = found.problem
    run_id = ops.insert_run(
        conn,
        tenant=tenant,
        resource=mounted.binding.resource,
        record_id=mounted.record_id(record),
        flow_id=str(found.flow["id"]),
        flow_name=str(found.flow.get("name") or ""),
        start_key=start_key,
        snapshot={**found.stored, **origin} if origin else found.stored,
        digest=found.snapshot.digest,
        state={},
        status=statuses.RunStatus.FAILED if problem else statuses.RunStatus.RUNNING,
        now=now,
        started_by=started_by,
        reason=problem,
        due_at=None if problem else now,
    )
    return run_id


def start_child(
    mounted: Mounted,
    conn: sa.Connection,
    found: Startable,
    record: Mapping[str, object],
    start_key: str,
    started_by: str,
    now: datetime,
    origin: Mapping[str, object],
) -> int | None:
    """Start ``found`` (one of ``startable``'s) on ``record`` as another run's child, its
    snapshot keeping ``origin`` (``{"parent": {...}}``); None if ``start_key`` started one."""
    return _start(mounted, conn, found, record, start_key, started_by, now, origin)


# How many (start kind, tenant) lists of flows a runner keeps (a tenant's records start
# only that tenant's flows); the oldest goes first.
KEPT_FLOW_LISTS = 256


def startable(mounted: Mounted, conn: sa.Connection, start: str, tenant: object) -> list[Startable]:
    """The active flows of one start kind that a record of ``tenant`` (as the record
    gives it; None without tenants) may start, as of ``conn``'s transaction.

    The runner keeps them between calls, with a digest of their rows; each call reads the
    digest again (one statement) and the rows only when it differs. So a flow edited in
    any way, by any process — saved through a runner or written around it — is used
    by the next start that can see the edit, and by none before.
    """
    owner = None if tenant is None else mounted.tables.tenant_value(tenant)
    explicit = mounted.binding.publish == "explicit"
    digest: object
    if explicit:
        active = [flow["id"] for flow in flow_rows.active_flows(conn, mounted.tables, owner)]
        digest = (flow_versions.marker(conn, mounted.binding.resource), tuple(active))
    else:
        digest = flow_rows.startable_digest(conn, mounted.tables, start, owner)
    key = (start, type(tenant), tenant)
    kept = mounted.startable.get(key)
    if kept is not None and kept[0] == digest:
        return kept[1]
    if explicit:
        found = _published(mounted, conn, start, tenant, owner)
    else:
        found = [
            _startable(mounted, flow, steps, tenant)
            for flow, steps in flow_rows.startable(conn, mounted.tables, start, owner)
        ]
        _keep_versions(mounted, conn, found, tenant)
    if key not in mounted.startable and len(mounted.startable) >= KEPT_FLOW_LISTS:
        forget_oldest(mounted.startable)
    mounted.startable[key] = (digest, found)
    return found


def _published(
    mounted: Mounted, conn: sa.Connection, start: str, tenant: object, owner: Tenant
) -> list[Startable]:
    """The active flows whose latest published version starts on ``start``, each as that
    version keeps it (``publish="explicit"``: the rows are a draft)."""
    flows = flow_rows.active_flows(conn, mounted.tables, owner)
    latest = flow_versions.latest(conn, mounted.binding.resource, [f["id"] for f in flows])
    found = []
    for flow in flows:
        version = latest.get(str(flow["id"]))
        if version is None:
            continue  # never published: it starts nothing yet
        snap = mounted.load_snapshot(version.snapshot)
        if snap.flow.start != start:
            continue
        row = {
            **flow,
            "name": snap.flow.name,
            "start": snap.flow.start,
            "condition": snap.flow.condition,
            "changes": snap.flow.changes,
            "schedule": snap.flow.schedule,
        }
        found.append(_from_snapshot(mounted, row, snap))
    return found


def _keep_versions(
    mounted: Mounted, conn: sa.Connection, found: list[Startable], tenant: object
) -> None:
    """``publish="on_save"``: each sound flow whose rows differ from its latest version is
    kept as a new version (by no one: a save), so its runs name the version they run."""
    sound = [f for f in found if f.problem is None]
    latest = flow_versions.latest(conn, mounted.binding.resource, [f.flow["id"] for f in sound])
    for startable_ in sound:
        kept = startable_.snapshot  # of an active flow: as a version keeps it
        version = latest.get(str(startable_.flow["id"]))
        if version is not None and version.digest == kept.digest:
            continue
        flow_versions.insert_version(
            conn,
            resource=mounted.binding.resource,
            flow_id=startable_.flow["id"],
            tenant=tenant,
            snapshot=kept.to_dict(),
            digest=kept.digest,
            at=mounted.clock(),
            by=None,
            note="",
        )


def _from_snapshot(
    mounted: Mounted, flow: Mapping[str, object], snap: snapshot.FlowSnapshot
) -> Startable:
    """A flow as it starts: its snapshot as kept (the rows', or a published version's),
    the load check's sentence, and its condition (None when it has none or it no longer
    parses: the run then starts, and fails with a sentence naming it)."""
    text = snap.flow.condition
    condition = None
    if text is not None and text.strip():
        try:
            condition = query.parse(text, mounted.columns)
        except errors.QueryError:
            condition = None
    return Startable(flow, snap, snap.to_dict(), mounted.check_snapshot(snap), condition)


def start_flows(
    mounted: Mounted,
    conn: sa.Connection,
    start: str,
    record: Mapping[str, object],
    start_key: str,
    now: datetime,
    changed: frozenset[str] | None = None,
) -> list[int]:
    """Start each active ``start`` flow whose condition ``record`` meets (of an updated
    flow with ``changes``, only when that column is in ``changed``); the new runs' ids."""
    started = []
    for found in startable(mounted, conn, start, record_tenant(mounted.binding, record)):
        column = found.flow.get("changes")
        if changed is not None and column and column not in changed:
            continue
        if found.matches(record, now):
            run_id = _start(mounted, conn, found, record, start_key, mounted.run_as, now)
            if run_id is not None:
                started.append(run_id)
    return started


# -- a change, once -------------------------------------------------------------------

# Where a connection remembers its current root transaction and that transaction's token.
_TRANSACTION = "flowrunner.change_transaction"


@dataclass(frozen=True)
class Change:
    """One change of one record: the columns it changed, and its identity as a start key."""

    key: str
    """``updated:<hash>``: the same for the same change reported again in one transaction."""
    columns: frozenset[str]
    """The columns whose values differ between before and after."""


def change_of(
    conn: sa.Connection,
    before: Mapping[str, object],
    after: Mapping[str, object],
    *,
    record_id: str,
    tenant: object,
) -> Change:
    """The change ``before`` → ``after`` of a record, reported in ``conn``'s transaction.

    Its identity is a hash of the record (and tenant), each changed column with its
    before and after values (normalized: ``Decimal("5.00")`` and ``5`` are one value, a
    datetime is compared in UTC), and a token of the connection's root transaction. So
    the same change reported twice in one transaction — the ORM hook and an explicit
    call, or one call made twice — has one key and starts each flow once, while the same
    change in a later transaction (closed, reopened, closed again) is a new change.

    A column counts as changed only when both mappings have it and its values differ:
    a caller that leaves a column out says nothing about it.
    """
    changed = {
        column: (_plain(before[column]), _plain(after[column]))
        for column in after
        if column in before and _plain(before[column]) != _plain(after[column])
    }
    identity = json.dumps(
        [
            _transaction_token(conn),
            None if tenant is None else str(tenant),
            record_id,
            sorted([column, old, new] for column, (old, new) in changed.items()),
        ],
        separators=(",", ":"),
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return Change(key=f"updated:{digest}", columns=frozenset(changed))


def _transaction_token(conn: sa.Connection) -> str:
    """A token for ``conn``'s root transaction: the same for every call within it.

    Kept in the connection's ``info`` beside a weak reference to the root transaction
    object (savepoints share their root); a later transaction on the same pooled
    connection is another object, so it gets a new token. Outside a transaction each
    call is its own change.
    """
    root = conn.get_transaction()
    if root is None:
        return uuid.uuid4().hex
    held = conn.info.get(_TRANSACTION)
    if held is not None and held[0]() is root:
        token: str = held[1]
        return token
    token = uuid.uuid4().hex
    conn.info[_TRANSACTION] = (weakref.ref(root), token)
    return token


def _plain(value: object) -> Any:
    """A column value as plain JSON that compares equal for equal values of any type."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float | Decimal):
        try:
            return format(Decimal(str(value)).normalize(), "f")
        except InvalidOperation:  # pragma: no cover - str() of a number is a number
            return str(value)
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return moment.isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def stored_snapshot(
    conn: sa.Connection, tables: app_tables.AppTables, flow_id: object
) -> snapshot.FlowSnapshot:
    """The stored flow ``flow_id`` and its steps, as the immutable copy a run would keep."""
    flow = flow_rows.flow_by_id(conn, tables, flow_id)
    if flow is None:
        raise errors.SnapshotBroken(f"there is no flow with id {flow_id!r}")
    if tables.tenant is not None:
        flow["tenant"] = flow.pop(tables.tenant)
    return snapshot.FlowSnapshot.build(flow, flow_rows.steps_of_flow(conn, tables, flow_id))


def matches(
    mounted: Mounted, flow: Mapping[str, object], record: Mapping[str, object], now: datetime
) -> bool:
    text = flow.get("condition")
    if text is None or not str(text).strip():
        return True
    try:
        return query.parse(str(text), mounted.columns).matches(record, now)
    except errors.QueryError:
        # A condition that broke after it was written starts a run that fails with
        # a sentence naming it, rather than silently never starting.
        return True


def start_manual(
    mounted: Mounted,
    flow: str | int,
    record_id: binding.RecordId,
    *,
    operator: str,
    tenant: binding.Tenant = None,
) -> int:
    """An operator starts a manual flow (by name or id) for a record; journaled.

    ``record_id`` (and ``tenant``) follow the key rule (``store.app_tables.key_of``); one
    that cannot be a key is refused with ``OperatorError`` before the transaction opens.
    """
    problem = payloads.text_problem(operator) if isinstance(operator, str) else "is no text"
    if problem is not None:  # kept as who started the run
        raise errors.OperatorError(f"the operator's name {problem}")
    try:
        key = mounted.tables.key_value(record_id)
        owner = tenant
        if tenant is not None and mounted.tables.tenant is not None:
            owner = mounted.tables.tenant_value(tenant)
    except errors.RecordRejected as exc:
        raise errors.OperatorError(str(exc)) from None
    now = mounted.clock()
    with dialects.begin(mounted.engine) as conn:
        found = flow_rows.flow_by_name_or_id(conn, mounted.tables, flow, tenant)
        if found is None:
            raise errors.OperatorError(
                f"there is no flow {flow!r}", status_code=404, code="flow_unknown"
            )
        refuse_manual_start(found)
        record = records.load_record(conn, mounted.tables, key, owner)
        if record is None:
            raise errors.OperatorError(
                f"there is no {mounted.binding.resource} {record_id!r}"
                + (f" for tenant {tenant!r}" if mounted.binding.tenant else ""),
                status_code=404,
                code="record_unknown",
            )
        start_key = f"manual:{uuid.uuid4().hex}"
        run_id = start_run(mounted, conn, found, record, start_key, operator, now)
        assert run_id is not None
        ops.journal(
            conn,
            operator=operator,
            action="start",
            at=now,
            tenant=tenant,
            run_id=run_id,
            resource=mounted.binding.resource,
            record_id=str(key),
            detail={"flow": found["name"]},
        )
        return run_id


def start_existing(
    mounted: Mounted,
    where: str | None = None,
    *,
    flow: str | int | None = None,
    tenant: binding.Tenant = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Hand records that existed before their flows to the runner as though just created.

    Each chosen record starts each active ``created`` flow whose condition holds
    (``flow`` names one). Running it again starts nothing new. ``progress`` is called
    with (done, total). Returns the number of runs started.
    """
    if mounted.binding.tenant is not None and tenant is None:
        raise errors.OperatorError(
            f"{mounted.binding.resource} records belong to tenants: name the tenant"
        )
    now = mounted.clock()
    condition = query.parse(where, mounted.columns) if where else None
    clause = condition.to_sql(mounted.tables.resource, now) if condition else None
    with mounted.engine.connect() as conn:
        total = records.count_records(conn, mounted.tables, clause, tenant)
        flows = flow_rows.flows_to_start(conn, mounted.tables, "created", tenant)
        if flow is not None:
            flows = [f for f in flows if f["name"] == flow or str(f["id"]) == str(flow)]
            if not flows:
                raise errors.OperatorError(
                    f"there is no active flow {flow!r} that starts when a record is created"
                )
        batches = list(records.record_ids(conn, mounted.tables, clause, tenant))
    started = done = 0
    for ids in batches:
        with dialects.begin(mounted.engine) as conn:
            # Each flow's steps once per batch, not once per record.
            steps = {f["id"]: flow_rows.steps_of_flow(conn, mounted.tables, f["id"]) for f in flows}
            for record_id in ids:
                record = records.load_record(conn, mounted.tables, record_id, tenant)
                if record is None:
                    continue
                for found in flows:
                    if matches(mounted, found, record, now):
                        key = f"created:{mounted.record_id(record)}"
                        if start_run(
                            mounted,
                            conn,
                            found,
                            record,
                            key,
                            mounted.run_as,
                            now,
                            steps[found["id"]],
                        ):
                            started += 1
        done += len(ids)
        if progress is not None:
            progress(done, total)
    return started


def refuse_manual_start(flow: Mapping[str, object]) -> None:
    """``OperatorError`` with a sentence when an operator may not start ``flow``.

    Only a manual flow is started by an operator, and only while it is active.
    """
    if flow.get("start") != "manual":
        raise errors.OperatorError(
            f"flow {flow['name']!r} starts when a record is {flow['start']}; "
            "only manual flows are started by an operator"
        )
    if flow.get("active") is not None and not flow.get("active"):
        raise errors.OperatorError(
            f"flow {flow['name']!r} is inactive; make it active again to start it"
        )
