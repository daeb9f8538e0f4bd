"""auditor state

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 15:10:40.327040
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dirty_thread",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("mark", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    op.create_table(
        "transition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=512), nullable=False),
        sa.Column("from_state", sa.String(length=32), nullable=True),
        sa.Column("to_state", sa.String(length=32), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.Column("policy", sa.String(length=128), nullable=False),
        sa.Column("thresholds", sa.String(length=512), nullable=False),
        sa.Column("evidence", sa.String(length=4096), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("transition", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_transition_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_transition_request_id"), ["request_id"], unique=False)

    op.create_table(
        "wait_state",
        sa.Column("request_id", sa.String(length=512), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("policy", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=True),
        sa.Column("requested_at", sa.BigInteger(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("receipt_at", sa.BigInteger(), nullable=True),
        sa.Column("evaluated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("request_id"),
    )
    with op.batch_alter_table("wait_state", schema=None) as batch_op:
        batch_op.create_index("ix_wait_state_due", ["due_at"], unique=False)
        batch_op.create_index(
            "ix_wait_state_open_since", ["closed", "state", "since"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_wait_state_thread_id"), ["thread_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("wait_state", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wait_state_thread_id"))
        batch_op.drop_index("ix_wait_state_open_since")
        batch_op.drop_index("ix_wait_state_due")

    op.drop_table("wait_state")
    with op.batch_alter_table("transition", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_transition_request_id"))
        batch_op.drop_index(batch_op.f("ix_transition_at"))

    op.drop_table("transition")
    op.drop_table("dirty_thread")
