"""Limits on commands: ``flowrunner_limit_tokens`` and ``flowrunner_limit_waiting``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

- ``flowrunner_limit_tokens``: a limit's tokens by its name, sort (``slot``: one per
  command allowed at once; ``start``: one per start allowed in the rate's window) and
  number, each with the run holding it and until when.
- ``flowrunner_limit_waiting``: the runs waiting for a limit's token, since when, and
  when a freed token last woke each.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "flowrunner_limit_tokens",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("run_id", _ID, nullable=True),
        sa.Column("until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", "kind", "number", name="pk_flowrunner_limit_tokens"),
    )
    op.create_table(
        "flowrunner_limit_waiting",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("run_id", _ID, nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("woken_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name", "run_id", name="pk_flowrunner_limit_waiting"),
    )
    op.create_index(
        "ix_flowrunner_limit_waiting_name_since", "flowrunner_limit_waiting", ["name", "since"]
    )
    op.create_index("ix_flowrunner_limit_waiting_run_id", "flowrunner_limit_waiting", ["run_id"])


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
