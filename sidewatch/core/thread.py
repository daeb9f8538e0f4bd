"""What the engine reads of a whole thread before its walk: the answers as they count (a
tool message naming a gated call aimed at that call's wait, a repeated tool-message answer
dropped), which gated calls each run answered and asked for, and the thread's subagents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from sidewatch.core.facts import (
    REASON_MASTRA,
    VIA_EDITED_LATER,
    VIA_GATED_CALL,
    VIA_LATER,
    VIA_TOOL_MESSAGE,
    AnswerFact,
    InterruptFact,
    LegacyResumeFact,
    SubagentFact,
    ThreadFacts,
)
from sidewatch.core.model import Code, SubagentState, SubagentStep, SubagentTrace


def answers_of(facts: ThreadFacts) -> tuple[AnswerFact, ...]:
    """The thread's answers as the walk matches them: those naming a gated call aimed at its
    wait, only the first tool-message answer of each interrupt, and no `resume[]` entry after
    its input's first naming a Mastra suspension (@ag-ui/mastra reads only the first)."""
    return _first_tool_message_answers(_by_gated_call(_mastra_first_entry(facts)))


def _mastra_first_entry(facts: ThreadFacts) -> ThreadFacts:
    """The facts without the later `resume[]` entries that name a Mastra suspension: Mastra's
    adapter resumes by the first entry only and ignores the rest (the suspension is asked
    again), so such an entry answers nothing, and its run is one that ignored the wait."""
    later = [a for a in facts.answers if a.via in (VIA_LATER, VIA_EDITED_LATER)]
    if not later:
        return facts
    mastra = {i.interrupt_id for i in facts.interrupts if i.reason == REASON_MASTRA}
    ignored = {id(a) for a in later if a.interrupt_id in mastra}
    if not ignored:
        return facts
    return replace(facts, answers=tuple(a for a in facts.answers if id(a) not in ignored))


@dataclass(frozen=True, slots=True)
class GatedCalls:
    """Which gated calls each run's input answered (`resume[]` entries and tool messages,
    by the interrupts' tool-call ids) and asked for (its interrupts), from the whole thread."""

    answered: dict[str, frozenset[str]]
    asked: dict[str, frozenset[str]]

    def others_reported(self, run: str, call: str | None, reported: set[str]) -> bool:
        """The run reported a result (one of `reported`) of another gated call its input
        answered, and did not ask for `call` again: evidence it drops `call` if it ends
        without that call's result."""
        if call is None or call in self.asked.get(run, ()):
            return False
        return any(c != call for c in self.answered.get(run, frozenset()) & reported)


def gated_calls(facts: ThreadFacts, answers: Iterable[AnswerFact]) -> GatedCalls:
    """Which gated tool calls each run of the thread was answered about, and which it asked
    for (announced a wait on), from the thread's interrupts and answers."""
    calls: dict[str, set[str]] = {}
    asked: dict[str, set[str]] = {}
    for i in facts.interrupts:
        if i.tool_call_id is not None:
            calls.setdefault(i.interrupt_id, set()).add(i.tool_call_id)
            asked.setdefault(i.run_id, set()).add(i.tool_call_id)
    answered: dict[str, set[str]] = {}
    for a in answers:
        answered.setdefault(a.run_id, set()).update(calls.get(a.interrupt_id, ()))
    return GatedCalls(
        {k: frozenset(v) for k, v in answered.items()},
        {k: frozenset(v) for k, v in asked.items()},
    )


@dataclass(frozen=True, slots=True)
class Subagents:
    """The thread's subagent invocations: each one's events, and which interrupt of which run
    a suspended one said it raised (`SUBAGENT_FINISHED` `outcome.interruptIds`)."""

    traces: dict[str, SubagentTrace]
    raised: dict[tuple[str, str], str]  # (run, interrupt id) -> subagentRunId

    def trace(self, f: InterruptFact) -> SubagentTrace | None:
        """The subagent that raised the wait `f` opens: the interrupt's own `subagentRunId`,
        else the earliest suspended subagent of its run that names it. Never a wait itself."""
        run_id = f.subagent_run_id
        if run_id is None:
            run_id = self.raised.get((f.run_id, f.interrupt_id))
            if run_id is None:
                return None
        return self.traces.get(run_id) or SubagentTrace(run_id)


def subagents_of(facts: Iterable[SubagentFact]) -> Subagents:
    """Every subagent invocation of the thread with its steps in (time, arrival) order."""
    steps: dict[str, list[SubagentStep]] = {}
    raised: dict[tuple[str, str], str] = {}
    for f in sorted(facts, key=lambda f: (f.at, f.seq)):
        steps.setdefault(f.subagent_run_id, []).append(
            SubagentStep(f.at, f.seq, f.state, f.run_id, f.name)
        )
        if f.state is SubagentState.SUSPENDED:
            for interrupt_id in f.interrupt_ids:
                raised.setdefault((f.run_id, interrupt_id), f.subagent_run_id)
    return Subagents({k: SubagentTrace(k, tuple(v)) for k, v in steps.items()}, raised)


def legacy_answer(
    lr: LegacyResumeFact, interrupt_id: str, code: Code, digest: str | None
) -> AnswerFact:
    """A legacy resume's answer of one wait (an entry of its map, or its one answer)."""
    return AnswerFact(
        thread_id=lr.thread_id,
        run_id=lr.run_id,
        interrupt_id=interrupt_id,
        code=code,
        at=lr.at,
        seq=lr.seq,
        digest=digest,
    )


def _by_gated_call(facts: ThreadFacts) -> tuple[AnswerFact, ...]:
    """Tool messages naming a wait by its gated call (Agent Framework's `confirm_changes`)
    as answers of that wait: the latest announced with that `toolCallId` at the answer, else
    the first one after it. One no interrupt gates stays an answer naming the call."""
    answers = facts.answers
    if not any(a.via == VIA_GATED_CALL for a in answers):
        return answers
    gating: dict[str, list[InterruptFact]] = {}
    for i in sorted(facts.interrupts, key=lambda i: (i.at, i.seq)):
        if i.tool_call_id is not None:
            gating.setdefault(i.tool_call_id, []).append(i)
    out = []
    for a in answers:
        if a.via != VIA_GATED_CALL:
            out.append(a)
            continue
        its = gating.get(a.interrupt_id, [])
        before = [i for i in its if (i.at, i.seq) <= (a.at, a.seq)]
        target = before[-1] if before else its[0] if its else None
        iid = a.interrupt_id if target is None else target.interrupt_id
        out.append(replace(a, interrupt_id=iid, via=VIA_TOOL_MESSAGE))
    return tuple(out)


def _first_tool_message_answers(answers: tuple[AnswerFact, ...]) -> tuple[AnswerFact, ...]:
    """Clients repeat a tool message's answer (ADK's confirmation, a frontend-tool wait's) in
    every later input's history: only the first answer for an interrupt counts; the repeats
    are not continuations."""
    if not answers:
        return answers
    seen: set[str] = set()
    kept = []
    for a in sorted(answers, key=lambda a: (a.at, a.seq)):
        if a.via == VIA_TOOL_MESSAGE:
            if a.interrupt_id in seen:
                continue
            seen.add(a.interrupt_id)
        kept.append(a)
    return tuple(kept) if len(kept) != len(answers) else answers
