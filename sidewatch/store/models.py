"""The store's tables (SQLAlchemy Core). Identities, times, digests, references and codes only:
no tool arguments, messages, interrupt messages or payloads have a column to land in.

Every fact table has a natural key (a unique constraint), so a re-delivered line is an
insert that does nothing. Every run-scoped key holds the thread: clients choose run ids and
producers interrupt and tool-call ids, and the same id in two threads names two things.
`at` is ms since the epoch, `seq` the arrival order.

Plain Core tables, no ORM classes: every read and write is a Core statement, and a command
that only reads (`audit`, `report`) then loads neither an ORM nor pydantic to declare them.
A column is NOT NULL unless `null=True`, as the migrations made it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

REQUEST_ID_COLUMN = 640  # a wait's requestId: a producer's (500 at most) or a default one

metadata = MetaData()


def table_of(table: Table) -> Table:
    """A table itself (the callers written for the earlier ORM models ask for it so)."""
    return table


def _id() -> Column[int]:
    return Column("id", Integer, primary_key=True)


def _text(name: str, length: int, null: bool = False, **kw: Any) -> Column[str]:
    return Column(name, String(length), nullable=null, **kw)


def _ms(name: str, null: bool = False) -> Column[int]:
    """ms since the epoch, or an arrival sequence: they outgrow 32 bits."""
    return Column(name, BigInteger, nullable=null)


def _int(name: str, **kw: Any) -> Column[int]:
    return Column(name, Integer, nullable=False, **kw)


def _bool(name: str, null: bool = False, **kw: Any) -> Column[bool]:
    return Column(name, Boolean, nullable=null, **kw)


def _at_seq() -> tuple[Column[int], Column[int]]:
    return _ms("at"), _ms("seq")


# One ingest unit (a file, a request body) and what became of its lines. `key`: the source's
# own identity of the unit (a JetStream stream and sequence), when it has one: a unit
# delivered again after it was committed is recognised and not stored twice.
Unit = Table(
    "unit",
    metadata,
    _id(),
    _text("source", 512),
    _ms("received_at"),
    _int("accepted", default=0),
    _int("skipped", default=0),
    _int("rejected", default=0),
    _text("key", 192, null=True, unique=True, index=True),
)

# Accepted and skipped lines of a unit, by bounded kind (for ingest health).
LineCount = Table(
    "line_count",
    metadata,
    Column("unit_id", Integer, ForeignKey("unit.id"), primary_key=True),
    _text("kind", 32, primary_key=True),
    _int("lines"),
)

RejectRow = Table(
    "reject",
    metadata,
    _id(),
    Column("unit_id", Integer, ForeignKey("unit.id"), nullable=False, index=True),
    _int("line"),
    _text("reason", 32),
    _text("error", 300),
)

InterruptRow = Table(
    "interrupt",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256),
    _text("interrupt_id", 256),
    *_at_seq(),
    _text("reason", 256, null=True),
    _text("tool_call_id", 256, null=True),
    _ms("expires_at", null=True),
    _text("digest", 128, null=True),
    _bool("handle", null=True),
    _text("request_id", 512, null=True, index=True),
    _text("action", 256, null=True),
    _bool("tool_result_receipt", default=False),
    # The wait it announced closed and was pruned (store.retention) while its thread kept an
    # open wait: the row stays so that the engine knows the id was used, and closed.
    _bool("pruned", default=False, server_default=false()),
    _text("subagent_run_id", 256, null=True),  # the interrupt's `subagentRunId` (0011)
    UniqueConstraint("thread_id", "run_id", "interrupt_id"),
    Index("ix_interrupt_thread_at", "thread_id", "at"),
    Index("ix_interrupt_thread_interrupt", "thread_id", "interrupt_id"),
    Index("ix_interrupt_thread_call", "thread_id", "tool_call_id"),
)

ToolCallRow = Table(
    "tool_call",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("tool_call_id", 256, index=True),
    _text("run_id", 256),
    _text("name", 256),
    _text("digest", 128),
    *_at_seq(),
    UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_call_key"),
    Index("ix_tool_call_thread_at", "thread_id", "at"),
)

RunRow = Table(
    "run_fact",
    metadata,
    _id(),
    _text("run_id", 256),
    _text("thread_id", 256, index=True),
    _text("mark", 16),
    *_at_seq(),
    UniqueConstraint("thread_id", "run_id", "mark", name="uq_run_fact_key"),
    Index("ix_run_fact_thread_at", "thread_id", "at"),
)

# A run's W3C trace context: the `traceparent` and `tracestate` of its request, as its
# input or `RUN_STARTED` carried them (the first one stored wins). Identifiers only: the trace
# exporter parents a wait's span on its asking run's and links the runs that answered it.
RunTraceRow = Table(
    "run_trace",
    metadata,
    _id(),
    _text("thread_id", 256),
    _text("run_id", 256),
    _text("traceparent", 55),
    _text("tracestate", 512, null=True),
    *_at_seq(),
    UniqueConstraint("thread_id", "run_id", name="uq_run_trace_key"),
)

AnswerRow = Table(
    "answer",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256),
    _text("interrupt_id", 256),
    _text("code", 16),
    _text("digest", 128, null=True),
    *_at_seq(),
    _text("via", 16, default="resume"),
    UniqueConstraint("thread_id", "run_id", "interrupt_id", name="uq_answer_key"),
    Index("ix_answer_thread_at", "thread_id", "at"),
)

# `forwardedProps.command.resume` answers: codes and hashed keys only, never payloads.
LegacyResumeRow = Table(
    "legacy_resume",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256),
    _text("code", 16),
    _text("digest", 128, null=True),
    _text("entries", 8192),
    *_at_seq(),
    UniqueConstraint("thread_id", "run_id", name="uq_legacy_resume_key"),
    Index("ix_legacy_resume_thread_at", "thread_id", "at"),
)

ToolResultRow = Table(
    "tool_result",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256),
    _text("tool_call_id", 256),
    *_at_seq(),
    UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_result_key"),
    Index("ix_tool_result_thread_at", "thread_id", "at"),
    Index("ix_tool_result_thread_call", "thread_id", "tool_call_id"),
)

# A `SUBAGENT_STARTED|FINISHED|ERROR` event of run `run_id`: the invocation's id, its state,
# its name (started) and the interrupts a suspended one raised (a JSON list of ids). Never its
# description, result or error message.
SubagentRow = Table(
    "subagent",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256),
    _text("subagent_run_id", 256),
    _text("state", 16),
    *_at_seq(),
    _text("name", 256, null=True),
    _text("interrupt_ids", 8192, default="[]"),
    UniqueConstraint("thread_id", "run_id", "subagent_run_id", "state", name="uq_subagent_key"),
    Index("ix_subagent_thread_invocation", "thread_id", "subagent_run_id"),
)

# A `sidewatch.route|decision|action|receipt` event.
SignalRow = Table(
    "signal",
    metadata,
    _id(),
    _text("key", 64, unique=True),
    _text("kind", 16),
    _text("request_id", 512, null=True, index=True),
    _text("thread_id", 256, null=True),
    _text("interrupt_id", 256, null=True),
    _text("approver_ref", 256, null=True),
    _bool("delivered", default=False),
    _bool("acknowledged", default=False),
    _text("code", 16, null=True),
    _text("digest", 128, null=True),
    *_at_seq(),
    _text("channel", 64, null=True),  # a route's channel code (0022)
    Index("ix_signal_ref", "thread_id", "interrupt_id"),
    Index("ix_signal_thread_at", "thread_id", "at"),
)

# Heartbeats compacted into spans (store.heartbeats): `beats` beats of one thread, run and
# handle from `at` to `last_at` (`seq`, `last_seq`: the first's and the last's arrival), no
# two consecutive ones further apart than the compaction gap. A beat that changes nothing
# extends a span in place; a new handle, or a longer gap, starts another.
HeartbeatRow = Table(
    "heartbeat",
    metadata,
    _id(),
    _text("thread_id", 256, index=True),
    _text("run_id", 256, null=True),
    _bool("handle", null=True),
    *_at_seq(),
    _ms("last_at"),
    _ms("last_seq"),
    _int("beats"),
    Index("ix_heartbeat_thread_at", "thread_id", "at"),
    # A checkpoint's look at the prefix by run, and the thread-wide spans (run NULL) before
    # its cut (store.suffix): by key, not along the thread's history.
    Index("ix_heartbeat_thread_run_at", "thread_id", "run_id", "at"),
    # Retention's walk over spans by first beat (store.retention._unknown_beats): not by last
    # beat, which a span extended in place changes (on PostgreSQL no update would be HOT).
    Index("ix_heartbeat_at", "at", "id"),
)

# The latest beat of each service instance (`sidewatch.heartbeat` of the service form),
# upserted: one row an instance, never one a beat. `first_*`: its first beat seen.
ServiceHeartbeatRow = Table(
    "service_heartbeat",
    metadata,
    _text("service", 256, primary_key=True),
    _text("instance", 256, primary_key=True),
    _bool("durable"),
    _ms("first_at"),
    _ms("first_seq"),
    _ms("last_at"),
    _ms("last_seq"),
)

# Each change of a service instance: when it was first seen, or first said `durable`
# otherwise than before.
ServiceChangeRow = Table(
    "service_heartbeat_change",
    metadata,
    _id(),
    _text("service", 256),
    _text("instance", 256),
    _bool("durable"),
    *_at_seq(),
    UniqueConstraint("service", "instance", "durable", name="uq_service_change"),
)

# A thread's waits (of `run_id`, or all) are held by a service instance.
ServiceBindingRow = Table(
    "service_binding",
    metadata,
    _id(),
    _text("key", 64, unique=True),
    _text("thread_id", 256, index=True),
    _text("run_id", 256, null=True),
    _text("service", 256),
    _text("instance", 256),
    _bool("durable"),
    *_at_seq(),
    Index("ix_service_binding_service", "service", "instance"),
    # A checkpoint's suffix loads the bindings to its own runs (services.expand_runs).
    Index("ix_service_binding_thread_run", "thread_id", "run_id"),
)

FindingRow = Table(
    "finding",
    metadata,
    _id(),
    _text("key", 64, unique=True),
    _text("rule", 64),
    _text("thread_id", 256, null=True, index=True),
    _text("run_id", 256, null=True),
    _text("interrupt_id", 256, null=True),
    *_at_seq(),
    Index("ix_finding_thread_at", "thread_id", "at"),
)

# What pruned rows counted, kept so that counters continue past retention (see
# store.retention): `counter` names the count (`lines`, `rejects`, `transitions`, ...), `key`
# its labels joined by U+001F, `value` the sum of the pruned rows' share.
PrunedTotal = Table(
    "pruned_total",
    metadata,
    _text("counter", 32, primary_key=True),
    _text("key", 512, primary_key=True),
    _ms("value"),
)

# The store-wide totals the exported counters continue from, kept as rows are written so that
# a tick reads a fixed set of rows instead of counting the tables (store.sql.add_totals):
# `counter` is `findings` (key: the rule), `lines` (the line kind) or `rejects` (the reason),
# `value` what every row ever written counted, pruned ones included (retention leaves it).
# `shard` spreads concurrent writers over rows (a unit's own, from its id); readers sum them.
RunningTotal = Table(
    "running_total",
    metadata,
    _text("counter", 32, primary_key=True),
    _text("key", 512, primary_key=True),
    _int("shard", primary_key=True, autoincrement=False),
    _ms("value"),
)

# Threads a pruning pass skipped for a dirty mark: the next passes try them again (the scan
# of closing transitions has gone past them).
PruneRetry = Table(
    "prune_retry",
    metadata,
    _text("thread_id", 256, primary_key=True),
)

# Store-wide settings, e.g. the generated key that hashes personal approver refs.
Meta = Table(
    "meta",
    metadata,
    _text("key", 64, primary_key=True),
    _text("value", 512),
)


# ---------------------------------------------------------------------------------------
# The auditor's own records: the current verdict of every wait, its transitions, and which
# threads have new evidence since the auditor last looked at them.

# The latest verdict of a wait, as the scheduled auditor last recorded it. `due_at` is when
# time alone would next change it (indexed: a tick finds what is due without a scan).
# A wait is its thread and its requestId (two threads' waits may have the same one). On
# SQLite it is a rowid table: WITHOUT ROWID measured a third
# slower to write a full audit's rows (bench/store_shape.py), each index then holding the
# text key instead of the rowid.
WaitState = Table(
    "wait_state",
    metadata,
    _text("thread_id", 256, primary_key=True),
    # The longest requestId sidewatch makes, `{threadId}/{interruptId}@{runId}` of ids of the
    # longest accepted length (200), is 602 characters.
    _text("request_id", REQUEST_ID_COLUMN, primary_key=True),
    _text("policy", 128),
    _text("state", 32),
    _bool("closed"),
    _ms("since"),
    _ms("due_at", null=True),
    _ms("requested_at"),
    _ms("decided_at", null=True),
    _ms("receipt_at", null=True),
    _ms("evaluated_at"),
    # The never-reported evidence an open verdict rests on ("route", "handle,heartbeat"; ""
    # when it rests on reports): the gauge of unreported waits continues from it.
    _text("unreported", 32, default="", server_default=""),
    # Whether the verdict rests on an inference (Verdict.uncertain): a filter of /ui/waits.
    _bool("uncertain", default=False, server_default=false()),
    Index("ix_wait_state_request_id", "request_id"),
    Index("ix_wait_state_due", "due_at"),
    # The lists' order within a state (app.read): a page after a cursor is a range of it.
    # On PostgreSQL its text columns are COLLATE "C" (the baseline migration): code point order.
    Index("ix_wait_state_open_since", "closed", "state", "since", "request_id", "thread_id"),
)

# A wait entered `to_state` at `at` (by the evidence); recorded by the auditor at
# `recorded_at` with the evidence and thresholds of that verdict (JSON, content-free).
# The transitions one verdict recorded share them: they are one row, that of the last of them
# (the state the verdict left the wait in), and `earlier` holds the ones before it in order,
# as JSON `[[from, to, at], ...]` (NULL: it made one). A row a recording instead of a row a
# transition: a full audit's write floor (bench/store_shape.py). Every row carries its
# thresholds and evidence (store.transitions.compact and expand); the columns are nullable
# only because the pre-release rows that lacked them were (those stores are refused now).
TransitionRow = Table(
    "transition",
    metadata,
    _id(),
    _text("request_id", REQUEST_ID_COLUMN),
    _text("thread_id", 256),
    _text("from_state", 32, null=True),
    _text("to_state", 32),
    _ms("at"),
    _ms("recorded_at"),
    _text("policy", 128),
    _text("thresholds", 512, null=True),
    _text("evidence", 4096, null=True),
    Column("earlier", Text, nullable=True),
    Index("ix_transition_wait", "request_id", "thread_id"),
)

# A thread with evidence the auditor has not classified yet (`mark`: the newest unit).
DirtyThread = Table(
    "dirty_thread",
    metadata,
    _text("thread_id", 256, primary_key=True),
    _ms("mark"),
    # The earliest time of the facts ingest marked it for since it was set (None: marked by
    # no fact): one before a checkpoint's cut came late (store.suffix).
    _ms("early", null=True),
)

# A long thread's checkpoint (core.checkpoint): the facts timed before `cut` are settled
# history, `count` of them when it was written (a late fact changes it), `dangling` the ids
# they named that none of their waits had (JSON list). Written with the verdicts it rests on.
ThreadCheckpoint = Table(
    "thread_checkpoint",
    metadata,
    _text("thread_id", 256, primary_key=True),
    _ms("cut"),
    _ms("count"),
    _text("dangling", 16384),
)

# What is kept of a wait settled before its thread's checkpoint's cut (core.settled.Kept): its
# evidence without its heartbeats, and the runs that announced it again (zlib-compressed JSON,
# store.checkpoint.pack); a read gives it the beats that reach it then and classifies it. `at`:
# the time it was evaluated at (it is read for a later time only). Written and dropped with
# the checkpoint, in its transaction.
SettledWait = Table(
    "settled_wait",
    metadata,
    _text("thread_id", 256, primary_key=True),
    _text("request_id", REQUEST_ID_COLUMN, primary_key=True),
    _ms("at"),
    Column("evidence", LargeBinary, nullable=False),
    sqlite_with_rowid=False,
)

# Which replica audits: the holder renews the row every half interval; another replica takes
# it over only once it has expired. `epoch` grows at every change of holder and fences the
# writes of a holder that lost it (see store.lease).
Lease = Table(
    "lease",
    metadata,
    _text("name", 32, primary_key=True),
    _text("holder", 256),
    _ms("epoch"),
    _ms("acquired_at"),
    _ms("expires_at"),
)
