"""The engine's own tables: the one ``MetaData`` that migrations create and move.

Every table holding tenant-owned data has a nullable ``tenant`` column; every
timestamp is UTC (``UTCDateTime``); JSON is JSONB on PostgreSQL. A change here
needs a new migration in ``flowrunner/store/migrations/versions`` — a test
compares this metadata with the migrated schema on both databases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from flowrunner.foundations import sqltypes
from flowrunner.store import dialects

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

_R = TypeVar("_R")

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER keys


class TenantText(sa.types.TypeDecorator[str]):
    """Text that takes any tenant key: an application's integer tenant ids are stored as
    their text, on both databases, and compare equal to it in queries."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: object, dialect: sa.Dialect) -> str | None:
        return None if value is None else str(value)


def _tenant() -> sa.Column[str]:
    return sa.Column("tenant", TenantText(), nullable=True)


def _at(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sqltypes.UTCDateTime(), nullable=nullable)


runs = sa.Table(
    "flowrunner_runs",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _tenant(),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("record_id", sa.Text, nullable=False),
    sa.Column("flow_id", sa.Text, nullable=False),
    sa.Column("flow_name", sa.Text, nullable=False),
    # The "once per change" guard: created:<record>, updated:<change>, manual:<uuid>,
    # restart:<run>.
    sa.Column("start_key", sa.Text, nullable=False),
    sa.Column("snapshot", dialects.json_type(), nullable=False),
    sa.Column("digest", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("state", dialects.json_type(), nullable=False),
    # Incremented by every save; a save names the version it read.
    sa.Column("version", sa.Integer, nullable=False),
    _at("started_at"),
    _at("updated_at"),
    _at("ended_at", nullable=True),
    sa.Column("error", dialects.json_type(), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("started_by", sa.Text, nullable=True),
    # Events about the record up to this id were stored before the run began.
    sa.Column("event_floor", Id, nullable=True),
    # A failed run an operator started again points at its new run.
    sa.Column("restarted_as", Id, nullable=True),
    sa.UniqueConstraint("resource", "flow_id", "start_key"),
    sa.Index(None, "resource", "record_id"),
    sa.Index(None, "status"),
    # The Operations room: the header's counts by status and the age filters (0006).
    sa.Index(None, "resource", "status", "started_at"),
    sa.Index(None, "resource", "tenant", "status", "started_at"),
)

step_log = sa.Table(
    "flowrunner_step_log",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    sa.Column("run_id", Id, nullable=False),
    _tenant(),
    _at("at"),
    sa.Column("position", sa.Integer, nullable=True),
    sa.Column("step_id", sa.Text, nullable=True),
    sa.Column("title", sa.Text, nullable=True),
    sa.Column("kind", sa.Text, nullable=True),
    sa.Column("pass", sa.Integer, nullable=True),
    # started, done, waiting, woke, arrived, timed_out, failed, notice, set, command, ...
    sa.Column("what", sa.Text, nullable=False),
    sa.Column("detail", dialects.json_type(), nullable=True),
    # When it happened on the flow's own clock (``at``: when a worker did it).
    _at("due_at", nullable=True),
    sa.Index(None, "run_id", "id"),
)

due = sa.Table(
    "flowrunner_due",
    metadata,
    sa.Column("run_id", Id, primary_key=True, autoincrement=False),
    _tenant(),
    _at("due_at"),
    # Bumped by every wake-up, so a worker finishing a claim can tell it was woken
    # meanwhile and must not postpone the wake-up it did not see.
    sa.Column("wakes", sa.Integer, nullable=False, server_default="0"),
    # The run's resource: each runner claims only its own resource's runs, on the one
    # index (a page written per index and commit: a claim across resources, which no
    # worker makes, reads the table).
    sa.Column("resource", sa.Text, nullable=True),
    sa.Index(None, "resource", "due_at"),
)

events = sa.Table(
    "flowrunner_events",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _tenant(),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("record_id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("payload", dialects.json_type(), nullable=False),
    _at("at"),
    # PostgreSQL: the writing transaction's id, what the feed's order begins with
    # (``dialects.writing_transaction``); 0 on SQLite, where ids are commit order.
    sa.Column("txid", sa.BigInteger, nullable=False, server_default="0"),
    sa.Index(None, "resource", "record_id", "id"),
    sa.Index(None, "resource", "txid", "id"),
)

notices = sa.Table(
    "flowrunner_notices",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _tenant(),
    sa.Column("run_id", Id, nullable=False),
    sa.Column("step_id", sa.Text, nullable=False),
    sa.Column("pass", sa.Integer, nullable=False),
    sa.Column("audience", sa.Text, nullable=False),
    sa.Column("recipient", sa.Text, nullable=True),
    sa.Column("title", sa.Text, nullable=True),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("email", sa.Boolean, nullable=False, server_default=sa.false()),
    _at("at"),
    _at("delivered_at", nullable=True),
    # Why nobody can be told (the recipient's column is empty); null: it can be delivered.
    sa.Column("problem", sa.Text, nullable=True),
    # Delivery through the binding's channels (0007): the channel the rule names (null:
    # the application delivers it), the attempts, when a deliverer may take it next (null:
    # nothing to do; a claim moves it to the claim's end), the last error, sanitized.
    sa.Column("channel", sa.Text, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    _at("next_attempt_at", nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    _at("sent_at", nullable=True),
    _at("failed_at", nullable=True),
    # A replayed run tells nobody twice.
    sa.UniqueConstraint("run_id", "step_id", "pass"),
    sa.Index(None, "next_attempt_at"),
)

leases = sa.Table(
    "flowrunner_leases",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    _at("expires_at"),
    # The fencing token: increases whenever a different owner acquires.
    sa.Column("epoch", sa.Integer, nullable=False),
)

idempotency = sa.Table(
    "flowrunner_idempotency",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    _tenant(),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("result", dialects.json_type(), nullable=True),
    _at("created_at"),
    _at("updated_at"),
)

journal = sa.Table(
    "flowrunner_journal",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _at("at"),
    sa.Column("operator", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    _tenant(),
    sa.Column("run_id", Id, nullable=True),
    sa.Column("resource", sa.Text, nullable=True),
    sa.Column("record_id", sa.Text, nullable=True),
    sa.Column("detail", dialects.json_type(), nullable=True),
    sa.Index(None, "run_id"),
)

# A flow's published versions: what its runs start on. Immutable once written; a roll
# back publishes an earlier version's rows again under a new number.
flow_versions = sa.Table(
    "flowrunner_flow_versions",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _tenant(),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("flow_id", sa.Text, nullable=False),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("digest", sa.Text, nullable=False),
    sa.Column("snapshot", dialects.json_type(), nullable=False),
    _at("published_at"),
    sa.Column("published_by", sa.Text, nullable=True),
    sa.Column("note", sa.Text, nullable=False),
    sa.UniqueConstraint("resource", "flow_id", "number"),
)


# A limit's tokens (``store/limits``): a ``slot`` per command allowed at once, held by a
# run until its command ends (``until``: a lease's end, so a dead worker's frees itself);
# a ``start`` per start allowed in the rate's window, held until the window has passed.
limit_tokens = sa.Table(
    "flowrunner_limit_tokens",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("run_id", Id, nullable=True),
    _at("until", nullable=True),
)

# The runs waiting for a limit's token, in the order they began to wait; ``woken_at``:
# when a freed token made it due (no second wake-up is spent on it meanwhile).
limit_waiting = sa.Table(
    "flowrunner_limit_waiting",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("run_id", Id, primary_key=True),
    _at("since"),
    _at("woken_at", nullable=True),
    sa.Index(None, "name", "since"),
    sa.Index(None, "run_id"),
)


# What each signed callback was answered (``store/callbacks``): a receipt (204) or a
# refusal, with the inbound's name (null: a name no inbound has), the sender's delivery
# key once the body was read, the status, the reason (sanitized) and the event emitted.
# Answers alike in one minute fold into one row (``fold``, ``count``, ``last_at``), so
# refusals sent in a flood add one row a minute per reason, not one per request.
callbacks = sa.Table(
    "flowrunner_callbacks",
    metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    _tenant(),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("endpoint", sa.Text, nullable=True),
    sa.Column("key", sa.Text, nullable=True),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("event_id", Id, nullable=True),
    sa.Column("fold", sa.Text, nullable=False),
    sa.Column("count", sa.Integer, nullable=False, server_default="1"),
    _at("at"),
    _at("last_at"),
    sa.UniqueConstraint("fold"),
    sa.Index(None, "resource", "id"),
)


def from_row(make: Callable[..., _R], row: sqltypes.ResultRow, **values: object) -> _R:
    """A row of one of these tables as its record (``RunRow``, ``EventRow``, ...).

    Each column goes to the field of its name (``pass``, a Python keyword, to ``pass_``);
    ``values`` add fields or replace what a column gave.
    """
    fields = {("pass_" if name == "pass" else name): value for name, value in row._mapping.items()}
    return make(**{**fields, **values})
