"""The reference the engine is checked against: the straightforward assemble-then-replay that
`core/assemble.py` was, rebuilding a wait's evidence and classifying it from scratch whenever
it asks "was it open then?". Quadratic, and only for tests.

Where the old result depended only on the order in which it was built, this reference takes
the one-pass reading (every existing test passes either way):

1. Interrupts, legacy resumes and lone answers are resolved in one (time, arrival) order, and
   every "was it open then?" sees everything matched before that instant: the re-announcement
   check sees legacy and lone answers, a legacy resume sees lone answers, a lone answer sees
   the other lone answers, and `run_ignores_open_interrupt` sees lone answers.
2. The lone-answer rule counts a run's answers without waiting for its legacy resumes to be
   resolved: each legacy resume of the run counts as its entries that name an interrupt of
   the thread, or as one answer when none does.
3. A requestId names the earliest announced wait that carries it.
4. A run that announces a wait again counts for it from that announcement on: its heartbeats
   and its RUN_FINISHED before that instant are not the wait's (a wait's own first run counts
   whenever).
5. A tool message naming a wait by its gated call (`via: gated_call`, Agent Framework's
   `confirm_changes`) is, before anything else, an answer of the interrupt that gates that
   call (the latest announced by then, else the first after), as a tool message.

A wait a later run moved past unanswered and that a run's answer then reopens (issue 31) needs
nothing of its own here: the reference feeds a wait every later run's steps and classifies
with the same health model, so "was it open then?" sees it closed from the move to the answer
and open after it, as the engine's walk does (tests/core/test_late_answers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sidewatch.core.facts import (
    VIA_EDITED,
    VIA_EDITED_LATER,
    VIA_LATER,
    AnswerFact,
    FindingFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
    key_hash,
)
from sidewatch.core.health import Replay, classify
from sidewatch.core.model import (
    CLOSED_STATES,
    ActionChange,
    Code,
    Decision,
    Heartbeat,
    Item,
    Receipt,
    Route,
    RunEvent,
    RunStep,
    SubagentState,
    SubagentStep,
    SubagentTrace,
    Verdict,
    WaitEvidence,
)
from sidewatch.core.policy import Policy

PolicyFor = Callable[[str | None, str | None], Policy]
Key = tuple[int, int]

_RUN_STEPS = {
    RunMark.STARTED: RunStep.STARTED,
    RunMark.FINISHED: RunStep.FINISHED,
    RunMark.INTERRUPTED: RunStep.INTERRUPTED,
    RunMark.ERROR: RunStep.ERROR,
}


@dataclass(slots=True)
class _Wait:
    first: InterruptFact
    request_id: str
    action: str | None
    digest: str | None
    runs: dict[str, Key] = field(default_factory=dict)  # run → when it announced the wait

    @property
    def key(self) -> Key:
        return (self.first.at, self.first.seq)


@dataclass(frozen=True, slots=True)
class ThreadWaits:
    waits: tuple[WaitEvidence, ...]
    findings: tuple[FindingFact, ...]


@dataclass(slots=True)
class _Built:
    """What is known at one point of the walk."""

    facts: ThreadFacts
    by_id: dict[str, list[_Wait]] = field(default_factory=dict)
    waits: list[_Wait] = field(default_factory=list)
    extra: list[tuple[_Wait, Decision]] = field(default_factory=list)  # lone answers
    # run → the gated calls its input answered (resume[] and tool messages), and asked for
    answered_calls: dict[str, set[str]] = field(default_factory=dict)
    asked_calls: dict[str, set[str]] = field(default_factory=dict)


def oracle_verdicts(
    facts: ThreadFacts, policy_for: PolicyFor, now: int
) -> tuple[list[tuple[WaitEvidence, Verdict]], tuple[FindingFact, ...]]:
    """Assemble, then classify each wait at `now`."""
    tw = assemble(facts, policy_for)
    return [(ev, classify(ev, policy_for(ev.action, ev.reason), now)) for ev in tw.waits], (
        tw.findings
    )


def assemble(facts: ThreadFacts, policy_for: PolicyFor) -> ThreadWaits:
    """Every wait of the thread with its timeline, in the order the waits were announced."""
    calls = {(c.run_id, c.tool_call_id): c for c in facts.tool_calls}
    latest = {c.tool_call_id: c for c in sorted(facts.tool_calls, key=lambda c: (c.at, c.seq))}
    facts = _first_tool_message_answers(_gated_call_answers(_mastra_first_entries(facts)))
    known = {i.interrupt_id for i in facts.interrupts}
    hashed = {key_hash(i): i for i in known}
    finished = {r.run_id for r in facts.runs if r.mark is RunMark.FINISHED}
    counts: dict[str, int] = {}
    for a in facts.answers:
        counts[a.run_id] = counts.get(a.run_id, 0) + 1
    for lr in facts.legacy_resumes:
        named = sum(1 for h, _, _ in lr.entries if h in hashed)
        counts[lr.run_id] = counts.get(lr.run_id, 0) + max(named, 1)
    lone = [
        a
        for a in facts.answers
        if a.interrupt_id not in known and a.run_id in finished and counts[a.run_id] == 1
    ]

    # One walk in (time, arrival) order; at the same instant interrupts come first.
    steps: list[tuple[int, int, int, int, object]] = []
    steps += [(f.at, f.seq, 0, n, f) for n, f in enumerate(facts.interrupts)]
    steps += [(lr.at, lr.seq, 1, n, lr) for n, lr in enumerate(facts.legacy_resumes)]
    steps += [(a.at, a.seq, 2, n, a) for n, a in enumerate(lone)]
    steps.sort(key=lambda s: s[:4])
    b = _Built(facts)
    for i in facts.interrupts:
        if i.tool_call_id is not None:
            b.asked_calls.setdefault(i.run_id, set()).add(i.tool_call_id)
    for a in facts.answers:
        for i in facts.interrupts:
            if i.interrupt_id == a.interrupt_id and i.tool_call_id is not None:
                b.answered_calls.setdefault(a.run_id, set()).add(i.tool_call_id)
    legacy: list[AnswerFact] = []
    findings: list[FindingFact] = []
    for at, seq, kind, _, fact in steps:
        key = (at, seq)
        if kind == 0:
            assert isinstance(fact, InterruptFact)
            f = fact
            same = b.by_id.get(f.interrupt_id)
            last = same[-1] if same else None
            if last is not None and (f.run_id in last.runs or _open_at(last, b, policy_for, key)):
                last.runs.setdefault(f.run_id, key)  # announced again: the same wait
                continue
            call = None
            if f.tool_call_id is not None:
                call = calls.get((f.run_id, f.tool_call_id)) or latest.get(f.tool_call_id)
            default_id = f"{f.thread_id}/{f.interrupt_id}"
            if last is not None:
                default_id += f"@{f.run_id}"
            w = _Wait(
                first=f,
                request_id=f.request_id or default_id,
                action=f.action or (call.name if call else None),
                digest=f.digest or (call.digest if call else None),
                runs={f.run_id: (-(2**62), 0)},
            )
            b.by_id.setdefault(f.interrupt_id, []).append(w)
            b.waits.append(w)
        elif kind == 1:
            assert isinstance(fact, LegacyResumeFact)
            lr = fact
            entries = [(hashed[h], Code(c), d) for h, c, d in lr.entries if h in hashed]
            if entries:
                new = [_answer(lr, i, c, d) for i, c, d in entries]
            else:
                open_then = [w for w in b.waits if w.key < key and _open_at(w, b, policy_for, key)]
                if len(open_then) == 1:
                    new = [_answer(lr, open_then[0].first.interrupt_id, lr.code, lr.digest)]
                else:
                    rule = "legacy_resume_ambiguous" if open_then else "answer_unknown_interrupt"
                    findings.append(
                        FindingFact(
                            rule=rule,
                            at=lr.at,
                            seq=lr.seq,
                            thread_id=facts.thread_id,
                            run_id=lr.run_id,
                            interrupt_id=None,
                        )
                    )
                    new = []
            legacy += new
            b.facts = replace(facts, answers=facts.answers + tuple(legacy))
        else:
            assert isinstance(fact, AnswerFact)
            a = fact
            open_then = [w for w in b.waits if w.key < key and _open_at(w, b, policy_for, key)]
            if len(open_then) == 1:
                d = Decision(a.at, a.seq, a.code, a.digest, a.run_id, True, a.via in EDITED)
                b.extra.append((open_then[0], d))

    facts = b.facts
    for a in facts.answers:
        if a.interrupt_id not in b.by_id and not any(d.run_id == a.run_id for _, d in b.extra):
            findings.append(
                FindingFact(
                    rule="answer_unknown_interrupt",
                    at=a.at,
                    seq=a.seq,
                    thread_id=facts.thread_id,
                    run_id=a.run_id,
                    interrupt_id=a.interrupt_id,
                )
            )
    evidence = []
    for w in b.waits:
        mine = [d for x, d in b.extra if x is w]
        ev = _evidence(w, b)
        rules = _wait_findings(w, b, policy_for, {d.run_id for d in mine})
        evidence.append(replace(ev, findings=rules) if rules else ev)
    return ThreadWaits(tuple(evidence), tuple(findings))


def _answer(lr: LegacyResumeFact, interrupt_id: str, code: Code, digest: str | None) -> AnswerFact:
    return AnswerFact(
        thread_id=lr.thread_id,
        run_id=lr.run_id,
        interrupt_id=interrupt_id,
        code=code,
        at=lr.at,
        seq=lr.seq,
        digest=digest,
    )


def _wait_findings(
    w: _Wait, b: _Built, policy_for: PolicyFor, lone_runs: set[str | None]
) -> tuple[str, ...]:
    facts = b.facts
    rules = [
        f.rule
        for f in facts.findings
        if f.interrupt_id == w.first.interrupt_id and f.run_id in w.runs
    ]
    answering = {a.run_id for a in facts.answers if _answer_wait(a, b.by_id) is w} | lone_runs
    errored = {r.run_id for r in facts.runs if r.mark is RunMark.ERROR}
    ev = _evidence(w, b)
    replay = Replay(ev, policy_for(ev.action, ev.reason))
    for item in sorted(ev.items, key=lambda i: (i.at, i.seq)):
        replay.feed(item)
    if (answering - replay.repeats) & errored:
        rules.append("resume_rejected")
    if replay.repeats & errored:
        rules.append("repeated_answer_rejected")
    later = _later_runs(w, facts.runs)
    for r in sorted(facts.runs, key=lambda r: (r.at, r.seq)):
        if (
            r.mark is RunMark.INPUT
            and r.run_id in later
            and r.run_id not in answering
            and _open_at(w, b, policy_for, (r.at, r.seq))
        ):
            rules.append("run_ignores_open_interrupt")
            break
    return tuple(dict.fromkeys(rules))


def _evidence(w: _Wait, b: _Built) -> WaitEvidence:
    f = w.first
    extra = [d for x, d in b.extra if x is w]
    return WaitEvidence(
        request_id=w.request_id,
        thread_id=f.thread_id,
        run_id=f.run_id,
        interrupt_id=f.interrupt_id,
        requested_at=f.at,
        requested_seq=f.seq,
        action=w.action,
        reason=f.reason,
        tool_call_id=f.tool_call_id,
        expires_at=f.expires_at,
        digest=w.digest,
        handle=f.handle,
        items=tuple(_items(w, b)) + tuple(extra),
        tool_result_receipt=f.tool_result_receipt,
        subagent=_subagent(f, b.facts),
    )


def _subagent(f: InterruptFact, facts: ThreadFacts) -> SubagentTrace | None:
    """The subagent that raised the wait: the interrupt's own `subagentRunId`, else the first
    suspended subagent of its run naming it; with every event of that subagent."""
    ordered = sorted(facts.subagents, key=lambda s: (s.at, s.seq))
    run_id = f.subagent_run_id
    for s in ordered:
        if run_id is not None:
            break
        if (
            s.state is SubagentState.SUSPENDED
            and s.run_id == f.run_id
            and f.interrupt_id in s.interrupt_ids
        ):
            run_id = s.subagent_run_id
    if run_id is None:
        return None
    steps = [
        SubagentStep(s.at, s.seq, s.state, s.run_id, s.name)
        for s in ordered
        if s.subagent_run_id == run_id
    ]
    return SubagentTrace(run_id, tuple(steps))


def _owner(ref_at: Key, candidates: list[_Wait]) -> _Wait:
    owner = candidates[0]
    for c in candidates:
        if c.key <= ref_at:
            owner = c
    return owner


def _signal_wait(s: SignalFact, b: _Built) -> _Wait | None:
    if s.request_id is not None:
        named = [w for w in b.waits if w.request_id == s.request_id]
        return min(named, key=lambda w: w.key) if named else None
    if s.thread_id != b.facts.thread_id or s.interrupt_id not in b.by_id:
        return None
    return _owner((s.at, s.seq), b.by_id[s.interrupt_id])


def _answer_wait(a: AnswerFact, by_id: dict[str, list[_Wait]]) -> _Wait | None:
    ws = by_id.get(a.interrupt_id)
    return _owner((a.at, a.seq), ws) if ws else None


def _items(w: _Wait, b: _Built) -> list[Item]:
    facts = b.facts
    items: list[Item] = []
    for s in facts.signals:
        if _signal_wait(s, b) is not w:
            continue
        if s.kind is SignalKind.ROUTE:
            items.append(Route(s.at, s.seq, s.approver_ref, s.delivered, s.acknowledged))
        elif s.kind is SignalKind.DECISION and s.code is not None:
            items.append(Decision(s.at, s.seq, s.code, s.digest))
        elif s.kind is SignalKind.ACTION and s.digest is not None:
            items.append(ActionChange(s.at, s.seq, s.digest))
        elif s.kind is SignalKind.RECEIPT:
            items.append(Receipt(s.at, s.seq))
    for a in facts.answers:
        if _answer_wait(a, b.by_id) is w:
            edited = a.via in EDITED
            items.append(Decision(a.at, a.seq, a.code, a.digest, run_id=a.run_id, edited=edited))
    for h in facts.heartbeats:
        beat = Heartbeat(h.at, h.seq, h.handle, h.last_at, h.last_seq, h.beats)
        if h.run_id is None or (h.run_id in w.runs and (h.at, h.seq) >= w.runs[h.run_id]):
            items.append(beat)
        elif h.run_id in w.runs and h.last_at is not None and h.last_at > w.runs[h.run_id][0]:
            # A span that goes on past the run's announcement counts from it on.
            items.append(replace(beat, at=w.runs[h.run_id][0], seq=w.runs[h.run_id][1]))
    later = _later_runs(w, facts.runs)
    for r in facts.runs:
        step = _RUN_STEPS.get(r.mark)
        if step is not None and r.run_id in later:
            again = r.run_id in w.runs and (r.at, r.seq) >= w.runs[r.run_id]
            others = step in (RunStep.FINISHED, RunStep.INTERRUPTED) and _others_reported(w, r, b)
            items.append(RunEvent(r.at, r.seq, r.run_id, step, again, others))
    if w.first.tool_call_id is not None:
        for t in facts.tool_results:
            if t.tool_call_id == w.first.tool_call_id and t.run_id != w.first.run_id:
                items.append(RunEvent(t.at, t.seq, t.run_id, RunStep.TOOL_RESULT))
    return items


def _others_reported(w: _Wait, r: RunFact, b: _Built) -> bool:
    """Run `r` reported, before it ended, the result of a gated call its input answered other
    than this wait's, and did not ask for this wait's call again."""
    call = w.first.tool_call_id
    if call is None or call in b.asked_calls.get(r.run_id, set()):
        return False
    return any(
        t.run_id == r.run_id
        and (t.at, t.seq) < (r.at, r.seq)
        and t.tool_call_id != call
        and t.tool_call_id in b.answered_calls.get(r.run_id, set())
        for t in b.facts.tool_results
    )


def _later_runs(w: _Wait, runs: tuple[RunFact, ...]) -> set[str]:
    first: dict[str, Key] = {}
    for r in runs:
        key = (r.at, r.seq)
        if r.run_id not in first or key < first[r.run_id]:
            first[r.run_id] = key
    return {rid for rid, key in first.items() if key > w.key and rid != w.first.run_id}


def _open_at(w: _Wait, b: _Built, policy_for: PolicyFor, before: Key) -> bool:
    """Whether the wait was open just before the fact at `before` arrived."""
    ev = _evidence(w, b)
    ev = replace(ev, items=tuple(i for i in ev.items if (i.at, i.seq) < before))
    return classify(ev, policy_for(ev.action, ev.reason), before[0]).state not in CLOSED_STATES


EDITED = (VIA_EDITED, VIA_EDITED_LATER)


def _mastra_first_entries(facts: ThreadFacts) -> ThreadFacts:
    """@ag-ui/mastra resumes by an input's first `resume[]` entry only: a later entry naming
    a Mastra suspension answers nothing."""
    mastra = {i.interrupt_id for i in facts.interrupts if i.reason == "mastra:tool_suspend"}
    kept = tuple(
        a
        for a in facts.answers
        if not (a.via in (VIA_LATER, VIA_EDITED_LATER) and a.interrupt_id in mastra)
    )
    return replace(facts, answers=kept)


def _gated_call_answers(facts: ThreadFacts) -> ThreadFacts:
    answers = []
    for a in facts.answers:
        if a.via != "gated_call":
            answers.append(a)
            continue
        gating = sorted(
            (i for i in facts.interrupts if i.tool_call_id == a.interrupt_id),
            key=lambda i: (i.at, i.seq),
        )
        earlier = [i for i in gating if (i.at, i.seq) <= (a.at, a.seq)]
        chosen = (earlier[-1] if earlier else gating[0]).interrupt_id if gating else None
        answers.append(replace(a, interrupt_id=chosen or a.interrupt_id, via="tool_message"))
    return replace(facts, answers=tuple(answers))


def _first_tool_message_answers(facts: ThreadFacts) -> ThreadFacts:
    seen: set[str] = set()
    kept = []
    for a in sorted(facts.answers, key=lambda a: (a.at, a.seq)):
        if a.via == "tool_message":
            if a.interrupt_id in seen:
                continue
            seen.add(a.interrupt_id)
        kept.append(a)
    return replace(facts, answers=tuple(kept)) if len(kept) != len(facts.answers) else facts
