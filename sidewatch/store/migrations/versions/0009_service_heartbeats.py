"""service heartbeats: the latest beat per service instance, its changes, and the threads
bound to an instance (`sidewatch.heartbeat` of the service form)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 12:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_heartbeat",
        sa.Column("service", sa.String(length=256), nullable=False),
        sa.Column("instance", sa.String(length=256), nullable=False),
        sa.Column("durable", sa.Boolean(), nullable=False),
        sa.Column("first_at", sa.BigInteger(), nullable=False),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("service", "instance"),
    )
    op.create_table(
        "service_heartbeat_change",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("service", sa.String(length=256), nullable=False),
        sa.Column("instance", sa.String(length=256), nullable=False),
        sa.Column("durable", sa.Boolean(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("service", "instance", "durable", name="uq_service_change"),
    )
    op.create_table(
        "service_binding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("service", sa.String(length=256), nullable=False),
        sa.Column("instance", sa.String(length=256), nullable=False),
        sa.Column("durable", sa.Boolean(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("service_binding", schema=None) as batch_op:
        batch_op.create_index("ix_service_binding_service", ["service", "instance"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_service_binding_thread_id"), ["thread_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("service_binding", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_service_binding_thread_id"))
        batch_op.drop_index("ix_service_binding_service")
    op.drop_table("service_binding")
    op.drop_table("service_heartbeat_change")
    op.drop_table("service_heartbeat")
