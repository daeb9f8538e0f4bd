"""Content-free facts, as ingest extracts them and the store keeps them.

Every fact has `at` (ms since the epoch: the event's timestamp, else its ingest time) and
`seq` (arrival order). None of them holds a tool argument, a message or a payload.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from sidewatch.core.model import Code, SubagentState


class RunMark(StrEnum):
    """What a run fact says of its run: asked for, started, or ended (and how)."""

    INPUT = "input"  # a RunAgentInput (or the input echoed in RUN_STARTED) asked for the run
    STARTED = "started"
    FINISHED = "finished"  # no outcome, or `success`
    INTERRUPTED = "interrupted"  # finished with the interrupt outcome
    CANCELLED = "cancelled"  # finished with the cancelled outcome: closes and answers nothing
    ERROR = "error"


class SignalKind(StrEnum):
    """Which `sidewatch.*` evidence event a signal fact is."""

    ROUTE = "route"
    DECISION = "decision"
    ACTION = "action"
    RECEIPT = "receipt"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptFact:
    """A run announced interrupt `interrupt_id` on its end: the request of a wait (or the
    same wait again), with what it asked and the metadata the producer gave."""

    thread_id: str
    run_id: str
    interrupt_id: str
    at: int
    seq: int
    reason: str | None = None
    tool_call_id: str | None = None
    expires_at: int | None = None
    digest: str | None = None  # a digest the producer supplied in metadata
    handle: bool | None = None  # metadata.resumeHandle: present, null, or not reported
    request_id: str | None = None  # metadata.requestId
    action: str | None = None  # the gated tool call's name, when the unit held the call
    tool_result_receipt: bool = False  # only the gated call's result consumes it (ADK)
    # Its wait closed and its other facts were pruned (store.retention): the id was used and
    # closed, which decides later waits' identity and matching; it is no wait of its own.
    pruned: bool = False
    subagent_run_id: str | None = None  # the interrupt's `subagentRunId`: a subagent raised it


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFact:
    """A tool call's name and action digest; its arguments are never kept."""

    thread_id: str
    tool_call_id: str
    run_id: str
    name: str
    digest: str
    at: int
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFact:
    """A step of run `run_id` on its thread: its input, start or end."""

    run_id: str
    thread_id: str
    mark: RunMark
    at: int
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTraceFact:
    """The W3C trace context of run `run_id`'s request (`traceparent`, `tracestate` on its
    input or `RUN_STARTED`): identifiers only, read by the trace exporter, never by the model."""

    thread_id: str
    run_id: str
    traceparent: str
    tracestate: str | None
    at: int
    seq: int


VIA_EDITED = "resume_edited"  # an answer's `via`: an accept carrying `editedArgs`
# A `resume[]` entry after the input's first (plain, or an edited accept): Mastra's adapter
# reads only the first entry, so a later one does not answer a Mastra suspension.
VIA_LATER = "resume_later"
VIA_EDITED_LATER = "edited_later"
EDITED = frozenset({VIA_EDITED, VIA_EDITED_LATER})  # the `via`s of an edited accept
REASON_MASTRA = "mastra:tool_suspend"  # a Mastra suspension's reason (@ag-ui/mastra)
# A `role: "tool"` message answering a call (ADK's confirmation, a frontend-tool wait): only
# the first one for an id counts, later inputs repeat it in their history.
VIA_TOOL_MESSAGE = "tool_message"
# A tool message for a frontend call that repeats a gated call (Agent Framework's
# `confirm_changes`): `interrupt_id` holds the gated call's id, and the answer is the wait's
# whose `tool_call_id` that is (the engine resolves it).
VIA_GATED_CALL = "gated_call"
REASON_FRONTEND_TOOL = "frontend_tool"  # a frontend-tool wait's reason (`waits.frontendTools`)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerFact:
    """A resume entry: the input of run `run_id` answered interrupt `interrupt_id`."""

    thread_id: str
    run_id: str
    interrupt_id: str
    code: Code
    at: int
    seq: int
    digest: str | None = None
    # "resume": a resume[] entry; "resume_edited": one accepting edited arguments;
    # "tool_message": a tool message (ADK's confirmation, a frontend-tool wait);
    # "gated_call": a tool message naming the wait by its gated call (`VIA_GATED_CALL`)
    via: str = "resume"


@dataclass(frozen=True, slots=True, kw_only=True)
class LegacyResumeFact:
    """ag-ui-langgraph's `forwardedProps.command.resume` in the input of run `run_id`: read as
    one answer (`code`), and as a map whose keys may name interrupts (`entries`: (key hash,
    code, digest) per key); which reading applies is decided once the thread is known."""

    thread_id: str
    run_id: str
    code: Code
    at: int
    seq: int
    digest: str | None = None
    entries: tuple[tuple[str, Code, str | None], ...] = ()


def key_hash(key: str) -> str:
    """How a legacy resume map's keys are kept (a key may be a payload's field name, so it
    is never stored as it is); interrupt ids are hashed the same way to compare."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultFact:
    """Run `run_id` reported the result of tool call `tool_call_id` (never the result)."""

    thread_id: str
    run_id: str
    tool_call_id: str
    at: int
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFact:
    """Run `run_id` reported a `SUBAGENT_*` event of invocation `subagent_run_id`: its state,
    its name (on SUBAGENT_STARTED), and the interrupts a suspended one raised itself. Never
    its description, result or error message."""

    thread_id: str
    run_id: str
    subagent_run_id: str
    state: SubagentState
    at: int
    seq: int
    name: str | None = None
    interrupt_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalFact:
    """A `sidewatch.*` evidence event naming a wait by requestId or thread + interrupt."""

    kind: SignalKind
    at: int
    seq: int
    request_id: str | None = None
    thread_id: str | None = None
    interrupt_id: str | None = None
    approver_ref: str | None = None
    channel: str | None = None  # a route's channel: a short code (`ag-ui`, `slack`), never content
    delivered: bool = False
    acknowledged: bool = False
    code: Code | None = None
    digest: str | None = None
    key: str = ""  # natural key: a re-delivered event has the same one


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatFact:
    """The requester of the thread's waits (of `run_id`, or all) is alive; `handle` reports
    its resume handle (None: not reported). A compacted run of beats (store.heartbeats) is one
    fact: `beats` beats of the same handle from `at` to `last_at`, no two consecutive ones
    further apart than the compaction gap (never more than any policy's freshness)."""

    thread_id: str
    at: int
    seq: int
    run_id: str | None = None
    handle: bool | None = None
    key: str = ""
    last_at: int | None = None  # None: one beat
    last_seq: int | None = None
    beats: int = 1
    # A bound service's beat (store.services.expand: its binding, or a beat of an instance
    # that holds the binding), not a stored heartbeat: no row of the thread's history.
    bound: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceBeatFact:
    """A service instance is alive (`sidewatch.heartbeat` of the service form). Stored as the
    latest beat per instance; the store expands it into `HeartbeatFact`s of the threads bound
    to it, so the core never sees one."""

    service: str
    instance: str
    durable: bool
    at: int
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceBindFact:
    """The waits of a thread (of `run_id`, or all) are held by a service instance: kept alive by
    any beat of the service when `durable`, else only by the instance's own."""

    thread_id: str
    service: str
    instance: str
    durable: bool
    at: int
    seq: int
    run_id: str | None = None
    key: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingFact:
    """A protocol finding noticed at ingest (e.g. an `expiresAt` that does not parse)."""

    rule: str
    at: int
    seq: int
    thread_id: str | None = None
    run_id: str | None = None
    interrupt_id: str | None = None


Fact = (
    InterruptFact
    | ToolCallFact
    | RunFact
    | AnswerFact
    | ToolResultFact
    | LegacyResumeFact
    | SignalFact
    | HeartbeatFact
    | FindingFact
    | ServiceBeatFact
    | ServiceBindFact
    | SubagentFact
    | RunTraceFact
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadFacts:
    """Everything stored about one thread, plus the signals that name its waits by requestId."""

    thread_id: str
    interrupts: tuple[InterruptFact, ...] = ()
    tool_calls: tuple[ToolCallFact, ...] = ()
    runs: tuple[RunFact, ...] = ()
    answers: tuple[AnswerFact, ...] = ()
    tool_results: tuple[ToolResultFact, ...] = ()
    signals: tuple[SignalFact, ...] = ()
    heartbeats: tuple[HeartbeatFact, ...] = ()
    legacy_resumes: tuple[LegacyResumeFact, ...] = ()
    findings: tuple[FindingFact, ...] = ()
    subagents: tuple[SubagentFact, ...] = ()
