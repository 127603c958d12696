"""Notices are delivered through the binding's channels, each attempt kept.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06

- ``flowrunner_notices.channel``: the binding's channel its notify rule names (``mail``,
  ``hooks``); null for a notice the application delivers itself, as before.
- ``attempts``: how many times a deliverer tried to send it.
- ``next_attempt_at``: when a deliverer may take it next (null: nothing to do — sent,
  failed for good, or no channel); a deliverer's claim moves it to the claim's end.
- ``last_error``: why the last attempt failed, one sanitized line.
- ``sent_at``: when a channel sent it; ``failed_at``: when the deliverer gave up.
- an index on ``next_attempt_at``: finding what is due costs what is due.

Notices written before this revision have no channel: the application delivers them
as it did (``runner.notices(undelivered=True)``, ``runner.mark_delivered``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flowrunner_notices") as table:
        table.add_column(sa.Column("channel", sa.Text(), nullable=True))
        table.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        table.add_column(sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        table.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("failed_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_flowrunner_notices_next_attempt_at", "flowrunner_notices", ["next_attempt_at"]
    )


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
