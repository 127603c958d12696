"""Runs that listen from their start, several resources in one database, restarts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

- ``flowrunner_runs.event_floor``: the id of the latest event about the record stored
  before the run began; events above it count for the run's first steps.
- ``flowrunner_runs.restarted_as``: the run an operator started again as (a failed
  run points at its restart).
- ``flowrunner_step_log.due_at``: when a history line happened on the flow's own
  clock (``at`` is when a worker did it).
- ``flowrunner_due.resource``: each runner claims only its own resource's runs;
  existing rows take their run's resource.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _id() -> sa.BigInteger:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("flowrunner_runs") as table:
        table.add_column(sa.Column("event_floor", _id(), nullable=True))
        table.add_column(sa.Column("restarted_as", _id(), nullable=True))
    with op.batch_alter_table("flowrunner_step_log") as table:
        table.add_column(sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("flowrunner_due") as table:
        table.add_column(sa.Column("resource", sa.Text(), nullable=True))
    op.execute(
        "UPDATE flowrunner_due SET resource = (SELECT r.resource FROM flowrunner_runs r"
        " WHERE r.id = flowrunner_due.run_id)"
    )
    op.create_index("ix_flowrunner_due_resource_due_at", "flowrunner_due", ["resource", "due_at"])


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
