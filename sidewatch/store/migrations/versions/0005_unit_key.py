"""unit key

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable and added in place: existing units (files, HTTP bodies) have no key.
    op.add_column("unit", sa.Column("key", sa.String(length=192), nullable=True))
    op.create_index("ix_unit_key", "unit", ["key"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_unit_key", table_name="unit")
    with op.batch_alter_table("unit", schema=None) as batch_op:
        batch_op.drop_column("key")
