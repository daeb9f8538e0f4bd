"""paths: an index of heartbeat spans by their first beat, so that retention's walk over the
heartbeats of threads that announced no wait reads what grew old, not the whole table

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 22:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_heartbeat_at", "heartbeat", ["at", "id"])


def downgrade() -> None:
    # Lossless: an index only.
    op.drop_index("ix_heartbeat_at", table_name="heartbeat")
