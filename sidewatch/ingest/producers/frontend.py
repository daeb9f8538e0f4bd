"""Frontend tools (`waits.frontendTools`): a run that stopped on a frontend tool call ends in
success, the call left for the application (AG-UI 1.0's `pendingToolCallIds`, or derived from
the stream); where the config names the tool, the call is a wait whose answer is the next
input's `role: "tool"` message. Agent Framework's synthetic `confirm_changes` call repeats a
gated call that its 1.0 outcome announces: a tool message for it answers that wait, named by
the gated call's id. Registered only when the config names frontend tools."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import orjson

from sidewatch.core.facts import (
    REASON_FRONTEND_TOOL,
    VIA_GATED_CALL,
    VIA_TOOL_MESSAGE,
    AnswerFact,
    Fact,
)
from sidewatch.ingest.bounds import DIGEST_MAX
from sidewatch.ingest.fields import checked, checked_or_none
from sidewatch.ingest.openruns import RunHold
from sidewatch.ingest.outcome import pending_ids
from sidewatch.ingest.payload import NO_LABELS, Decision, Labels, decision_of
from sidewatch.ingest.producers.adk import ADK_CONFIRMATION, adk_answer
from sidewatch.ingest.producers.agent_framework import gated_call_of
from sidewatch.ingest.producers.base import Call, Dialect, Grammar, RunEnd

if TYPE_CHECKING:
    from ag_ui.core import RunAgentInput


def is_frontend_tool(name: str | None, patterns: Sequence[str]) -> bool:
    """A tool the config names as a frontend tool (glob patterns, case-sensitive, as policy
    `tools:`). ADK's confirmation call has its own reading and is never one."""
    return (
        name is not None
        and name != ADK_CONFIRMATION
        and any(fnmatchcase(name, p) for p in patterns)
    )


def history_calls(messages: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """The tool calls of the assistant messages of an input's history: id -> (name,
    arguments). The arguments are read only for `gated_call_of`, then dropped."""
    out: dict[str, tuple[str, str]] = {}
    for m in messages:
        if getattr(m, "role", None) != "assistant":
            continue
        for call in getattr(m, "tool_calls", None) or ():
            fn = getattr(call, "function", None)
            name, args = getattr(fn, "name", None), getattr(fn, "arguments", None)
            if isinstance(call.id, str) and isinstance(name, str):
                out[call.id] = (name, args if isinstance(args, str) else "")
    return out


def tool_message_call(message: Any) -> str | None:
    """The call id a `role: "tool"` message answers."""
    if getattr(message, "role", None) != "tool":
        return None
    call_id = getattr(message, "tool_call_id", None)
    return call_id if isinstance(call_id, str) else None


def tool_message_decision(content: Any, labels: Labels = NO_LABELS) -> Decision:
    """A frontend call's answer by the decision rules: the content is a JSON value (an object
    with `approved`, a boolean, a quoted word) or, when it is not JSON, a bare string."""
    value = content
    if isinstance(content, str):
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(content)
    return decision_of(value, labels)


HOLD = "frontend"  # its records in `openruns`: a thread's `_State` as tuples


class Frontend(Dialect):
    """The calls each run started, the (thread, run, call) results seen, the names of the
    frontend-tool calls ended, and the (thread, call) frontend waits announced: by thread
    across units (`openruns.py`: ids and tool names only), until the run's end."""

    def __init__(
        self, patterns: Sequence[str], labels: Labels = NO_LABELS, hold: RunHold | None = None
    ) -> None:
        self.patterns = tuple(patterns)  # glob patterns
        self.labels = labels
        self.hold = RunHold() if hold is None else hold
        self._run_calls: dict[tuple[str, str], list[str]] = {}
        self._results: set[tuple[str, str, str]] = set()
        self._waits: set[tuple[str, str]] = set()
        self._names: dict[tuple[str, str, str], str] = {}  # (thread, run, call) -> its tool
        # the calls the run being ended left, and whether they were derived from the stream
        self._left: tuple[list[str], bool] = ([], False)
        self._threads: set[str] = set()  # those whose records earlier units left are here

    def _thread(self, thread: str) -> None:
        """The thread's record left by earlier units, taken the first time."""
        if thread in self._threads:
            return
        self._threads.add(thread)
        calls, results, waits, names = self.hold.take(HOLD, thread) or ((), (), (), ())
        for run, ids in calls:
            self._run_calls[(thread, run)] = [*ids, *self._run_calls.get((thread, run), [])]
        self._results.update((thread, run, c) for run, c in results)
        self._waits.update((thread, c) for c in waits)
        self._names.update({(thread, run, c): name for run, c, name in names})

    def call_started(self, thread: str, run: str, call_id: str) -> None:
        self._thread(thread)
        self._run_calls.setdefault((thread, run), []).append(call_id)

    def call_ended(self, call_id: str, call: Call, args: str) -> None:
        """A frontend tool's call may be left by its run in a later unit: its name is kept."""
        if is_frontend_tool(call.name, self.patterns):
            self._thread(call.thread_id)
            self._names[(call.thread_id, call.run_id, call_id)] = call.name

    def result(self, thread: str, run: str, call_id: str) -> None:
        self._thread(thread)
        self._results.add((thread, run, call_id))

    def run_begun(self, g: Grammar, thread: str, run: str) -> None:
        """The thread moved on: what its runs not ended held is dropped (no wait is derived
        from a run whose end never came)."""
        self._thread(thread)
        self._forget(thread, lambda r: r != run)

    def _forget(self, thread: str, which: Callable[[str], bool]) -> None:
        """Drop what the thread's runs `which` holds."""
        for key in [k for k in self._run_calls if k[0] == thread and which(k[1])]:
            del self._run_calls[key]
        self._results -= {k for k in self._results if k[0] == thread and which(k[1])}
        for name_key in [k for k in self._names if k[0] == thread and which(k[1])]:
            del self._names[name_key]

    def finish(self, g: Grammar) -> None:
        """Left for the next units: the thread's calls by run, results, names and waits."""
        for thread in self.hold.closed(HOLD):  # a closing unit takes every thread's
            self._thread(thread)
        self.hold.overdue(HOLD)  # pushed out by the bound: no wait is derived from them
        if self.hold.alone:
            return
        rec: dict[str, tuple[list[Any], list[Any], list[Any], list[Any]]] = {
            t: ([], [], [], []) for t in self._threads
        }
        for (thread, run), ids in self._run_calls.items():
            rec.setdefault(thread, ([], [], [], []))[0].append((run, tuple(ids)))
        for thread, run, call_id in self._results:
            rec.setdefault(thread, ([], [], [], []))[1].append((run, call_id))
        for thread, call_id in self._waits:
            rec.setdefault(thread, ([], [], [], []))[2].append(call_id)
        for (thread, run, call_id), name in self._names.items():
            rec.setdefault(thread, ([], [], [], []))[3].append((run, call_id, name))
        for thread, parts in rec.items():
            kept = tuple(tuple(p) for p in parts)
            self.hold.leave(HOLD, thread, kept if any(kept) else ())

    def run_ending(self, thread: str, run: str, outcome: Any, success: bool) -> None:
        self._thread(thread)
        pending = pending_ids(outcome) if success else []  # may reject the line
        started = self._run_calls.pop((thread, run), [])
        self._left = (pending or started, not pending)

    def run_ended(self, g: Grammar, end: RunEnd) -> bool:
        """A run that ended in success left calls for the application: those its outcome's
        `pendingToolCallIds` names, else (`derived`) the calls it started with no result in
        it. Each one of a tool the config names is a wait, whose id is the call's."""
        (left, derived), self._left = self._left, ([], False)
        if not end.success:
            self._forget(end.thread, lambda r: r == end.run)
            return False
        thread, run = end.thread, end.run
        announced = False
        for call_id in dict.fromkeys(left):
            if derived and (thread, run, call_id) in self._results:
                continue
            open_call = g.calls.get(call_id)
            if open_call is not None and open_call.thread_id == thread:
                g.end_call(call_id)  # a stream cut before TOOL_CALL_END
            call = g.ended_call(thread, run, call_id)
            # ended in an earlier unit: its tool's name was kept (its action and digest are
            # its stored call's, which the engine reads by the wait's toolCallId)
            name = call[0].name if call is not None else self._names.get((thread, run, call_id))
            if name is None or not is_frontend_tool(name, self.patterns):
                continue
            self._waits.add((thread, call_id))
            g.announce_call(thread, run, call_id, end.at, end.seq, REASON_FRONTEND_TOOL)
            announced = True
        self._forget(thread, lambda r: r == run)
        return announced

    def input(
        self, g: Grammar, inp: RunAgentInput, thread: str, run: str, at: int, seq: int
    ) -> Sequence[Fact]:
        """The input's `role: "tool"` messages for calls of a frontend tool (named so by the
        history's assistant message, or announced as a wait in this unit), read by the
        decision rules; the content is then dropped. A tool message for `confirm_changes`
        answers the wait of the gated call it repeats."""
        calls = history_calls(inp.messages)
        out: list[Fact] = []
        self._thread(thread)
        for i, m in enumerate(inp.messages):
            call_id = tool_message_call(m)
            if call_id is None or adk_answer(m) is not None:  # ADK's is read already
                continue
            name, args = calls.get(call_id, (None, None))
            if (thread, call_id) not in self._waits and not is_frontend_tool(name, self.patterns):
                continue
            decision = tool_message_decision(getattr(m, "content", None), self.labels)
            gated = gated_call_of(name, args)
            where = f"RunAgentInput: messages.{i}"
            target = checked(gated or call_id, f"{where}: toolCallId")
            checked_or_none(decision.digest, f"{where}: approvedActionFingerprint", DIGEST_MAX)
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
