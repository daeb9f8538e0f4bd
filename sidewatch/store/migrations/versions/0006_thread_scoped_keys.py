"""thread-scoped keys

Every run-scoped natural key gains the thread (a run is `(threadId, runId)`): run facts,
answers, legacy resumes, tool calls and tool results. Tool calls had no thread column: each
row takes the thread of the interrupt in its run that names the call, else of its run's facts.
Every row is kept; rows a collision already cost (the old key refused them) are not stored
anywhere and cannot come back. The auditor's requestId columns widen to hold the longest
default requestId.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 11:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# SQLite's unique constraints of 0001 and 0003 have no name: batch mode names what it
# reflects by this convention, so that they can be dropped.
_CONVENTION = {"uq": "uq_%(table_name)s_%(column_0_N_name)s"}

# table -> (old key, new key, new key's name)
_KEYS = {
    "run_fact": (["run_id", "mark"], ["thread_id", "run_id", "mark"], "uq_run_fact_key"),
    "answer": (
        ["run_id", "interrupt_id"],
        ["thread_id", "run_id", "interrupt_id"],
        "uq_answer_key",
    ),
    "legacy_resume": (["run_id"], ["thread_id", "run_id"], "uq_legacy_resume_key"),
    "tool_call": (
        ["run_id", "tool_call_id"],
        ["thread_id", "run_id", "tool_call_id"],
        "uq_tool_call_key",
    ),
    "tool_result": (
        ["run_id", "tool_call_id"],
        ["thread_id", "run_id", "tool_call_id"],
        "uq_tool_result_key",
    ),
}

# The thread of a stored tool call: the interrupt of its run that gates it, else the run's
# own facts (a run id used by one thread only, the common case, gives that thread).
_TOOL_CALL_THREAD = """
UPDATE tool_call SET thread_id = COALESCE(
    (SELECT min(i.thread_id) FROM interrupt i
     WHERE i.run_id = tool_call.run_id AND i.tool_call_id = tool_call.tool_call_id),
    (SELECT min(r.thread_id) FROM run_fact r WHERE r.run_id = tool_call.run_id),
    (SELECT min(i.thread_id) FROM interrupt i WHERE i.run_id = tool_call.run_id),
    ''
)
"""


def _unique_name(table: str, columns: list[str]) -> str:
    """The stored name of `table`'s unique constraint on `columns` (PostgreSQL's own, or the
    convention's for SQLite's unnamed ones)."""
    for uq in sa.inspect(op.get_bind()).get_unique_constraints(table):
        if list(uq["column_names"]) == columns:
            return str(uq["name"] or f"uq_{table}_{'_'.join(columns)}")
    raise RuntimeError(f"{table} has no unique constraint on {columns}")


def _rekey(table: str, old: list[str], new: list[str], name: str) -> None:
    old_name = _unique_name(table, old)
    with op.batch_alter_table(table, naming_convention=_CONVENTION) as batch_op:
        if table == "tool_call":
            batch_op.alter_column("thread_id", existing_type=sa.String(256), nullable=False)
            batch_op.create_index("ix_tool_call_thread_id", ["thread_id"], unique=False)
        batch_op.drop_constraint(old_name, type_="unique")
        batch_op.create_unique_constraint(name, new)


def upgrade() -> None:
    op.add_column("tool_call", sa.Column("thread_id", sa.String(length=256), nullable=True))
    # Indexes for the back-fill only: without them it is quadratic in the rows.
    op.create_index("tmp_ix_interrupt_run_call", "interrupt", ["run_id", "tool_call_id"])
    op.create_index("tmp_ix_run_fact_run", "run_fact", ["run_id"])
    op.execute(_TOOL_CALL_THREAD)
    op.drop_index("tmp_ix_interrupt_run_call", table_name="interrupt")
    op.drop_index("tmp_ix_run_fact_run", table_name="run_fact")
    for table, (old, new, name) in _KEYS.items():
        # Each new key holds the old one's columns and more: no stored row can violate it.
        _rekey(table, old, new, name)
    # A default requestId of three 200-character ids is 602 characters.
    for table in ("wait_state", "transition"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.alter_column("request_id", existing_type=sa.String(512), type_=sa.String(640))


def downgrade() -> None:
    """Back to run-only keys: of the rows that now share one, the first stored is kept (what
    the old keys kept at ingest); the others are deleted, as the old schema cannot hold them.
    A recorded requestId longer than 512 characters makes PostgreSQL refuse the downgrade."""
    for table, (old, _new, name) in _KEYS.items():
        same = " AND ".join(f"o.{c} = {table}.{c}" for c in old)
        op.execute(
            f"DELETE FROM {table} WHERE EXISTS "  # noqa: S608 (names of our own tables)
            f"(SELECT 1 FROM {table} o WHERE {same} AND o.id < {table}.id)"
        )
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_constraint(name, type_="unique")
            batch_op.create_unique_constraint(f"uq_{table}_{'_'.join(old)}", old)
    for table in ("wait_state", "transition"):
        with op.batch_alter_table(table) as batch_op:
            batch_op.alter_column("request_id", existing_type=sa.String(640), type_=sa.String(512))
    with op.batch_alter_table("tool_call") as batch_op:
        batch_op.drop_index("ix_tool_call_thread_id")
        batch_op.drop_column("thread_id")
