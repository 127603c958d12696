"""What the application tells its runner, in its own transactions: records created,
updated and deleted, and events emitted.

Each change starts the flows it should (``flows.starts``), wakes the record's waiting
runs, arms the binding's timers (``timers``) and, for an event, plans the jobs and starts
the code workflows waiting for it — all in a savepoint of the application's transaction,
so a refusal leaves that usable. ``FlowRunner.record_created`` and friends are these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pydantic
import sqlalchemy as sa

from flowrunner import errors
from flowrunner.binding import Event, RecordId, Tenant
from flowrunner.engine.mounted import Mounted
from flowrunner.flows import starts
from flowrunner.foundations import payloads
from flowrunner.jobs import spec
from flowrunner.store import dialects, records
from flowrunner.store import operations as ops
from flowrunner.workflows import starts as workflow_starts


class Changes:
    """A runner's intake: records and events, told in the application's transactions."""

    def __init__(self, mounted: Mounted) -> None:
        self.mounted = mounted

    def record_created(self, conn: sa.Connection, record: Mapping[str, Any]) -> list[int]:
        """Start every active ``created`` flow whose condition holds, in ``conn``'s transaction.

        Starting twice for the same record starts nothing new. The binding's timers
        (``at``) whose column the record gives an instant are armed (not in the list).
        A record without its key (or, on a tenant binding, its tenant), or with a key its
        column cannot hold, is refused with ``RecordRejected`` before anything is
        written; what is written goes in a savepoint, so an error leaves ``conn``'s
        transaction usable.
        """
        mounted = self.mounted
        record_id, _ = mounted.identify(record, "record_created")
        now = mounted.clock()
        with dialects.Savepoint(conn, "flowrunner_start"):
            started = starts.start_flows(
                mounted, conn, "created", record, f"created:{record_id}", now
            )
            if mounted.timers is not None:
                mounted.timers.arm(conn, record, now)
            return started

    def record_updated(
        self, conn: sa.Connection, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> list[int]:
        """Start each active ``updated`` flow that matches this change, once per change.

        The same change reported again in the same transaction (by ``watch`` and by an
        explicit call, or twice) starts nothing new; the same change in a later
        transaction is a new change (see ``flows.starts.change_of``). A flow with
        ``changes`` starts only when that column changed. Runs of the record that wait
        are woken, so an ``until`` step follows a changed date; a timer (``at``) whose
        column changed to an instant is armed for it. Refused as ``record_created`` is,
        before anything is written, and written in a savepoint.
        """
        if not isinstance(before, Mapping):
            raise errors.RecordRejected(
                "record_updated takes the record before the change as a mapping of column "
                f"to value, not a {type(before).__name__}"
            )
        mounted = self.mounted
        record_id, tenant = mounted.identify(after, "record_updated")
        now = mounted.clock()
        with conn.begin_nested():
            change = starts.change_of(conn, before, after, record_id=record_id, tenant=tenant)
            started = starts.start_flows(
                mounted, conn, "updated", after, change.key, now, changed=change.columns
            )
            ops.wake_record(
                conn,
                resource=mounted.binding.resource,
                record_id=record_id,
                tenant=tenant,
                now=now,
            )
            if mounted.timers is not None:
                mounted.timers.arm(conn, after, now, changed=change.columns)
        return started

    def record_deleted(
        self, conn: sa.Connection, record_id: RecordId, *, tenant: Tenant = None
    ) -> None:
        """Tell the runner a record was deleted (in your transaction): its waiting runs end.

        ``record_id`` follows the key rule (``RecordRejected`` otherwise); on a tenant
        binding ``tenant`` is required. Written in a savepoint of ``conn``'s transaction.
        """
        mounted = self.mounted
        key = str(mounted.tables.key_value(record_id))
        owner = None
        if mounted.binding.tenant is not None:
            if tenant is None:
                raise errors.RecordRejected(
                    f"{mounted.binding.resource} records belong to tenants: name the deleted "
                    "record's tenant"
                )
            owner = str(mounted.tables.tenant_value(tenant))
        now = mounted.clock()
        with conn.begin_nested():
            ops.wake_record(
                conn, resource=mounted.binding.resource, record_id=key, tenant=owner, now=now
            )

    def emit(self, conn: sa.Connection, name: str, payload: Mapping[str, Any]) -> int:
        """Record an event in the application's transaction and wake the record's runs.

        The binding's ``events`` names the payload field that identifies the record; its
        value follows the key rule (``store.app_tables.key_of``: ``7`` or ``"7"`` for an
        integer key, never ``"007"``), and the event is stored under the key as the
        record's runs hold it. The payload must be plain data (``foundations.payloads``).
        An unknown event, a payload that is not plain, does not name its record (or, on
        a tenant binding, its tenant) as a key, or names no record is refused with
        ``EventRejected`` before anything is written; the writes go in a savepoint, so a
        refusal leaves ``conn``'s transaction usable.
        """
        mounted = self.mounted
        resource = mounted.binding.resource
        field, record_id, tenant, plain = self._event(name, payload)
        now = mounted.clock()
        with conn.begin_nested():
            if self._load(conn, record_id, tenant) is None:
                raise errors.EventRejected(
                    f"event {name!r} names {resource} {payloads.quote(record_id)} "
                    f"in field {field!r}, which does not exist",
                    status_code=404,
                    code="record_unknown",
                )
            key = str(record_id)
            event_id = ops.insert_event(
                conn,
                tenant=tenant,
                resource=resource,
                record_id=key,
                name=name,
                payload=plain,
                at=now,
            )
            ops.wake_record(conn, resource=resource, record_id=key, tenant=tenant, now=now)
            if mounted.on_event:
                stored = spec.Emitted(
                    id=event_id,
                    name=name,
                    payload=plain,
                    record_id=key,
                    tenant=None if tenant is None else str(tenant),
                    at=now,
                )
                for hook in mounted.on_event:
                    hook(conn, stored)
            if mounted.workflows is not None:
                workflow_starts.start_on_event(
                    mounted,
                    conn,
                    mounted.workflows,
                    name,
                    plain,
                    record_id=key,
                    tenant=tenant,
                    now=now,
                )
        return event_id

    def check_event(self, name: str, payload: Mapping[str, Any]) -> None:
        """``emit``'s checks that need no database — a known event, a plain payload naming
        its record (and tenant) as keys — raising ``EventRejected`` as ``emit`` would.

        ``emit`` checks them again, and that the record exists.
        """
        self._event(name, payload)

    def _load(self, conn: sa.Connection, record_id: RecordId, tenant: Tenant) -> object:
        """The record, or None; inside ``emit``'s savepoint.

        Integer and text keys are judged before anything is sent; a key column of another
        type (a UUID, say) takes the value as given, and a value the database cannot
        compare with it names no record (the savepoint undoes the failed statement).
        """
        try:
            return records.load_record(conn, self.mounted.tables, record_id, tenant)
        except (sa.exc.DataError, sa.exc.ProgrammingError):
            return None
        except sa.exc.StatementError as exc:
            if isinstance(exc, sa.exc.DBAPIError):
                raise  # the connection or the server failed: not about the key
            return None  # the key column's type refused the value before sending it

    def _event(self, name: object, payload: object) -> tuple[str, RecordId, Tenant, dict[str, Any]]:
        """The checks of ``emit``, none of which reads or writes: the field naming the
        record, the record's key and tenant as their columns hold them (checked first, so
        a wrong key is refused by the key rule), and the plain payload."""
        binding, tables = self.mounted.binding, self.mounted.tables
        if not isinstance(name, str) or name not in binding.events:
            known = ", ".join(sorted(binding.events)) or "none"
            raise errors.EventRejected(
                f"there is no event {payloads.quote(name)} (events: {known})",
                status_code=404,
                code="event_unknown",
            )
        if not isinstance(payload, Mapping):
            raise errors.EventRejected(f"event {name!r} needs a mapping of fields as its payload")
        declared = binding.event(name)
        if declared.shape is not None:
            payload = shaped(name, declared, payload, keep=(declared.key, binding.tenant))
        field = declared.key
        resource = binding.resource
        if payload.get(field) is None:
            raise errors.EventRejected(
                f"event {name!r} must name its {resource} in field {field!r}"
            )
        try:
            record_id = tables.key_value(payload[field])
        except errors.RecordRejected as exc:
            raise errors.EventRejected(
                f"event {name!r} names {resource} {payloads.quote(payload[field])} in field "
                f"{field!r}, which cannot be a {resource} key: send {exc.expected}"
            ) from None
        tenant = None
        column = binding.tenant
        if column is not None:
            if payload.get(column) is None:
                raise errors.EventRejected(
                    f"event {name!r} must name its tenant in field {column!r}: "
                    f"{resource} records belong to tenants"
                )
            try:
                tenant = tables.tenant_value(payload[column])
            except errors.RecordRejected as exc:
                raise errors.EventRejected(
                    f"event {name!r} names tenant {payloads.quote(payload[column])} in field "
                    f"{column!r}, which cannot be a tenant key: send {exc.expected}"
                ) from None
        try:
            plain = payloads.plain(payload)
        except payloads.NotPlain as exc:
            raise errors.EventRejected(f"event {name!r}: {exc}") from None
        return field, record_id, tenant, plain

    def watch(self, mapped_class: type[Any]) -> Callable[[], None]:
        """Opt in: ORM inserts and updates of ``mapped_class`` call record_created/updated,
        in the flush's own transaction. Returns a function that stops watching."""
        # Imported here: SQLAlchemy's ORM is a fifth of a worker's imports, and only an
        # application that watches mapped classes needs it.
        from sqlalchemy import orm

        mapper = orm.class_mapper(mapped_class)
        names = [c.key for c in mapper.column_attrs]

        def as_record(target: object) -> dict[str, Any]:
            return {name: getattr(target, name) for name in names}

        def after_insert(_mapper: object, connection: sa.Connection, target: object) -> None:
            self.record_created(connection, as_record(target))

        def after_update(_mapper: object, connection: sa.Connection, target: object) -> None:
            after = as_record(target)
            before = dict(after)
            changed = False
            for name in names:
                history = orm.attributes.instance_state(target).attrs[name].history
                if history.deleted:
                    before[name] = history.deleted[0]
                    changed = True
            if changed:
                self.record_updated(connection, before, after)

        sa.event.listen(mapped_class, "after_insert", after_insert)
        sa.event.listen(mapped_class, "after_update", after_update)

        def unwatch() -> None:
            sa.event.remove(mapped_class, "after_insert", after_insert)
            sa.event.remove(mapped_class, "after_update", after_update)

        return unwatch


def shaped(
    name: str, event: Event, payload: Mapping[str, Any], *, keep: tuple[str | None, ...] = ()
) -> dict[str, Any]:
    """``payload`` validated by ``event``'s shape: the model's fields as it read them
    (the fields in ``keep`` — the record's key and tenant — kept from the payload when the
    shape has none of theirs). ``EventRejected`` with every field's problem otherwise.

    >>> class Sent(pydantic.BaseModel):
    ...     order: int
    ...     supplier: str
    >>> shaped("po.sent", Event(key="order", shape=Sent), {"order": "7", "supplier": "Acme"})
    {'order': 7, 'supplier': 'Acme'}
    >>> try:
    ...     shaped("po.sent", Event(key="order", shape=Sent), {"order": 7})
    ... except errors.EventRejected as refused:
    ...     print(refused.errors[0].message)
    po.sent needs the field 'supplier'
    """
    assert event.shape is not None
    try:
        model = event.shape.model_validate(dict(payload))
    except pydantic.ValidationError as exc:
        problems = [_field_error(name, event, err) for err in exc.errors()]
        said = "; ".join(f"{p.field}: {p.message}" for p in problems)
        raise errors.EventRejected(
            f"event {name!r} does not fit its shape: {said}", errors=problems
        ) from None
    read = model.model_dump(by_alias=True)
    for field in keep:
        if field is not None and field not in read and field in payload:
            read[field] = payload[field]
    return read


def _field_error(name: str, event: Event, err: Any) -> errors.FieldError:
    """One of pydantic's errors as a sentence about the event's field."""
    where = ".".join(str(p) for p in err["loc"]) or "payload"
    kind = str(err["type"])
    if kind == "missing":
        message = f"{name} needs the field {where!r}"
    elif kind == "extra_forbidden":
        fields = ", ".join(event.fields or ()) or "none"
        message = f"{name} has no field {where!r} (its fields: {fields})"
    else:
        said = str(err["msg"]).removeprefix("Value error, ")
        said = said.replace("Input should be", "should be", 1)
        message = f"{said[:1].lower()}{said[1:]}, not {payloads.quote(err.get('input'))}"
    return errors.FieldError(where, message, kind)
