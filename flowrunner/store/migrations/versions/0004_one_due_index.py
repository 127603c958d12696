"""The due-work index is one index: ``(resource, due_at)``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Every worker claims the runs of its own resource, and every start, wake-up and save
writes the due row, so each index on it is written twice per run (a page per index in
each commit). ``(resource, due_at)`` serves every claim; ``(due_at)`` and ``(tenant,
due_at)`` served only claims across resources, which no worker makes: they go.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_flowrunner_due_due_at", table_name="flowrunner_due")
    op.drop_index("ix_flowrunner_due_tenant_due_at", table_name="flowrunner_due")


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
