"""wait state: the never-reported evidence a verdict rests on

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 11:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Every thread with an open wait is audited again: its stored verdict predates the column
# (and the rule that a handle never reported orphans a wait only after heartbeatFreshness).
_MARK_OPEN = (
    "INSERT INTO dirty_thread (thread_id, mark) "
    "SELECT DISTINCT thread_id, 1 FROM wait_state WHERE closed = false "
    "ON CONFLICT (thread_id) DO UPDATE SET mark = dirty_thread.mark + 1"
)


def upgrade() -> None:
    op.add_column(
        "wait_state",
        sa.Column("unreported", sa.String(length=32), nullable=False, server_default=""),
    )
    op.execute(_MARK_OPEN)


def downgrade() -> None:
    with op.batch_alter_table("wait_state", schema=None) as batch_op:
        batch_op.drop_column("unreported")
