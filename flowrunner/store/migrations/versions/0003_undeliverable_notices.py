"""Notices nobody can receive are kept, with why.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

- ``flowrunner_notices.problem``: why a notice cannot be delivered (its recipient's
  column was empty), in a sentence; null for a notice to deliver. Notices written
  before this revision are all to deliver, as they were.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flowrunner_notices") as table:
        table.add_column(sa.Column("problem", sa.Text(), nullable=True))


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
