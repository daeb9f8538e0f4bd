"""settled: what the read API shows of each wait settled before a long thread's checkpoint's
cut, so the GET of one wait and the list serve it without evaluating the thread whole

Checkpoints taken before the upgrade are dropped: they have no settled bodies beside them.
Each long thread takes one again (with its bodies) at its next evaluation.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 01:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settled_wait",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("request_id", sa.String(length=640), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "request_id"),
        sqlite_with_rowid=False,
    )
    op.execute("DELETE FROM thread_checkpoint")


def downgrade() -> None:
    # Lossless: the bodies are derived from the facts; the checkpoints stay valid without them.
    op.drop_table("settled_wait")
