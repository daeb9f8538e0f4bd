"""lists: a wait's recorded `uncertain`, and the list's index in its order

`/ui/waits` and `GET /v1/waits` read the recorded verdicts page by page along an index
(app.read): `ix_wait_state_open_since` becomes (closed, state, since, request_id, thread_id),
the list's order within a state (on PostgreSQL its text COLLATE "C"), so that a page after a
cursor is an index range scan. The lists' counts are running totals (`running_total`, counter
`waits`, by state, uncertain and policy), filled here from the rows there are; every write of
wait_state moves them in its transaction. The `uncertain` filter of `/ui/waits` is a column:
`wait_state.uncertain`. A stored verdict predates it, so every thread that holds a wait is
evaluated whole once more (marked, its checkpoint and kept settled waits dropped, as a policy
change does): the next tick records `uncertain` of every wait, and moves the totals with it.
The downgrade gives 0022's column, index and totals back.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04 09:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_MARK_ALL = (
    # (`WHERE true`: SQLite reads ON CONFLICT after a bare SELECT as a join's ON.)
    "INSERT INTO dirty_thread (thread_id, mark) "
    "SELECT DISTINCT thread_id, 1 FROM wait_state WHERE true "
    "ON CONFLICT (thread_id) DO UPDATE SET mark = dirty_thread.mark + 1"
)


# The recorded verdicts' running totals (auditstate.WAITS, wait_key: `state|0|policy`, none
# uncertain yet), from the rows there are; every later write of wait_state moves them.
_TOTALS = (
    "INSERT INTO running_total (counter, key, shard, value) "
    "SELECT 'waits', state || '|0|' || policy, 0, count(*) FROM wait_state GROUP BY state, policy"
)

_PG_INDEX = (
    "CREATE INDEX ix_wait_state_open_since ON wait_state "
    '(closed, state, since, request_id COLLATE "C", thread_id COLLATE "C")'
)


def upgrade() -> None:
    op.add_column(
        "wait_state",
        sa.Column("uncertain", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.drop_index("ix_wait_state_open_since", table_name="wait_state")
    if op.get_bind().dialect.name == "postgresql":
        # The lists order text by code point (COLLATE "C", SQLite's own order): the index
        # holds it in that order, so a page is an index range read in order, whatever the
        # database's locale, and the planner's estimates (no sort of a state's waits).
        op.execute(_PG_INDEX)
    else:
        op.create_index(
            "ix_wait_state_open_since",
            "wait_state",
            ["closed", "state", "since", "request_id", "thread_id"],
        )
    op.execute(_TOTALS)
    op.execute(_MARK_ALL)
    op.execute("DELETE FROM thread_checkpoint")
    op.execute("DELETE FROM settled_wait")


def downgrade() -> None:
    op.execute("DELETE FROM running_total WHERE counter = 'waits'")
    op.drop_index("ix_wait_state_open_since", table_name="wait_state")
    op.create_index("ix_wait_state_open_since", "wait_state", ["closed", "state", "since"])
    with op.batch_alter_table("wait_state", schema=None) as batch_op:
        batch_op.drop_column("uncertain")
