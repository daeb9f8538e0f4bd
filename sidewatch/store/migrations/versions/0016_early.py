"""early: a dirty mark keeps the earliest time of the facts that set it, so a long thread's
checkpoint tells a late fact (timed before its cut) by arrival, without counting the prefix;
and subagent steps are found by their invocation (a checkpoint asks the prefix by it)

Checkpoints taken before the upgrade are dropped: a fact that came late before the upgrade is
in no dirty mark's `early`. Each long thread takes one again at its next evaluation.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 22:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("dirty_thread") as batch:
        batch.add_column(sa.Column("early", sa.BigInteger(), nullable=True))
    op.create_index("ix_subagent_thread_invocation", "subagent", ["thread_id", "subagent_run_id"])
    op.create_index("ix_heartbeat_thread_run_at", "heartbeat", ["thread_id", "run_id", "at"])
    op.execute("DELETE FROM thread_checkpoint")


def downgrade() -> None:
    # Lossless: a checkpoint still holds its prefix's count, which 0014 checks.
    op.drop_index("ix_heartbeat_thread_run_at", table_name="heartbeat")
    op.drop_index("ix_subagent_thread_invocation", table_name="subagent")
    with op.batch_alter_table("dirty_thread") as batch:
        batch.drop_column("early")
