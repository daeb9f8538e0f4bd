"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 14:41:09.762715
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("interrupt_id", sa.String(length=256), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "interrupt_id"),
    )
    with op.batch_alter_table("answer", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_answer_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "finding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("rule", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=True),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("interrupt_id", sa.String(length=256), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_finding_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "heartbeat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("handle", sa.Boolean(), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("heartbeat", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_heartbeat_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "interrupt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("interrupt_id", sa.String(length=256), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=256), nullable=True),
        sa.Column("tool_call_id", sa.String(length=256), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("handle", sa.Boolean(), nullable=True),
        sa.Column("request_id", sa.String(length=512), nullable=True),
        sa.Column("action", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "interrupt_id"),
    )
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_interrupt_request_id"), ["request_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_interrupt_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=512), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "run_fact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("mark", sa.String(length=16), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "mark"),
    )
    with op.batch_alter_table("run_fact", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_run_fact_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "signal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("request_id", sa.String(length=512), nullable=True),
        sa.Column("thread_id", sa.String(length=256), nullable=True),
        sa.Column("interrupt_id", sa.String(length=256), nullable=True),
        sa.Column("approver_ref", sa.String(length=256), nullable=True),
        sa.Column("delivered", sa.Boolean(), nullable=False),
        sa.Column("acknowledged", sa.Boolean(), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=True),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("signal", schema=None) as batch_op:
        batch_op.create_index("ix_signal_ref", ["thread_id", "interrupt_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_signal_request_id"), ["request_id"], unique=False)

    op.create_table(
        "tool_call",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tool_call_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "tool_call_id"),
    )
    with op.batch_alter_table("tool_call", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_tool_call_tool_call_id"), ["tool_call_id"], unique=False
        )

    op.create_table(
        "tool_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("tool_call_id", sa.String(length=256), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("run_id", "tool_call_id"),
    )
    with op.batch_alter_table("tool_result", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tool_result_thread_id"), ["thread_id"], unique=False)

    op.create_table(
        "unit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=512), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "line_count",
        sa.Column("unit_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["unit_id"],
            ["unit.id"],
        ),
        sa.PrimaryKeyConstraint("unit_id", "kind"),
    )
    op.create_table(
        "reject",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("unit_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("error", sa.String(length=300), nullable=False),
        sa.ForeignKeyConstraint(
            ["unit_id"],
            ["unit.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reject", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reject_unit_id"), ["unit_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("reject", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reject_unit_id"))

    op.drop_table("reject")
    op.drop_table("line_count")
    op.drop_table("unit")
    with op.batch_alter_table("tool_result", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tool_result_thread_id"))

    op.drop_table("tool_result")
    with op.batch_alter_table("tool_call", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tool_call_tool_call_id"))

    op.drop_table("tool_call")
    with op.batch_alter_table("signal", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_signal_request_id"))
        batch_op.drop_index("ix_signal_ref")

    op.drop_table("signal")
    with op.batch_alter_table("run_fact", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_fact_thread_id"))

    op.drop_table("run_fact")
    op.drop_table("meta")
    with op.batch_alter_table("interrupt", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_interrupt_thread_id"))
        batch_op.drop_index(batch_op.f("ix_interrupt_request_id"))

    op.drop_table("interrupt")
    with op.batch_alter_table("heartbeat", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_heartbeat_thread_id"))

    op.drop_table("heartbeat")
    with op.batch_alter_table("finding", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_finding_thread_id"))

    op.drop_table("finding")
    with op.batch_alter_table("answer", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_answer_thread_id"))

    op.drop_table("answer")
