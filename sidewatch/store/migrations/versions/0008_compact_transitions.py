"""compact transitions, and the auditor's records keyed by thread

A wait's record (`wait_state`) is keyed by (thread, requestId), so two threads whose waits
have the same requestId keep a record each; on SQLite it is stored in its key's B-tree (no
rowid). A transition names its thread too, and the transitions one verdict recorded share
their thresholds and evidence: stored once, on the last of them; the earlier ones hold NULL
(store.auditstate.expand gives them back). The index on `transition.at`, which no query
used, is dropped. Every row and every transition's evidence is kept.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 12:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_STATE_COLS = (
    "thread_id, request_id, policy, state, closed, since, due_at, requested_at, decided_at, "
    "receipt_at, evaluated_at, unreported"
)
# Until now a requestId had one record: its thread is that record's.
_THREAD = (
    "UPDATE transition SET thread_id = COALESCE("
    "(SELECT w.thread_id FROM wait_state w WHERE w.request_id = transition.request_id), '')"
)
# A transition whose next one (of the same wait) was recorded by the same verdict with the
# same thresholds and evidence shares them with it: its copy goes. Chosen first, then
# cleared, so that every choice compares the stored copies.
_SHARED = (
    "INSERT INTO tmp_shared_transition (id) SELECT t.id FROM transition t "
    "JOIN transition n ON n.id = (SELECT min(x.id) FROM transition x "
    "WHERE x.request_id = t.request_id AND x.thread_id = t.thread_id AND x.id > t.id) "
    "WHERE n.recorded_at = t.recorded_at AND n.thresholds = t.thresholds "
    "AND n.evidence = t.evidence"
)
_CLEAR = (
    "UPDATE transition SET thresholds = NULL, evidence = NULL "
    "WHERE id IN (SELECT id FROM tmp_shared_transition)"
)
# Back: each NULL takes the copy of the next transition of its wait and verdict that has one.
_FILL = (
    "UPDATE transition SET {col} = (SELECT x.{col} FROM transition x "
    "WHERE x.request_id = transition.request_id AND x.thread_id = transition.thread_id "
    "AND x.recorded_at = transition.recorded_at AND x.id > transition.id "
    "AND x.{col} IS NOT NULL ORDER BY x.id LIMIT 1) WHERE {col} IS NULL"
)


def _wait_state(name: str, key: list[str]) -> sa.Table:
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("thread_id", sa.String(256), nullable=False),
        sa.Column("request_id", sa.String(640), nullable=False),
        sa.Column("policy", sa.String(128), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=True),
        sa.Column("requested_at", sa.BigInteger(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("receipt_at", sa.BigInteger(), nullable=True),
        sa.Column("evaluated_at", sa.BigInteger(), nullable=False),
        sa.Column("unreported", sa.String(32), nullable=False, server_default=""),
        sa.PrimaryKeyConstraint(*key),
        sqlite_with_rowid=key[0] != "request_id",
    )


def _rebuild_wait_state(key: list[str], indexes: dict[str, list[str]]) -> None:
    """wait_state again with primary key `key` (SQLite cannot change a key in place, nor
    make a table rowid-less), every row copied."""
    bind = op.get_bind()
    new = _wait_state("wait_state_new", key)
    new.create(bind)
    op.execute(
        f"INSERT INTO wait_state_new ({_STATE_COLS}) "  # noqa: S608 (our own names)
        f"SELECT {_STATE_COLS} FROM wait_state"
    )
    op.drop_table("wait_state")
    op.rename_table("wait_state_new", "wait_state")
    if bind.dialect.name == "postgresql":  # the key's name follows the table's
        op.execute("ALTER INDEX wait_state_new_pkey RENAME TO wait_state_pkey")
    for name, cols in indexes.items():
        op.create_index(name, "wait_state", cols)


def upgrade() -> None:
    op.add_column("transition", sa.Column("thread_id", sa.String(256), nullable=True))
    op.execute(_THREAD)
    op.create_index("ix_transition_wait", "transition", ["request_id", "thread_id"])
    with op.batch_alter_table("transition") as batch_op:
        batch_op.alter_column("thread_id", existing_type=sa.String(256), nullable=False)
        batch_op.alter_column("thresholds", existing_type=sa.String(512), nullable=True)
        batch_op.alter_column("evidence", existing_type=sa.String(4096), nullable=True)
        batch_op.drop_index("ix_transition_at")
        batch_op.drop_index("ix_transition_request_id")
    op.create_table("tmp_shared_transition", sa.Column("id", sa.Integer(), primary_key=True))
    op.execute(_SHARED)
    op.execute(_CLEAR)
    op.drop_table("tmp_shared_transition")
    _rebuild_wait_state(
        ["thread_id", "request_id"],
        {
            "ix_wait_state_request_id": ["request_id"],
            "ix_wait_state_due": ["due_at"],
            "ix_wait_state_open_since": ["closed", "state", "since"],
        },
    )


def downgrade() -> None:
    """Back to one record per requestId: of two threads' records of the same requestId, the
    one evaluated last is kept (the old key held one); every transition gets its copies."""
    op.execute(
        "DELETE FROM wait_state WHERE EXISTS (SELECT 1 FROM wait_state o "
        "WHERE o.request_id = wait_state.request_id AND (o.evaluated_at > wait_state.evaluated_at "
        "OR (o.evaluated_at = wait_state.evaluated_at AND o.thread_id > wait_state.thread_id)))"
    )
    _rebuild_wait_state(
        ["request_id"],
        {
            "ix_wait_state_thread_id": ["thread_id"],
            "ix_wait_state_due": ["due_at"],
            "ix_wait_state_open_since": ["closed", "state", "since"],
        },
    )
    for col in ("thresholds", "evidence"):
        op.execute(_FILL.format(col=col))
    op.execute("UPDATE transition SET thresholds = '{}' WHERE thresholds IS NULL")
    op.execute("UPDATE transition SET evidence = '{}' WHERE evidence IS NULL")
    with op.batch_alter_table("transition") as batch_op:
        batch_op.drop_index("ix_transition_wait")
        batch_op.alter_column("thresholds", existing_type=sa.String(512), nullable=False)
        batch_op.alter_column("evidence", existing_type=sa.String(4096), nullable=False)
        batch_op.drop_column("thread_id")
        batch_op.create_index("ix_transition_request_id", ["request_id"])
        batch_op.create_index("ix_transition_at", ["at"])
