"""producer dialects

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 15:45:29.420492
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "legacy_resume",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("entries", sa.String(length=8192), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id"),
    )
    with op.batch_alter_table("legacy_resume", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_legacy_resume_thread_id"), ["thread_id"], unique=False)

    with op.batch_alter_table("answer", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("via", sa.String(length=16), nullable=False, server_default="resume")
        )

    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "tool_result_receipt", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.drop_column("tool_result_receipt")

    with op.batch_alter_table("answer", schema=None) as batch_op:
        batch_op.drop_column("via")

    with op.batch_alter_table("legacy_resume", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_legacy_resume_thread_id"))

    op.drop_table("legacy_resume")
