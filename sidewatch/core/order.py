"""The order of the engine's walk: every fact of a thread as a step at its position (time,
arrival, kind, index, sub-index). At one instant the announcements come first, then the
questions asked of the waits as they were just before it, then the items (in the order a
timeline lists them)."""

from __future__ import annotations

from sidewatch.core.facts import AnswerFact, RunMark, ThreadFacts
from sidewatch.core.model import Code, RunStep

Pos = tuple[int, int, int, int, int]  # at, seq, kind, index, sub-index: the walk's order
Step = tuple[Pos, object]

# The kinds of step, in their order at one instant (see the module's head).
INTERRUPT, LEGACY, LONE, INPUT = 0, 1, 2, 3
SIGNAL, ANSWER, LEGACY_ANSWER, HEARTBEAT, RUN, TOOL_RESULT, LONE_ANSWER = range(10, 17)

# The marks of a run that are a step of it, as a wait's timeline names them.
RUN_STEPS = {
    RunMark.STARTED: RunStep.STARTED,
    RunMark.FINISHED: RunStep.FINISHED,
    RunMark.INTERRUPTED: RunStep.INTERRUPTED,
    RunMark.ERROR: RunStep.ERROR,
}

LegacyEntries = list[tuple[str, Code, str | None]]  # interrupt id, answer, digest


def ordered_steps(
    facts: ThreadFacts, answers: tuple[AnswerFact, ...], known: set[str], hashed: dict[str, str]
) -> list[Step]:
    """Every fact of the thread (its `answers` as they count) as a step, in the walk's order.
    A legacy resume carries its entries that name an interrupt of the thread (`known`, by
    their `hashed` keys); an answer naming no known interrupt in a run that finished with no
    other answer is also a LONE step (the lone-answer rule)."""
    finished = {r.run_id for r in facts.runs if r.mark is RunMark.FINISHED}
    # A run's answers for the lone-answer rule, counted before legacy resumes resolve.
    counts: dict[str, int] = {}
    for a in answers:
        counts[a.run_id] = counts.get(a.run_id, 0) + 1
    legacy_entries: list[LegacyEntries] = []
    for lr in facts.legacy_resumes:
        entries = [(hashed[h], c, d) for h, c, d in lr.entries if h in hashed]
        legacy_entries.append(entries)
        counts[lr.run_id] = counts.get(lr.run_id, 0) + max(len(entries), 1)

    out: list[Step] = []
    for n, f in enumerate(facts.interrupts):
        out.append(((f.at, f.seq, INTERRUPT, n, 0), f))
    for n, lr in enumerate(facts.legacy_resumes):
        out.append(((lr.at, lr.seq, LEGACY, n, 0), (lr, legacy_entries[n])))
    for n, a in enumerate(answers):
        out.append(((a.at, a.seq, ANSWER, n, 0), a))
        if a.interrupt_id not in known and a.run_id in finished and counts[a.run_id] == 1:
            out.append(((a.at, a.seq, LONE, n, 0), a))
    for n, r in enumerate(facts.runs):
        if r.mark is RunMark.INPUT:
            out.append(((r.at, r.seq, INPUT, n, 0), r))
        elif r.mark in RUN_STEPS:
            out.append(((r.at, r.seq, RUN, n, 0), r))
    for n, s in enumerate(facts.signals):
        out.append(((s.at, s.seq, SIGNAL, n, 0), s))
    for n, h in enumerate(facts.heartbeats):
        out.append(((h.at, h.seq, HEARTBEAT, n, 0), h))
    for n, t in enumerate(facts.tool_results):
        out.append(((t.at, t.seq, TOOL_RESULT, n, 0), t))
    out.sort(key=lambda s: s[0])
    return out
