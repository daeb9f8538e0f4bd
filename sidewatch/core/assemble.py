"""From one thread's facts to the evidence of each of its waits.

Owns identity (which announcements are one wait, its requestId), the matching of answers and
evidence events to waits whenever the wait appears, and which later runs of the thread count
for a wait. Pure: facts in, `WaitEvidence` out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import orjson

from sidewatch.core.facts import (
    AnswerFact,
    FindingFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
    key_hash,
)
from sidewatch.core.health import classify
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
    WaitEvidence,
)
from sidewatch.core.policy import Policy

PolicyFor = Callable[[str | None, str | None], Policy]

_RUN_STEPS = {
    RunMark.STARTED: RunStep.STARTED,
    RunMark.FINISHED: RunStep.FINISHED,
    RunMark.ERROR: RunStep.ERROR,
}


@dataclass(slots=True)
class _Wait:
    first: InterruptFact
    request_id: str
    action: str | None
    digest: str | None
    runs: set[str] = field(default_factory=set)  # runs that announced it (first + again)

    @property
    def key(self) -> tuple[int, int]:
        return (self.first.at, self.first.seq)


@dataclass(frozen=True, slots=True)
class ThreadWaits:
    waits: tuple[WaitEvidence, ...]
    findings: tuple[FindingFact, ...]  # noticed on the thread, about no single wait


def assemble(facts: ThreadFacts, policy_for: PolicyFor) -> ThreadWaits:
    """Every wait of the thread with its timeline, in the order the waits were announced."""
    # A call id may come back in a later run of the thread: an interrupt's gated call is the
    # one of its own run, else the latest with that id.
    calls = {(c.run_id, c.tool_call_id): c for c in facts.tool_calls}
    latest = {c.tool_call_id: c for c in sorted(facts.tool_calls, key=lambda c: (c.at, c.seq))}
    facts = _first_tool_message_answers(facts)
    by_id: dict[str, list[_Wait]] = {}
    waits: list[_Wait] = []
    findings: list[FindingFact] = []

    for f in sorted(facts.interrupts, key=lambda i: (i.at, i.seq)):
        same = by_id.get(f.interrupt_id)
        last = same[-1] if same else None
        if last is not None and (
            f.run_id in last.runs or _open_at(last, facts, by_id, policy_for, (f.at, f.seq))
        ):
            last.runs.add(f.run_id)  # announced again: the same wait
            continue
        call = None
        if f.tool_call_id is not None:
            call = calls.get((f.run_id, f.tool_call_id)) or latest.get(f.tool_call_id)
        default_id = f"{f.thread_id}/{f.interrupt_id}"
        if last is not None:
            default_id += f"@{f.run_id}"  # an id reused after the earlier wait closed
        w = _Wait(
            first=f,
            request_id=f.request_id or default_id,
            action=f.action or (call.name if call else None),
            digest=f.digest or (call.digest if call else None),
            runs={f.run_id},
        )
        by_id.setdefault(f.interrupt_id, []).append(w)
        waits.append(w)

    legacy, legacy_findings = _legacy_answers(facts, by_id, waits, policy_for)
    if legacy:
        facts = replace(facts, answers=facts.answers + tuple(legacy))
    findings += legacy_findings
    extra = _lone_answers(facts, by_id, waits, policy_for)
    for a in facts.answers:
        if a.interrupt_id not in by_id and not any(d.run_id == a.run_id for _, d in extra):
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
    for w in waits:
        mine = [d for a, d in extra if a is w]
        ev = _evidence(w, facts, by_id, mine)
        rules = _wait_findings(w, facts, by_id, policy_for, {d.run_id for d in mine})
        evidence.append(replace(ev, findings=rules) if rules else ev)
    return ThreadWaits(tuple(evidence), tuple(findings))


def _wait_findings(
    w: _Wait,
    facts: ThreadFacts,
    by_id: dict[str, list[_Wait]],
    policy_for: PolicyFor,
    lone_runs: set[str | None],
) -> tuple[str, ...]:
    """The protocol findings about one wait: those noticed at ingest, a run that started on
    the thread while the wait was open without answering it, and a continuation the producer
    refused (a RUN_ERROR in a run whose input answered the wait)."""
    rules = [
        f.rule
        for f in facts.findings
        if f.interrupt_id == w.first.interrupt_id and f.run_id in w.runs
    ]
    answering = {a.run_id for a in facts.answers if _answer_wait(a, by_id) is w} | lone_runs
    errored = {r.run_id for r in facts.runs if r.mark is RunMark.ERROR}
    if answering & errored:
        rules.append("resume_rejected")
    later = _later_runs(w, facts.runs)
    for r in sorted(facts.runs, key=lambda r: (r.at, r.seq)):
        if (
            r.mark is RunMark.INPUT
            and r.run_id in later
            and r.run_id not in answering
            and _open_at(w, facts, by_id, policy_for, (r.at, r.seq))
        ):
            rules.append("run_ignores_open_interrupt")
            break
    return tuple(dict.fromkeys(rules))


def _evidence(
    w: _Wait, facts: ThreadFacts, by_id: dict[str, list[_Wait]], extra: list[Decision]
) -> WaitEvidence:
    f = w.first
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
        items=tuple(_items(w, facts, by_id)) + tuple(extra),
        tool_result_receipt=f.tool_result_receipt,
    )


def _owner(ref_at: tuple[int, int], candidates: list[_Wait]) -> _Wait:
    """The most recent wait announced at or before the reference, else the first one."""
    owner = candidates[0]
    for c in candidates:
        if c.key <= ref_at:
            owner = c
    return owner


def _signal_wait(s: SignalFact, facts: ThreadFacts, by_id: dict[str, list[_Wait]]) -> _Wait | None:
    if s.request_id is not None:
        for ws in by_id.values():
            for w in ws:
                if w.request_id == s.request_id:
                    return w
        return None
    if s.thread_id != facts.thread_id or s.interrupt_id not in by_id:
        return None
    return _owner((s.at, s.seq), by_id[s.interrupt_id])


def _answer_wait(a: AnswerFact, by_id: dict[str, list[_Wait]]) -> _Wait | None:
    ws = by_id.get(a.interrupt_id)
    return _owner((a.at, a.seq), ws) if ws else None


def _items(w: _Wait, facts: ThreadFacts, by_id: dict[str, list[_Wait]]) -> list[Item]:
    items: list[Item] = []
    for s in facts.signals:
        if _signal_wait(s, facts, by_id) is not w:
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
        if _answer_wait(a, by_id) is w:
            items.append(Decision(a.at, a.seq, a.code, a.digest, run_id=a.run_id))
    for h in facts.heartbeats:
        if h.run_id is None or h.run_id in w.runs:
            items.append(Heartbeat(h.at, h.seq, h.handle))
    later = _later_runs(w, facts.runs)
    for r in facts.runs:
        step = _RUN_STEPS.get(r.mark)
        if step is not None and r.run_id in later:
            items.append(RunEvent(r.at, r.seq, r.run_id, step, reannounced=r.run_id in w.runs))
    if w.first.tool_call_id is not None:
        for t in facts.tool_results:
            if t.tool_call_id == w.first.tool_call_id and t.run_id != w.first.run_id:
                items.append(RunEvent(t.at, t.seq, t.run_id, RunStep.TOOL_RESULT))
    return items


def _later_runs(w: _Wait, runs: tuple[RunFact, ...]) -> set[str]:
    """Runs of the thread first seen after the wait was announced (not its own run)."""
    first: dict[str, tuple[int, int]] = {}
    for r in runs:
        key = (r.at, r.seq)
        if r.run_id not in first or key < first[r.run_id]:
            first[r.run_id] = key
    return {rid for rid, key in first.items() if key > w.key and rid != w.first.run_id}


def _open_at(
    w: _Wait,
    facts: ThreadFacts,
    by_id: dict[str, list[_Wait]],
    policy_for: PolicyFor,
    before: tuple[int, int],
) -> bool:
    """Whether the wait was open just before the fact at `before` (time, arrival) arrived:
    producers set no timestamps, so a whole unit often shares one time and only arrival
    order tells what came first."""
    ev = _evidence(w, facts, by_id, [])
    ev = replace(ev, items=tuple(i for i in ev.items if (i.at, i.seq) < before))
    return classify(ev, policy_for(ev.action, ev.reason), before[0]).state not in CLOSED_STATES


def _first_tool_message_answers(facts: ThreadFacts) -> ThreadFacts:
    """ADK clients repeat a confirmation's answer in every later input's history: only the
    first answer for an interrupt counts; the repeats are not continuations."""
    seen: set[str] = set()
    kept = []
    for a in sorted(facts.answers, key=lambda a: (a.at, a.seq)):
        if a.via == "tool_message":
            if a.interrupt_id in seen:
                continue
            seen.add(a.interrupt_id)
        kept.append(a)
    return replace(facts, answers=tuple(kept)) if len(kept) != len(facts.answers) else facts


def _legacy_answers(
    facts: ThreadFacts,
    by_id: dict[str, list[_Wait]],
    waits: list[_Wait],
    policy_for: PolicyFor,
) -> tuple[list[AnswerFact], list[FindingFact]]:
    """`forwardedProps.command.resume`: a map keyed by interrupt id when any key names an
    interrupt of the thread (open or closed); otherwise one answer for the thread's one open
    wait (with several open: a finding, and nothing applied)."""
    hashed = {key_hash(interrupt_id): interrupt_id for interrupt_id in by_id}
    answers: list[AnswerFact] = []
    findings: list[FindingFact] = []
    for lr in sorted(facts.legacy_resumes, key=lambda r: (r.at, r.seq)):
        entries = [(hashed[h], Code(c), d) for h, c, d in orjson.loads(lr.entries) if h in hashed]
        if entries:
            answers += [
                AnswerFact(
                    thread_id=facts.thread_id,
                    run_id=lr.run_id,
                    interrupt_id=i,
                    code=c,
                    at=lr.at,
                    seq=lr.seq,
                    digest=d,
                )
                for i, c, d in entries
            ]
            continue
        so_far = replace(facts, answers=facts.answers + tuple(answers))
        open_then = [
            w
            for w in waits
            if w.key < (lr.at, lr.seq) and _open_at(w, so_far, by_id, policy_for, (lr.at, lr.seq))
        ]
        if len(open_then) == 1:
            answers.append(
                AnswerFact(
                    thread_id=facts.thread_id,
                    run_id=lr.run_id,
                    interrupt_id=open_then[0].first.interrupt_id,
                    code=lr.code,
                    at=lr.at,
                    seq=lr.seq,
                    digest=lr.digest,
                )
            )
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
    return answers, findings


def _lone_answers(
    facts: ThreadFacts,
    by_id: dict[str, list[_Wait]],
    waits: list[_Wait],
    policy_for: PolicyFor,
) -> list[tuple[_Wait, Decision]]:
    """Some producers apply a run's only answer to the thread's only open wait, whatever id
    it names: such an answer, still unmatched when its run completes, is that wait's."""
    finished = {r.run_id for r in facts.runs if r.mark is RunMark.FINISHED}
    per_run: dict[str, list[AnswerFact]] = {}
    for a in facts.answers:
        per_run.setdefault(a.run_id, []).append(a)
    out: list[tuple[_Wait, Decision]] = []
    for run_id, answers in per_run.items():
        if len(answers) != 1 or run_id not in finished or answers[0].interrupt_id in by_id:
            continue
        a = answers[0]
        open_then = [
            w
            for w in waits
            if w.key < (a.at, a.seq) and _open_at(w, facts, by_id, policy_for, (a.at, a.seq))
        ]
        if len(open_then) == 1:
            out.append((open_then[0], Decision(a.at, a.seq, a.code, a.digest, a.run_id, True)))
    return out
