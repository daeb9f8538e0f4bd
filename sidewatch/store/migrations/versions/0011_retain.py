"""retention inside threads: a closed wait pruned from a thread that still has an open one
leaves its interrupts behind, marked `pruned` (the engine still knows the id, and that it
closed); the threads a pruning pass skipped for a dirty mark, to retry

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 19:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("pruned", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "prune_retry",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("thread_id"),
    )


def downgrade() -> None:
    # Lossless or not at all: a pruned interrupt without its flag would be an open wait again.
    pruned = op.get_bind().execute(sa.text("SELECT count(*) FROM interrupt WHERE pruned")).scalar()
    if pruned:
        raise RuntimeError(
            "interrupts of pruned waits are kept as such: downgrading below 0011 would make "
            "them open waits again; not downgraded"
        )
    op.drop_table("prune_retry")
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.drop_column("pruned")
