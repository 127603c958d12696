"""The engine's tables: runs, step log, due work, events, notices, leases, idempotency, journal.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Written out in full rather than imported from ``engine_tables`` so that this migration
keeps meaning what it meant when later migrations change the metadata.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _json() -> sa.JSON:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def _id() -> sa.BigInteger:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _at(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _tenant() -> sa.Column[str]:
    return sa.Column("tenant", sa.Text(), nullable=True)


def upgrade() -> None:
    op.create_table(
        "flowrunner_runs",
        sa.Column("id", _id(), autoincrement=True),
        _tenant(),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("flow_id", sa.Text(), nullable=False),
        sa.Column("flow_name", sa.Text(), nullable=False),
        sa.Column("start_key", sa.Text(), nullable=False),
        sa.Column("snapshot", _json(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("state", _json(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        _at("started_at"),
        _at("updated_at"),
        _at("ended_at", nullable=True),
        sa.Column("error", _json(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("started_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_runs"),
        sa.UniqueConstraint(
            "resource", "flow_id", "start_key", name="uq_flowrunner_runs_resource_flow_id_start_key"
        ),
    )
    op.create_index(
        "ix_flowrunner_runs_resource_record_id", "flowrunner_runs", ["resource", "record_id"]
    )
    op.create_index("ix_flowrunner_runs_status", "flowrunner_runs", ["status"])

    op.create_table(
        "flowrunner_step_log",
        sa.Column("id", _id(), autoincrement=True),
        sa.Column("run_id", _id(), nullable=False),
        _tenant(),
        _at("at"),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("step_id", sa.Text(), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("kind", sa.Text(), nullable=True),
        sa.Column("pass", sa.Integer(), nullable=True),
        sa.Column("what", sa.Text(), nullable=False),
        sa.Column("detail", _json(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_step_log"),
    )
    op.create_index("ix_flowrunner_step_log_run_id_id", "flowrunner_step_log", ["run_id", "id"])

    op.create_table(
        "flowrunner_due",
        sa.Column("run_id", _id(), autoincrement=False),
        _tenant(),
        _at("due_at"),
        sa.Column("wakes", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("run_id", name="pk_flowrunner_due"),
    )
    op.create_index("ix_flowrunner_due_due_at", "flowrunner_due", ["due_at"])
    op.create_index("ix_flowrunner_due_tenant_due_at", "flowrunner_due", ["tenant", "due_at"])

    op.create_table(
        "flowrunner_events",
        sa.Column("id", _id(), autoincrement=True),
        _tenant(),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("payload", _json(), nullable=False),
        _at("at"),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_events"),
    )
    op.create_index(
        "ix_flowrunner_events_resource_record_id_id",
        "flowrunner_events",
        ["resource", "record_id", "id"],
    )

    op.create_table(
        "flowrunner_notices",
        sa.Column("id", _id(), autoincrement=True),
        _tenant(),
        sa.Column("run_id", _id(), nullable=False),
        sa.Column("step_id", sa.Text(), nullable=False),
        sa.Column("pass", sa.Integer(), nullable=False),
        sa.Column("audience", sa.Text(), nullable=False),
        sa.Column("recipient", sa.Text(), nullable=True),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("email", sa.Boolean(), nullable=False, server_default=sa.false()),
        _at("at"),
        _at("delivered_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_notices"),
        sa.UniqueConstraint(
            "run_id", "step_id", "pass", name="uq_flowrunner_notices_run_id_step_id_pass"
        ),
    )

    op.create_table(
        "flowrunner_leases",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        _at("expires_at"),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_flowrunner_leases"),
    )

    op.create_table(
        "flowrunner_idempotency",
        sa.Column("key", sa.Text(), nullable=False),
        _tenant(),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("result", _json(), nullable=True),
        _at("created_at"),
        _at("updated_at"),
        sa.PrimaryKeyConstraint("key", name="pk_flowrunner_idempotency"),
    )

    op.create_table(
        "flowrunner_journal",
        sa.Column("id", _id(), autoincrement=True),
        _at("at"),
        sa.Column("operator", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        _tenant(),
        sa.Column("run_id", _id(), nullable=True),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("record_id", sa.Text(), nullable=True),
        sa.Column("detail", _json(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_journal"),
    )
    op.create_index("ix_flowrunner_journal_run_id", "flowrunner_journal", ["run_id"])


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
