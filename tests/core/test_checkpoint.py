"""A checkpoint's suffix gives the whole thread's verdicts: on generated histories, a checkpoint
taken at every cut after every number of arrived facts, then resumed once all facts arrived
(late ones included), either says it no longer holds or gives exactly what evaluating the
whole thread gives for the waits after the cut (evidence, verdict) and its findings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidewatch.core.checkpoint import Checkpoint, at_cut, choose, holds, seen_in, split
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import (
    AnswerFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    ThreadFacts,
    key_hash,
)
from sidewatch.core.model import Code
from sidewatch.core.policy import DEFAULT_POLICY, Need, Policy
from tests.core.test_engine_differential import (
    INTERRUPTS,
    MIN,
    THREAD,
    _thread,
    histories,
    policies,
)


def _arrived(facts: ThreadFacts) -> list[object]:
    """The facts in arrival (seq) order."""
    out: list[object] = []
    for name in (
        "interrupts",
        "tool_calls",
        "runs",
        "answers",
        "tool_results",
        "signals",
        "heartbeats",
        "legacy_resumes",
        "findings",
    ):
        out += getattr(facts, name)
    return sorted(out, key=lambda f: f.seq)  # type: ignore[attr-defined]


def _resumed(
    first: ThreadFacts, facts: ThreadFacts, cut: int, policy_for: object, now: int, later: int
) -> tuple[list[object], list[object]] | None:
    """The checkpoint of `first` at `cut` (its waits as the store recorded them), resumed on
    `facts` at `later`: (the suffix's waits, the whole thread's waits after the cut), or None
    when it does not hold."""
    found = at_cut(first, evaluate(first, policy_for, now), cut)  # type: ignore[arg-type]
    if found is None:
        return None
    cp = found[0]
    recorded = [
        w.evidence.request_id
        for w in evaluate(first, policy_for, now).waits  # type: ignore[arg-type]
        if w.evidence.requested_at < cut
    ]
    prefix, suffix = split(facts, cut)
    part = evaluate(suffix, policy_for, later)  # type: ignore[arg-type]
    if not holds(cp, suffix, part, seen_in(prefix, recorded, facts.signals)):
        return None
    whole = evaluate(facts, policy_for, later)  # type: ignore[arg-type]
    expected = [
        (w.evidence, w.verdict, w.settled_at) for w in whole.waits if w.evidence.requested_at >= cut
    ]
    got = [(w.evidence, w.verdict, w.settled_at) for w in part.waits]
    assert got == expected
    # The thread's findings as a set: they are stored by their natural key, in no order, and
    # the pass emits lone answers' findings in the order the answers came in.
    assert sorted(part.findings, key=repr) == sorted(
        (f for f in whole.findings if f.at >= cut), key=repr
    )
    return got, expected


HASHED = {key_hash(k): k for k in (*INTERRUPTS, "field")}


def _epochs(facts: ThreadFacts, bounds: list[int], beats: bool) -> ThreadFacts:
    """The history with its shared ids (runs, interrupts, calls, requestIds) renamed by the
    epoch of each fact's time: ids repeat within an epoch, never across. Then cuts between
    epochs hold, and the waits before and after them are compared. Without `beats`, no
    thread-wide heartbeat (one keeps every cut from holding)."""

    def epoch(at: int) -> int:
        return sum(1 for b in bounds if b <= at)

    def name(x: str | None, at: int) -> str | None:
        return None if x is None or x.startswith("run ") else f"{x}#{epoch(at)}"

    def rid(x: str | None, at: int) -> str | None:
        if x is None:
            return None
        for iid in INTERRUPTS:
            if x.startswith(f"{THREAD}/{iid}"):
                tail = x[len(f"{THREAD}/{iid}") :]
                run = f"@{name(tail[1:], at)}" if tail else ""
                return f"{THREAD}/{iid}#{epoch(at)}{run}"
        return f"{x}#{epoch(at)}"

    def one(f: Any) -> Any:
        changes: dict[str, Any] = {}
        for field in ("run_id", "interrupt_id", "tool_call_id"):
            if hasattr(f, field):
                changes[field] = name(getattr(f, field), f.at)
        if hasattr(f, "request_id"):
            changes["request_id"] = rid(f.request_id, f.at)
        if isinstance(f, LegacyResumeFact):
            changes["entries"] = tuple(
                (key_hash(f"{HASHED[h]}#{epoch(f.at)}"), c, d) for h, c, d in f.entries
            )
        return replace(f, **changes)

    kept = [f for f in _arrived(facts) if beats or not _thread_wide(f)]
    return _thread([one(f) for f in kept])


def _thread_wide(f: object) -> bool:
    return isinstance(f, HeartbeatFact) and f.run_id is None


@st.composite
def blocks(draw: st.DrawFn) -> tuple[ThreadFacts, int]:
    """Two or three histories one after another on one thread, their ids renamed by block
    (within a block ids repeat, across blocks mostly not: a block keeps some of the ids of
    the one before), each block later than the one before; some facts of a block arrive
    after the next block (late facts, timed before what was evaluated)."""
    out: list[object] = []
    late: list[object] = []
    offset = seq = 0
    now = 0
    for n in range(draw(st.integers(2, 3))):
        facts, at = draw(histories())
        keep = draw(st.booleans())  # this block shares its ids with the one before
        # A producer's requestIds may repeat across blocks, the other ids not.
        same = draw(st.booleans())
        mine = _renamed(
            facts, str(n - 1 if keep and n else n), offset, seq, str(n - 1 if same and n else n)
        )
        arrived = _arrived(mine)
        if n and draw(st.integers(0, 3)) == 0:
            k = draw(st.integers(0, len(arrived) - 1))
            late.append(arrived.pop(k))
        out += arrived
        seq = max(f.seq for f in _arrived(mine)) + 10  # type: ignore[attr-defined]
        now = offset + at
        offset = max(f.at for f in _arrived(mine)) + draw(st.sampled_from((1, MIN, 40 * MIN)))  # type: ignore[attr-defined]
    for f in late:  # arrives last
        seq += 10
        out.append(replace(f, seq=seq))  # type: ignore[type-var]
    return _thread(out), now


HASHED = {key_hash(k): k for k in (*INTERRUPTS, "field")}


def _renamed(facts: ThreadFacts, block: str, offset: int, seq: int, requests: str) -> ThreadFacts:
    def name(x: str | None) -> str | None:
        return None if x is None else f"{x}#{block}"

    def rid(x: str | None) -> str | None:
        if x is None:
            return None
        if x.startswith(f"{THREAD}/"):
            tail = x[len(THREAD) + 1 :]
            iid, _, run = tail.partition("@")
            return f"{THREAD}/{iid}#{block}" + (f"@{run}#{block}" if run else "")
        return f"{x}#{requests}"

    def one(f: Any) -> Any:
        changes: dict[str, Any] = {"at": f.at + offset, "seq": f.seq + seq}
        for field in ("run_id", "interrupt_id", "tool_call_id"):
            if hasattr(f, field):
                changes[field] = name(getattr(f, field))
        if hasattr(f, "request_id"):
            changes["request_id"] = rid(f.request_id)
        if isinstance(f, LegacyResumeFact):
            changes["entries"] = tuple(
                (key_hash(f"{HASHED[h]}#{block}"), c, d) for h, c, d in f.entries
            )
        if isinstance(f, InterruptFact) and f.expires_at is not None:
            changes["expires_at"] = f.expires_at + offset
        return replace(f, **changes)

    return _thread([one(f) for f in _arrived(facts)])


@settings(max_examples=250, deadline=None)
@given(blocks(), policies(), st.integers(0, 20 * MIN), st.booleans())
def test_a_checkpoint_resumed_at_every_cut_gives_the_whole_evaluation(
    history: tuple[ThreadFacts, int], pair: tuple[Policy, Policy], wait: int, beats: bool
) -> None:
    facts, now = history
    if not beats:  # without thread-wide heartbeats (one keeps every cut from holding)
        facts = _thread([f for f in _arrived(facts) if not _thread_wide(f)])
    deploys, default = pair

    def policy_for(action: str | None, reason: str | None) -> Policy:
        return deploys if action == "deploy" else default

    arrived = _arrived(facts)
    cuts = sorted({f.at for f in arrived if f.at <= now})  # type: ignore[attr-defined]
    for k in range(1, len(arrived) + 1, max(1, len(arrived) // 6)):
        first = _thread(arrived[:k])
        for cut in cuts:
            _resumed(first, facts, cut, policy_for, now, now + wait)
    for cut in cuts:  # everything arrived before the checkpoint
        _resumed(facts, facts, cut, policy_for, now, now + wait)


def _thread_wide(f: object) -> bool:
    return isinstance(f, HeartbeatFact) and f.run_id is None


def _long_thread(waits: int) -> list[object]:
    """Waits one after another, each answered (accepted) by the next run, which finishes."""
    out: list[object] = []
    seq = 0
    for n in range(waits):
        at = n * 10 * MIN
        ask, answer = f"ask-{n}", f"answer-{n}"
        seq += 10
        out += [
            RunFact(run_id=ask, thread_id=THREAD, mark=RunMark.STARTED, at=at, seq=seq),
            InterruptFact(thread_id=THREAD, run_id=ask, interrupt_id=f"i{n}", at=at, seq=seq + 1),
            RunFact(run_id=ask, thread_id=THREAD, mark=RunMark.INTERRUPTED, at=at, seq=seq + 2),
            RunFact(run_id=answer, thread_id=THREAD, mark=RunMark.INPUT, at=at + MIN, seq=seq + 3),
            AnswerFact(
                thread_id=THREAD,
                run_id=answer,
                interrupt_id=f"i{n}",
                code=Code.ACCEPT,
                at=at + MIN,
                seq=seq + 3,
            ),
            RunFact(
                run_id=answer, thread_id=THREAD, mark=RunMark.STARTED, at=at + MIN, seq=seq + 4
            ),
            RunFact(
                run_id=answer, thread_id=THREAD, mark=RunMark.FINISHED, at=at + MIN, seq=seq + 5
            ),
        ]
    return out


def _policy(action: str | None, reason: str | None) -> Policy:
    return replace(DEFAULT_POLICY, route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED)


def _checkpoint(facts: ThreadFacts, now: int) -> Checkpoint:
    cp = choose(facts, evaluate(facts, _policy, now), now, lambda f: evaluate(f, _policy, now))
    assert cp is not None
    return cp


def _holds(first: list[object], more: list[object], now: int) -> bool:
    thread = _thread(first)
    cp = _checkpoint(thread, now)
    recorded = [
        w.evidence.request_id
        for w in evaluate(thread, _policy, now).waits
        if w.evidence.requested_at < cp.cut
    ]
    facts = _thread(first + more)
    prefix, suffix = split(facts, cp.cut)
    part = evaluate(suffix, _policy, now)
    return holds(cp, suffix, part, seen_in(prefix, recorded, facts.signals))


NOW = 100 * MIN


def test_a_long_settled_history_is_cut_before_its_last_runs() -> None:
    cp = _checkpoint(_thread(_long_thread(6)), NOW)
    # Before the last wait's run: a wait and its answer are never cut apart.
    assert cp.cut == 5 * 10 * MIN
    assert cp.dangling == frozenset()


def test_a_new_run_on_the_thread_keeps_the_checkpoint() -> None:
    new = RunFact(run_id="new", thread_id=THREAD, mark=RunMark.STARTED, at=NOW, seq=10**6)
    assert _holds(_long_thread(6), [new], NOW)


def test_a_fact_timed_before_the_cut_that_arrived_later_ends_it() -> None:
    late = RunFact(run_id="late", thread_id=THREAD, mark=RunMark.STARTED, at=MIN, seq=10**6)
    assert not _holds(_long_thread(6), [late], NOW)


def test_a_failing_run_that_answered_a_settled_wait_ends_it() -> None:
    # answer-2 accepted i2 and finished; its error now reopens i2 (RESUMED -> STUCK).
    error = RunFact(run_id="answer-2", thread_id=THREAD, mark=RunMark.ERROR, at=NOW, seq=10**6)
    assert not _holds(_long_thread(6), [error], NOW)


def test_an_answer_to_a_settled_wait_ends_it() -> None:
    again = AnswerFact(
        thread_id=THREAD, run_id="new", interrupt_id="i1", code=Code.DECLINE, at=NOW, seq=10**6
    )
    assert not _holds(_long_thread(6), [again], NOW)


def test_a_lone_answer_before_the_cut_is_dangling_and_a_wait_with_its_id_ends_it() -> None:
    lone = AnswerFact(
        thread_id=THREAD, run_id="ask-0", interrupt_id="later", code=Code.ACCEPT, at=0, seq=11
    )
    first = [*_long_thread(6), lone]
    assert "later" in _checkpoint(_thread(first), NOW).dangling
    wait = InterruptFact(thread_id=THREAD, run_id="new", interrupt_id="later", at=NOW, seq=10**6)
    assert not _holds(first, [wait], NOW)


def test_a_thread_wide_heartbeat_after_the_cut_ends_it() -> None:
    beat = HeartbeatFact(thread_id=THREAD, at=NOW, seq=10**6)
    assert not _holds(_long_thread(6), [beat], NOW)


def test_a_wait_after_the_cut_with_the_requestid_of_a_settled_wait_ends_it() -> None:
    first = [
        replace(f, request_id="req") if isinstance(f, InterruptFact) and f.run_id == "ask-1" else f
        for f in _long_thread(6)
    ]
    wait = InterruptFact(
        thread_id=THREAD, run_id="new", interrupt_id="fresh", at=NOW, seq=10**6, request_id="req"
    )
    assert not _holds(first, [wait], NOW)


def test_a_legacy_resume_map_naming_a_settled_wait_ends_it() -> None:
    resume = LegacyResumeFact(
        thread_id=THREAD,
        run_id="new",
        code=Code.DECLINE,
        at=NOW,
        seq=10**6,
        entries=((key_hash("i1"), Code.DECLINE, None),),
    )
    assert not _holds(_long_thread(6), [resume], NOW)
