"""The evaluation engine: one thread's facts to every wait's evidence and verdict, in one pass.

Owns identity (which announcements are one wait, its requestId), the matching of answers and
evidence events to waits whenever the wait appears, and which later runs of the thread count
for a wait. Facts are walked once in (time, arrival) order; each wait's replay stays live, so
"was it open then?" is read from it, never rebuilt. Pure: facts and `now` in, verdicts out.
The walk's order is `core.order`'s; what it reads of the whole thread first, `core.thread`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace

from sidewatch.core.facts import (
    EDITED,
    AnswerFact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
    key_hash,
)
from sidewatch.core.health import Replay
from sidewatch.core.model import (
    ActionChange,
    Decision,
    Heartbeat,
    Item,
    Receipt,
    Route,
    RunEvent,
    RunStep,
    State,
    Verdict,
    WaitEvidence,
)
from sidewatch.core.order import (
    INPUT,
    INTERRUPT,
    LEGACY,
    LEGACY_ANSWER,
    LONE,
    LONE_ANSWER,
    RUN_STEPS,
    LegacyEntries,
    Pos,
    Step,
    ordered_steps,
)
from sidewatch.core.policy import Policy
from sidewatch.core.thread import (
    GatedCalls,
    Subagents,
    answers_of,
    gated_calls,
    legacy_answer,
    subagents_of,
)
from sidewatch.core.vocab import FindingRule

PolicyFor = Callable[[str | None, str | None], Policy]
Key = tuple[int, int]
_ENDS = (RunStep.FINISHED, RunStep.INTERRUPTED)
FINDING_REPEAT = FindingRule.REPEATED_ANSWER_REJECTED
# A wait's header fields, in the order of _HEAD (WaitEvidence's first twelve).
_Head = tuple[
    str,
    str,
    str,
    str,
    int,
    int,
    str | None,
    str | None,
    str | None,
    int | None,
    str | None,
    bool | None,
]


@dataclass(frozen=True, slots=True)
class Evaluated:
    """One wait of the thread: its evidence as matched, and its verdict at `now`."""

    evidence: WaitEvidence
    verdict: Verdict | None  # None: its replay raised (`error`); the thread's other waits stand
    error: Exception | None = None
    runs: frozenset[str] = frozenset()  # the runs that announced it (first and again)
    # The later runs that announced it again, each with the (at, seq) it did: from then on
    # their beats reach it (core.settled gives a settled wait its beats back by this).
    again: tuple[tuple[str, int, int], ...] = ()
    # When its evidence closed it (RESUMED included: only a later step of a run that answered
    # it reopens it; CANCELLED by a run that moved past it too: only a run's answer naming it
    # reopens it); None while open. Time alone never reopens a wait (core.checkpoint).
    settled_at: int | None = None


@dataclass(frozen=True, slots=True)
class ThreadVerdicts:
    """The outcome of one pass over a thread: every wait, and the thread's own findings."""

    waits: tuple[Evaluated, ...]  # in the order the waits were announced
    findings: tuple[FindingFact, ...]  # noticed on the thread, about no single wait


@dataclass(slots=True)
class _Wait:
    first: InterruptFact
    header: WaitEvidence
    asked: _Head  # the header's first fields (_HEAD): the evidence's, at the end
    replay: Replay
    runs: set[str]  # runs that announced it (first and again)
    items: list[Item] = field(default_factory=list)
    again: tuple[tuple[str, int, int], ...] = ()  # later runs that announced it, and when
    answering: set[str] = field(default_factory=set)  # runs whose input answered it
    ignoring: set[str] = field(default_factory=set)  # runs whose input came while it was open
    verdict: Verdict | None = None
    error: Exception | None = None  # its replay raised: fed no more, counted as closed
    # Its facts were pruned (store.retention): it closed, and only its id and requestId are
    # left. Never fed, never open, no verdict: later waits' identity and matching see it.
    pruned: bool = False

    @property
    def key(self) -> Key:
        return (self.first.at, self.first.seq)


def evaluate(facts: ThreadFacts, policy_for: PolicyFor, now: int) -> ThreadVerdicts:
    """Every wait of the thread with its timeline and its verdict at `now`, plus the thread's
    findings. Facts after `now` still decide identity and matching; verdicts ignore them."""
    return _Pass(facts, policy_for, now).run()


@dataclass(slots=True)
class _Pass:
    facts: ThreadFacts
    policy_for: PolicyFor
    when: int  # the evaluation time (`now`)
    # Whole-thread knowledge, from a first cheap look at the facts.
    known: set[str] = field(default_factory=set)  # the thread's interrupt ids
    hashed: dict[str, str] = field(default_factory=dict)
    first_seen: dict[str, Key] = field(default_factory=dict)  # run → its first run fact
    calls: dict[tuple[str, str], ToolCallFact] = field(default_factory=dict)
    latest: dict[str, ToolCallFact] = field(default_factory=dict)
    answers: tuple[AnswerFact, ...] = ()  # as matched: gated calls are read from them
    gated: GatedCalls | None = None  # read at the first run step that needs them
    subagents: Subagents = field(default_factory=lambda: Subagents({}, {}))
    # The walk.
    waits: list[_Wait] = field(default_factory=list)
    by_id: dict[str, list[_Wait]] = field(default_factory=dict)
    by_request: dict[str, _Wait] = field(default_factory=dict)  # the earliest with the id
    by_call: dict[str, list[_Wait]] = field(default_factory=dict)
    open: dict[int, _Wait] = field(default_factory=dict)  # by id(): not closed so far
    by_run: dict[str, list[_Wait]] = field(default_factory=dict)  # waits a run announced
    answered_by: dict[str, list[_Wait]] = field(default_factory=dict)
    # Items for waits not announced yet, by the thread-scoped id they name, in walk order.
    for_interrupt: dict[str, list[tuple[Pos, Item]]] = field(default_factory=dict)
    for_request: dict[str, list[tuple[Pos, Item]]] = field(default_factory=dict)
    heartbeats: dict[str | None, list[tuple[Pos, Item]]] = field(default_factory=dict)
    results: dict[str, list[tuple[Pos, ToolResultFact]]] = field(default_factory=dict)
    run_results: dict[str, set[str]] = field(default_factory=dict)  # run → calls with results
    lone_runs: set[str] = field(default_factory=set)
    findings: list[FindingFact] = field(default_factory=list)
    crossed: bool = False  # past `now`: the verdicts are taken

    def run(self) -> ThreadVerdicts:
        facts = self.facts
        answers = answers_of(facts)
        steps = self._prepare(answers)
        k, n = 0, len(steps)
        while k < n:
            at, seq = steps[k][0][0], steps[k][0][1]
            j = k
            while j < n and steps[j][0][0] == at and steps[j][0][1] == seq:
                j += 1
            self._instant((at, seq), steps[k:j])
            k = j
        for w in self.waits:
            if w.verdict is None:
                self._take_verdict(w)
        return self._finish(answers)

    def _prepare(self, answers: tuple[AnswerFact, ...]) -> list[Step]:
        facts = self.facts
        self.known = {i.interrupt_id for i in facts.interrupts}
        if facts.legacy_resumes:  # only their keys are hashed: one digest per id otherwise
            self.hashed = {key_hash(i): i for i in self.known}
        first_seen = self.first_seen
        for r in facts.runs:
            key = (r.at, r.seq)
            seen = first_seen.get(r.run_id)
            if seen is None or key < seen:
                first_seen[r.run_id] = key
        if facts.tool_calls:
            self.calls = {(c.run_id, c.tool_call_id): c for c in facts.tool_calls}
            self.latest = {
                c.tool_call_id: c for c in sorted(facts.tool_calls, key=lambda c: (c.at, c.seq))
            }
        self.answers = answers
        if facts.subagents:
            self.subagents = subagents_of(facts.subagents)
        return ordered_steps(facts, answers, self.known, self.hashed)

    # -- one instant ----------------------------------------------------------------------

    def _instant(self, key: Key, steps: list[Step]) -> None:
        if not self.crossed and key[0] > self.when:
            self.crossed = True
            for w in self.waits:
                self._take_verdict(w)
        later: list[Step] = []
        for pos, fact in steps:
            kind = pos[2]
            if kind == INTERRUPT:
                assert isinstance(fact, InterruptFact)
                self._announce(fact, key)
            elif kind == LEGACY:
                assert isinstance(fact, tuple)
                later += self._legacy(pos, *fact)
            elif kind == LONE:
                assert isinstance(fact, AnswerFact)
                later += self._lone(pos, fact)
            elif kind == INPUT:
                assert isinstance(fact, RunFact)
                self._input(fact)
            else:
                later.append((pos, fact))
        if len(later) > 1:
            later.sort(key=lambda s: s[0])
        for pos, fact in later:
            self._item(pos, fact)

    def _announce(self, f: InterruptFact, key: Key) -> None:
        same = self.by_id.get(f.interrupt_id)
        last = same[-1] if same else None
        if f.pruned and last is not None and last.pruned:  # one closed wait, or several
            last.runs.add(f.run_id)
            return
        if last is not None and (
            f.run_id in last.runs or (not last.pruned and last.replay.closed is None)
        ):
            if f.run_id not in last.runs:  # announced again: the same wait
                last.runs.add(f.run_id)
                last.again += ((f.run_id, key[0], key[1]),)
                self.by_run.setdefault(f.run_id, []).append(last)
                # The run's spans of beats that go on past this instant count from it on.
                for _, hb in self.heartbeats.get(f.run_id, ()):
                    if isinstance(hb, Heartbeat) and hb.last_at is not None and hb.last_at > key[0]:
                        self._feed(last, replace(hb, at=key[0], seq=key[1]))
            return
        call = None
        if f.tool_call_id is not None:
            call = self.calls.get((f.run_id, f.tool_call_id)) or self.latest.get(f.tool_call_id)
        default_id = f"{f.thread_id}/{f.interrupt_id}"
        if last is not None:
            default_id += f"@{f.run_id}"  # an id reused after the earlier wait closed
        asked: _Head = (  # in the order of _HEAD
            f.request_id or default_id,
            f.thread_id,
            f.run_id,
            f.interrupt_id,
            f.at,
            f.seq,
            f.action or (call.name if call else None),
            f.reason,
            f.tool_call_id,
            f.expires_at,
            f.digest or (call.digest if call else None),
            f.handle,
        )
        # By position: a third less than by name, twice a wait (tested at import: _HEAD).
        header = WaitEvidence(*asked, (), f.tool_result_receipt, (), self.subagents.trace(f))
        policy = self.policy_for(header.action, header.reason)
        w = _Wait(f, header, asked, Replay(header, policy), {f.run_id})
        if f.pruned:
            self._pruned(w)
            return
        self.waits.append(w)
        self.by_id.setdefault(f.interrupt_id, []).append(w)
        self.by_run.setdefault(f.run_id, []).append(w)
        self.open[id(w)] = w
        buffered: list[tuple[Pos, Item]] = []
        if len(self.by_id[f.interrupt_id]) == 1:
            buffered += self.for_interrupt.pop(f.interrupt_id, [])
        if header.request_id not in self.by_request:
            self.by_request[header.request_id] = w
            buffered += self.for_request.pop(header.request_id, [])
        buffered += self.heartbeats.get(f.run_id, [])
        buffered += self.heartbeats.get(None, [])
        if f.tool_call_id is not None:
            self.by_call.setdefault(f.tool_call_id, []).append(w)
            buffered += [
                (pos, RunEvent(t.at, t.seq, t.run_id, RunStep.TOOL_RESULT))
                for pos, t in self.results.get(f.tool_call_id, [])
                if t.run_id != f.run_id
            ]
        buffered.sort(key=lambda b: b[0])
        for _, item in buffered:
            self._feed(w, item)
        if self.crossed and w.error is None:  # announced after `now`: only what came before
            try:
                fresh = Replay(header, policy)
                for _, item in buffered:
                    if item.at <= self.when:
                        fresh.feed(item)
                w.verdict = fresh.verdict(self.when)
            except Exception as e:
                self._fail(w, e)

    def _pruned(self, w: _Wait) -> None:
        """A pruned wait: its id and requestId are taken, as the wait took them; what would
        have been buffered for it is dropped, as the closed wait would have dropped it."""
        w.pruned = True
        iid = w.first.interrupt_id
        self.by_id.setdefault(iid, []).append(w)
        if len(self.by_id[iid]) == 1:
            self.for_interrupt.pop(iid, None)
        if w.header.request_id not in self.by_request:
            self.by_request[w.header.request_id] = w
            self.for_request.pop(w.header.request_id, None)

    def _open_before(self, key: Key) -> list[_Wait]:
        return [w for w in self.open.values() if w.key < key]

    def _legacy(self, pos: Pos, lr: LegacyResumeFact, entries: LegacyEntries) -> list[Step]:
        """`forwardedProps.command.resume`: a map keyed by interrupt id when any key names an
        interrupt of the thread (open or closed); otherwise one answer for the thread's one
        open wait (with several open: a finding, and nothing applied)."""
        at, seq, _, n, _ = pos
        if entries:
            return [
                ((at, seq, LEGACY_ANSWER, n, m), legacy_answer(lr, i, c, d))
                for m, (i, c, d) in enumerate(entries)
            ]
        open_then = self._open_before((at, seq))
        if len(open_then) == 1:
            iid = open_then[0].first.interrupt_id
            return [((at, seq, LEGACY_ANSWER, n, 0), legacy_answer(lr, iid, lr.code, lr.digest))]
        self.findings.append(
            FindingFact(
                rule=FindingRule.LEGACY_RESUME_AMBIGUOUS
                if open_then
                else FindingRule.ANSWER_UNKNOWN_INTERRUPT,
                at=lr.at,
                seq=lr.seq,
                thread_id=self.facts.thread_id,
                run_id=lr.run_id,
                interrupt_id=None,
            )
        )
        return []

    def _lone(self, pos: Pos, a: AnswerFact) -> list[Step]:
        """Some producers apply a run's only answer to the thread's only open wait, whatever
        id it names: such an answer, unmatched and in a run that completes, is that wait's."""
        open_then = self._open_before((a.at, a.seq))
        if len(open_then) != 1:
            return []
        self.lone_runs.add(a.run_id)
        d = Decision(a.at, a.seq, a.code, a.digest, a.run_id, True, a.via in EDITED)
        return [((a.at, a.seq, LONE_ANSWER, pos[3], 0), (open_then[0], d))]

    def _input(self, r: RunFact) -> None:
        """A run asked for while a wait was open: a finding unless the run answered it."""
        first = self.first_seen[r.run_id]
        for w in self.open.values():
            if w.key < first and w.first.run_id != r.run_id:
                w.ignoring.add(r.run_id)

    # -- items ----------------------------------------------------------------------------

    def _item(self, pos: Pos, fact: object) -> None:
        if isinstance(fact, tuple):  # a lone answer, already matched
            w, d = fact
            self._feed(w, d)
        elif isinstance(fact, AnswerFact):
            self._to_interrupt(
                pos,
                fact.interrupt_id,
                Decision(
                    fact.at,
                    fact.seq,
                    fact.code,
                    fact.digest,
                    fact.run_id,
                    False,
                    fact.via in EDITED,
                ),
            )
        elif isinstance(fact, SignalFact):
            self._signal(pos, fact)
        elif isinstance(fact, HeartbeatFact):
            item = heartbeat_item(fact)
            self.heartbeats.setdefault(fact.run_id, []).append((pos, item))
            targets: Iterable[_Wait] = (
                self.waits if fact.run_id is None else self.by_run.get(fact.run_id, ())
            )
            for w in targets:
                self._feed(w, item)
        elif isinstance(fact, RunFact):
            self._run(fact)
        elif isinstance(fact, ToolResultFact):
            self.results.setdefault(fact.tool_call_id, []).append((pos, fact))
            self.run_results.setdefault(fact.run_id, set()).add(fact.tool_call_id)
            for w in self.by_call.get(fact.tool_call_id, ()):
                if fact.run_id != w.first.run_id:
                    self._feed(w, RunEvent(fact.at, fact.seq, fact.run_id, RunStep.TOOL_RESULT))

    def _to_interrupt(self, pos: Pos, interrupt_id: str, item: Item) -> None:
        """The most recent wait with the id announced so far, else the first one to come."""
        ws = self.by_id.get(interrupt_id)
        if ws:
            self._feed(ws[-1], item)
        elif interrupt_id in self.known:
            self.for_interrupt.setdefault(interrupt_id, []).append((pos, item))

    def _signal(self, pos: Pos, s: SignalFact) -> None:
        item: Item | None = None
        if s.kind is SignalKind.ROUTE:
            item = Route(s.at, s.seq, s.approver_ref, s.delivered, s.acknowledged, s.channel)
        elif s.kind is SignalKind.DECISION and s.code is not None:
            item = Decision(s.at, s.seq, s.code, s.digest)
        elif s.kind is SignalKind.ACTION and s.digest is not None:
            item = ActionChange(s.at, s.seq, s.digest)
        elif s.kind is SignalKind.RECEIPT:
            item = Receipt(s.at, s.seq)
        if item is None:
            return
        if s.request_id is not None:
            w = self.by_request.get(s.request_id)
            if w is not None:
                self._feed(w, item)
            else:
                self.for_request.setdefault(s.request_id, []).append((pos, item))
        elif s.thread_id == self.facts.thread_id and s.interrupt_id is not None:
            self._to_interrupt(pos, s.interrupt_id, item)

    def _run(self, r: RunFact) -> None:
        """A later run's step reaches the waits it can still change: the open ones, and a
        RESUMED one only from a run whose input accepted it (its failure reopens the wait)."""
        first = self.first_seen[r.run_id]
        targets = [w for w in self.open.values() if w.key < first]
        for w in self.answered_by.get(r.run_id, ()):
            if w.replay.closed is State.RESUMED and w.key < first:
                targets.append(w)
        step = RUN_STEPS[r.mark]
        reported = self.run_results.get(r.run_id, set()) if step in _ENDS else set()
        for w in targets:
            if w.first.run_id != r.run_id:
                again = r.run_id in w.runs
                others = bool(reported) and self._gated().others_reported(
                    r.run_id, w.header.tool_call_id, reported
                )
                item = RunEvent(r.at, r.seq, r.run_id, step, again, others)
                self._feed(w, item)

    def _gated(self) -> GatedCalls:
        if self.gated is None:
            self.gated = gated_calls(self.facts, self.answers)
        return self.gated

    def _take_verdict(self, w: _Wait) -> None:
        if w.error is None:
            try:
                w.verdict = w.replay.verdict(self.when)
            except Exception as e:
                self._fail(w, e)

    def _fail(self, w: _Wait, e: Exception) -> None:
        """A wait whose replay raises (a model bug, a policy it cannot use) is left out;
        the pass goes on for the others."""
        w.error, w.verdict = e, None
        self.open.pop(id(w), None)

    def _feed(self, w: _Wait, item: Item) -> None:
        if w.pruned:
            return
        w.items.append(item)
        if w.error is not None:
            return
        try:
            w.replay.feed(item)
        except Exception as e:
            self._fail(w, e)
            return
        if (
            isinstance(item, Decision)
            and item.run_id is not None
            and item.run_id not in w.answering
        ):
            w.answering.add(item.run_id)
            self.answered_by.setdefault(item.run_id, []).append(w)
        if w.replay.closed is None:
            self.open[id(w)] = w
        else:
            self.open.pop(id(w), None)

    # -- the end --------------------------------------------------------------------------

    def _finish(self, answers: tuple[AnswerFact, ...]) -> ThreadVerdicts:
        facts = self.facts
        for a in answers:
            if a.interrupt_id not in self.known and a.run_id not in self.lone_runs:
                self.findings.append(
                    FindingFact(
                        rule=FindingRule.ANSWER_UNKNOWN_INTERRUPT,
                        at=a.at,
                        seq=a.seq,
                        thread_id=facts.thread_id,
                        run_id=a.run_id,
                        interrupt_id=a.interrupt_id,
                    )
                )
        noticed: dict[str, list[FindingFact]] = {}
        for f in facts.findings:
            if f.interrupt_id is not None:
                noticed.setdefault(f.interrupt_id, []).append(f)
        errored = {r.run_id for r in facts.runs if r.mark is RunMark.ERROR}
        out = []
        for w in self.waits:
            rules = [f.rule for f in noticed.get(w.first.interrupt_id, ()) if f.run_id in w.runs]
            repeats = w.replay.repeats
            if (w.answering - repeats) & errored:
                rules.append(FindingRule.RESUME_REJECTED)
            if repeats & errored:  # an answer repeated after its continuation ended
                rules.append(FINDING_REPEAT)
            if w.ignoring - w.answering:
                rules.append(FindingRule.RUN_IGNORES_OPEN_INTERRUPT)
            found = tuple(dict.fromkeys(rules))
            # Built from its fields, not replace()d: twice as fast, once per wait.
            h = w.header
            ev = WaitEvidence(*w.asked, tuple(w.items), h.tool_result_receipt, found, h.subagent)
            v = w.verdict
            if v is not None and found:
                v = replace(v, findings=tuple(dict.fromkeys((*found, *v.findings))))
            settled = w.replay.closed_at if w.error is None and w.replay.closed else None
            out.append(
                Evaluated(ev, v, w.error, runs=frozenset(w.runs), again=w.again, settled_at=settled)
            )
        return ThreadVerdicts(tuple(out), tuple(self.findings))


# WaitEvidence's fields in the order the engine passes them by position (_Wait.asked, then
# items, tool_result_receipt, findings, subagent): a reordered field fails at import.
_HEAD = (
    "request_id",
    "thread_id",
    "run_id",
    "interrupt_id",
    "requested_at",
    "requested_seq",
    "action",
    "reason",
    "tool_call_id",
    "expires_at",
    "digest",
    "handle",
)
if tuple(f.name for f in fields(WaitEvidence)) != (
    *_HEAD,
    "items",
    "tool_result_receipt",
    "findings",
    "subagent",
):  # pragma: no cover - a guard against a reordered model
    raise TypeError("WaitEvidence's fields moved: update core.engine._HEAD")


def heartbeat_item(fact: HeartbeatFact) -> Heartbeat:
    """The timeline item of a heartbeat fact (a beat, or a span of beats)."""
    return Heartbeat(fact.at, fact.seq, fact.handle, fact.last_at, fact.last_seq, fact.beats)
