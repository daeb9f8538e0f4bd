"""kept: a settled wait is kept as its evidence without heartbeats, not as a finished body

`settled_wait.body` (the GET's body, stored when the wait settled) becomes `evidence`: what
core.settled keeps of the wait, given at read time the beats that reach it then, so that a
settled wait whose timeline holds heartbeats (a thread-wide beat reaches every wait, a span
grows in place, a service may be bound to its run later) is served too, without evaluating
its thread whole. The stored bodies cannot be turned into evidence: they go, with the
checkpoints beside them, and the threads that had one are marked for the auditor, whose next
tick evaluates each whole and takes its checkpoint again, with its settled waits kept the new
way (a thread evaluated from its checkpoint never keeps the waits settled before it). The
downgrade gives the table 0017's shape back, empty: the checkpoints stay valid without their
bodies (a GET of a settled wait then evaluates its thread whole).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02 08:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def _table(last: sa.Column[bytes]) -> None:
    op.create_table(
        "settled_wait",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("request_id", sa.String(length=640), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        *([sa.Column("since", sa.BigInteger(), nullable=False)] if last.name == "body" else []),
        last,
        sa.PrimaryKeyConstraint("thread_id", "request_id"),
        sqlite_with_rowid=False,
    )


def upgrade() -> None:
    op.drop_table("settled_wait")
    _table(sa.Column("evidence", sa.LargeBinary(), nullable=False))
    op.execute(
        # (`WHERE true`: SQLite reads ON CONFLICT after a bare SELECT as a join's ON.)
        "INSERT INTO dirty_thread (thread_id, mark) SELECT thread_id, 1 FROM thread_checkpoint "
        "WHERE true "
        "ON CONFLICT (thread_id) DO UPDATE SET mark = dirty_thread.mark + 1"
    )
    op.execute("DELETE FROM thread_checkpoint")


def downgrade() -> None:
    op.drop_table("settled_wait")
    _table(sa.Column("body", sa.LargeBinary(), nullable=False))
