"""Settled waits stay settled: a long thread's history before a cut is evaluated once.

A checkpoint splits a thread at a time `cut`: every wait announced before it is settled (its
evidence closed it; time alone never reopens a wait, and what does, a later step of a run that
answered it or a run's answer for a wait a run moved past, names a run, an interrupt, a call
or a requestId of the prefix, which `holds` refuses), and the facts before it (the prefix)
share no run or requestId with the facts after it (the suffix). Thread-wide heartbeats (no
run: a beat, or a span of beats, for every wait of the thread) are in the suffix whatever
their time (`split`): the engine gives each wait every thread-wide beat before it, so a suffix
wait's evidence holds the prefix's beats as in the whole thread. They reach the settled waits
before the cut as well, but change nothing the store keeps of them (a closed verdict's state,
since, times and findings: beats only move freshness, handle and `missing`, and a closed state
rests on none of them). They are few: spans, one a handle change or a pause in the beating.
A service bound to one of the thread's runs (store.services.expand) beats as that run's
heartbeats, fed to that run's waits only, whenever timed: the suffix has the beats of the
bindings to its own runs, whatever their time, and no others (a prefix run's waits are settled,
and a run that neither side uses has no wait). They are no row of the thread's history, so the
prefix's count leaves them out, and a late beat or binding changes no cut.
Interrupt ids and tool-call ids may be shared where the engine's matching cannot reach across
the cut (`holds`: CrewAI's one interrupt id per thread, scripted tool-call ids); a shared
interrupt id is then seeded into the suffix as a closed tombstone (`seeded`), which gives its
later waits the `@run` requestIds the whole thread gives. Then the suffix alone gives the
verdicts of the suffix's waits that the whole thread gives, and a tick evaluates only it.

Whether that still holds is checked at every use, from what the store says of the prefix
asked about the suffix's own ids only (`Seen`): any doubt, and the thread is evaluated whole.
A fact timed before the cut that arrived after the checkpoint (sources are not ordered with
each other) changes the prefix's count of facts, and so the thread is evaluated whole, from
its first fact. The checkpoint itself is a few numbers and the prefix's dangling references
(ids it named that none of its waits had, usually none), whatever the history's length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from sidewatch.core.engine import ThreadVerdicts
from sidewatch.core.facts import (
    VIA_GATED_CALL,
    VIA_TOOL_MESSAGE,
    HeartbeatFact,
    InterruptFact,
    SignalFact,
    ThreadFacts,
    key_hash,
)

LONG = 400  # facts: a thread shorter than this is evaluated whole (no checkpoint is kept)
MAX_DANGLING = 64  # a prefix naming more unknown ids than this keeps no checkpoint
CANDIDATES = 8  # cuts tried, latest first


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a thread's settled history ends, and what detects a change to it."""

    thread_id: str
    cut: int  # the prefix: the facts timed before it (signals naming a wait: by the wait)
    count: int  # the prefix's facts when it was taken (`prefix_count`)
    dangling: frozenset[str]  # ids (and key hashes) the prefix named that no prefix wait had


@dataclass(frozen=True, slots=True)
class Seen:
    """What the prefix holds of the ids the suffix uses (asked of the store)."""

    count: int  # the prefix's facts now
    runs: frozenset[str] = frozenset()
    interrupts: frozenset[str] = frozenset()  # interrupt ids of prefix interrupts
    calls: frozenset[str] = frozenset()  # tool-call ids of any prefix fact
    requests: frozenset[str] = frozenset()  # requestIds of prefix waits
    gated: frozenset[str] = frozenset()  # tool-call ids of prefix interrupts
    results: frozenset[str] = frozenset()  # tool-call ids of prefix tool results
    subagents: frozenset[str] = frozenset()  # subagent invocations with prefix steps


@dataclass(frozen=True, slots=True)
class Uses:
    """The ids a part of a thread uses."""

    runs: frozenset[str]
    interrupts: frozenset[str]
    calls: frozenset[str]
    subagents: frozenset[str]  # subagent invocations (`subagentRunId`) it has or names


def refs(facts: ThreadFacts) -> set[str]:
    """Every requestId a wait of these interrupts may have (as the store routes signals)."""
    out: set[str] = set()
    for i in facts.interrupts:
        out.add(f"{i.thread_id}/{i.interrupt_id}")
        out.add(f"{i.thread_id}/{i.interrupt_id}@{i.run_id}")
        if i.request_id is not None:
            out.add(i.request_id)
    return out


def split(facts: ThreadFacts, cut: int) -> tuple[ThreadFacts, ThreadFacts]:
    """The prefix and the suffix of a thread at `cut`. A signal naming a requestId belongs
    to the suffix when a suffix interrupt may have that id, whenever it was timed, a
    thread-wide heartbeat (no run) always does (every later wait is fed it), and so does a
    bound service's beat of a run the suffix uses (only that run's waits are fed it)."""

    def parts(xs: Iterable[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        before: list[Any] = []
        after: list[Any] = []
        for x in xs:
            (after if x.at >= cut else before).append(x)
        return tuple(before), tuple(after)

    pi, si = parts(facts.interrupts)
    later = refs(replace(facts, interrupts=si))
    ps: list[SignalFact] = []
    ss: list[SignalFact] = []
    for s in facts.signals:
        if s.request_id is not None:
            (ss if s.request_id in later else ps).append(s)
        else:
            (ss if s.at >= cut else ps).append(s)
    split_ = {
        name: parts(getattr(facts, name))
        for name in (
            "tool_calls",
            "runs",
            "answers",
            "tool_results",
            "legacy_resumes",
            "findings",
            "subagents",
        )
    }
    own = [h for h in facts.heartbeats if not h.bound]
    split_["heartbeats"] = (
        tuple(h for h in own if h.run_id is not None and h.at < cut),
        tuple(h for h in own if h.run_id is None or h.at >= cut),
    )
    prefix = ThreadFacts(
        thread_id=facts.thread_id,
        interrupts=pi,
        signals=tuple(ps),
        **{k: v[0] for k, v in split_.items()},
    )
    suffix = ThreadFacts(
        thread_id=facts.thread_id,
        interrupts=si,
        signals=tuple(ss),
        **{k: v[1] for k, v in split_.items()},
    )
    if not any(h.bound for h in facts.heartbeats):
        return prefix, suffix
    # A bound service's beats reach the waits of the binding's run only (the thread's, with
    # none): with the suffix when that run is the suffix's, whatever their time; else no
    # suffix wait (a prefix run's waits are settled), and the store loads them not. (In the
    # thread's order: beats at one instant are fed in it.)
    runs = uses(suffix).runs

    def after(h: HeartbeatFact) -> bool:
        if h.bound:
            return h.run_id is None or h.run_id in runs
        return h.run_id is None or h.at >= cut

    return (
        replace(prefix, heartbeats=tuple(h for h in facts.heartbeats if not after(h))),
        replace(suffix, heartbeats=tuple(h for h in facts.heartbeats if after(h))),
    )


def prefix_count(
    prefix: ThreadFacts, requests: Iterable[str], signals: Iterable[SignalFact]
) -> int:
    """The prefix's facts as the store counts them: every fact timed before the cut (but a
    finding the auditor wrote, seq 0, a signal naming a requestId, a thread-wide heartbeat,
    which `split` puts in the suffix, and a bound service's beat, no row of the thread's
    history: services.expand gives it from the service's latest beats), plus the signals
    (of any time, in `signals`) naming one of `requests`, the prefix waits' requestIds."""
    wanted = set(requests)
    n = (
        len(prefix.interrupts)
        + len(prefix.tool_calls)
        + len(prefix.runs)
        + len(prefix.answers)
        + len(prefix.tool_results)
        + sum(1 for h in prefix.heartbeats if not h.bound)
        + len(prefix.legacy_resumes)
        + len(prefix.subagents)
        + sum(1 for f in prefix.findings if f.seq != 0)
        + sum(1 for s in prefix.signals if s.request_id is None)
    )
    return n + sum(1 for s in signals if s.request_id in wanted)


def uses(facts: ThreadFacts) -> Uses:
    """The runs, interrupt ids and tool-call ids these facts use or name."""
    runs: set[str] = set()
    for xs in (
        facts.interrupts,
        facts.tool_calls,
        facts.runs,
        facts.answers,
        facts.tool_results,
        facts.legacy_resumes,
        facts.subagents,
    ):
        runs.update(x.run_id for x in xs)
    # A bound service's beat is no fact of its run: it reaches that run's waits, if any.
    runs.update(h.run_id for h in facts.heartbeats if h.run_id is not None and not h.bound)
    runs.update(f.run_id for f in facts.findings if f.run_id is not None and f.seq != 0)
    interrupts = {i.interrupt_id for i in facts.interrupts}
    interrupts.update(a.interrupt_id for a in facts.answers)
    interrupts.update(i for s in facts.subagents for i in s.interrupt_ids)
    interrupts.update(
        s.interrupt_id
        for s in facts.signals
        if s.request_id is None and s.interrupt_id is not None and s.thread_id == facts.thread_id
    )
    calls = {c.tool_call_id for c in facts.tool_calls}
    calls.update(t.tool_call_id for t in facts.tool_results)
    calls.update(i.tool_call_id for i in facts.interrupts if i.tool_call_id is not None)
    # A tool message naming its wait by the gated call names a tool-call id (engine's
    # `_by_gated_call`: the latest interrupt with that call at the answer, else the next).
    calls.update(a.interrupt_id for a in facts.answers if a.via == VIA_GATED_CALL)
    # A wait's subagent trace is every step of its invocation, thread-wide (`subagents_of`).
    subagents = {s.subagent_run_id for s in facts.subagents}
    subagents.update(i.subagent_run_id for i in facts.interrupts if i.subagent_run_id is not None)
    return Uses(
        runs=frozenset(runs),
        interrupts=frozenset(interrupts),
        calls=frozenset(calls),
        subagents=frozenset(subagents),
    )


def dangling(prefix: ThreadFacts, requests: Iterable[str]) -> frozenset[str]:
    """What the prefix names that none of its waits has: answers' and signals' interrupt ids,
    signals' requestIds, legacy resume keys (hashed). A suffix wait with one of them would
    have taken that fact: the checkpoint no longer holds."""
    own = {i.interrupt_id for i in prefix.interrupts}
    hashes = {key_hash(i) for i in own}
    rids = set(requests)
    out = {a.interrupt_id for a in prefix.answers if a.interrupt_id not in own}
    for s in prefix.signals:
        if s.request_id is not None:
            if s.request_id not in rids:
                out.add(s.request_id)
        elif s.interrupt_id is not None and s.interrupt_id not in own:
            out.add(s.interrupt_id)
    for lr in prefix.legacy_resumes:
        out.update(h for h, _, _ in lr.entries if h not in hashes)
    return frozenset(out)


def holds(cp: Checkpoint, suffix: ThreadFacts, result: ThreadVerdicts, seen: Seen) -> bool:
    """The suffix's evaluation (`result`, of `seeded(suffix, seen)`) is the whole thread's for
    the suffix's waits: the prefix is as it was, shares no run or requestId with the suffix,
    its shared interrupt and tool-call ids cannot be matched across the cut, and it names
    nothing the suffix has."""
    if seen.count != cp.count:
        return False
    u = uses(suffix)
    if u.runs & seen.runs or u.subagents & seen.subagents:
        return False
    if not _interrupts_apart(suffix, u.interrupts & seen.interrupts):
        return False
    if not _calls_apart(suffix, u.calls & seen.calls, seen):
        return False
    rids = {w.evidence.request_id for w in result.waits}
    if rids & seen.requests:
        return False
    own = {i.interrupt_id for i in suffix.interrupts}
    hashes = {key_hash(i) for i in own}
    # (A prefix tool message naming a call id no earlier interrupt gates goes to the first
    # interrupt gated by it: `_by_gated_call`.)
    gates = {i.tool_call_id for i in suffix.interrupts if i.tool_call_id is not None}
    if (u.interrupts | hashes | refs(suffix) | gates) & cp.dangling:
        return False
    # A legacy resume key naming no suffix interrupt may name a prefix one (kept hashed: the
    # store cannot be asked): the thread is evaluated whole.
    return all(h in hashes for lr in suffix.legacy_resumes for h, _, _ in lr.entries)


def _interrupts_apart(suffix: ThreadFacts, shared: frozenset[str]) -> bool:
    """The engine matches a fact naming an interrupt id to the latest wait announced with it
    so far (`_to_interrupt`), and a new announcement of a closed wait's id makes a wait of its
    own (`_announce`). So a shared id never reaches a prefix wait when the suffix announces
    it (not as a pruned tombstone, which would merge into the prefix's) before any suffix
    fact names it, and no tool message names it (only an interrupt's first one counts,
    thread-wide: `_first_tool_message_answers`)."""
    if not shared:
        return True
    first: dict[str, tuple[int, int]] = {}
    for i in suffix.interrupts:
        if i.interrupt_id in shared:
            if i.pruned:
                return False
            key = (i.at, i.seq)
            first[i.interrupt_id] = min(key, first.get(i.interrupt_id, key))
    if shared - first.keys():  # named by the suffix, announced only before the cut
        return False
    if any(a.via in (VIA_TOOL_MESSAGE, VIA_GATED_CALL) for a in suffix.answers):
        return False

    def after(iid: str, key: tuple[int, int]) -> bool:
        return iid not in first or key >= first[iid]

    hashed = {key_hash(i): i for i in first}
    return (
        all(after(a.interrupt_id, (a.at, a.seq)) for a in suffix.answers)
        and all(
            after(hashed.get(h, ""), (lr.at, lr.seq))
            for lr in suffix.legacy_resumes
            for h, _, _ in lr.entries
        )
        and all(
            after(s.interrupt_id, (s.at, s.seq))
            for s in suffix.signals
            if s.request_id is None
            and s.interrupt_id is not None
            and s.thread_id == suffix.thread_id
        )
    )


def _calls_apart(suffix: ThreadFacts, shared: frozenset[str], seen: Seen) -> bool:
    """A tool result reaches every wait gated by its call id, of another run, announced before
    or after it (`by_call`, `results`), and an interrupt without its run's call takes the
    thread's latest call with the id. So a shared call id gates no prefix wait, and a suffix
    wait it gates has the call in the suffix (the latest, then) and no prefix result."""
    if not shared:
        return True
    if shared & seen.gated:
        return False
    called = {c.tool_call_id for c in suffix.tool_calls}
    return all(
        i.tool_call_id in called and i.tool_call_id not in seen.results
        for i in suffix.interrupts
        if i.tool_call_id in shared
    )


def seeded(suffix: ThreadFacts, seen: Seen, cut: int) -> ThreadFacts:
    """The suffix as the checkpoint evaluates it: each interrupt id it announces that the
    prefix used, as a closed tombstone before the cut, so that its later waits get `@run`
    requestIds, as in the whole thread."""
    shared = {i.interrupt_id for i in suffix.interrupts} & seen.interrupts
    if not shared:
        return suffix
    runs = uses(suffix).runs
    run = "\x00checkpoint"  # a run of the suffix would take the tombstone's wait as its own
    while run in runs:
        run += "\x00"
    stones = tuple(
        InterruptFact(
            thread_id=suffix.thread_id, run_id=run, interrupt_id=i, at=cut - 1, seq=-1, pruned=True
        )
        for i in sorted(shared)
    )
    return replace(suffix, interrupts=stones + suffix.interrupts)


def seen_in(prefix: ThreadFacts, requests: Iterable[str], signals: Iterable[SignalFact]) -> Seen:
    """What `prefix` holds of every id: the store's answer, computed from the facts (tests)."""
    u = uses(prefix)
    # The store asks the findings of the suffix's runs whoever wrote them (store.suffix
    # `seen`: one the auditor wrote, seq 0, too).
    found = {f.run_id for f in prefix.findings if f.run_id is not None}
    return Seen(
        count=prefix_count(prefix, requests, signals),
        runs=u.runs | found,
        interrupts=frozenset(i.interrupt_id for i in prefix.interrupts),
        calls=u.calls,
        requests=frozenset(requests),
        gated=frozenset(i.tool_call_id for i in prefix.interrupts if i.tool_call_id is not None),
        results=frozenset(t.tool_call_id for t in prefix.tool_results),
        subagents=frozenset(s.subagent_run_id for s in prefix.subagents),
    )


def at_cut(
    facts: ThreadFacts,
    result: ThreadVerdicts,
    cut: int,
    base: Checkpoint | None = None,
    held: Seen | None = None,
) -> tuple[Checkpoint, ThreadFacts, Seen] | None:
    """The checkpoint of `facts` (evaluated: `result`) at `cut`, with the suffix and what the
    prefix holds, when every wait before the cut is settled; else None. With `base`, `facts`
    are the suffix of `base` and the checkpoint continues it; `held`: what the prefix of
    `base` holds of their ids."""
    before = [w for w in result.waits if w.evidence.requested_at < cut]
    # Closed by what came before the cut: a later fact may close a wait open at the cut
    # (the thread's one open wait takes a lone answer) and then the cut does not hold.
    if not all(w.settled_at is not None and w.settled_at < cut for w in before):
        return None
    prefix, suffix = split(facts, cut)
    rids = [w.evidence.request_id for w in before]
    loose = dangling(prefix, rids) | (base.dangling if base is not None else frozenset())
    if len(loose) > MAX_DANGLING:
        return None
    count = prefix_count(prefix, rids, facts.signals) + (base.count if base else 0)
    seen = replace(seen_in(prefix, rids, facts.signals), count=count)
    if held is not None:
        ids = {k: getattr(seen, k) | getattr(held, k) for k in _IDS}
        seen = Seen(count=count, **ids)
    return Checkpoint(facts.thread_id, cut, count, loose), suffix, seen


_IDS = ("runs", "interrupts", "calls", "requests", "gated", "results", "subagents")


def choose(
    facts: ThreadFacts,
    result: ThreadVerdicts,
    now: int,
    evaluate_part: Callable[[ThreadFacts], ThreadVerdicts],
    base: Checkpoint | None = None,
    held: Seen | None = None,
) -> Checkpoint | None:
    """The latest cut at or before `now` (a run's first fact) where the history before it is
    settled and shares nothing with what follows. `facts` and `result`: the whole thread, or
    (with `base`) the suffix of `base` and its evaluation (`held`: what the prefix of `base`
    holds of its ids); `evaluate_part` evaluates a suffix."""
    starts: dict[str, int] = {}
    for xs in (facts.interrupts, facts.tool_calls, facts.runs, facts.answers, facts.tool_results):
        for x in xs:
            if x.at < starts.get(x.run_id, now + 1):
                starts[x.run_id] = x.at
    floor = base.cut if base is not None else -1
    cuts = sorted({t for t in starts.values() if floor < t <= now}, reverse=True)
    for cut in cuts[:CANDIDATES]:
        found = at_cut(facts, result, cut, base, held)
        if found is None:
            continue
        cp, suffix, seen = found
        if holds(cp, suffix, evaluate_part(seeded(suffix, seen, cut)), seen):
            return cp
    return None
