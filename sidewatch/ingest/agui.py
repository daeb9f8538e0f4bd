"""The interpreter of one ingest unit: its lines framed, dispatched by type and counted; AG-UI
1.0 events go to the grammar (`grammar.py`) and the producers' dialects (`producers/`),
`sidewatch.*` evidence events to `evidence.py`, each into content-free facts.

Arguments, messages and payloads are read only to compute a digest or a decision code and are
dropped at once; a bad line becomes a line-numbered `Reject` and never stops the unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import MethodType
from typing import Any

import orjson

from sidewatch.core.facts import Fact, FindingFact, SignalFact, SignalKind
from sidewatch.core.vocab import FindingRule, LineKind, RejectReason
from sidewatch.ingest.evidence import EVIDENCE_NAMES, EvidenceError, read_evidence, route_channel
from sidewatch.ingest.fields import LineError, need, run_agent_input
from sidewatch.ingest.grammar import AguiGrammar
from sidewatch.ingest.opencalls import OpenCalls
from sidewatch.ingest.openruns import OpenRuns, RunHold
from sidewatch.ingest.payload import NO_LABELS, Labels
from sidewatch.ingest.producers import dialects
from sidewatch.ingest.producers.base import Dialect, Handler
from sidewatch.ingest.reader import Framed
from sidewatch.ingest.untimed import Retime

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
    # the untimed inputs of earlier units whose run started in this one (ingest.untimed)
    retimes: list[Retime] = field(default_factory=list)


# A line's handler, called with the interpreter: the grammar's and the dialects' alike.
LineHandler = Callable[["Interpreter", int, dict[str, Any]], LineKind]


class Interpreter(AguiGrammar):
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
        open_calls: OpenCalls | None = None,
        open_runs: OpenRuns | None = None,
        closing: bool = False,
    ) -> None:
        # `open_runs`: what earlier units' dialects hold for a run's end (None: the unit is
        # read alone, and closes what it holds at its end; `closing`: it closes all of it).
        hold = RunHold(open_runs, closing)
        super().__init__(
            received_at, seq_base, labels, dialects(labels, frontend_tools, hold), open_calls, hold
        )
        # The kinds of line its sender may send (a token's `kinds`; None: all): any other is
        # a `kind_not_allowed` reject. Without `agui`, every AG-UI line takes the tables that
        # refuse it, so the hot path of the unrestricted reading stays as it is.
        self.allowed = allowed
        self._agui = allowed is None or "agui" in allowed
        self._skipped, self._skipped_str = (_SKIPPED, _SKIPPED_STR) if self._agui else ({}, {})
        # The dispatch tables are the same for every unit read by the same dialects: built
        # once per tuple of dialect classes, only the dialects' own handlers bound per unit.
        ds = self.dialects
        tables = _tables(tuple(map(type, ds)), self._agui, self)
        handlers, byte_handlers = dict(tables.handlers), dict(tables.byte_handlers)
        customs: dict[str, Handler] = {}
        for key, at, func in tables.bound:
            handlers[key] = byte_handlers[key.encode()] = MethodType(func, ds[at])
        for key, at, func in tables.customs:
            customs[key] = MethodType(func, ds[at])
        self._handlers: dict[str, LineHandler] = handlers
        self._byte_handlers: dict[bytes, LineHandler] = byte_handlers
        self._customs: dict[str, Handler] = customs
        self.protect_ref = protect_ref
        self.max_line_bytes = max_line_bytes  # a longer (relevant) line is a reject
        self.result = UnitResult(facts=self.facts, retimes=self.untimed.retimes)

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
            feed, args, loads, here = self.feed, 0, orjson.loads, self.here
            steps = states = 0
            for i in kept:
                line = lines[i]
                if line.startswith(_ARGS) and (not limit or len(line) <= limit):
                    # Argument chunks stream one per token: the next-hottest line, so the
                    # checks of `_tool_args` are inlined here and the lines counted at once; a
                    # part of a call not open in this unit takes `feed`.
                    try:
                        obj = loads(line)
                        delta, call_id = obj["delta"], obj["toolCallId"]
                        call = here(call_id, obj) if isinstance(call_id, str) else None
                        if isinstance(delta, str) and call is not None:
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
                except LineError as e:
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
        except LineError as e:
            res.rejects.append(Reject(line_no, e.reason, e.error))

    def _count(self, kind: LineKind) -> None:
        res = self.result
        res.kinds[kind] += 1
        if kind in _SKIP_KINDS:
            res.skipped += 1
        else:
            res.accepted += 1

    def finish(self) -> UnitResult:
        self.finish_calls()
        return self.result

    # -- one line ----------------------------------------------------------------------

    def _line(self, n: int, obj: Any) -> LineKind:
        if not isinstance(obj, dict):
            raise LineError(RejectReason.NOT_OBJECT, f"not a JSON object but {type(obj).__name__}")
        typ = obj.get("type")
        if typ is None:
            if "threadId" in obj and "runId" in obj and "messages" in obj:
                if not self._agui:
                    raise self._refused("RunAgentInput", "agui")
                self.input(run_agent_input(obj, "RunAgentInput"), n, obj)
                return LineKind.INPUT
            raise LineError(
                RejectReason.UNKNOWN_SHAPE, 'unknown shape: no "type", and not a RunAgentInput'
            )
        if not isinstance(typ, str):
            raise LineError(RejectReason.UNKNOWN_SHAPE, '"type" is not a string')
        skipped = self._skipped_str.get(typ)
        if skipped is not None:
            return skipped
        handler = self._handlers.get(typ)
        if handler is None:
            raise LineError(RejectReason.UNKNOWN_TYPE, '"type" is not an AG-UI 1.0 event type')
        return handler(self, n, obj)

    # -- CUSTOM: sidewatch evidence events ------------------------------------------------

    def _custom(self, n: int, obj: dict[str, Any]) -> LineKind:
        name = need(obj, "name", "CUSTOM")
        if not name.startswith("sidewatch."):
            if not self._agui:  # on_interrupt, or the producer's own: AG-UI lines
                raise self._refused("CUSTOM", "agui")
            custom = self._customs.get(name)  # a dialect's event, or one nobody reads
            return LineKind.CUSTOM if custom is None else custom(self, n, obj)
        if name not in EVIDENCE_NAMES:  # the name is the producer's: never said back
            raise LineError(
                RejectReason.UNKNOWN_EVIDENCE, "CUSTOM: name: not a sidewatch.* evidence event"
            )
        if self.allowed is not None and name[10:] not in self.allowed:
            raise self._refused(name, name[10:])
        if "value" not in obj:
            raise LineError(RejectReason.INVALID_FIELD, f"{name}: value: Field required")
        at = self.at(obj)
        try:
            fact = read_evidence(
                name, obj["value"], at, self.seq_base + n, "timestamp" in obj, self.protect_ref
            )
        except EvidenceError as e:
            raise LineError(e.reason, f"{name}: {e}") from e
        self.emit(fact)
        # A route's channel that is not a code is kept as none; the route itself stands.
        if (
            isinstance(fact, SignalFact)
            and fact.kind is SignalKind.ROUTE
            and route_channel(obj["value"])[1]
        ):
            self.emit(
                FindingFact(
                    rule=FindingRule.ROUTE_CHANNEL_INVALID,
                    at=at,
                    seq=fact.seq,
                    thread_id=fact.thread_id,
                    interrupt_id=fact.interrupt_id,
                )
            )
        return LineKind.EVIDENCE

    def _refused(self, what: str, kind: str) -> LineError:
        """The reject of a line of a `kind` its sender may not send."""
        allowed = ", ".join(sorted(self.allowed or ()))
        return LineError(
            RejectReason.KIND_NOT_ALLOWED,
            f"{what}: a line of kind {kind}, which this token may not send (its kinds: {allowed})",
        )

    def _agui_refused(self, n: int, obj: dict[str, Any]) -> LineKind:
        """An AG-UI event from a sender whose token's kinds leave out `agui`. Its type is
        named only as a known one (a repeated "type" key may have parsed to another)."""
        typ = obj.get("type")
        raise self._refused(
            typ if isinstance(typ, str) and typ in self._handlers else "AG-UI", "agui"
        )


_GRAMMAR: dict[str, LineHandler] = {
    "RUN_STARTED": Interpreter.run_started,
    "RUN_FINISHED": Interpreter.run_finished,
    "RUN_ERROR": Interpreter.run_error,
    "TOOL_CALL_START": Interpreter.tool_start,
    "TOOL_CALL_ARGS": Interpreter.tool_args,
    "TOOL_CALL_END": Interpreter.tool_end,
    "TOOL_CALL_CHUNK": Interpreter.tool_chunk,
    "TOOL_CALL_RESULT": Interpreter.tool_result,
    "CUSTOM": Interpreter._custom,
}


@dataclass(frozen=True, slots=True)
class _Tables:
    """A unit's dispatch tables for one tuple of dialect classes: the grammar's handlers by
    type (str and bytes), and the dialects' own, bound to a unit's dialects when it is built
    (key, index of the dialect, its function)."""

    handlers: dict[str, LineHandler]
    byte_handlers: dict[bytes, LineHandler]
    bound: tuple[tuple[str, int, Callable[..., LineKind]], ...]
    customs: tuple[tuple[str, int, Callable[..., LineKind]], ...]


_TABLES: dict[tuple[tuple[type[Dialect], ...], bool], _Tables] = {}


def _tables(kinds: tuple[type[Dialect], ...], agui: bool, first: Interpreter) -> _Tables:
    """The tables of `kinds` (and whether AG-UI lines are allowed), read from the dialects of
    the first unit built with them (`first`): a dialect's handlers are its own methods, and
    which types and names it reads is its class's (never an instance's) to say."""
    found = _TABLES.get((kinds, agui))
    if found is not None:
        return found
    ds = first.dialects
    index = {id(d): i for i, d in enumerate(ds)}

    def unbound(d: Dialect, table: dict[str, Handler]) -> list[tuple[str, int, Any]]:
        out = []
        for key, handler in table.items():
            if not isinstance(handler, MethodType) or handler.__self__ is not d:
                raise TypeError(f"{type(d).__name__}: a handler that is not its own method")
            out.append((key, index[id(d)], handler.__func__))
        return out

    own: list[tuple[str, int, Any]] = []
    for d in first.event_hooks:
        own = [o for o in own if o[0] not in d.events()] + unbound(d, d.events())
    customs: list[tuple[str, int, Any]] = []
    for d in first.custom_hooks:
        customs = [c for c in customs if c[0] not in d.customs()] + unbound(d, d.customs())
    theirs = {o[0] for o in own}
    handlers: dict[str, LineHandler] = {k: v for k, v in _GRAMMAR.items() if k not in theirs}
    if not agui:
        # The same types for a sender that may not send AG-UI lines: each is refused, but a
        # CUSTOM event, which may be evidence of a kind it may send.
        handlers = {
            k: _GRAMMAR["CUSTOM"] if k == "CUSTOM" else Interpreter._agui_refused
            for k in (*_SKIPPED_STR, *_GRAMMAR, *(o[0] for o in own))
        }
        own = []
    found = _Tables(
        handlers, {k.encode(): v for k, v in handlers.items()}, tuple(own), tuple(customs)
    )
    _TABLES[(kinds, agui)] = found
    return found
