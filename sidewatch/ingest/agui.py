"""The interpreter of one ingest unit: AG-UI 1.0 events, `RunAgentInput` and `sidewatch.*`
evidence events in order, with the unit's run context, to content-free facts.

Arguments, messages and payloads are read only to compute a digest or a decision code and are
dropped at once; a bad line becomes a line-numbered `Reject` and never stops the unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from sidewatch.core.facts import (
    REASON_FRONTEND_TOOL,
    VIA_EDITED,
    VIA_GATED_CALL,
    VIA_TOOL_MESSAGE,
    AnswerFact,
    Fact,
    FindingFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    SubagentFact,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code, SubagentState
from sidewatch.core.vocab import FindingRule, LineKind, RejectReason
from sidewatch.ingest.bounds import (
    DIGEST_MAX,
    ENTRIES_MAX,
    ID_MAX,
    REQUEST_ID_MAX,
    TIME_RANGE,
    id_problem,
    legacy_entries_json,
    time_ok,
)
from sidewatch.ingest.dialects import (
    ADK_CONFIRMATION,
    AdkOriginal,
    LegacyInterrupt,
    adk_answer,
    adk_original,
    adk_original_of_meta,
    crewai_interrupt,
    first_outcome_decision,
    gated_call_of,
    history_calls,
    is_crewai,
    is_frontend_tool,
    is_maf_approval,
    legacy_interrupt,
    legacy_resume,
    tool_message_call,
    tool_message_decision,
)
from sidewatch.ingest.digest import action_digest
from sidewatch.ingest.evidence import EVIDENCE_NAMES, EvidenceError, read_evidence, route_channel
from sidewatch.ingest.payload import NO_LABELS, Decision, Labels, decision_of
from sidewatch.ingest.reader import Framed

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput
    from pydantic import BaseModel

# AG-UI 1.0's event types (`ag_ui.core.EventType`, checked in the tests): named here so that a
# stream needing no `RunAgentInput` and no unusual interrupt is read without importing the
# ag-ui models and pydantic, most of the interpreter's start-up.
EVENT_TYPES = (
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TEXT_MESSAGE_CHUNK",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_CHUNK",
    "TOOL_CALL_RESULT",
    "STATE_SNAPSHOT",
    "STATE_DELTA",
    "MESSAGES_SNAPSHOT",
    "ACTIVITY_SNAPSHOT",
    "ACTIVITY_DELTA",
    "RAW",
    "CUSTOM",
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_START",
    "REASONING_MESSAGE_START",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_MESSAGE_END",
    "REASONING_MESSAGE_CHUNK",
    "REASONING_END",
    "REASONING_ENCRYPTED_VALUE",
    "SUBAGENT_STARTED",
    "SUBAGENT_FINISHED",
    "SUBAGENT_ERROR",
)
# Known events that carry nothing about waits, by the `kind` they are counted under.
_SKIPPED: dict[bytes, LineKind] = {}
for _name in EVENT_TYPES:
    _kind = {
        "TEXT": LineKind.CONTENT,
        "REASONING": LineKind.CONTENT,
        "STATE": LineKind.STATE,
        "MESSAGES": LineKind.STATE,
        "ACTIVITY": LineKind.ACTIVITY,
        "RAW": LineKind.RAW,
        "STEP": LineKind.STEP,
    }.get(_name.split("_")[0])
    if _kind is not None:
        _SKIPPED[_name.encode()] = _kind
for _name in (
    "THINKING_START",
    "THINKING_END",
    "THINKING_TEXT_MESSAGE_START",
    "THINKING_TEXT_MESSAGE_CONTENT",
    "THINKING_TEXT_MESSAGE_END",
):
    _SKIPPED[_name.encode()] = LineKind.CONTENT
_SKIPPED_STR = {k.decode(): v for k, v in _SKIPPED.items()}
_SKIP_KINDS = frozenset({*_SKIPPED.values(), LineKind.CUSTOM})
_PREFIX = b'{"type":"'
# Model output (text and reasoning token deltas) is most of a stream: dropped in one pass.
_BULK = (b'{"type":"TEXT_MESSAGE_', b'{"type":"REASONING_', b'{"type":"THINKING_')
_ARGS = b'{"type":"TOOL_CALL_ARGS"'
# A graph's steps and state deltas: a few lines per step, dropped in the same loop.
_STEPS = (b'{"type":"STEP_STARTED"', b'{"type":"STEP_FINISHED"')
_STATES = (b'{"type":"STATE_DELTA"', b'{"type":"STATE_SNAPSHOT"')
M = TypeVar("M", bound="BaseModel")


@dataclass(frozen=True, slots=True)
class Reject:
    line: int
    reason: RejectReason  # a bounded code, the metric label
    error: str  # one line for a person; never the line's content


@dataclass(slots=True)
class UnitResult:
    facts: list[Fact] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)  # accepted and skipped lines by kind
    accepted: int = 0
    skipped: int = 0


class _LineError(Exception):
    def __init__(self, reason: RejectReason, error: str) -> None:
        super().__init__(error)
        self.reason, self.error = reason, error


@dataclass(slots=True)
class _Call:
    name: str
    thread_id: str
    run_id: str
    at: int
    seq: int
    args: list[str]


class Interpreter:
    """Reads one unit's lines in order. `received_at` stands in for missing timestamps; facts
    get `seq = seq_base + line`, so arrival order is (unit, line)."""

    def __init__(
        self,
        received_at: int,
        seq_base: int,
        protect_ref: Callable[[str], str],
        max_line_bytes: int | None = None,
        labels: Labels = NO_LABELS,
        frontend_tools: Sequence[str] = (),
        allowed: frozenset[str] | None = None,
    ) -> None:
        self.received_at = received_at
        # The kinds of line its sender may send (a token's `kinds`; None: all): any other is
        # a `kind_not_allowed` reject. Without `agui`, every AG-UI line takes the tables that
        # refuse it, so the hot path of the unrestricted reading stays as it is.
        self.allowed = allowed
        self._agui = allowed is None or "agui" in allowed
        self._skipped, self._skipped_str = (_SKIPPED, _SKIPPED_STR) if self._agui else ({}, {})
        self._handlers, self._byte_handlers = (
            (_HANDLERS, _BYTE_HANDLERS) if self._agui else (_AGUI_REFUSED, _AGUI_REFUSED_BYTES)
        )
        self.labels = labels  # the policies' own decision labels (`decisions:`)
        self.frontend = tuple(frontend_tools)  # `waits.frontendTools`: glob patterns
        self.seq_base = seq_base
        self.protect_ref = protect_ref
        self.max_line_bytes = max_line_bytes  # a longer (relevant) line is a reject
        self.result = UnitResult()
        # A unit may hold several threads, and they may reuse run and tool-call ids: every
        # map of run or call ids is keyed with the thread too.
        self._ctx: tuple[str, str] | None = None  # (thread, run) of the latest start or input
        self._threads: dict[str, set[str]] = {}  # run -> the threads using it in this unit
        self._calls: dict[str, _Call] = {}  # open tool calls: arguments held in memory only
        # ended calls by (thread, run, call id): name and digest
        self._ended: dict[tuple[str, str, str], tuple[_Call, str]] = {}
        # (thread, ADK confirmation call id) -> the gated call
        self._adk: dict[tuple[str, str], AdkOriginal] = {}
        self._adk_pending: dict[tuple[str, str], list[tuple[str, int, int]]] = {}  # per run
        # (thread, run) -> where the facts of its untimed input start and end in `facts`
        self._untimed_inputs: dict[tuple[str, str], tuple[int, int]] = {}
        # legacy on_interrupt events per run, until the run's end says what their ids are
        # (the event's `subagentRunId` beside it: ag-ui-langgraph attributes the event itself)
        self._legacy: dict[tuple[str, str], list[tuple[LegacyInterrupt, int, int, str | None]]] = {}
        # ag-ui-crewai: its pauses held per run until the run's end, and then (thread,
        # interrupt id) -> (the run that announced it last, what a cancel of it runs)
        self._crewai_held: dict[tuple[str, str], list[tuple[str, Code | None]]] = {}
        self._crewai: dict[tuple[str, str], tuple[str, Code | None]] = {}
        # Frontend tools (only with `waits.frontendTools`): the calls each run started, the
        # (thread, run, call) results seen, and the (thread, call) frontend waits announced.
        self._run_calls: dict[tuple[str, str], list[str]] = {}
        self._results: set[tuple[str, str, str]] = set()
        self._frontend: set[tuple[str, str]] = set()

    # -- entry points ------------------------------------------------------------------

    def read(self, framed: Framed) -> UnitResult:
        """Interpret a whole framed unit."""
        if framed.lines:
            self._lines(framed.lines, 1)
        for n, raw in framed.items:
            self.feed(n, raw)
        return self.finish()

    def read_chunks(self, chunks: Iterable[list[bytes]]) -> UnitResult:
        """Interpret a unit of NDJSON lines given a chunk at a time, its line numbers running
        on across chunks: the same reading as `read` of all its lines at once, in the memory
        of one chunk (and of the unit's facts)."""
        first = 1
        for lines in chunks:
            self._lines(lines, first)
            first += len(lines)
        return self.finish()

    def _lines(self, lines: list[bytes], first: int) -> None:
        """Raw lines numbered from `first`. The bulk of an agent's stream (text and reasoning
        deltas) is dropped in one pass per family, counted but never parsed; graph steps and
        state deltas are counted in the loop over the rest, never reaching `feed`."""
        res = self.result
        if not self._agui:  # every line is refused or read alone: no pass drops any unread
            for i, line in enumerate(lines):
                self.feed(first + i, line)
            return
        if lines:
            limit = self.max_line_bytes
            # A line over the limit is a reject whatever its type, so it takes `feed`.
            kept = [
                i
                for i, line in enumerate(lines)
                if not line.startswith(_BULK) or (limit and len(line) > limit)
            ]
            if len(kept) != len(lines):
                res.kinds[LineKind.CONTENT] += len(lines) - len(kept)
                res.skipped += len(lines) - len(kept)
            feed, args, loads, calls = self.feed, 0, orjson.loads, self._calls
            steps = states = 0
            for i in kept:
                line = lines[i]
                if line.startswith(_ARGS) and (not limit or len(line) <= limit):
                    # Argument chunks stream one per token: the next-hottest line, so the
                    # checks of `_tool_args` are inlined here and the lines counted at once.
                    try:
                        obj = loads(line)
                        delta, call = obj["delta"], calls.get(obj["toolCallId"])
                        if isinstance(delta, str) and isinstance(obj["toolCallId"], str):
                            if call is not None:
                                call.args.append(delta)
                            args += 1
                            continue
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        pass
                if line.startswith(_STEPS) and (not limit or len(line) <= limit):
                    steps += 1  # graph steps and state: counted, never parsed, as `feed` does
                    continue
                if line.startswith(_STATES) and (not limit or len(line) <= limit):
                    states += 1
                    continue
                feed(first + i, line)  # the general path, which also words any reject
            if args:
                res.kinds[LineKind.TOOL_CALL] += args
                res.accepted += args
            if steps:
                res.kinds[LineKind.STEP] += steps
            if states:
                res.kinds[LineKind.STATE] += states
            res.skipped += steps + states

    def feed(self, line_no: int, raw: bytes | Any) -> None:
        res = self.result
        if self.max_line_bytes and isinstance(raw, bytes) and len(raw) > self.max_line_bytes:
            res.rejects.append(
                Reject(
                    line_no,
                    RejectReason.TOO_LONG,
                    f"line of {len(raw)} bytes, over the limit of {self.max_line_bytes}",
                )
            )
            return
        if isinstance(raw, bytes):
            line = raw if raw[:1] == b"{" else raw.strip()
            if not line:
                return
            handler = None
            if line[:9] == _PREFIX:
                # The AG-UI encoder writes "type" first: dispatch on it before parsing anything.
                typ = line[9 : line.find(b'"', 9)]
                kind = self._skipped.get(typ)
                if kind is not None:  # irrelevant: counted, never parsed
                    res.kinds[kind] += 1
                    res.skipped += 1
                    return
                handler = self._byte_handlers.get(typ)
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                res.rejects.append(Reject(line_no, RejectReason.NOT_JSON, f"not JSON: {e}"))
                return
            if handler is not None:
                try:
                    kind = handler(self, line_no, obj)
                except _LineError as e:
                    res.rejects.append(Reject(line_no, e.reason, e.error))
                    return
                res.kinds[kind] += 1  # `_count`, inlined on the hot path
                if kind in _SKIP_KINDS:
                    res.skipped += 1
                else:
                    res.accepted += 1
                return
        else:
            obj = raw
        try:
            self._count(self._line(line_no, obj))
        except _LineError as e:
            res.rejects.append(Reject(line_no, e.reason, e.error))

    def _count(self, kind: LineKind) -> None:
        res = self.result
        res.kinds[kind] += 1
        if kind in _SKIP_KINDS:
            res.skipped += 1
        else:
            res.accepted += 1

    def finish(self) -> UnitResult:
        for thread, run in list(self._legacy):
            self._flush_legacy(thread, run, [])  # a run whose end is not in this unit
        for call_id in list(self._calls):
            if self._calls[call_id].name == ADK_CONFIRMATION:
                self._end_call(call_id)
        for thread, run in list(self._adk_pending):
            self._flush_adk(thread, run, [])
        for call_id in list(self._calls):
            self._end_call(call_id)  # a stream cut before TOOL_CALL_END still has an action
        # Calls no interrupt of this unit claimed are kept (name and digest only) for an
        # interrupt that may arrive in a later unit.
        for (thread, run, call_id), (call, digest) in self._ended.items():
            self._emit(
                ToolCallFact(
                    thread_id=thread,
                    tool_call_id=call_id,
                    run_id=run,
                    name=call.name,
                    digest=digest,
                    at=call.at,
                    seq=call.seq,
                )
            )
        self._ended.clear()
        return self.result

    # -- one line ----------------------------------------------------------------------

    def _line(self, n: int, obj: Any) -> LineKind:
        if not isinstance(obj, dict):
            raise _LineError(RejectReason.NOT_OBJECT, f"not a JSON object but {type(obj).__name__}")
        typ = obj.get("type")
        if typ is None:
            if "threadId" in obj and "runId" in obj and "messages" in obj:
                if not self._agui:
                    raise self._refused("RunAgentInput", "agui")
                self._input(_run_agent_input(obj, "RunAgentInput"), n, obj)
                return LineKind.INPUT
            raise _LineError(
                RejectReason.UNKNOWN_SHAPE, 'unknown shape: no "type", and not a RunAgentInput'
            )
        if not isinstance(typ, str):
            raise _LineError(RejectReason.UNKNOWN_SHAPE, '"type" is not a string')
        skipped = self._skipped_str.get(typ)
        if skipped is not None:
            return skipped
        handler = self._handlers.get(typ)
        if handler is None:
            raise _LineError(RejectReason.UNKNOWN_TYPE, '"type" is not an AG-UI 1.0 event type')
        return handler(self, n, obj)

    def _at(self, obj: dict[str, Any]) -> int:
        ts = obj.get("timestamp")
        if ts is None:
            return self.received_at
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise _LineError(
                RejectReason.INVALID_FIELD, "timestamp: must be an integer (ms since the epoch)"
            )
        if not time_ok(ts):  # before the type: 1e17 is a time in µs more than a float
            raise _LineError(
                RejectReason.TIME_OUT_OF_RANGE,
                f"timestamp: must be ms since the epoch {TIME_RANGE}",
            )
        if not isinstance(ts, int):
            raise _LineError(
                RejectReason.INVALID_FIELD, "timestamp: must be an integer (ms since the epoch)"
            )
        return ts

    def _run(self, obj: dict[str, Any], what: str) -> tuple[str, str]:
        thread, run = obj.get("threadId"), obj.get("runId")
        if isinstance(thread, str):
            _checked(thread, f"{what}: threadId")
        if isinstance(run, str):
            _checked(run, f"{what}: runId")
        if isinstance(thread, str) and isinstance(run, str):
            return thread, run
        if isinstance(run, str):  # a run named inline is that run, never the one in context
            if self._ctx is not None and self._ctx[1] == run:
                return self._ctx
            known = self._threads.get(run, set())
            if len(known) != 1:
                raise _LineError(
                    RejectReason.NO_RUN_CONTEXT,
                    f"{what} names a runId which this unit has not started: add its threadId"
                    if not known
                    else f"{what} names a runId which several threads of this unit use: "
                    "add its threadId",
                )
            return next(iter(known)), run
        if isinstance(thread, str) and (self._ctx is None or self._ctx[0] != thread):
            raise _LineError(
                RejectReason.NO_RUN_CONTEXT,
                f"{what} names a threadId but no runId, and the run in context is of "
                "another thread",
            )
        if self._ctx is None:
            raise _LineError(
                RejectReason.NO_RUN_CONTEXT,
                f"{what} needs a run: no threadId/runId on it and no RUN_STARTED or "
                "RunAgentInput before it in this unit",
            )
        return self._ctx

    def _set_ctx(self, thread: str, run: str) -> None:
        self._ctx = (thread, run)
        self._threads.setdefault(run, set()).add(thread)

    def _emit(self, fact: Fact) -> None:
        self.result.facts.append(fact)

    def _finding(
        self, rule: FindingRule, thread: str, run: str, at: int, seq: int, interrupt_id: str | None
    ) -> None:
        """A finding of `rule` on the line at `at`, `seq` (the context in the order of
        `_crewai_run_end`), about `interrupt_id` or, with none, the run."""
        self._emit(
            FindingFact(
                rule=rule, at=at, seq=seq, thread_id=thread, run_id=run, interrupt_id=interrupt_id
            )
        )

    # -- runs and inputs ----------------------------------------------------------------

    def _input(self, inp: RunAgentInput, n: int, obj: dict[str, Any]) -> None:
        # Every value is read and checked before the first fact: a rejected line leaves none.
        at, seq = self._at(obj), self.seq_base + n
        thread = _checked(inp.thread_id, "RunAgentInput: threadId")
        run = _checked(inp.run_id, "RunAgentInput: runId")
        facts: list[Fact] = [
            RunFact(run_id=run, thread_id=thread, mark=RunMark.INPUT, at=at, seq=seq)
        ]
        # resume[] wins over the legacy form, as the integrations do
        legacy = None if inp.resume else legacy_resume(inp.forwarded_props, self.labels)
        if legacy is not None:
            where = "RunAgentInput: forwardedProps.command.resume: approvedActionFingerprint"
            for digest in (legacy.single_digest, *(e[2] for e in legacy.entries)):
                _checked_or_none(digest, where, DIGEST_MAX)
            entries = legacy.entries
            if len(legacy_entries_json(entries)) > ENTRIES_MAX:  # hundreds of keys name no
                entries = ()  # interrupts: one answer
            facts.append(
                LegacyResumeFact(
                    thread_id=thread,
                    run_id=run,
                    code=legacy.single,
                    at=at,
                    seq=seq,
                    digest=legacy.single_digest,
                    entries=entries,
                )
            )
        for i, m in enumerate(inp.messages):
            answer = adk_answer(m)
            if answer is not None:  # ADK: a tool message for a confirmation call
                call_id = _checked(answer[0], f"RunAgentInput: messages.{i}: toolCallId")
                facts.append(
                    AnswerFact(
                        thread_id=thread,
                        run_id=run,
                        interrupt_id=call_id,
                        code=answer[1],
                        at=at,
                        seq=seq,
                        digest=None,
                        via=VIA_TOOL_MESSAGE,
                    )
                )
        for i, entry in enumerate(inp.resume or ()):
            if entry.status == "cancelled":
                decision = Decision(Code.CANCEL)
            else:
                decision = decision_of(entry.payload, self.labels)
            code, digest = decision.code, decision.digest
            where = f"RunAgentInput: resume.{i}"
            interrupt_id = _checked(entry.interrupt_id, f"{where}: interruptId")
            _checked_or_none(digest, f"{where}: payload.approvedActionFingerprint", DIGEST_MAX)
            facts.append(
                AnswerFact(
                    thread_id=thread,
                    run_id=run,
                    interrupt_id=interrupt_id,
                    code=code,
                    at=at,
                    seq=seq,
                    digest=digest,
                    via=VIA_EDITED if decision.edited else "resume",
                )
            )
        if self.frontend:
            facts += self._frontend_answers(inp, thread, run, at, seq)
        facts += self._crewai_cancels(inp, thread, at, seq)
        self._set_ctx(thread, run)
        if obj.get("timestamp") is None:
            start = len(self.result.facts)
            self._untimed_inputs[(thread, run)] = (start, start + len(facts))
        self.result.facts.extend(facts)

    def _run_started(self, n: int, obj: dict[str, Any]) -> LineKind:
        thread, run = _id(obj, "threadId", "RUN_STARTED"), _id(obj, "runId", "RUN_STARTED")
        at = self._at(obj)
        self._time_input(thread, run, obj)
        self._set_ctx(thread, run)
        if obj.get("input") is not None:
            inp = _run_agent_input(obj["input"], "RUN_STARTED: input")
            self._input(inp, n, {"timestamp": obj.get("timestamp")})
        self._emit(
            RunFact(
                run_id=run, thread_id=thread, mark=RunMark.STARTED, at=at, seq=self.seq_base + n
            )
        )
        return LineKind.RUN

    def _time_input(self, thread: str, run: str, obj: dict[str, Any]) -> None:
        """An input without a time takes its run's start time when the producer stamps its
        events (pydantic-ai): the ingest time, after the whole stream, would put the answers
        after the run that consumed them."""
        span = self._untimed_inputs.pop((thread, run), None)
        if span is None or obj.get("timestamp") is None:
            return
        at, facts = self._at(obj), self.result.facts
        for i in range(*span):
            facts[i] = replace(facts[i], at=at)

    def _run_finished(self, n: int, obj: dict[str, Any]) -> LineKind:
        thread, run = _id(obj, "threadId", "RUN_FINISHED"), _id(obj, "runId", "RUN_FINISHED")
        at, seq = self._at(obj), self.seq_base + n
        self._threads.setdefault(run, set()).add(thread)
        outcome = obj.get("outcome")
        kind = outcome.get("type") if isinstance(outcome, dict) else outcome
        success = kind is None or kind == "success"
        pending = _pending_ids(outcome) if success and self.frontend else []  # before any fact
        started = self._run_calls.pop((thread, run), [])
        if success:
            self._crewai_run_end(thread, run, at, seq, success=True)
            self._flush_legacy(thread, run, [])
            self._flush_adk(thread, run, [])
            announced = self._flush_frontend(thread, run, at, seq, pending or started, not pending)
            self._emit(RunFact(run_id=run, thread_id=thread, mark=RunMark.FINISHED, at=at, seq=seq))
            return LineKind.INTERRUPT if announced else LineKind.RUN
        if kind == "cancelled":
            self._crewai_run_end(thread, run, at, seq, success=False)
            self._flush_legacy(thread, run, [])
            self._flush_adk(thread, run, [])
            self._emit(
                RunFact(run_id=run, thread_id=thread, mark=RunMark.CANCELLED, at=at, seq=seq)
            )
            return LineKind.RUN
        if kind == "interrupt" and isinstance(outcome, dict) and not outcome.get("interrupts"):
            # The protocol requires at least one interrupt; the run still ended.
            self._finding(FindingRule.INTERRUPT_OUTCOME_EMPTY, thread, run, at, seq, None)
            self._emit(
                RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=seq)
            )
            self._crewai_run_end(thread, run, at, seq, success=False)
            self._flush_legacy(thread, run, [])
            self._flush_adk(thread, run, [])
            return LineKind.INTERRUPT
        if kind != "interrupt":
            raise _LineError(
                RejectReason.INVALID_FIELD,
                "RUN_FINISHED: outcome.type: must be success, interrupt or cancelled",
            )
        interrupts = _interrupts(outcome)
        for i, it in enumerate(interrupts):  # all checked before the first fact
            _check_interrupt(it, f"RUN_FINISHED: outcome.interrupts.{i}")
        self._emit(RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=seq))
        seen: set[str] = set()
        for it in interrupts:
            if it.id in seen:
                self._finding(FindingRule.DUPLICATE_INTERRUPT_ID, thread, run, at, seq, it.id)
            seen.add(it.id)
            meta = it.metadata if isinstance(it.metadata, dict) else {}
            self._announce(
                thread=thread,
                run=run,
                interrupt_id=it.id,
                at=at,
                seq=seq,
                reason=it.reason,
                tool_call_id=it.tool_call_id,
                expires_raw=it.expires_at,
                meta=meta,
                subagent_run_id=it.subagent_run_id,
            )
        for it in interrupts:  # ag-ui-crewai's opt-in 1.0 outcome
            if is_crewai(None, it.metadata):
                self._crewai[(thread, it.id)] = (run, first_outcome_decision(it.response_schema))
        self._crewai_run_end(thread, run, at, seq, success=False)
        self._flush_legacy(thread, run, [it.id for it in interrupts])
        self._flush_adk(thread, run, [it.id for it in interrupts])
        return LineKind.INTERRUPT

    def _announce_call(
        self, thread: str, run: str, call_id: str, at: int, seq: int, reason: str
    ) -> None:
        """A wait announced by a tool call alone (ADK's confirmation, a frontend tool): its
        interrupt id is the call's id."""
        self._announce(
            thread=thread,
            run=run,
            interrupt_id=call_id,
            at=at,
            seq=seq,
            reason=reason,
            tool_call_id=call_id,
        )

    def _announce(
        self,
        *,
        thread: str,
        run: str,
        interrupt_id: str,
        at: int,
        seq: int,
        reason: str | None,
        tool_call_id: str | None,
        expires_raw: str | None = None,
        meta: dict[str, Any] | None = None,
        action: str | None = None,
        digest: str | None = None,
        subagent_run_id: str | None = None,
    ) -> None:
        """One interrupt of a run, as a fact: its action is the gated call seen in this unit
        (or the dialect's own), its digest the producer's fingerprint or the computed one."""
        meta = {} if meta is None else meta
        original = self._adk.get((thread, tool_call_id or "")) or adk_original_of_meta(meta)
        # ADK and Agent Framework consume an approval with the gated call's result.
        tool_result_receipt = original is not None or is_maf_approval(meta)
        if original is not None:  # ADK: the action is the call awaiting confirmation
            tool_call_id, action, digest = original.call_id, original.name, original.digest
        elif tool_call_id is not None and action is None:
            open_call = self._calls.get(tool_call_id)
            if open_call is not None and open_call.thread_id == thread:
                self._end_call(tool_call_id)
            claimed = self._claim(thread, run, tool_call_id)
            if claimed is not None:
                action, digest = claimed[0].name, digest or claimed[1]
        expires = _parse_time(expires_raw) if expires_raw is not None else None
        if expires_raw is not None and expires is None:
            self._finding(FindingRule.EXPIRES_AT_UNPARSABLE, thread, run, at, seq, interrupt_id)
        self._emit(
            InterruptFact(
                thread_id=thread,
                run_id=run,
                interrupt_id=interrupt_id,
                at=at,
                seq=seq,
                reason=reason,
                tool_call_id=tool_call_id,
                expires_at=expires,
                digest=_meta_digest(meta) or digest,
                handle=(None if "resumeHandle" not in meta else bool(meta["resumeHandle"])),
                request_id=_str_or_none(meta.get("requestId")),
                action=action,
                tool_result_receipt=tool_result_receipt,
                subagent_run_id=subagent_run_id,
            )
        )

    def _claim(self, thread: str, run: str, call_id: str) -> tuple[_Call, str] | None:
        """The ended call an interrupt gates: of its own run, else the thread's latest one
        with that id (never another thread's: producers reuse call ids across threads)."""
        claimed = self._ended.pop((thread, run, call_id), None)
        if claimed is None:
            for key in reversed(self._ended):
                if key[0] == thread and key[2] == call_id:
                    return self._ended.pop(key)
        return claimed

    # -- frontend tools (`waits.frontendTools`) ---------------------------------------------

    def _flush_frontend(
        self, thread: str, run: str, at: int, seq: int, pending: list[str], derived: bool
    ) -> bool:
        """A run that ended in success left calls for the application: those its outcome's
        `pendingToolCallIds` names, else (`derived`) the calls it started with no result in
        it. Each one of a tool the config names is a wait, whose id is the call's."""
        if not self.frontend:
            return False
        announced = False
        for call_id in dict.fromkeys(pending):
            if derived and (thread, run, call_id) in self._results:
                continue
            open_call = self._calls.get(call_id)
            if open_call is not None and open_call.thread_id == thread:
                self._end_call(call_id)  # a stream cut before TOOL_CALL_END
            call = self._ended.get((thread, run, call_id))
            if call is None:  # named by the outcome, started by an earlier run of the unit
                ended = reversed(self._ended.items())
                call = next((v for k, v in ended if k[0] == thread and k[2] == call_id), None)
            if call is None or not is_frontend_tool(call[0].name, self.frontend):
                continue
            self._frontend.add((thread, call_id))
            self._announce_call(thread, run, call_id, at, seq, REASON_FRONTEND_TOOL)
            announced = True
        return announced

    def _frontend_answers(
        self, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> list[Fact]:
        """The input's `role: "tool"` messages for calls of a frontend tool (named so by the
        history's assistant message, or announced as a wait in this unit), read by the
        decision rules; the content is then dropped. A tool message for Agent Framework's
        `confirm_changes` answers the wait of the gated call it repeats."""
        calls = history_calls(inp.messages)
        out: list[Fact] = []
        for i, m in enumerate(inp.messages):
            call_id = tool_message_call(m)
            if call_id is None or adk_answer(m) is not None:  # ADK's is read already
                continue
            name, args = calls.get(call_id, (None, None))
            if (thread, call_id) not in self._frontend and not is_frontend_tool(
                name, self.frontend
            ):
                continue
            decision = tool_message_decision(getattr(m, "content", None), self.labels)
            gated = gated_call_of(name, args)
            where = f"RunAgentInput: messages.{i}"
            target = _checked(gated or call_id, f"{where}: toolCallId")
            _checked_or_none(decision.digest, f"{where}: approvedActionFingerprint", DIGEST_MAX)
            out.append(
                AnswerFact(
                    thread_id=thread,
                    run_id=run,
                    interrupt_id=target,
                    code=decision.code,
                    at=at,
                    seq=seq,
                    digest=decision.digest,
                    via=VIA_GATED_CALL if gated else VIA_TOOL_MESSAGE,
                )
            )
        return out

    def _flush_adk(self, thread: str, run: str, announced: list[str]) -> None:
        """ADK's default mode announces a wait only by its confirmation tool call: at the
        run's end, every confirmation its 1.0 outcome did not announce becomes a wait."""
        for call_id, at, seq in self._adk_pending.pop((thread, run), []):
            if call_id not in announced:
                self._announce_call(thread, run, call_id, at, seq, "confirmation")

    def _run_error(self, n: int, obj: dict[str, Any]) -> LineKind:
        _need(obj, "message", "RUN_ERROR")  # read for validity only: never kept
        thread, run = self._run(obj, "RUN_ERROR")
        self._emit(
            RunFact(
                run_id=run,
                thread_id=thread,
                mark=RunMark.ERROR,
                at=self._at(obj),
                seq=self.seq_base + n,
            )
        )
        return LineKind.RUN

    # -- tool calls: only the name and digest survive ----------------------------------

    def _tool_start(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id = _id(obj, "toolCallId", "TOOL_CALL_START")
        name = _id(obj, "toolCallName", "TOOL_CALL_START")
        thread, run = self._run(obj, "TOOL_CALL_START")
        at = self._at(obj)
        self._end_other_run(call_id, thread, run)
        self._calls[call_id] = _Call(name, thread, run, at, self.seq_base + n, [])
        if self.frontend:
            self._run_calls.setdefault((thread, run), []).append(call_id)
        return LineKind.TOOL_CALL

    def _tool_args(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id, delta = obj.get("toolCallId"), obj.get("delta")
        if not isinstance(call_id, str) or not isinstance(delta, str):
            raise _LineError(
                RejectReason.INVALID_FIELD, "TOOL_CALL_ARGS: toolCallId and delta must be strings"
            )
        call = self._calls.get(call_id)
        if call is not None:
            call.args.append(delta)
        return LineKind.TOOL_CALL

    def _tool_end(self, n: int, obj: dict[str, Any]) -> LineKind:
        self._end_call(_need(obj, "toolCallId", "TOOL_CALL_END"))
        return LineKind.TOOL_CALL

    def _tool_chunk(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id, name, delta = obj.get("toolCallId"), obj.get("toolCallName"), obj.get("delta")
        if isinstance(call_id, str) and isinstance(name, str) and call_id not in self._calls:
            _checked(call_id, "TOOL_CALL_CHUNK: toolCallId")
            _checked(name, "TOOL_CALL_CHUNK: toolCallName")
            thread, run = self._run(obj, "TOOL_CALL_CHUNK")
            self._calls[call_id] = _Call(name, thread, run, self._at(obj), self.seq_base + n, [])
            if self.frontend:
                self._run_calls.setdefault((thread, run), []).append(call_id)
        if isinstance(call_id, str) and isinstance(delta, str) and call_id in self._calls:
            self._calls[call_id].args.append(delta)
        return LineKind.TOOL_CALL

    def _tool_result(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id = _id(obj, "toolCallId", "TOOL_CALL_RESULT")
        thread, run = self._run(obj, "TOOL_CALL_RESULT")
        if self.frontend:
            self._results.add((thread, run, call_id))
        self._emit(
            ToolResultFact(
                thread_id=thread,
                run_id=run,
                tool_call_id=call_id,
                at=self._at(obj),
                seq=self.seq_base + n,
            )
        )
        return LineKind.TOOL_CALL

    def _end_other_run(self, call_id: str, thread: str, run: str) -> None:
        """A call id still open in another thread or run (producers reuse call ids across
        threads) is ended before the new call takes the id, so that it is kept, not lost."""
        open_call = self._calls.get(call_id)
        if open_call is not None and (open_call.thread_id, open_call.run_id) != (thread, run):
            self._end_call(call_id)

    def _end_call(self, call_id: str) -> None:
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        args = "".join(call.args)  # dropped at the end of this method, once digested
        thread, run = call.thread_id, call.run_id
        self._ended[(thread, run, call_id)] = (call, action_digest(call.name, args))
        if call.name == ADK_CONFIRMATION:
            original = adk_original(args)
            if original is not None:
                self._adk[(thread, call_id)] = original
                self._adk_pending.setdefault((thread, run), []).append((call_id, call.at, call.seq))

    # -- ag-ui-langgraph's legacy interrupt event ------------------------------------------

    def _on_interrupt(self, n: int, obj: dict[str, Any]) -> LineKind:
        """Held until the run ends: its id may only be known from the run's 1.0 outcome, and
        when the outcome announces the same interrupt, the outcome's richer fact is kept."""
        thread, run = self._run(obj, "CUSTOM on_interrupt")
        crewai = crewai_interrupt(obj.get("value")) if obj.get("rawEvent") is None else None
        legacy = legacy_interrupt(obj.get("value"), obj.get("rawEvent"))
        if crewai is not None:  # ag-ui-crewai: the value is the Interrupt object itself
            legacy = crewai.interrupt
        _checked_or_none(legacy.interrupt_id, "CUSTOM on_interrupt: rawEvent.id")
        _checked_or_none(legacy.reason, "CUSTOM on_interrupt: value.reason")
        _checked_or_none(legacy.tool_call_id, "CUSTOM on_interrupt: value.toolCallId")
        _checked_or_none(legacy.action, "CUSTOM on_interrupt: value.action_requests.0.name")
        _check_expiry(legacy.expires_at, "CUSTOM on_interrupt: value.expiresAt")
        sub = obj.get("subagentRunId")
        if sub is not None and not isinstance(sub, str):
            raise _LineError(
                RejectReason.INVALID_FIELD, "CUSTOM on_interrupt: subagentRunId: must be a string"
            )
        _checked_or_none(sub, "CUSTOM on_interrupt: subagentRunId")
        self._legacy.setdefault((thread, run), []).append(
            (legacy, self._at(obj), self.seq_base + n, sub)
        )
        if crewai is not None and legacy.interrupt_id is not None:
            self._crewai_held.setdefault((thread, run), []).append(
                (legacy.interrupt_id, crewai.first_outcome)
            )
        return LineKind.INTERRUPT

    # -- ag-ui-crewai: where it contradicts AG-UI 1.0 ---------------------------------------

    def _crewai_run_end(self, thread: str, run: str, at: int, seq: int, *, success: bool) -> None:
        """At a run's end, its crewai pauses are known (for a later cancel of them); a run
        that paused and still ended in success (ag-ui-crewai's default) is a finding."""
        for interrupt_id, first in self._crewai_held.pop((thread, run), []):
            self._crewai[(thread, interrupt_id)] = (run, first)
            if success:
                self._finding(
                    FindingRule.INTERRUPT_REPORTED_AS_SUCCESS, thread, run, at, seq, interrupt_id
                )

    def _crewai_cancels(self, inp: RunAgentInput, thread: str, at: int, seq: int) -> list[Fact]:
        """A cancel of a crewai pause is sent to crewai as empty feedback, which it resolves
        to the step's first outcome: a finding, unless that outcome is a decline."""
        found: list[Fact] = []
        for entry in inp.resume or ():
            known = self._crewai.get((thread, entry.interrupt_id))
            if entry.status == "cancelled" and known is not None and known[1] is not Code.DECLINE:
                found.append(
                    FindingFact(
                        rule=FindingRule.CANCEL_RUNS_FIRST_OUTCOME,
                        at=at,
                        seq=seq,
                        thread_id=thread,
                        run_id=known[0],
                        interrupt_id=entry.interrupt_id,
                    )
                )
        return found

    def _flush_legacy(self, thread: str, run: str, announced: list[str]) -> None:
        """Emit the run's legacy interrupts once its end is seen (`announced`: the ids of its
        1.0 outcome, in order). The n-th one without an id is the outcome's n-th interrupt,
        else `{runId}#{n}`, with a finding."""
        unnamed = 0
        for legacy, at, seq, sub in self._legacy.pop((thread, run), []):
            interrupt_id = legacy.interrupt_id
            if interrupt_id is None:
                unnamed += 1
                if unnamed <= len(announced):
                    interrupt_id = announced[unnamed - 1]
                else:
                    interrupt_id = f"{run}#{unnamed}"
                    self._finding(
                        FindingRule.LEGACY_INTERRUPT_WITHOUT_ID, thread, run, at, seq, interrupt_id
                    )
            if interrupt_id in announced:
                continue  # the outcome says it all, and more
            self._announce(
                thread=thread,
                run=run,
                interrupt_id=interrupt_id,
                at=at,
                seq=seq,
                reason=legacy.reason,
                tool_call_id=legacy.tool_call_id,
                expires_raw=legacy.expires_at,
                action=legacy.action,
                digest=legacy.digest,
                subagent_run_id=sub,
            )

    # -- subagents (AG-UI 1.0): their ids, name and state, never their content -------------

    def _subagent_started(self, n: int, obj: dict[str, Any]) -> LineKind:
        at = self._at(obj)
        from ag_ui.core import SubagentStartedEvent  # noqa: PLC0415 (the models load only when needed)

        ev = _valid(SubagentStartedEvent, obj, "SUBAGENT_STARTED")
        name = _checked(ev.name, "SUBAGENT_STARTED: name")  # the description is not kept
        sub = ev.subagent_run_id
        return self._subagent(n, obj, "SUBAGENT_STARTED", sub, at, SubagentState.RUNNING, name=name)

    def _subagent_finished(self, n: int, obj: dict[str, Any]) -> LineKind:
        at = self._at(obj)
        from ag_ui.core import (  # noqa: PLC0415 (the models load only when needed)
            SubagentFinishedEvent,
            SubagentFinishedSuspendedOutcome,
        )

        ev = _valid(SubagentFinishedEvent, obj, "SUBAGENT_FINISHED")  # its result is not kept
        if not isinstance(ev.outcome, SubagentFinishedSuspendedOutcome):
            sub = ev.subagent_run_id
            return self._subagent(n, obj, "SUBAGENT_FINISHED", sub, at, SubagentState.FINISHED)
        ids = tuple(
            _checked(i, f"SUBAGENT_FINISHED: outcome.interruptIds.{k}")
            for k, i in enumerate(ev.outcome.interrupt_ids or ())
        )
        if len(orjson.dumps(ids)) > ENTRIES_MAX:
            raise _LineError(
                RejectReason.INVALID_FIELD,
                f"SUBAGENT_FINISHED: outcome.interruptIds: more than the store holds "
                f"({ENTRIES_MAX} bytes of JSON)",
            )
        return self._subagent(
            n, obj, "SUBAGENT_FINISHED", ev.subagent_run_id, at, SubagentState.SUSPENDED, ids
        )

    def _subagent_error(self, n: int, obj: dict[str, Any]) -> LineKind:
        at = self._at(obj)
        from ag_ui.core import SubagentErrorEvent  # noqa: PLC0415 (the models load only when needed)

        ev = _valid(SubagentErrorEvent, obj, "SUBAGENT_ERROR")  # its message is not kept
        return self._subagent(n, obj, "SUBAGENT_ERROR", ev.subagent_run_id, at, SubagentState.ERROR)

    def _subagent(
        self,
        n: int,
        obj: dict[str, Any],
        what: str,
        subagent_run_id: str,
        at: int,
        state: SubagentState,
        interrupt_ids: tuple[str, ...] = (),
        name: str | None = None,
    ) -> LineKind:
        """A subagent's event as a fact of the run in context: a suspended subagent opens no
        wait of its own; its interrupts are the parent run's (`RUN_FINISHED`'s outcome)."""
        sub = _checked(subagent_run_id, f"{what}: subagentRunId")
        thread, run = self._run(obj, what)
        self._emit(
            SubagentFact(
                thread_id=thread,
                run_id=run,
                subagent_run_id=sub,
                state=state,
                at=at,
                seq=self.seq_base + n,
                name=name,
                interrupt_ids=interrupt_ids,
            )
        )
        return LineKind.SUBAGENT

    # -- CUSTOM: sidewatch evidence events ------------------------------------------------

    def _custom(self, n: int, obj: dict[str, Any]) -> LineKind:
        name = _need(obj, "name", "CUSTOM")
        if not name.startswith("sidewatch."):
            if not self._agui:  # on_interrupt, or the producer's own: AG-UI lines
                raise self._refused("CUSTOM", "agui")
            return self._on_interrupt(n, obj) if name == "on_interrupt" else LineKind.CUSTOM
        if name not in EVIDENCE_NAMES:  # the name is the producer's: never said back
            raise _LineError(
                RejectReason.UNKNOWN_EVIDENCE, "CUSTOM: name: not a sidewatch.* evidence event"
            )
        if self.allowed is not None and name[10:] not in self.allowed:
            raise self._refused(name, name[10:])
        if "value" not in obj:
            raise _LineError(RejectReason.INVALID_FIELD, f"{name}: value: Field required")
        at = self._at(obj)
        try:
            fact = read_evidence(
                name, obj["value"], at, self.seq_base + n, "timestamp" in obj, self.protect_ref
            )
        except EvidenceError as e:
            raise _LineError(e.reason, f"{name}: {e}") from e
        self._emit(fact)
        # A route's channel that is not a code is kept as none; the route itself stands.
        if (
            isinstance(fact, SignalFact)
            and fact.kind is SignalKind.ROUTE
            and route_channel(obj["value"])[1]
        ):
            self._emit(
                FindingFact(
                    rule=FindingRule.ROUTE_CHANNEL_INVALID,
                    at=at,
                    seq=fact.seq,
                    thread_id=fact.thread_id,
                    interrupt_id=fact.interrupt_id,
                )
            )
        return LineKind.EVIDENCE

    def _refused(self, what: str, kind: str) -> _LineError:
        """The reject of a line of a `kind` its sender may not send."""
        allowed = ", ".join(sorted(self.allowed or ()))
        return _LineError(
            RejectReason.KIND_NOT_ALLOWED,
            f"{what}: a line of kind {kind}, which this token may not send (its kinds: {allowed})",
        )

    def _agui_refused(self, n: int, obj: dict[str, Any]) -> LineKind:
        """An AG-UI event from a sender whose token's kinds leave out `agui`. Its type is
        named only as a known one (a repeated "type" key may have parsed to another)."""
        typ = obj.get("type")
        raise self._refused(
            typ if isinstance(typ, str) and typ in _AGUI_REFUSED else "AG-UI", "agui"
        )


_HANDLERS: dict[str, Callable[[Interpreter, int, dict[str, Any]], LineKind]] = {
    "RUN_STARTED": Interpreter._run_started,
    "RUN_FINISHED": Interpreter._run_finished,
    "RUN_ERROR": Interpreter._run_error,
    "TOOL_CALL_START": Interpreter._tool_start,
    "TOOL_CALL_ARGS": Interpreter._tool_args,
    "TOOL_CALL_END": Interpreter._tool_end,
    "TOOL_CALL_CHUNK": Interpreter._tool_chunk,
    "TOOL_CALL_RESULT": Interpreter._tool_result,
    "CUSTOM": Interpreter._custom,
    "SUBAGENT_STARTED": Interpreter._subagent_started,
    "SUBAGENT_FINISHED": Interpreter._subagent_finished,
    "SUBAGENT_ERROR": Interpreter._subagent_error,
}
_BYTE_HANDLERS = {k.encode(): v for k, v in _HANDLERS.items()}
# The same types for a sender that may not send AG-UI lines: each is refused, but a CUSTOM
# event, which may be evidence of a kind it may send.
_AGUI_REFUSED: dict[str, Callable[[Interpreter, int, dict[str, Any]], LineKind]] = {
    k: Interpreter._custom if k == "CUSTOM" else Interpreter._agui_refused
    for k in (*_SKIPPED_STR, *_HANDLERS)
}
_AGUI_REFUSED_BYTES = {k.encode(): v for k, v in _AGUI_REFUSED.items()}


def _need(obj: dict[str, Any], key: str, what: str) -> str:
    """A required string field, checked by hand on the hot path (pydantic's wording)."""
    v = obj.get(key)
    if isinstance(v, str):
        return v
    problem = "Field required" if v is None else "Input should be a valid string"
    raise _LineError(RejectReason.INVALID_FIELD, f"{what}: {key}: {problem}")


def _id(obj: dict[str, Any], key: str, what: str) -> str:
    """A required id or name that is stored: a string within the id rules."""
    return _checked(_need(obj, key, what), f"{what}: {key}")


def _checked(value: str, where: str, limit: int = ID_MAX) -> str:
    problem = id_problem(value, limit)
    if problem is not None:
        raise _LineError(RejectReason.INVALID_ID, f"{where}: {problem}")
    return value


def _checked_or_none(value: str | None, where: str, limit: int = ID_MAX) -> None:
    if value is not None:
        _checked(value, where, limit)


def _check_interrupt(it: _Interrupt, where: str) -> None:
    """The stored values of a 1.0 interrupt: its ids, reason, expiry and metadata."""
    _checked(it.id, f"{where}: id")
    _checked(it.reason, f"{where}: reason")
    _checked_or_none(it.tool_call_id, f"{where}: toolCallId")
    _checked_or_none(it.subagent_run_id, f"{where}: subagentRunId")
    _check_expiry(it.expires_at, f"{where}: expiresAt")
    meta = it.metadata if isinstance(it.metadata, dict) else {}
    request_id = _str_or_none(meta.get("requestId"))
    _checked_or_none(request_id, f"{where}: metadata.requestId", REQUEST_ID_MAX)
    _checked_or_none(_meta_digest(meta), f"{where}: metadata digest", DIGEST_MAX)


def _check_expiry(raw: str | None, where: str) -> None:
    """An `expiresAt` that parses but lies outside the stored range rejects its line; one
    that does not parse is the spec's finding (`expires_at_unparsable`), not a reject."""
    if raw is None:
        return
    expires = _parse_time(raw)
    if expires is not None and not time_ok(expires):
        raise _LineError(RejectReason.TIME_OUT_OF_RANGE, f"{where}: must be a time {TIME_RANGE}")


# Pydantic's messages of these error types are made of the schema alone (expected types,
# literals, lengths); the others may quote the input (a union's tag, a validator's words),
# so only their type is said. No AG-UI model has a map of models, so a location holds field
# names, list indices and union tags the schema knows, never a key of the input.
_SCHEMA_ONLY_MESSAGES = frozenset(
    {
        "missing",
        "extra_forbidden",
        "string_type",
        "int_type",
        "float_type",
        "bool_type",
        "dict_type",
        "list_type",
        "model_type",
        "model_attributes_type",
        "dataclass_type",
        "is_instance_of",
        "none_required",
        "literal_error",
        "enum",
        "int_parsing",
        "int_from_float",
        "float_parsing",
        "bool_parsing",
        "finite_number",
        "too_short",
        "too_long",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "string_unicode",
        "union_tag_not_found",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    }
)


@dataclass(frozen=True, slots=True)
class _Interrupt:
    """What sidewatch reads of an AG-UI 1.0 `Interrupt`."""

    id: str
    reason: str
    tool_call_id: str | None
    expires_at: str | None
    metadata: dict[str, Any] | None
    response_schema: dict[str, Any] | None
    subagent_run_id: str | None = None


# An interrupt outcome made only of these keys, with values of exactly these JSON types, is
# one `RunFinishedInterruptOutcome` validates as it is: read by hand (ingest's hot path, and
# no pydantic to import). Anything else (a snake_case spelling, an extra key, a number for a
# string) is left to pydantic, which accepts or words the reject as always.
_OUTCOME_KEYS = frozenset({"type", "interrupts"})
_INTERRUPT_TYPES: dict[str, type] = {
    "id": str,
    "reason": str,
    "message": str,
    "toolCallId": str,
    "subagentRunId": str,
    "expiresAt": str,
    "responseSchema": dict,
    "metadata": dict,
}
_INTERRUPT_REQUIRED = ("id", "reason")


def _interrupts(outcome: Any) -> list[_Interrupt]:
    """The interrupts of a RUN_FINISHED `interrupt` outcome, validated."""
    plain = _plain_interrupts(outcome) if type(outcome) is dict else None
    return plain if plain is not None else _modelled_interrupts(outcome)


def _modelled_interrupts(outcome: Any) -> list[_Interrupt]:
    """The interrupts as ag-ui's `RunFinishedInterruptOutcome` validates and reads them: any
    spelling and shape the hand reader leaves (its reference, too)."""
    from ag_ui.core import RunFinishedInterruptOutcome  # noqa: PLC0415 (only when needed)

    parsed = _valid(RunFinishedInterruptOutcome, outcome, "RUN_FINISHED: outcome")
    return [
        _Interrupt(
            it.id,
            it.reason,
            it.tool_call_id,
            it.expires_at,
            it.metadata,
            it.response_schema,
            it.subagent_run_id,
        )
        for it in parsed.interrupts
    ]


def _plain_interrupts(outcome: dict[str, Any]) -> list[_Interrupt] | None:
    items = outcome.get("interrupts")
    if outcome.get("type") != "interrupt" or not outcome.keys() <= _OUTCOME_KEYS:
        return None
    if type(items) is not list or not items:
        return None
    out: list[_Interrupt] = []
    for it in items:
        if type(it) is not dict:
            return None
        for key, value in it.items():
            want = _INTERRUPT_TYPES.get(key)
            if want is None or (type(value) is not want and value is not None):
                return None
        if any(type(it.get(k)) is not str for k in _INTERRUPT_REQUIRED):
            return None
        out.append(
            _Interrupt(
                it["id"],
                it["reason"],
                it.get("toolCallId"),
                it.get("expiresAt"),
                it.get("metadata"),
                it.get("responseSchema"),
                it.get("subagentRunId"),
            )
        )
    return out


def _run_agent_input(obj: Any, what: str) -> RunAgentInput:
    from ag_ui.core import RunAgentInput  # noqa: PLC0415 (pydantic: only for an input)

    return _valid(RunAgentInput, obj, what)


def _valid(model: type[M], obj: Any, what: str) -> M:
    from pydantic import ValidationError  # noqa: PLC0415 (imported with the models)

    try:
        return model.model_validate(obj)
    except ValidationError as e:
        errors = e.errors(include_input=False, include_url=False)
        err = errors[0]
        where = ".".join(str(p) for p in err["loc"]) or "value"
        ctx = err.get("ctx", {})
        if err["type"] in _SCHEMA_ONLY_MESSAGES:
            rule = err["msg"]
        elif err["type"] == "union_tag_invalid":  # the tag's name and the expected ones
            rule = f"{ctx['discriminator']} should be one of {ctx['expected_tags']}"
        else:
            rule = f"invalid ({err['type']})"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise _LineError(RejectReason.INVALID_FIELD, f"{what}: {where}: {rule}{more}") from None


def _parse_time(text: str) -> int | None:
    try:
        dt = datetime.fromisoformat(text.strip())
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)  # a zone-less time is read as UTC
        return int(dt.timestamp() * 1000)
    except (ValueError, OverflowError):
        return None


def _meta_digest(meta: dict[str, Any]) -> str | None:
    digest = meta.get("actionDigest")
    if isinstance(digest, str):
        return digest
    gov = meta.get("governance")
    if isinstance(gov, dict) and isinstance(gov.get("actionFingerprint"), str):
        return str(gov["actionFingerprint"])
    return None


def _pending_ids(outcome: Any) -> list[str]:
    """A success outcome's `pendingToolCallIds` (checked like every stored id); [] when
    absent or empty."""
    ids = outcome.get("pendingToolCallIds") if isinstance(outcome, dict) else None
    if ids is None:
        return []
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _LineError(
            RejectReason.INVALID_FIELD,
            "RUN_FINISHED: outcome.pendingToolCallIds: must be a list of tool call ids",
        )
    for i, call_id in enumerate(ids):
        _checked(call_id, f"RUN_FINISHED: outcome.pendingToolCallIds.{i}")
    return ids


def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None
