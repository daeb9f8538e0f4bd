"""trace: a run's W3C trace context (`traceparent`, `tracestate` of its request, as its input
or `RUN_STARTED` carried them) is kept per run, so that the trace exporter writes a wait's span
as a child of its asking run's span and links the runs that answered or continued it

A new table, `run_trace`, one row a run (the first context stored wins); its rows go with
their run (store.history) and, naming no wait, by age (store.aged). The runs stored before
have none: their waits keep a span of their own, as before. The downgrade drops the table
and the contexts with it (no verdict rests on them).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04 15:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_trace",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("traceparent", sa.String(length=55), nullable=False),
        sa.Column("tracestate", sa.String(length=512), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", name="uq_run_trace_key"),
    )


def downgrade() -> None:
    op.drop_table("run_trace")
