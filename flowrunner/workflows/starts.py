"""Starting runs of code workflows: on an event, in its transaction, or by hand.

A start inserts a run row like a flow's — on the runner's resource, due now — whose
snapshot names the program ``workflow``, the workflow, the version it is pinned to and
its start (the event's payload, or the manual input). ``flow_id`` is
``workflow:<name>`` and ``start_key`` the start's key, so the store's guard starts one
run per key, whatever version is deployed: a re-sent event starts nothing new. The
run's event floor is read as it is inserted, so its ``wait_for`` steps count the
record's events from then on (not the event that started it, nor any before).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from flowrunner import binding, errors
from flowrunner.foundations import payloads
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops
from flowrunner.workflows import definitions

if TYPE_CHECKING:
    from flowrunner.engine.mounted import Mounted

PROGRAM = "workflow"
# The longest start key kept (the store's column holds it with room to spare).
KEY_LENGTH = 200


def flow_id(name: str) -> str:
    """The ``flow_id`` of a workflow's runs: ``workflow:late_fees``."""
    return f"{PROGRAM}:{name}"


def snapshot(
    definition: definitions.Definition,
    start: Mapping[str, Any],
    origin: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a run of ``definition`` keeps: the program, the workflow, its pinned version,
    its principal and its start — and where it came from, when another run made it
    (``origin``: ``{"parent": {"run": 7, "step": "credit"}}`` for a child,
    ``{"forked": {"run": 5, "step": "charge"}}`` for a fork)."""
    return {
        "program": PROGRAM,
        "workflow": definition.name,
        "version": definition.version,
        "run_as": definition.run_as,
        "start": dict(start),
        **dict(origin or {}),
    }


def insert(
    mounted: Mounted,
    conn: sa.Connection,
    definition: definitions.Definition,
    start: Mapping[str, Any],
    *,
    record_id: str,
    tenant: object,
    start_key: str,
    started_by: str,
    now: datetime,
    origin: Mapping[str, Any] | None = None,
    state: Mapping[str, Any] | None = None,
) -> int | None:
    """Insert a run of ``definition``, due now; None when ``start_key`` started one.

    ``origin`` says which run made it (``snapshot``); ``state`` is what it begins with
    (a fork's steps replayed; empty: it starts at its first step).
    """
    kept = snapshot(definition, start, origin)
    digest = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:32]
    return ops.insert_run(
        conn,
        tenant=tenant,
        resource=mounted.binding.resource,
        record_id=record_id,
        flow_id=flow_id(definition.name),
        flow_name=definition.name,
        start_key=start_key,
        snapshot=kept,
        digest=digest,
        state=dict(state or {}),
        now=now,
        started_by=started_by,
        due_at=now,
    )


def start_on_event(
    mounted: Mounted,
    conn: sa.Connection,
    workflows: definitions.Workflows,
    event: str,
    payload: Mapping[str, Any],
    *,
    record_id: str,
    tenant: object,
    now: datetime,
) -> list[int]:
    """Start each workflow ``event`` starts, once per its key; the new runs' ids.

    In the transaction (and savepoint) of ``runner.emit``: a key that cannot be read
    refuses the event with ``EventRejected``, and nothing of it is kept.
    """
    started = []
    for definition in workflows.started_by(event):
        assert isinstance(definition.start, definitions.OnEvent)
        key = record_id if definition.start.key is None else _key(definition, event, payload)
        if key is None:
            continue  # the key said: this event starts no run of this workflow
        run_id = insert(
            mounted,
            conn,
            definition,
            payload,
            record_id=record_id,
            tenant=tenant,
            start_key=f"event:{key}",
            started_by=definition.run_as or mounted.run_as,
            now=now,
        )
        if run_id is not None:
            started.append(run_id)
    return started


def _key(definition: definitions.Definition, event: str, payload: Mapping[str, Any]) -> str | None:
    assert isinstance(definition.start, definitions.OnEvent) and definition.start.key is not None
    try:
        key = definition.start.key(payload)
    except Exception as exc:
        raise errors.EventRejected(
            f"event {event!r}: workflow {definition.name!r} could not read its key "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if key is None:
        return None
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise errors.EventRejected(
            f"event {event!r}: workflow {definition.name!r}'s key is {payloads.quote(key)}; "
            "a key is a text or a whole number"
        )
    problem = key_problem(key)
    if problem is not None:
        raise errors.EventRejected(f"event {event!r}: workflow {definition.name!r}'s key {problem}")
    return str(key)


def key_problem(key: object) -> str | None:
    """Why ``key`` cannot be a start's key (the end of a sentence), or None: the one rule
    for a workflow's keys, started by an event or by hand. The key is kept in text
    columns, so it holds what they can hold on SQLite and PostgreSQL alike.

    >>> key_problem("2026-03") is None, key_problem(" ")
    (True, 'must be a text of 1 to 200 characters')
    >>> key_problem("a\\ud800")
    'contains a lone surrogate, which is not text (not UTF-8)'
    """
    if isinstance(key, int) and not isinstance(key, bool):
        if abs(key) >= 10**KEY_LENGTH:  # more digits than a key holds (str() is not asked)
            return f"must be a text of 1 to {KEY_LENGTH} characters"
        key = str(key)
    if not isinstance(key, str) or not key.strip() or len(key) > KEY_LENGTH:
        return f"must be a text of 1 to {KEY_LENGTH} characters"
    return payloads.text_problem(key)


def start_manual(
    mounted: Mounted,
    workflows: definitions.Workflows,
    name: str,
    start: Mapping[str, Any] | None,
    *,
    operator: str,
    record: binding.RecordId | None = None,
    key: str | None = None,
    tenant: binding.Tenant = None,
) -> int:
    """An operator (or the application) starts workflow ``name`` with ``start``; its run.

    ``record`` is the record the run is on (its ``wait_for`` steps count that record's
    events); without one the run is on its ``key``. ``key`` makes the start once: a
    second start with the same key is refused. Journaled with the operator's name.
    """
    definition = workflows.latest(name) if isinstance(name, str) else None
    if definition is None:
        known = ", ".join(workflows.names()) or "none"
        raise errors.OperatorError(
            f"there is no workflow {payloads.quote(name)} (workflows: {known})",
            status_code=404,
            code="workflow_unknown",
        )
    if not isinstance(definition.start, definitions.Manual):
        raise errors.OperatorError(
            f"workflow {name!r} starts on event {definition.start.event!r}; "
            "only a manual workflow is started by hand"
        )
    who = (operator or "").strip() if isinstance(operator, str) else ""
    if not who:
        raise errors.OperatorError(
            "name the operator: every start is journaled with who did it", code="operator_missing"
        )
    problem = payloads.text_problem(who)  # kept as who started the run
    if problem is not None:
        raise errors.OperatorError(f"the operator's name {problem}")
    try:
        given = payloads.plain(start or {})
    except payloads.NotPlain as exc:
        raise errors.OperatorError(f"workflow {name!r}'s start: {exc}") from None
    problem = None if key is None else key_problem(key if isinstance(key, int) else str(key))
    if problem is not None:
        raise errors.OperatorError(f"a start's key {problem}")
    owner = mounted.need_tenant(tenant)
    now = mounted.clock()
    with dialects.begin(mounted.engine) as conn:
        if record is not None:
            record_id = mounted.operator_key(record)
            if records.load_record(conn, mounted.tables, record_id, owner) is None:
                raise errors.OperatorError(
                    f"there is no {mounted.binding.resource} {payloads.quote(record)}",
                    status_code=404,
                    code="record_unknown",
                )
        start_key = f"manual:{key}" if key is not None else f"manual:{uuid.uuid4().hex}"
        on = record_id if record is not None else str(key or start_key)
        run_id = insert(
            mounted,
            conn,
            definition,
            given,
            record_id=on,
            tenant=owner,
            start_key=start_key,
            started_by=who,
            now=now,
        )
        if run_id is None:
            raise errors.OperatorError(
                f"workflow {name!r} was started with key {payloads.quote(key)} already",
                code="workflow_started",
            )
        ops.journal(
            conn,
            operator=who,
            action="start",
            at=now,
            tenant=owner,
            run_id=run_id,
            resource=mounted.binding.resource,
            record_id=on,
            detail={"workflow": name, "version": definition.version},
        )
    return run_id
