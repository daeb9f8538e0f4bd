"""baseline: the schema of sidewatch 0.1.0, in one revision

Every store starts here. The pre-release revisions (0001 to 0023, never released) are squashed
into this one: its upgrade makes the schema they left, table for table, column for column,
index for index, on SQLite and PostgreSQL alike (verified by dumping both before the squash:
docs/internals/store.md, "Migrations"). A store a pre-release build made is stamped with one of
their ids and is not upgraded from: `store.db` says to re-create it (docs/operating/upgrades.md).

The next revision is 0002 (revision id "0002_<name>", the file's name, down_revision this one).
After a new revision, write the new SQLite store's script again:
`python -m sidewatch.store.newstore`.

Revision ID: 0001_baseline
Revises:
Create Date: 2026-12-04 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None

# The lists order text by code point (COLLATE "C", SQLite's own order): on PostgreSQL the
# index holds it in that order whatever the database's locale, so a page of the wait list is
# an index range read in order (app.read).
_PG_OPEN_SINCE = (
    "CREATE INDEX ix_wait_state_open_since ON wait_state "
    '(closed, state, since, request_id COLLATE "C", thread_id COLLATE "C")'
)

# `heartbeat` was `heartbeat_span` before 0.1.0, and a PostgreSQL store kept that name's
# sequence and primary key: the baseline names them so, the schema of every store alike.
_PG_HEARTBEAT_NAMES = (
    "ALTER SEQUENCE heartbeat_id_seq RENAME TO heartbeat_span_id_seq",
    "ALTER INDEX heartbeat_pkey RENAME TO heartbeat_span_pkey",
)


def upgrade() -> None:  # noqa: PLR0915 (the whole schema, a statement a table and an index)
    op.create_table(
        "answer",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("interrupt_id", sa.String(length=256), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("via", sa.String(length=16), nullable=False, server_default="resume"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "interrupt_id", name="uq_answer_key"),
    )
    op.create_index("ix_answer_thread_at", "answer", ["thread_id", "at"])
    op.create_index("ix_answer_thread_id", "answer", ["thread_id"])
    op.create_table(
        "dirty_thread",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("mark", sa.BigInteger(), nullable=False),
        sa.Column("early", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    op.create_table(
        "finding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("rule", sa.String(length=64), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=True),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("interrupt_id", sa.String(length=256), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_index("ix_finding_thread_at", "finding", ["thread_id", "at"])
    op.create_index("ix_finding_thread_id", "finding", ["thread_id"])
    op.create_table(
        "heartbeat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=True),
        sa.Column("handle", sa.Boolean(), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("last_at", sa.BigInteger(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("beats", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    if op.get_bind().dialect.name == "postgresql":
        for statement in _PG_HEARTBEAT_NAMES:
            op.execute(statement)
    op.create_index("ix_heartbeat_at", "heartbeat", ["at", "id"])
    op.create_index("ix_heartbeat_thread_at", "heartbeat", ["thread_id", "at"])
    op.create_index("ix_heartbeat_thread_id", "heartbeat", ["thread_id"])
    op.create_index("ix_heartbeat_thread_run_at", "heartbeat", ["thread_id", "run_id", "at"])
    op.create_table(
        "interrupt",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("interrupt_id", sa.String(length=256), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.String(length=256), nullable=True),
        sa.Column("tool_call_id", sa.String(length=256), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("handle", sa.Boolean(), nullable=True),
        sa.Column("request_id", sa.String(length=512), nullable=True),
        sa.Column("action", sa.String(length=256), nullable=True),
        sa.Column("tool_result_receipt", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("pruned", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("subagent_run_id", sa.String(length=256), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "interrupt_id"),
    )
    op.create_index("ix_interrupt_request_id", "interrupt", ["request_id"])
    op.create_index("ix_interrupt_thread_at", "interrupt", ["thread_id", "at"])
    op.create_index("ix_interrupt_thread_call", "interrupt", ["thread_id", "tool_call_id"])
    op.create_index("ix_interrupt_thread_id", "interrupt", ["thread_id"])
    op.create_index("ix_interrupt_thread_interrupt", "interrupt", ["thread_id", "interrupt_id"])
    op.create_table(
        "lease",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "legacy_resume",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("entries", sa.String(length=8192), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", name="uq_legacy_resume_key"),
    )
    op.create_index("ix_legacy_resume_thread_at", "legacy_resume", ["thread_id", "at"])
    op.create_index("ix_legacy_resume_thread_id", "legacy_resume", ["thread_id"])
    op.create_table(
        "meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=512), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "prune_retry",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    op.create_table(
        "pruned_total",
        sa.Column("counter", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("counter", "key"),
    )
    op.create_table(
        "run_fact",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("mark", sa.String(length=16), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "mark", name="uq_run_fact_key"),
    )
    op.create_index("ix_run_fact_thread_at", "run_fact", ["thread_id", "at"])
    op.create_index("ix_run_fact_thread_id", "run_fact", ["thread_id"])
    op.create_table(
        "running_total",
        sa.Column("counter", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("counter", "key", "shard"),
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
    op.create_index("ix_service_binding_service", "service_binding", ["service", "instance"])
    op.create_index("ix_service_binding_thread_id", "service_binding", ["thread_id"])
    op.create_index("ix_service_binding_thread_run", "service_binding", ["thread_id", "run_id"])
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
        "settled_wait",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("request_id", sa.String(length=640), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("evidence", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "request_id"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "signal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("request_id", sa.String(length=512), nullable=True),
        sa.Column("thread_id", sa.String(length=256), nullable=True),
        sa.Column("interrupt_id", sa.String(length=256), nullable=True),
        sa.Column("approver_ref", sa.String(length=256), nullable=True),
        sa.Column("delivered", sa.Boolean(), nullable=False),
        sa.Column("acknowledged", sa.Boolean(), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=True),
        sa.Column("digest", sa.String(length=128), nullable=True),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_index("ix_signal_ref", "signal", ["thread_id", "interrupt_id"])
    op.create_index("ix_signal_request_id", "signal", ["request_id"])
    op.create_index("ix_signal_thread_at", "signal", ["thread_id", "at"])
    op.create_table(
        "subagent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("subagent_run_id", sa.String(length=256), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=True),
        sa.Column("interrupt_ids", sa.String(length=8192), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "thread_id", "run_id", "subagent_run_id", "state", name="uq_subagent_key"
        ),
    )
    op.create_index("ix_subagent_thread_id", "subagent", ["thread_id"])
    op.create_index("ix_subagent_thread_invocation", "subagent", ["thread_id", "subagent_run_id"])
    op.create_table(
        "thread_checkpoint",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("cut", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("dangling", sa.String(length=16384), nullable=False),
        sa.PrimaryKeyConstraint("thread_id"),
    )
    op.create_table(
        "tool_call",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tool_call_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("digest", sa.String(length=128), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_call_key"),
    )
    op.create_index("ix_tool_call_thread_at", "tool_call", ["thread_id", "at"])
    op.create_index("ix_tool_call_thread_id", "tool_call", ["thread_id"])
    op.create_index("ix_tool_call_tool_call_id", "tool_call", ["tool_call_id"])
    op.create_table(
        "tool_result",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("run_id", sa.String(length=256), nullable=False),
        sa.Column("tool_call_id", sa.String(length=256), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_result_key"),
    )
    op.create_index("ix_tool_result_thread_at", "tool_result", ["thread_id", "at"])
    op.create_index("ix_tool_result_thread_call", "tool_result", ["thread_id", "tool_call_id"])
    op.create_index("ix_tool_result_thread_id", "tool_result", ["thread_id"])
    op.create_table(
        "transition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=640), nullable=False),
        sa.Column("from_state", sa.String(length=32), nullable=True),
        sa.Column("to_state", sa.String(length=32), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.BigInteger(), nullable=False),
        sa.Column("policy", sa.String(length=128), nullable=False),
        sa.Column("thresholds", sa.String(length=512), nullable=True),
        sa.Column("evidence", sa.String(length=4096), nullable=True),
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("earlier", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_transition_wait", "transition", ["request_id", "thread_id"])
    op.create_table(
        "unit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=512), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("rejected", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=192), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_unit_key", "unit", ["key"], unique=True)
    op.create_table(
        "wait_state",
        sa.Column("thread_id", sa.String(length=256), nullable=False),
        sa.Column("request_id", sa.String(length=640), nullable=False),
        sa.Column("policy", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("closed", sa.Boolean(), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.Column("due_at", sa.BigInteger(), nullable=True),
        sa.Column("requested_at", sa.BigInteger(), nullable=False),
        sa.Column("decided_at", sa.BigInteger(), nullable=True),
        sa.Column("receipt_at", sa.BigInteger(), nullable=True),
        sa.Column("evaluated_at", sa.BigInteger(), nullable=False),
        sa.Column("unreported", sa.String(length=32), nullable=False, server_default=""),
        sa.Column("uncertain", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("thread_id", "request_id"),
    )
    op.create_index("ix_wait_state_due", "wait_state", ["due_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_OPEN_SINCE)
    else:
        op.create_index(
            "ix_wait_state_open_since",
            "wait_state",
            ["closed", "state", "since", "request_id", "thread_id"],
        )
    op.create_index("ix_wait_state_request_id", "wait_state", ["request_id"])
    op.create_table(
        "line_count",
        sa.Column("unit_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["unit_id"],
            ["unit.id"],
        ),
        sa.PrimaryKeyConstraint("unit_id", "kind"),
    )
    op.create_table(
        "reject",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("unit_id", sa.Integer(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("error", sa.String(length=300), nullable=False),
        sa.ForeignKeyConstraint(
            ["unit_id"],
            ["unit.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_reject_unit_id", "reject", ["unit_id"])
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
    op.drop_table("reject")
    op.drop_table("line_count")
    op.drop_table("wait_state")
    op.drop_table("unit")
    op.drop_table("transition")
    op.drop_table("tool_result")
    op.drop_table("tool_call")
    op.drop_table("thread_checkpoint")
    op.drop_table("subagent")
    op.drop_table("signal")
    op.drop_table("settled_wait")
    op.drop_table("service_heartbeat_change")
    op.drop_table("service_heartbeat")
    op.drop_table("service_binding")
    op.drop_table("running_total")
    op.drop_table("run_fact")
    op.drop_table("pruned_total")
    op.drop_table("prune_retry")
    op.drop_table("meta")
    op.drop_table("legacy_resume")
    op.drop_table("lease")
    op.drop_table("interrupt")
    op.drop_table("heartbeat")
    op.drop_table("finding")
    op.drop_table("dirty_thread")
    op.drop_table("answer")
