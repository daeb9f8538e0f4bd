"""subagents: the interrupt's `subagentRunId`, and the `SUBAGENT_*` events of a thread (ids,
name, state and the interrupts a suspended subagent raised; never their content)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 19:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column: the interrupts already stored were raised by no known subagent.
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.add_column(sa.Column("subagent_run_id", sa.String(length=256), nullable=True))
    op.create_table(
        "subagent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("subagent_run_id", sa.String(length=256), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("interrupt_ids", sa.String(length=8192), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "thread_id", "run_id", "subagent_run_id", "state", name="uq_subagent_key"
        ),
    )
    with op.batch_alter_table("subagent", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_subagent_thread_id"), ["thread_id"], unique=False)


def downgrade() -> None:
    # Loses the subagent evidence (never a wait or its state: it is evidence only).
    with op.batch_alter_table("subagent", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_subagent_thread_id"))
    op.drop_table("subagent")
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.drop_column("subagent_run_id")
