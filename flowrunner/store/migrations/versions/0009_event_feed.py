"""The event feed: each event keeps the transaction that wrote it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

- ``flowrunner_events.txid``: on PostgreSQL, the id of the transaction that stored the
  event (``pg_current_xact_id()``); 0 on SQLite, and for the events stored before this
  revision (all long committed). The feed (``runner.events``) hands events out by
  ``(txid, id)`` and only those of transactions older than every transaction still in
  flight, so a reader never passes an event that commits later.
- ``flowrunner_events (resource, txid, id)``: the feed reads one resource's events in
  that order from the index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flowrunner_events") as table:
        table.add_column(sa.Column("txid", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index(
        "ix_flowrunner_events_resource_txid_id", "flowrunner_events", ["resource", "txid", "id"]
    )


def downgrade() -> None:
    # flowrunner's migrations are forward-only: a release never needs to go back.
    raise NotImplementedError("flowrunner migrations are forward-only")
