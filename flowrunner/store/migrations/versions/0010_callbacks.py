"""What each signed callback was answered: ``flowrunner_callbacks``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

- ``flowrunner_callbacks``: each receipt and refusal of an inbound endpoint, with the
  endpoint, the sender's delivery key, the status, the reason, the event emitted, the
  tenant and the time; answers alike in one minute share a row (``fold``), counted.
- ``flowrunner_callbacks (resource, id)``: the Deliveries page reads a resource's
  newest first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "flowrunner_callbacks",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text(), nullable=True),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("endpoint", sa.Text(), nullable=True),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("event_id", _ID, nullable=True),
        sa.Column("fold", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_callbacks"),
        sa.UniqueConstraint("fold", name="uq_flowrunner_callbacks_fold"),
    )
    op.create_index(
        "ix_flowrunner_callbacks_resource_id", "flowrunner_callbacks", ["resource", "id"]
    )


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
