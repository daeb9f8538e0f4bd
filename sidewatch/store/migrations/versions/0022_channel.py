"""channel: a route's channel (`sidewatch.route` `channel`, a short code such as `slack`) is
kept with it, so that the wait page and the timeline say where an unroutable wait's
notification went

The routes stored before have none (the column is null); the downgrade drops the column and
the channels with it (the routes stay).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("signal", sa.Column("channel", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("signal", schema=None) as batch_op:
        batch_op.drop_column("channel")
