"""The AG-UI 1.0 grammar of a unit: runs, inputs and their `resume[]` answers, tool calls and
1.0 interrupt outcomes, read into content-free facts. Producers' dialects (`producers/`) are
called at fixed points through their hooks; nothing here knows a producer by name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sidewatch.core.facts import (
    VIA_EDITED,
    VIA_EDITED_LATER,
    VIA_LATER,
    AnswerFact,
    Fact,
    FindingFact,
    InterruptFact,
    RunFact,
    RunMark,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code
from sidewatch.core.vocab import FindingRule, LineKind, RejectReason
from sidewatch.ingest.bounds import DIGEST_MAX, TIME_RANGE, time_ok
from sidewatch.ingest.digest import action_digest
from sidewatch.ingest.fields import (
    LineError,
    checked,
    checked_or_none,
    need,
    parse_time,
    run_agent_input,
    stored_id,
    str_or_none,
)
from sidewatch.ingest.opencalls import Key, OpenCalls
from sidewatch.ingest.openruns import RunHold
from sidewatch.ingest.outcome import Interrupt, check_interrupt, interrupts, meta_digest
from sidewatch.ingest.payload import Decision, decision_of
from sidewatch.ingest.producers.base import (
    Announcement,
    Call,
    Dialect,
    Gate,
    RunEnd,
    plan,
)
from sidewatch.ingest.tracectx import TraceReader
from sidewatch.ingest.untimed import UntimedInputs

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput

    from sidewatch.ingest.payload import Labels


class AguiGrammar:
    """The state of one unit's reading and the handlers of the grammar's events. `received_at`
    stands in for missing timestamps; facts get `seq = seq_base + line`."""

    def __init__(
        self,
        received_at: int,
        seq_base: int,
        labels: Labels,
        dialects: Sequence[Dialect],
        open_calls: OpenCalls | None = None,
        hold: RunHold | None = None,
    ) -> None:
        self.received_at = received_at
        self.seq_base = seq_base
        self.labels = labels  # the policies' own decision labels (`decisions:`)
        self.facts: list[Fact] = []
        self._traces = TraceReader()  # the runs' W3C trace contexts (ingest.tracectx)
        self.dialects = tuple(dialects)
        # each hook is called only on the dialects that have it, in their order
        ds = self.dialects
        hooked = {h: [ds[i] for i in at] for h, at in plan(tuple(map(type, ds))).items()}
        self._on_start = [d.call_started for d in hooked["call_started"]]
        self._on_end = [d.call_ended for d in hooked["call_ended"]]
        self._on_result = [d.result for d in hooked["result"]]
        self._gates = [d.gate for d in hooked["gate"]]
        self._on_begun = [d.run_begun for d in hooked["run_begun"]]
        self._on_ending = [d.run_ending for d in hooked["run_ending"]]
        self._on_ended = [d.run_ended for d in hooked["run_ended"]]
        self._on_finish = [d.finish for d in hooked["finish"]]
        self._before_resume = hooked["before_resume"]
        self._after_resume = hooked["after_resume"]
        self.event_hooks = hooked["events"]  # the dialects that read events of their own
        self.custom_hooks = hooked["customs"]
        # A unit may hold several threads, and they may reuse run and tool-call ids: every
        # map of run or call ids is keyed with the thread too.
        self._ctx: tuple[str, str] | None = None  # (thread, run) of the latest start or input
        self._threads: dict[str, set[str]] = {}  # run -> the threads using it in this unit
        self.calls: dict[str, Call] = {}  # open tool calls: arguments held in memory only
        # The calls earlier units left open (none: this unit's only), those this unit took
        # from them, and those it leaves open for the next: `OpenCalls.settle`, once committed.
        self.open_calls = OpenCalls() if open_calls is None else open_calls
        self.took: set[Key] = set()
        self.left: list[tuple[str, Call]] = []
        # What the dialects hold for a run's end across units (`openruns.py`): the same
        # view as theirs, settled once the unit is committed.
        self.hold = RunHold() if hold is None else hold
        # ended calls by (thread, run, call id): name and digest; those an interrupt claimed
        self._ended: dict[tuple[str, str, str], tuple[Call, str]] = {}
        self._claimed: set[tuple[str, str, str]] = set()
        # inputs with no time, here and stored by earlier units, for their run's start
        self.untimed = UntimedInputs(self.hold)

    def finish_calls(self) -> None:
        """The unit ended: the dialects' held waits, then every call still open, and the
        calls no interrupt of this unit claimed (name and digest only), for an interrupt
        that may arrive in a later unit."""
        for finish in self._on_finish:
            finish(self)
        self.untimed.finish()
        # A call still open is held for its ARGS and END in a later unit (a call whose run
        # ended was ended with it: a stream cut before TOOL_CALL_END still has an action).
        self.left = list(self.calls.items())
        self.calls.clear()
        for (thread, run, call_id), (call, digest) in self._ended.items():
            if (thread, run, call_id) in self._claimed:
                continue
            self.emit(
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
        self._claimed.clear()

    # -- the services of the grammar (to the dialects, too) ----------------------------

    def at(self, obj: dict[str, Any]) -> int:
        """The line's time: its `timestamp` (ms since the epoch), else `received_at`."""
        ts = obj.get("timestamp")
        if ts is None:
            return self.received_at
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise LineError(
                RejectReason.INVALID_FIELD, "timestamp: must be an integer (ms since the epoch)"
            )
        if not time_ok(ts):  # before the type: 1e17 is a time in µs more than a float
            raise LineError(
                RejectReason.TIME_OUT_OF_RANGE,
                f"timestamp: must be ms since the epoch {TIME_RANGE}",
            )
        if not isinstance(ts, int):
            raise LineError(
                RejectReason.INVALID_FIELD, "timestamp: must be an integer (ms since the epoch)"
            )
        return ts

    def run(self, obj: dict[str, Any], what: str) -> tuple[str, str]:
        """The (thread, run) a line belongs to: named on it, else the one in context."""
        thread, run = obj.get("threadId"), obj.get("runId")
        if isinstance(thread, str):
            checked(thread, f"{what}: threadId")
        if isinstance(run, str):
            checked(run, f"{what}: runId")
        if isinstance(thread, str) and isinstance(run, str):
            return thread, run
        if isinstance(run, str):  # a run named inline is that run, never the one in context
            if self._ctx is not None and self._ctx[1] == run:
                return self._ctx
            known = self._threads.get(run, set())
            if len(known) != 1:
                raise LineError(
                    RejectReason.NO_RUN_CONTEXT,
                    f"{what} names a runId which this unit has not started: add its threadId"
                    if not known
                    else f"{what} names a runId which several threads of this unit use: "
                    "add its threadId",
                )
            return next(iter(known)), run
        if isinstance(thread, str) and (self._ctx is None or self._ctx[0] != thread):
            raise LineError(
                RejectReason.NO_RUN_CONTEXT,
                f"{what} names a threadId but no runId, and the run in context is of "
                "another thread",
            )
        if self._ctx is None:
            raise LineError(
                RejectReason.NO_RUN_CONTEXT,
                f"{what} needs a run: no threadId/runId on it and no RUN_STARTED or "
                "RunAgentInput before it in this unit",
            )
        return self._ctx

    def _set_ctx(self, thread: str, run: str) -> None:
        if self._ctx != (thread, run):
            for begun in self._on_begun:
                begun(self, thread, run)
        self._ctx = (thread, run)
        self._threads.setdefault(run, set()).add(thread)

    def emit(self, fact: Fact) -> None:
        self.facts.append(fact)

    def finding(
        self, rule: FindingRule, thread: str, run: str, at: int, seq: int, interrupt_id: str | None
    ) -> None:
        """A finding of `rule` on the line at `at`, `seq`, about `interrupt_id` or, with
        none, the run."""
        self.emit(
            FindingFact(
                rule=rule, at=at, seq=seq, thread_id=thread, run_id=run, interrupt_id=interrupt_id
            )
        )

    # -- runs and inputs ----------------------------------------------------------------

    def input(self, inp: RunAgentInput, n: int, obj: dict[str, Any]) -> None:
        """A `RunAgentInput`. Every value is read and checked before the first fact: a
        rejected line leaves none."""
        at, seq = self.at(obj), self.seq_base + n
        thread = checked(inp.thread_id, "RunAgentInput: threadId")
        run = checked(inp.run_id, "RunAgentInput: runId")
        facts: list[Fact] = [
            RunFact(run_id=run, thread_id=thread, mark=RunMark.INPUT, at=at, seq=seq)
        ]
        for d in self._before_resume:
            facts += d.input(self, inp, thread, run, at, seq)
        for i, entry in enumerate(inp.resume or ()):
            if entry.status == "cancelled":
                decision = Decision(Code.CANCEL)
            else:
                decision = decision_of(entry.payload, self.labels)
            code, digest = decision.code, decision.digest
            where = f"RunAgentInput: resume.{i}"
            interrupt_id = checked(entry.interrupt_id, f"{where}: interruptId")
            checked_or_none(digest, f"{where}: payload.approvedActionFingerprint", DIGEST_MAX)
            facts.append(
                AnswerFact(
                    thread_id=thread,
                    run_id=run,
                    interrupt_id=interrupt_id,
                    code=code,
                    at=at,
                    seq=seq,
                    digest=digest,
                    # an entry after the first says so (Mastra reads the first only)
                    via=(VIA_EDITED_LATER if i else VIA_EDITED)
                    if decision.edited
                    else (VIA_LATER if i else "resume"),
                )
            )
        for d in self._after_resume:
            facts += d.input(self, inp, thread, run, at, seq)
        facts += self._traces.facts(obj, thread, run, at, seq)
        self._set_ctx(thread, run)
        if obj.get("timestamp") is None:
            start = len(self.facts)
            self.untimed.input(thread, run, start, start + len(facts))
        self.facts.extend(facts)

    def run_started(self, n: int, obj: dict[str, Any]) -> LineKind:
        thread = stored_id(obj, "threadId", "RUN_STARTED")
        run = stored_id(obj, "runId", "RUN_STARTED")
        at = self.at(obj)
        self._set_ctx(thread, run)
        if obj.get("input") is not None:
            inp = run_agent_input(obj["input"], "RUN_STARTED: input")
            self.input(inp, n, {"timestamp": obj.get("timestamp")})
        # An input with no time takes its run's start time (ingest/untimed.py); after the
        # input this line echoes, which is timed by it (or, untimed, is then not remembered).
        self.untimed.started(thread, run, None if obj.get("timestamp") is None else at, self.facts)
        self.emit(
            RunFact(
                run_id=run, thread_id=thread, mark=RunMark.STARTED, at=at, seq=self.seq_base + n
            )
        )
        self.facts.extend(self._traces.facts(obj, thread, run, at, self.seq_base + n))
        return LineKind.RUN

    def run_finished(self, n: int, obj: dict[str, Any]) -> LineKind:
        thread = stored_id(obj, "threadId", "RUN_FINISHED")
        run = stored_id(obj, "runId", "RUN_FINISHED")
        at, seq = self.at(obj), self.seq_base + n
        self._threads.setdefault(run, set()).add(thread)
        outcome = obj.get("outcome")
        kind = outcome.get("type") if isinstance(outcome, dict) else outcome
        success = kind is None or kind == "success"
        for ending in self._on_ending:  # before any fact
            ending(thread, run, outcome, success)
        if not success and kind not in ("cancelled", "interrupt"):
            raise LineError(
                RejectReason.INVALID_FIELD,
                "RUN_FINISHED: outcome.type: must be success, interrupt or cancelled",
            )
        empty = kind == "interrupt" and isinstance(outcome, dict) and not outcome.get("interrupts")
        read = interrupts(outcome) if kind == "interrupt" and not empty else []
        for i, it in enumerate(read):  # all checked before the first fact
            check_interrupt(it, f"RUN_FINISHED: outcome.interrupts.{i}")
        self._end_run_calls(thread, run)
        if success:
            announced = self._run_ended(RunEnd(thread, run, at, seq, True, outcome))
            self.emit(RunFact(run_id=run, thread_id=thread, mark=RunMark.FINISHED, at=at, seq=seq))
            return LineKind.INTERRUPT if announced else LineKind.RUN
        if kind == "cancelled":
            self._run_ended(RunEnd(thread, run, at, seq, False, outcome))
            self.emit(RunFact(run_id=run, thread_id=thread, mark=RunMark.CANCELLED, at=at, seq=seq))
            return LineKind.RUN
        if empty:
            # The protocol requires at least one interrupt; the run still ended.
            self.finding(FindingRule.INTERRUPT_OUTCOME_EMPTY, thread, run, at, seq, None)
            self.emit(
                RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=seq)
            )
            self._run_ended(RunEnd(thread, run, at, seq, False, outcome))
            return LineKind.INTERRUPT
        self.emit(RunFact(run_id=run, thread_id=thread, mark=RunMark.INTERRUPTED, at=at, seq=seq))
        seen: set[str] = set()
        for it in read:
            if it.id in seen:
                self.finding(FindingRule.DUPLICATE_INTERRUPT_ID, thread, run, at, seq, it.id)
            seen.add(it.id)
            self._announce_interrupt(thread, run, at, seq, it)
        self._run_ended(RunEnd(thread, run, at, seq, False, outcome, tuple(read)))
        return LineKind.INTERRUPT

    def _end_run_calls(self, thread: str, run: str) -> None:
        """A run ended: its calls still open, here or held from an earlier unit, end with it
        (wherever the stream is cut, the same calls end at the same line)."""
        for call_id, call in list(self.calls.items()):
            if (call.thread_id, call.run_id) == (thread, run):
                self.end_call(call_id)
        for call_id in self.open_calls.of_run(thread, run):
            if self._adopt(thread, call_id) is not None:
                self.end_call(call_id)

    def _run_ended(self, end: RunEnd) -> bool:
        """Every dialect's hook (each one runs); whether one announced a wait by the end."""
        announced = [ended(self, end) for ended in self._on_ended]
        return any(announced)

    def _announce_interrupt(self, thread: str, run: str, at: int, seq: int, it: Interrupt) -> None:
        self.announce(
            Announcement(
                thread,
                run,
                it.id,
                at,
                seq,
                it.reason,
                it.tool_call_id,
                expires_raw=it.expires_at,
                meta=it.meta,
                subagent_run_id=it.subagent_run_id,
            )
        )

    def announce_call(
        self, thread: str, run: str, call_id: str, at: int, seq: int, reason: str
    ) -> None:
        """A wait announced by a tool call alone (ADK's confirmation, a frontend tool): its
        interrupt id is the call's id."""
        self.announce(Announcement(thread, run, call_id, at, seq, reason, call_id))

    def announce(self, wait: Announcement) -> None:
        """One interrupt of a run, as a fact: its action is the gated call seen in this unit
        (or a dialect's own), its digest the producer's fingerprint or the computed one."""
        thread, run, expires_raw = wait.thread, wait.run, wait.expires_raw
        tool_call_id, action, digest = wait.tool_call_id, wait.action, wait.digest
        meta = {} if wait.meta is None else wait.meta
        gate = self._gate(thread, tool_call_id, meta)
        if gate is not None and gate.call is not None:  # a dialect names the gated call
            tool_call_id, action, digest = gate.call.call_id, gate.call.name, gate.call.digest
        elif tool_call_id is not None and action is None:
            open_call = self.calls.get(tool_call_id)
            if open_call is None or open_call.thread_id != thread:
                open_call = self._adopt(thread, tool_call_id)
            if open_call is not None and open_call.thread_id == thread:
                self.end_call(tool_call_id)
            claimed = self._claim(thread, run, tool_call_id)
            if claimed is not None:
                action, digest = claimed[0].name, digest or claimed[1]
        expires = parse_time(expires_raw) if expires_raw is not None else None
        if expires_raw is not None and expires is None:
            rule = FindingRule.EXPIRES_AT_UNPARSABLE
            self.finding(rule, thread, run, wait.at, wait.seq, wait.interrupt_id)
        self.emit(
            InterruptFact(
                thread_id=thread,
                run_id=run,
                interrupt_id=wait.interrupt_id,
                at=wait.at,
                seq=wait.seq,
                reason=wait.reason,
                tool_call_id=tool_call_id,
                expires_at=expires,
                digest=meta_digest(meta) or digest,
                handle=(None if "resumeHandle" not in meta else bool(meta["resumeHandle"])),
                request_id=str_or_none(meta.get("requestId")),
                action=action,
                tool_result_receipt=gate is not None and gate.receipt,
                subagent_run_id=wait.subagent_run_id,
            )
        )

    def _gate(self, thread: str, tool_call_id: str | None, meta: dict[str, Any]) -> Gate | None:
        """The first dialect's reading of what the interrupt gates."""
        for gate in self._gates:
            found = gate(thread, tool_call_id, meta)
            if found is not None:
                return found
        return None

    def _claim(self, thread: str, run: str, call_id: str) -> tuple[Call, str] | None:
        """The ended call an interrupt gates: of its own run, else the thread's latest one
        with that id (never another thread's: producers reuse call ids across threads). A
        claimed call stays for a later interrupt naming it, as its fact would in the store."""
        key = (thread, run, call_id)
        if key not in self._ended:
            key = next(
                (k for k in reversed(self._ended) if k[0] == thread and k[2] == call_id), key
            )
        claimed = self._ended.get(key)
        if claimed is not None:
            self._claimed.add(key)
        return claimed

    def ended_call(self, thread: str, run: str, call_id: str) -> tuple[Call, str] | None:
        """`_claim`'s call, left in place."""
        call = self._ended.get((thread, run, call_id))
        if call is None:  # started by an earlier run of the unit
            ended = reversed(self._ended.items())
            call = next((v for k, v in ended if k[0] == thread and k[2] == call_id), None)
        return call

    def run_error(self, n: int, obj: dict[str, Any]) -> LineKind:
        need(obj, "message", "RUN_ERROR")  # read for validity only: never kept
        thread, run = self.run(obj, "RUN_ERROR")
        at = self.at(obj)
        self._end_run_calls(thread, run)
        self.emit(
            RunFact(
                run_id=run,
                thread_id=thread,
                mark=RunMark.ERROR,
                at=at,
                seq=self.seq_base + n,
            )
        )
        return LineKind.RUN

    # -- tool calls: only the name and digest survive ----------------------------------

    def tool_start(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id = stored_id(obj, "toolCallId", "TOOL_CALL_START")
        name = stored_id(obj, "toolCallName", "TOOL_CALL_START")
        thread, run = self.run(obj, "TOOL_CALL_START")
        at = self.at(obj)
        self._adopt(thread, call_id)  # held from an earlier unit: this start takes its place
        self._end_other_run(call_id, thread, run)
        self._start_call(call_id, Call(name, thread, run, at, self.seq_base + n, []))
        return LineKind.TOOL_CALL

    def _start_call(self, call_id: str, call: Call) -> None:
        self.calls[call_id] = call
        for started in self._on_start:
            started(call.thread_id, call.run_id, call_id)

    def tool_args(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id, delta = obj.get("toolCallId"), obj.get("delta")
        if not isinstance(call_id, str) or not isinstance(delta, str):
            raise LineError(
                RejectReason.INVALID_FIELD, "TOOL_CALL_ARGS: toolCallId and delta must be strings"
            )
        call = self._part(n, obj, call_id, "TOOL_CALL_ARGS")
        if call is not None:
            call.args.append(delta)
        return LineKind.TOOL_CALL

    def tool_end(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id = need(obj, "toolCallId", "TOOL_CALL_END")
        if self._part(n, obj, call_id, "TOOL_CALL_END") is not None:
            self.end_call(call_id)
        return LineKind.TOOL_CALL

    def tool_chunk(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id, name, delta = obj.get("toolCallId"), obj.get("toolCallName"), obj.get("delta")
        if not isinstance(call_id, str):
            return LineKind.TOOL_CALL
        call = self.here(call_id, obj)
        if call is None:
            checked(call_id, "TOOL_CALL_CHUNK: toolCallId")
            thread, run = self.run(obj, "TOOL_CALL_CHUNK")
            call = self._adopt(thread, call_id)
            if call is None and isinstance(name, str):  # the first chunk of a call
                checked(name, "TOOL_CALL_CHUNK: toolCallName")
                call = Call(name, thread, run, self.at(obj), self.seq_base + n, [])
                self._start_call(call_id, call)
            elif call is None:
                rule = FindingRule.ORPHAN_TOOL_CALL_PART
                self.finding(rule, thread, run, self.at(obj), self.seq_base + n, None)
        if call is not None and isinstance(delta, str):
            call.args.append(delta)
        return LineKind.TOOL_CALL

    def here(self, call_id: str, obj: dict[str, Any]) -> Call | None:
        """The call of this unit a part belongs to: open with its id, of the thread the part
        names if it names one."""
        call = self.calls.get(call_id)
        named = obj.get("threadId")
        if call is None or (isinstance(named, str) and named != call.thread_id):
            return None
        return call

    def _part(self, n: int, obj: dict[str, Any], call_id: str, what: str) -> Call | None:
        """The open call an ARGS or END line belongs to, by (thread, call id): of this unit,
        else held from an earlier one; a part of a call never started is a finding."""
        call = self.here(call_id, obj)
        if call is not None:
            return call
        thread, run = self.run(obj, what)
        call = self._adopt(thread, call_id)
        if call is None:
            rule = FindingRule.ORPHAN_TOOL_CALL_PART
            self.finding(rule, thread, run, self.at(obj), self.seq_base + n, None)
        return call

    def _adopt(self, thread: str, call_id: str) -> Call | None:
        """The call an earlier unit left open, now this unit's (None: none held, or taken
        already). Another thread's call open here with the id is ended first."""
        if (thread, call_id) in self.took:
            return None
        held = self.open_calls.get(thread, call_id)
        if held is None:
            return None
        if call_id in self.calls:
            self.end_call(call_id)
        self.took.add((thread, call_id))
        self.calls[call_id] = held
        return held

    def tool_result(self, n: int, obj: dict[str, Any]) -> LineKind:
        call_id = stored_id(obj, "toolCallId", "TOOL_CALL_RESULT")
        thread, run = self.run(obj, "TOOL_CALL_RESULT")
        for result in self._on_result:
            result(thread, run, call_id)
        self.emit(
            ToolResultFact(
                thread_id=thread,
                run_id=run,
                tool_call_id=call_id,
                at=self.at(obj),
                seq=self.seq_base + n,
            )
        )
        return LineKind.TOOL_CALL

    def _end_other_run(self, call_id: str, thread: str, run: str) -> None:
        """A call id still open in another thread or run (producers reuse call ids across
        threads) is ended before the new call takes the id, so that it is kept, not lost."""
        open_call = self.calls.get(call_id)
        if open_call is not None and (open_call.thread_id, open_call.run_id) != (thread, run):
            self.end_call(call_id)

    def end_call(self, call_id: str) -> None:
        """A call ended (or is taken as ended): its name and digest are kept."""
        call = self.calls.pop(call_id, None)
        if call is None:
            return
        args = "".join(call.args)  # dropped at the end of this method, once digested
        self._ended[(call.thread_id, call.run_id, call_id)] = (call, action_digest(call.name, args))
        for ended in self._on_end:
            ended(call_id, call, args)
