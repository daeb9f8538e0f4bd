"""incr: long threads' checkpoints, and the indexes a resumed evaluation reads by

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 19:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# (index, table, columns): a thread's facts from a time on, and the prefix's ids asked.
INDEXES = (
    ("ix_interrupt_thread_at", "interrupt", ("thread_id", "at")),
    ("ix_interrupt_thread_interrupt", "interrupt", ("thread_id", "interrupt_id")),
    ("ix_interrupt_thread_call", "interrupt", ("thread_id", "tool_call_id")),
    ("ix_tool_call_thread_at", "tool_call", ("thread_id", "at")),
    ("ix_run_fact_thread_at", "run_fact", ("thread_id", "at")),
    ("ix_answer_thread_at", "answer", ("thread_id", "at")),
    ("ix_legacy_resume_thread_at", "legacy_resume", ("thread_id", "at")),
    ("ix_tool_result_thread_at", "tool_result", ("thread_id", "at")),
    ("ix_tool_result_thread_call", "tool_result", ("thread_id", "tool_call_id")),
    ("ix_signal_thread_at", "signal", ("thread_id", "at")),
    ("ix_heartbeat_thread_at", "heartbeat", ("thread_id", "at")),
    ("ix_finding_thread_at", "finding", ("thread_id", "at")),
)


def upgrade() -> None:
    # No checkpoint for an existing store: each long thread gets one at its next evaluation.
    op.create_table(
        "thread_checkpoint",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("cut", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("dangling", sa.String(length=16384), nullable=False),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    for name, table, columns in INDEXES:
        op.create_index(name, table, list(columns))


def downgrade() -> None:
    # Lossless: checkpoints are derived from the facts, and taken again after an upgrade.
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
    op.drop_table("thread_checkpoint")
