"""totals: the store-wide counts of findings by rule, lines by kind and rejects by reason are
kept in `running_total` as their rows are written, in the same transaction, so that a tick
reads a fixed set of rows instead of counting the finding, line_count and reject tables.

The upgrade fills it from what the store holds: the rows' counts plus what retention pruned
(`pruned_total`), the values a tick read before. The downgrade drops it; nothing else changes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 01:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_FILL = (
    "INSERT INTO running_total (counter, key, shard, value) "
    "SELECT counter, key, 0, sum(value) FROM ("
    "SELECT 'lines' AS counter, kind AS key, sum(lines) AS value FROM line_count GROUP BY kind "
    "UNION ALL SELECT 'rejects', reason, count(*) FROM reject GROUP BY reason "
    "UNION ALL SELECT 'findings', rule, count(*) FROM finding GROUP BY rule "
    "UNION ALL SELECT counter, key, value FROM pruned_total "
    "WHERE counter IN ('lines', 'rejects', 'findings')"
    ") AS t GROUP BY counter, key"
)


def upgrade() -> None:
    op.create_table(
        "running_total",
        sa.Column("counter", sa.String(32), primary_key=True),
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("shard", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
    )
    op.execute(_FILL)


def downgrade() -> None:
    op.drop_table("running_total")
