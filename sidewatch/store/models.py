"""The store's tables (SQLModel). Identities, times, digests, references and codes only:
no tool arguments, messages, interrupt messages or payloads have a column to land in.

Every fact table has a natural key (a unique constraint), so a re-delivered line is an
insert that does nothing. Every run-scoped key holds the thread: clients choose run ids and
producers interrupt and tool-call ids, and the same id in two threads names two things.
`at` is ms since the epoch, `seq` the arrival order.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Index, Table, UniqueConstraint
from sqlmodel import Field, SQLModel

Ms = BigInteger  # ms since the epoch and arrival sequences outgrow 32 bits
REQUEST_ID_COLUMN = 640  # a wait's requestId: a producer's (500 at most) or a default one


def table_of(model: Any) -> Table:
    """The Core table of a model (typed, for the bulk paths that skip the ORM)."""
    table: Table = model.__table__
    return table


class Unit(SQLModel, table=True):
    """One ingest unit (a file, a request body) and what became of its lines."""

    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=512)
    received_at: int = Field(sa_type=Ms)
    accepted: int = 0
    skipped: int = 0
    rejected: int = 0
    # The source's own identity of the unit (a JetStream stream and sequence), when it has
    # one: a unit delivered again after it was committed is recognised and not stored twice.
    key: str | None = Field(default=None, max_length=192, unique=True, index=True)


class LineCount(SQLModel, table=True):
    """Accepted and skipped lines of a unit, by bounded kind (for ingest health)."""

    __tablename__ = "line_count"
    unit_id: int = Field(primary_key=True, foreign_key="unit.id")
    kind: str = Field(primary_key=True, max_length=32)
    lines: int


class RejectRow(SQLModel, table=True):
    __tablename__ = "reject"
    id: int | None = Field(default=None, primary_key=True)
    unit_id: int = Field(foreign_key="unit.id", index=True)
    line: int
    reason: str = Field(max_length=32)
    error: str = Field(max_length=300)


class InterruptRow(SQLModel, table=True):
    __tablename__ = "interrupt"
    __table_args__ = (UniqueConstraint("thread_id", "run_id", "interrupt_id"),)
    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str = Field(max_length=256)
    interrupt_id: str = Field(max_length=256)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)
    reason: str | None = Field(default=None, max_length=256)
    tool_call_id: str | None = Field(default=None, max_length=256)
    expires_at: int | None = Field(default=None, sa_type=Ms)
    digest: str | None = Field(default=None, max_length=128)
    handle: bool | None = None
    request_id: str | None = Field(default=None, max_length=512, index=True)
    action: str | None = Field(default=None, max_length=256)
    tool_result_receipt: bool = False


class ToolCallRow(SQLModel, table=True):
    __tablename__ = "tool_call"
    __table_args__ = (
        UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_call_key"),
    )
    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(max_length=256, index=True)
    tool_call_id: str = Field(max_length=256, index=True)
    run_id: str = Field(max_length=256)
    name: str = Field(max_length=256)
    digest: str = Field(max_length=128)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class RunRow(SQLModel, table=True):
    __tablename__ = "run_fact"
    __table_args__ = (UniqueConstraint("thread_id", "run_id", "mark", name="uq_run_fact_key"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(max_length=256)
    thread_id: str = Field(max_length=256, index=True)
    mark: str = Field(max_length=16)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class AnswerRow(SQLModel, table=True):
    __tablename__ = "answer"
    __table_args__ = (
        UniqueConstraint("thread_id", "run_id", "interrupt_id", name="uq_answer_key"),
    )
    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str = Field(max_length=256)
    interrupt_id: str = Field(max_length=256)
    code: str = Field(max_length=16)
    digest: str | None = Field(default=None, max_length=128)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)
    via: str = Field(default="resume", max_length=16)


class LegacyResumeRow(SQLModel, table=True):
    """`forwardedProps.command.resume` answers: codes and hashed keys only, never payloads."""

    __tablename__ = "legacy_resume"
    __table_args__ = (UniqueConstraint("thread_id", "run_id", name="uq_legacy_resume_key"),)
    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str = Field(max_length=256)
    code: str = Field(max_length=16)
    digest: str | None = Field(default=None, max_length=128)
    entries: str = Field(max_length=8192)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class ToolResultRow(SQLModel, table=True):
    __tablename__ = "tool_result"
    __table_args__ = (
        UniqueConstraint("thread_id", "run_id", "tool_call_id", name="uq_tool_result_key"),
    )
    id: int | None = Field(default=None, primary_key=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str = Field(max_length=256)
    tool_call_id: str = Field(max_length=256)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class SignalRow(SQLModel, table=True):
    """A `sidewatch.route|decision|action|receipt` event."""

    __tablename__ = "signal"
    __table_args__ = (Index("ix_signal_ref", "thread_id", "interrupt_id"),)
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)
    kind: str = Field(max_length=16)
    request_id: str | None = Field(default=None, max_length=512, index=True)
    thread_id: str | None = Field(default=None, max_length=256)
    interrupt_id: str | None = Field(default=None, max_length=256)
    approver_ref: str | None = Field(default=None, max_length=256)
    delivered: bool = False
    acknowledged: bool = False
    code: str | None = Field(default=None, max_length=16)
    digest: str | None = Field(default=None, max_length=128)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class HeartbeatRow(SQLModel, table=True):
    __tablename__ = "heartbeat"
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str | None = Field(default=None, max_length=256)
    handle: bool | None = None
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class ServiceHeartbeatRow(SQLModel, table=True):
    """The latest beat of each service instance (`sidewatch.heartbeat` of the service form),
    upserted: one row an instance, never one a beat. `first_*`: its first beat seen."""

    __tablename__ = "service_heartbeat"
    service: str = Field(primary_key=True, max_length=256)
    instance: str = Field(primary_key=True, max_length=256)
    durable: bool
    first_at: int = Field(sa_type=Ms)
    first_seq: int = Field(sa_type=Ms)
    last_at: int = Field(sa_type=Ms)
    last_seq: int = Field(sa_type=Ms)


class ServiceChangeRow(SQLModel, table=True):
    """Each change of a service instance: when it was first seen, or first said `durable`
    otherwise than before."""

    __tablename__ = "service_heartbeat_change"
    __table_args__ = (UniqueConstraint("service", "instance", "durable", name="uq_service_change"),)
    id: int | None = Field(default=None, primary_key=True)
    service: str = Field(max_length=256)
    instance: str = Field(max_length=256)
    durable: bool
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class ServiceBindingRow(SQLModel, table=True):
    """A thread's waits (of `run_id`, or all) are held by a service instance."""

    __tablename__ = "service_binding"
    __table_args__ = (Index("ix_service_binding_service", "service", "instance"),)
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)
    thread_id: str = Field(max_length=256, index=True)
    run_id: str | None = Field(default=None, max_length=256)
    service: str = Field(max_length=256)
    instance: str = Field(max_length=256)
    durable: bool
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class FindingRow(SQLModel, table=True):
    __tablename__ = "finding"
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=64, unique=True)
    rule: str = Field(max_length=64)
    thread_id: str | None = Field(default=None, max_length=256, index=True)
    run_id: str | None = Field(default=None, max_length=256)
    interrupt_id: str | None = Field(default=None, max_length=256)
    at: int = Field(sa_type=Ms)
    seq: int = Field(sa_type=Ms)


class PrunedTotal(SQLModel, table=True):
    """What pruned rows counted, kept so that counters continue past retention (see
    store.retention): `counter` names the count (`lines`, `rejects`, `transitions`, ...),
    `key` its labels joined by U+001F, `value` the sum of the pruned rows' share."""

    __tablename__ = "pruned_total"
    counter: str = Field(primary_key=True, max_length=32)
    key: str = Field(primary_key=True, max_length=512)
    value: int = Field(sa_type=Ms)


class Meta(SQLModel, table=True):
    """Store-wide settings, e.g. the generated key that hashes personal approver refs."""

    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(max_length=512)


# ---------------------------------------------------------------------------------------
# The auditor's own records: the current verdict of every wait, its transitions, and which
# threads have new evidence since the auditor last looked at them.


class WaitState(SQLModel, table=True):
    """The latest verdict of a wait, as the scheduled auditor last recorded it. `due_at` is
    when time alone would next change it (indexed: a tick finds what is due without a scan)."""

    __tablename__ = "wait_state"
    # A wait is its thread and its requestId (two threads' waits may have the same one). On
    # SQLite the table is its key's B-tree (no rowid): a full audit writes a row per wait.
    __table_args__ = (
        Index("ix_wait_state_request_id", "request_id"),
        Index("ix_wait_state_due", "due_at"),
        Index("ix_wait_state_open_since", "closed", "state", "since"),
        {"sqlite_with_rowid": False},
    )
    thread_id: str = Field(primary_key=True, max_length=256)
    # The longest requestId sidewatch makes, `{threadId}/{interruptId}@{runId}` of ids of the
    # longest accepted length (200), is 602 characters.
    request_id: str = Field(primary_key=True, max_length=REQUEST_ID_COLUMN)
    policy: str = Field(max_length=128)
    state: str = Field(max_length=32)
    closed: bool
    since: int = Field(sa_type=Ms)
    due_at: int | None = Field(default=None, sa_type=Ms)
    requested_at: int = Field(sa_type=Ms)
    decided_at: int | None = Field(default=None, sa_type=Ms)
    receipt_at: int | None = Field(default=None, sa_type=Ms)
    evaluated_at: int = Field(sa_type=Ms)
    # The never-reported evidence an open verdict rests on ("route", "handle,heartbeat"; ""
    # when it rests on reports): the gauge of unreported waits continues from it.
    unreported: str = Field(default="", max_length=32, sa_column_kwargs={"server_default": ""})


class TransitionRow(SQLModel, table=True):
    """A wait entered `to_state` at `at` (by the evidence); recorded by the auditor at
    `recorded_at` with the evidence and thresholds of that verdict (JSON, content-free).
    The transitions one verdict recorded share them, stored once: on the last of them (the
    highest id); the earlier ones hold NULL (store.auditstate.compact and expand)."""

    __tablename__ = "transition"
    __table_args__ = (Index("ix_transition_wait", "request_id", "thread_id"),)
    id: int | None = Field(default=None, primary_key=True)
    request_id: str = Field(max_length=REQUEST_ID_COLUMN)
    thread_id: str = Field(max_length=256)
    from_state: str | None = Field(default=None, max_length=32)
    to_state: str = Field(max_length=32)
    at: int = Field(sa_type=Ms)
    recorded_at: int = Field(sa_type=Ms)
    policy: str = Field(max_length=128)
    thresholds: str | None = Field(default=None, max_length=512)
    evidence: str | None = Field(default=None, max_length=4096)


class DirtyThread(SQLModel, table=True):
    """A thread with evidence the auditor has not classified yet (`mark`: the newest unit)."""

    __tablename__ = "dirty_thread"
    thread_id: str = Field(primary_key=True, max_length=256)
    mark: int = Field(sa_type=Ms)


class Lease(SQLModel, table=True):
    """Which replica audits: the holder renews the row every half interval; another replica
    takes it over only once it has expired. `epoch` grows at every change of holder and fences
    the writes of a holder that lost it (see store.lease)."""

    __tablename__ = "lease"
    name: str = Field(primary_key=True, max_length=32)
    holder: str = Field(max_length=256)
    epoch: int = Field(sa_type=Ms)
    acquired_at: int = Field(sa_type=Ms)
    expires_at: int = Field(sa_type=Ms)
