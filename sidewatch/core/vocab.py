"""The bounded vocabularies sidewatch counts under: the kinds of ingested lines, the reasons a
line is rejected, the protocol findings. Each member is a metric label value as it is; the
exporters list every member at 0, and docs/reference/ documents every one (tests hold both)."""

from __future__ import annotations

from enum import StrEnum


class LineKind(StrEnum):
    """What an accepted or skipped line was (`sidewatch_ingested_lines_total{kind}`)."""

    REDELIVERED = "redelivered"  # every line of a unit whose facts were all stored already
    INPUT = "input"  # a RunAgentInput
    RUN = "run"  # a run's start, end or error
    INTERRUPT = "interrupt"  # a run's end that announced waits, or a legacy on_interrupt
    TOOL_CALL = "tool_call"
    EVIDENCE = "evidence"  # a `sidewatch.*` evidence event
    CUSTOM = "custom"  # a CUSTOM event that is not sidewatch's (skipped)
    CONTENT = "content"  # text, reasoning and thinking (skipped, never parsed)
    STATE = "state"  # state and messages snapshots (skipped)
    ACTIVITY = "activity"  # skipped
    RAW = "raw"  # skipped
    STEP = "step"  # skipped
    SUBAGENT = "subagent"  # SUBAGENT_STARTED / _FINISHED / _ERROR (ids, name and state only)


class RejectReason(StrEnum):
    """Why a line was rejected (`sidewatch_rejected_lines_total{reason}`): a bounded code, never
    the line's content."""

    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"
    UNKNOWN_SHAPE = "unknown_shape"  # no "type", and not a RunAgentInput
    UNKNOWN_TYPE = "unknown_type"  # not an AG-UI 1.0 event type
    INVALID_FIELD = "invalid_field"
    NO_RUN_CONTEXT = "no_run_context"  # names no run this unit started
    TOO_LONG = "too_long"  # over `ingest.maxLineBytes`
    UNKNOWN_EVIDENCE = "unknown_evidence"  # a `sidewatch.*` name that is no evidence event
    TIME_OUT_OF_RANGE = "time_out_of_range"  # a time outside [2000, 2200)
    INVALID_ID = "invalid_id"  # an id too long for the store, or with control characters
    KIND_NOT_ALLOWED = "kind_not_allowed"  # of a kind its sender's token may not send (`kinds`)


class FindingRule(StrEnum):
    """A protocol finding (`sidewatch_protocol_findings_total{rule}`, a wait's `findings`):
    something a producer did that the protocol does not allow or that left a doubt. A finding
    never changes a state by itself; docs/internals/interpretations/protocol-findings.md says when
    each is noticed."""

    ANSWER_MATCHED_BY_LONE_WAIT = "answer_matched_by_lone_wait"
    ANSWER_UNKNOWN_INTERRUPT = "answer_unknown_interrupt"
    ANSWERED_AFTER_EXPIRY = "answered_after_expiry"
    ANSWERED_AFTER_MOVED_PAST = "answered_after_moved_past"
    CANCEL_RUNS_FIRST_OUTCOME = "cancel_runs_first_outcome"
    DROPPED_UNANSWERED = "dropped_unanswered"
    DUPLICATE_INTERRUPT_ID = "duplicate_interrupt_id"
    # evidence naming, by threadId, a thread no interrupt was stored for yet (it is kept)
    EVIDENCE_UNKNOWN_THREAD = "evidence_unknown_thread"
    EXPIRES_AT_UNPARSABLE = "expires_at_unparsable"
    INTERRUPT_OUTCOME_EMPTY = "interrupt_outcome_empty"
    INTERRUPT_REPORTED_AS_SUCCESS = "interrupt_reported_as_success"
    LEGACY_INTERRUPT_WITHOUT_ID = "legacy_interrupt_without_id"
    LEGACY_RESUME_AMBIGUOUS = "legacy_resume_ambiguous"
    ORPHAN_TOOL_CALL_PART = "orphan_tool_call_part"
    REPEATED_ANSWER_REJECTED = "repeated_answer_rejected"
    RESUME_REJECTED = "resume_rejected"
    ROUTE_CHANNEL_INVALID = "route_channel_invalid"
    RUN_IGNORES_OPEN_INTERRUPT = "run_ignores_open_interrupt"
    TRACE_CONTEXT_MALFORMED = "trace_context_malformed"
