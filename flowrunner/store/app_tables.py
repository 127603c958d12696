"""The application's tables: declaring its flows and steps tables, and reading all three.

An application declares the flows and steps tables in its own ``MetaData`` (or brings
tables it already has); a runner reads the resource, flows and steps tables by
reflection once, at mount, into an ``AppTables`` that every later statement uses::

    metadata = sa.MetaData()
    po_flow = app_tables.flows_table(metadata, "po_flow")
    po_flow_step = app_tables.steps_table(metadata, "po_flow_step", flows=po_flow)
    tables = app_tables.reflect(engine, binding)

Applications import the declaring helpers from ``flowrunner.tables``.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import ReflectedColumn
from sqlalchemy.engine.reflection import ObjectKind

from flowrunner import errors
from flowrunner.foundations import flow_columns, payloads, sqltypes

S = TypeVar("S")

# A flow's name is checked to fit (and is unique, so it is not an unbounded text);
# every other column users type into is text of any length, so what validation
# accepts the database stores.
NAME_LENGTH = 200


class Declared(Protocol):
    """What the store reads of a binding (``FlowBinding`` is one): its tables' names, the
    resource's key and tenant columns, and its kinds' input columns."""

    @property
    def resource(self) -> str: ...
    @property
    def flows_table(self) -> str: ...
    @property
    def steps_table(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def input_columns(self) -> tuple[str, ...]: ...


# -- declaring ---------------------------------------------------------------------


def flows_table(
    metadata: sa.MetaData,
    name: str,
    *,
    tenant: str | None = None,
    tenant_type: sqltypes.SqlType | None = None,
) -> sa.Table:
    """A flows table: ``id, name, start, condition, changes, active, calendar, schedule``
    (and the tenant column).

    A flow's name is unique within the table, or within its tenant.
    """
    columns: list[sqltypes.TableColumn] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(NAME_LENGTH), nullable=False),
        sa.Column("start", sa.Text, nullable=False),
        sa.Column("condition", sa.Text),
        sa.Column("changes", sa.Text),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        sa.Column("calendar", sa.Text),
        sa.Column("schedule", sa.Text),
    ]
    unique: tuple[str, ...] = ("name",)
    if tenant is not None:
        columns.append(sa.Column(tenant, tenant_type or sa.String(64), nullable=False))
        unique = (tenant, "name")
    return sa.Table(
        name,
        metadata,
        *columns,
        sa.UniqueConstraint(*unique, name=f"uq_{name}_name"),
    )


def steps_table(
    metadata: sa.MetaData,
    name: str,
    *,
    flows: sa.Table | str | None = None,
    inputs: Iterable[str] = (),
    tenant: str | None = None,
    tenant_type: sqltypes.SqlType | None = None,
) -> sa.Table:
    """A steps table with the fixed step columns plus one text column per kind input.

    ``flows`` (the flows table or its name) adds a foreign key from ``flow_id``.
    """
    flows_name = flows.name if isinstance(flows, sa.Table) else flows
    flow_id: sqltypes.TableColumn = (
        sa.Column("flow_id", sa.Integer, sa.ForeignKey(f"{flows_name}.id"), nullable=False)
        if flows_name
        else sa.Column("flow_id", sa.Integer, nullable=False)
    )
    columns: list[sqltypes.TableColumn] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        flow_id,
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("title", sa.Text),
        sa.Column("duration", sa.Text),
        sa.Column("field", sa.Text),
        sa.Column("value", sa.Text),
        sa.Column("condition", sa.Text),
        sa.Column("goto", sa.Integer),
        sa.Column("event", sa.Text),
        sa.Column("audience", sa.Text),
        sa.Column("message", sa.Text),
        sa.Column("mode", sa.Text),
        sa.Column("remind", sa.Text),
        sa.Column("on_failure", sa.Integer),
        sa.Column("escalate", sa.Text),
        sa.Column("escalate_to", sa.Text),
    ]
    for column in dict.fromkeys(inputs):
        columns.append(sa.Column(column, sa.Text))
    if tenant is not None:
        columns.append(sa.Column(tenant, tenant_type or sa.String(64), nullable=False))
    return sa.Table(name, metadata, *columns, sa.Index(f"ix_{name}_flow", "flow_id", "position"))


def for_binding(
    metadata: sa.MetaData,
    binding: Declared,
    *,
    tenant_type: sqltypes.SqlType | None = None,
) -> tuple[sa.Table, sa.Table]:
    """The flows and steps tables a binding names, with every kind's input columns."""
    flows = flows_table(
        metadata, binding.flows_table, tenant=binding.tenant, tenant_type=tenant_type
    )
    steps = steps_table(
        metadata,
        binding.steps_table,
        flows=flows,
        inputs=binding.input_columns,
        tenant=binding.tenant,
        tenant_type=tenant_type,
    )
    return flows, steps


def create_declared(bind: sa.Engine | sa.Connection, metadata: sa.MetaData) -> None:
    """Create the tables an application declared (the demo plays the application)."""
    metadata.create_all(bind)


# -- as the database has them --------------------------------------------------------


@dataclass(frozen=True)
class AppTables:
    """The application's tables a runner works on, reflected once (see ``reflect``)."""

    resource: sa.Table
    flows: sa.Table
    steps: sa.Table
    key: str
    tenant: str | None
    # The application's own columns of the flows and steps tables (audit columns, say):
    # kept on save, never judged.
    flow_extra: frozenset[str] = frozenset()
    step_extra: frozenset[str] = frozenset()
    # Statements built once for this runner's tables (see store.prepared).
    built: dict[Hashable, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def metadata(self) -> sa.MetaData:
        """The ``MetaData`` the three tables were read into (``FlowBinding.check`` takes it)."""
        return self.resource.metadata

    def statement(self, key: Hashable, build: Callable[[], S]) -> S:
        """The statement for ``key``, built by ``build`` the first time it is asked for."""
        found = self.built.get(key)
        if found is None:
            found = self.built[key] = build()
        return cast(S, found)

    def key_value(self, record_id: object) -> Any:
        """The record id as the key column holds it (runs keep ``str`` of it); see ``key_of``.

        Raises ``RecordRejected`` for an id the column cannot hold, saying what to send.
        """
        return key_of(self.resource.c[self.key], record_id, self.resource.name)

    def tenant_value(self, tenant: object) -> Any:
        """The tenant as the resource's tenant column holds it (runs keep ``str`` of it).

        The rule of ``key_of``, except that a text tenant column also takes an ``int``,
        as its digits: tenants are ``str | int`` everywhere an operator names one.
        """
        assert self.tenant is not None, "a binding without tenants has no tenant column"
        column = self.resource.c[self.tenant]
        if _python_type(column) is str and isinstance(tenant, int) and not isinstance(tenant, bool):
            tenant = str(tenant)
        return key_of(column, tenant, "tenant")

    def where_record_params(self) -> sa.ColumnElement[bool]:
        """This record (of this tenant): parameters ``p_key`` and ``p_tenant``."""
        clause: sa.ColumnElement[bool] = self.resource.c[self.key] == sa.bindparam("p_key")
        if self.tenant is not None:
            clause = sa.and_(clause, self.resource.c[self.tenant] == sa.bindparam("p_tenant"))
        return clause


# -- keys ----------------------------------------------------------------------------

# A whole number as ``str(int)`` writes it: no sign but "-", no zeros in front, no
# spaces, no underscores, ASCII digits only.
_WHOLE = re.compile(r"0|-?[1-9][0-9]*", re.ASCII)
# The most digits a 64-bit whole number has (so ``int()`` never reads a long text).
_WHOLE_DIGITS = len(str(payloads.MIN_INT))
# A UUID as ``str()`` writes it (lowercase, with hyphens), for messages.
_UUID = "12345678-1234-5678-1234-567812345678"


def id_limit(column: sqltypes.TableColumn) -> int | None:
    """The bound of the whole numbers an integer id column holds (``-limit <= id <
    limit``), or None for a column of another type: an id past it names no row, and is
    never sent (PostgreSQL refuses to compare a column with a number it cannot hold)."""
    if isinstance(column.type, sa.SmallInteger):
        return 2**15
    if isinstance(column.type, sa.BigInteger):
        return 2**63
    return 2**31 if isinstance(column.type, sa.Integer) else None


def key_of(column: sqltypes.TableColumn, value: object, what: str) -> Any:
    """``value`` as ``column`` holds it, by the one rule every record key follows.

    An integer column takes an ``int`` (not a ``bool``) or text that is exactly how
    ``str()`` writes one (``"7"``, ``"-3"``; not ``"007"``, ``" 7"``, ``"+7"``, ``"7_0"``,
    ``"٧"``), within 64 bits; a text column takes text exactly as given (no trimming),
    without ``\\x00``; a UUID column takes a ``uuid.UUID`` or text exactly as ``str()``
    writes one (lowercase, with hyphens). Anything else raises ``RecordRejected`` saying
    what to send, so a key is never guessed: ``str()`` of the result is the key as runs
    and events keep it. Other column types take their value as given. ``what`` names
    the key's owner in the message (the resource, or "tenant").

    >>> import sqlalchemy as sa
    >>> key_of(sa.Column("id", sa.Integer), "7", "purchase_order")
    7
    >>> key_of(sa.Column("id", sa.Integer), "007", "purchase_order")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowrunner.errors.RecordRejected: purchase_order '007' is not a purchase_order key: send ...
    """
    python_type = _python_type(column)
    if python_type is int:
        if isinstance(value, bool) or not (isinstance(value, int) or _whole_text(value)):
            raise _refused(
                value, what, "a whole number such as 7, or its digits as text such as '7'"
            )
        number = int(value)
        if not payloads.MIN_INT <= number <= payloads.MAX_INT:
            raise _refused(
                value, what, f"a whole number from {payloads.MIN_INT} to {payloads.MAX_INT}"
            )
        return number
    if python_type is str:
        if not isinstance(value, str):
            raise _refused(value, what, "text, exactly as the key is stored")
        if payloads.text_problem(value) is not None:
            raise _refused(value, what, "text without \\x00 or lone surrogates")
        return str.__str__(value)
    if python_type is uuid.UUID:
        if isinstance(value, uuid.UUID):
            return value
        if _uuid_text(value):
            return uuid.UUID(value)
        raise _refused(value, what, f"its UUID as text as str() writes it, such as '{_UUID}'")
    if value is None or isinstance(value, bool | Mapping | list | tuple | set):
        raise _refused(value, what, "a value of its key column's type")
    return value


def _whole_text(value: object) -> TypeGuard[str]:
    return (
        isinstance(value, str)
        and len(value) <= _WHOLE_DIGITS
        and _WHOLE.fullmatch(value) is not None
    )


def _uuid_text(value: object) -> TypeGuard[str]:
    if not isinstance(value, str) or len(value) != len(_UUID):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _python_type(column: sqltypes.TableColumn) -> type | None:
    try:
        found: type = column.type.python_type
    except NotImplementedError:
        return None
    return found


def _refused(value: object, what: str, expected: str) -> errors.RecordRejected:
    return errors.RecordRejected(
        f"{what} {payloads.quote(value)} is not a {what} key: send {expected}",
        value=value,
        expected=expected,
    )


def reflect(bind: sa.Engine | sa.Connection, binding: Declared) -> AppTables:
    """The binding's resource, flows and steps tables as the database has them now.

    Raises ``BindingError`` naming a table that does not exist. Reading tables costs a
    few queries, so callers keep the result: a runner reflects once, at mount.
    """
    resource, flows, steps = read_tables(
        bind,
        {
            binding.resource: "resource",
            binding.flows_table: "flows",
            binding.steps_table: "steps",
        },
    )
    tables = AppTables(
        resource,
        flows,
        steps,
        key=binding.key,
        tenant=binding.tenant,
        flow_extra=_extra(flows, binding),
        step_extra=_extra(steps, binding),
    )
    # The same tables read for the same binding before: the one kept, with what was
    # built on it (``AppTables.statement``).
    return _kept(_mounted, tables, tables)


def read_tables(bind: sa.Engine | sa.Connection, wanted: Mapping[str, str]) -> list[sa.Table]:
    """The tables named in ``wanted`` (name -> what the table is, for an error), in its
    order, with what a runner uses of them: their columns (type, nullability, server
    default) and primary key.

    Read together, in a query for the columns and one for the keys, where reflecting each
    table whole would read its foreign keys, indexes, constraints, comments and options
    too (on PostgreSQL about four times the queries and the time, for nothing we use).
    Raises ``BindingError`` naming a table (or view) that does not exist.
    """
    names = list(wanted)
    inspector = sa.inspect(bind)
    found = {
        name: columns
        for (_, name), columns in inspector.get_multi_columns(
            filter_names=names, kind=ObjectKind.ANY
        ).items()
    }
    for name in names:
        if name not in found:
            raise errors.BindingError(
                f"the {wanted[name]} table {name!r} does not exist in the database"
            )
    keys = {
        name: frozenset(key["constrained_columns"])
        for (_, name), key in inspector.get_multi_pk_constraint(
            filter_names=names, kind=ObjectKind.ANY
        ).items()
    }
    # What the database said of the tables, in full: the same words, the same tables.
    said = (
        type(inspector.dialect),
        tuple((name, repr(found[name]), tuple(sorted(keys.get(name, ())))) for name in names),
    )
    kept = _read.get(said)
    if kept is None:
        metadata = sa.MetaData()
        kept = _kept(
            _read,
            said,
            tuple(
                sa.Table(
                    name,
                    metadata,
                    *(_column(column, keys.get(name, frozenset())) for column in found[name]),
                )
                for name in names
            ),
        )
    return list(kept)


# Tables read before, by what the database said of them, and each binding's ``AppTables``
# on them. A runner mounted again on tables of the same shape (on another engine or
# database: another tenant's, a second runner in the same process) uses the same
# ``Table`` objects and finds what the ``AppTables`` built on them, and a second runner
# on the same engine finds the statements SQLAlchemy compiled for them (its cache is
# keyed by the tables themselves), instead of compiling each again (mounting a runner on
# a second SQLite database of the purchase-order app and running one order's flow: about
# 54 ms before, 41 ms so). A table the database describes otherwise is a new one. The
# ``Table`` objects are never changed once read.
_KEPT_AT_MOST = 64
_read: dict[Hashable, tuple[sa.Table, ...]] = {}
_mounted: dict[Hashable, AppTables] = {}
_keeping = threading.Lock()


def _kept(kept: dict[Any, S], key: Hashable, value: S) -> S:
    """``kept[key]``, set to ``value`` if it has none; at most ``_KEPT_AT_MOST`` kept, the
    oldest forgotten first."""
    with _keeping:
        found = kept.get(key)
        if found is None:
            if len(kept) >= _KEPT_AT_MOST:
                del kept[next(iter(kept))]
            found = kept[key] = value
        return found


def _column(found: ReflectedColumn, key: frozenset[str]) -> sa.Column[Any]:
    """A column as the inspector read it (as SQLAlchemy's own reflection builds one)."""
    extra: list[Any] = []
    default = found.get("default")
    if default is not None:
        extra.append(sa.DefaultClause(sa.text(default)))
    if "computed" in found:
        extra.append(sa.Computed(**found["computed"]))
    if "identity" in found:
        extra.append(sa.Identity(**found["identity"]))
    return sa.Column(
        found["name"],
        found["type"],
        *extra,
        nullable=found["nullable"],
        autoincrement=found.get("autoincrement", "auto"),
        primary_key=found["name"] in key,
        comment=found.get("comment"),
        **found.get("dialect_options", {}),
    )


def _extra(table: sa.Table, binding: Declared) -> frozenset[str]:
    ours = {*flow_columns.FLOW_COLUMNS, *flow_columns.STEP_COLUMNS, *binding.input_columns}
    return frozenset(
        str(c.name) for c in table.columns if c.name not in ours and c.name != binding.tenant
    )
