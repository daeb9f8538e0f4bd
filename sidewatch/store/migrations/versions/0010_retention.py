"""retention: the counts of pruned rows, so that counters continue past `store.retention`

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 15:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pruned_total",
        sa.Column("counter", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("counter", "key"),
    )


def downgrade() -> None:
    # Lossless or not at all: once something was pruned, this table holds the only count of
    # it, and without it the counters a restarted daemon continues from would go back.
    kept = op.get_bind().execute(sa.text("SELECT count(*) FROM pruned_total")).scalar()
    if kept:
        raise RuntimeError(
            "pruned_total holds the counts of pruned rows: downgrading below 0010 would lose "
            "them (and counters would go back); not downgraded"
        )
    op.drop_table("pruned_total")
