"""A flow's published versions: ``flowrunner_flow_versions``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Each row is one immutable version of one flow of one resource: its number (1, 2, …
per flow), the snapshot its runs start on and that snapshot's digest (a run's
``digest`` names the version it runs), when and by whom it was published, and a note.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flowrunner_flow_versions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("tenant", sa.Text(), nullable=True),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("flow_id", sa.Text(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("digest", sa.Text(), nullable=False),
        sa.Column(
            "snapshot",
            sa.JSON(none_as_null=True).with_variant(
                postgresql.JSONB(none_as_null=True), "postgresql"
            ),
            nullable=False,
        ),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published_by", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_flowrunner_flow_versions"),
        sa.UniqueConstraint(
            "resource",
            "flow_id",
            "number",
            name="uq_flowrunner_flow_versions_resource_flow_id_number",
        ),
    )


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
