"""The Operations room reads its counts and age filters through indexes.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-10

- ``flowrunner_runs (resource, status, started_at)``: the header's counts (how many
  runs of each status) are read from the index alone, not from every run's row with its
  snapshot; a status with an age (``failed``, older than two days) is one range of it.
- ``flowrunner_runs (resource, tenant, status, started_at)``: the same for one tenant.

Without them each count read every run of the resource. ``docs/performance.md`` has
the figures, before and after, on 200,000 runs.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_flowrunner_runs_resource_status_started_at",
        "flowrunner_runs",
        ["resource", "status", "started_at"],
    )
    op.create_index(
        "ix_flowrunner_runs_resource_tenant_status_started_at",
        "flowrunner_runs",
        ["resource", "tenant", "status", "started_at"],
    )


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
