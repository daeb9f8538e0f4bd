"""A checkpoint's suffix gives the whole thread's verdicts: on generated histories, a checkpoint
taken at every cut after every number of arrived facts, then resumed once all facts arrived
(late ones included), either says it no longer holds or gives exactly what evaluating the
whole thread gives for the waits after the cut (evidence, verdict) and its findings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sidewatch.app.evaluate import settles
from sidewatch.app.read import settled_body
from sidewatch.core.checkpoint import (
    Checkpoint,
    at_cut,
    choose,
    holds,
    seeded,
    seen_in,
    split,
)
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import (
    VIA_GATED_CALL,
    VIA_TOOL_MESSAGE,
    AnswerFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    SubagentFact,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
    key_hash,
)
from sidewatch.core.health import classify
from sidewatch.core.model import Code, Heartbeat, SubagentState
from sidewatch.core.policy import DEFAULT_POLICY, Need, Policy
from sidewatch.core.settled import kept, restored
from tests.core.test_engine_differential import (
    CALLS,
    INTERRUPTS,
    MIN,
    THREAD,
    _thread,
    histories,
    interrupts,
    policies,
    signal,
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
        "subagents",
    ):
        out += getattr(facts, name)
    return sorted(out, key=lambda f: f.seq)  # type: ignore[attr-defined]


def _resumed(
    first: ThreadFacts, facts: ThreadFacts, cut: int, policy_for: object, now: int, later: int
) -> tuple[list[object], list[object]] | None:
    """The checkpoint of `first` at `cut` (its waits as the store recorded them), resumed on
    `facts` at `later`: (the suffix's waits, the whole thread's waits after the cut), or None
    when it does not hold. Where it holds, the waits before the cut keep what the store
    recorded of them (they are not evaluated again)."""
    then = evaluate(first, policy_for, now)  # type: ignore[arg-type]
    found = at_cut(first, then, cut)
    if found is None:
        return None
    cp, taken_suffix, taken_seen = found
    # The auditor keeps a checkpoint, and what it settles, only where it holds when taken
    # (core.checkpoint.choose).
    taken_part = evaluate(seeded(taken_suffix, taken_seen, cut), policy_for, now)  # type: ignore[arg-type]
    taken = holds(cp, taken_suffix, taken_part, taken_seen)
    recorded = [w.evidence.request_id for w in then.waits if w.evidence.requested_at < cut]
    prefix, suffix = split(facts, cut)
    seen = seen_in(prefix, recorded, facts.signals)
    part = evaluate(seeded(suffix, seen, cut), policy_for, later)  # type: ignore[arg-type]
    if not holds(cp, suffix, part, seen):
        return None
    whole = evaluate(facts, policy_for, later)  # type: ignore[arg-type]
    expected = [
        (w.evidence, w.verdict, w.settled_at) for w in whole.waits if w.evidence.requested_at >= cut
    ]
    got = [(w.evidence, w.verdict, w.settled_at) for w in part.waits]
    assert got == expected
    assert _records(whole, cut) == _records(then, cut)
    # What is kept of the waits it settles (app.evaluate, core.settled), read back later with
    # the beats that reach them then (thread-wide ones, and their runs', bound services'
    # too, whenever they came), is the whole thread's evidence and verdict later.
    later_of: dict[str, Any] = {}  # a GET shows the first wait with a requestId
    for w in whole.waits:
        later_of.setdefault(w.evidence.request_id, w)
    firsts: dict[str, Any] = {}
    for w in then.waits:
        firsts.setdefault(w.evidence.request_id, w)
    for w in firsts.values() if taken else ():
        if settles(w, cut):
            k = kept(w)
            assert not any(isinstance(i, Heartbeat) for i in k.evidence.items)
            beats = [h for h in facts.heartbeats if h.run_id is None or h.run_id in k.runs]
            ev = restored(k, beats)
            lw = later_of[w.evidence.request_id]
            assert ev == lw.evidence
            v = classify(ev, policy_for(ev.action, ev.reason), later)  # type: ignore[operator]
            assert v == lw.verdict
            assert settled_body(ev, v) == settled_body(lw.evidence, lw.verdict)
    # The thread's findings as a set: they are stored by their natural key, in no order, and
    # the pass emits lone answers' findings in the order the answers came in.
    assert sorted(part.findings, key=repr) == sorted(
        (f for f in whole.findings if f.at >= cut), key=repr
    )
    return got, expected


def _records(result: Any, cut: int) -> list[tuple[object, ...]]:
    """What the store keeps of each wait before the cut (app.evaluate `settled_rows`)."""
    return [
        (
            w.evidence.request_id,
            w.settled_at,
            *(
                (v.state, v.since, v.facts.decided_at, v.facts.receipt_at, v.unreported, v.findings)
                if (v := w.verdict) is not None
                else ()
            ),
        )
        for w in result.waits
        if w.evidence.requested_at < cut
    ]


HASHED = {key_hash(k): k for k in (*INTERRUPTS, *CALLS, "field")}


def _thread_wide(f: object) -> bool:
    return isinstance(f, HeartbeatFact) and f.run_id is None


@st.composite
def blocks(draw: st.DrawFn) -> tuple[ThreadFacts, int]:
    """Two or three histories one after another on one thread, their ids renamed by block
    (within a block ids repeat, across blocks mostly not: a block keeps some of the ids of
    the one before), each block later than the one before; some facts of a block arrive
    after the next block (late facts, timed before what was evaluated). Interrupt ids and
    tool-call ids may be shared by every block while runs are not: scripted tool-call ids,
    and CrewAI's one interrupt id per thread (the thread id)."""
    out: list[object] = []
    late: list[object] = []
    offset = seq = 0
    now = 0
    # Shared by every block: "" (each block its own), "*" (one name for all), "crew" (every
    # interrupt id is the thread's id, for interrupts; tool calls: like "*").
    interrupts = draw(st.sampled_from(("", "*", "crew")))
    calls = draw(st.sampled_from(("", "*")))
    for n in range(draw(st.integers(2, 3))):
        facts, at = draw(st.one_of(histories(), asked_and_answered()))
        keep = draw(st.booleans())  # this block shares its ids with the one before
        # A producer's requestIds may repeat across blocks, the other ids not.
        same = draw(st.booleans())
        block = str(n - 1 if keep and n else n)
        labels = {
            "run": block,
            "interrupt": interrupts or block,
            "call": calls or block,
            "request": str(n - 1 if same and n else n),
        }
        mine = _renamed(facts, offset, seq, labels)
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


@st.composite
def asked_and_answered(draw: st.DrawFn) -> tuple[ThreadFacts, int]:
    """Waits one after another, each answered by the next run in a dialect (a `resume[]`
    entry, a legacy resume map, a decision signal naming the interrupt), maybe with a gated
    call and its result, and evidence naming a wait that may come before it is announced:
    what keeps most cuts settled, so shared interrupt and tool-call ids are put to the test."""
    out: list[object] = []
    at = seq = 0
    for n in range(draw(st.integers(1, 3))):
        ask, answer = f"ask {n}", f"answer {n}"
        iid, call = draw(interrupts), draw(st.sampled_from((None, *CALLS)))
        seq += 10
        out += [
            RunFact(run_id=ask, thread_id=THREAD, mark=RunMark.INPUT, at=at, seq=seq),
            RunFact(run_id=ask, thread_id=THREAD, mark=RunMark.STARTED, at=at, seq=seq + 1),
        ]
        if draw(st.integers(0, 4)) == 0:  # evidence for the wait before it is announced
            out.append(draw(signal(at, seq + 1)))
        if call is not None:
            out.append(
                ToolCallFact(
                    thread_id=THREAD,
                    tool_call_id=call,
                    run_id=ask,
                    name="deploy",
                    digest=draw(st.sampled_from(("d1", "d2"))),
                    at=at,
                    seq=seq + 2,
                )
            )
        out += [
            InterruptFact(
                thread_id=THREAD,
                run_id=ask,
                interrupt_id=iid,
                at=at,
                seq=seq + 3,
                tool_call_id=call,
                request_id=draw(st.sampled_from((None, None, "req-a"))),
            ),
            RunFact(run_id=ask, thread_id=THREAD, mark=RunMark.INTERRUPTED, at=at, seq=seq + 3),
        ]
        at += draw(st.sampled_from((1, MIN)))
        out.append(RunFact(run_id=answer, thread_id=THREAD, mark=RunMark.INPUT, at=at, seq=seq + 4))
        code = draw(st.sampled_from((Code.ACCEPT, Code.ACCEPT, Code.DECLINE)))
        dialect = draw(st.sampled_from(("resume", "legacy", "signal")))
        if dialect == "resume":
            out.append(
                AnswerFact(
                    thread_id=THREAD, run_id=answer, interrupt_id=iid, code=code, at=at, seq=seq + 4
                )
            )
        elif dialect == "legacy":
            out.append(
                LegacyResumeFact(
                    thread_id=THREAD,
                    run_id=answer,
                    code=code,
                    at=at,
                    seq=seq + 4,
                    entries=((key_hash(iid), code, None),),
                )
            )
        else:
            out.append(
                SignalFact(
                    kind=SignalKind.DECISION,
                    at=at,
                    seq=seq + 4,
                    thread_id=THREAD,
                    interrupt_id=iid,
                    code=code,
                )
            )
        out.append(
            RunFact(run_id=answer, thread_id=THREAD, mark=RunMark.STARTED, at=at, seq=seq + 5)
        )
        if call is not None and draw(st.booleans()):
            out.append(
                ToolResultFact(
                    thread_id=THREAD, run_id=answer, tool_call_id=call, at=at, seq=seq + 6
                )
            )
        end = draw(st.sampled_from((RunMark.FINISHED, RunMark.FINISHED, RunMark.ERROR)))
        out.append(RunFact(run_id=answer, thread_id=THREAD, mark=end, at=at, seq=seq + 7))
        if draw(st.integers(0, 2)) == 0:  # a thread-wide beat (or span: into later blocks)
            out.append(
                HeartbeatFact(
                    thread_id=THREAD,
                    at=at,
                    seq=seq + 8,
                    handle=draw(st.sampled_from((None, True, False))),
                    last_at=draw(st.sampled_from((None, at + 2 * MIN, at + 60 * MIN))),
                    last_seq=seq + 8,
                )
            )
        at += draw(st.sampled_from((1, MIN, 10 * MIN)))
    return _thread(out), at + draw(st.integers(0, 20 * MIN))


def _renamed(facts: ThreadFacts, offset: int, seq: int, labels: dict[str, str]) -> ThreadFacts:
    """The history later by `offset` and `seq`, its ids named by their kind's label."""

    def run(x: str) -> str:
        return f"{x}#{labels['run']}"

    def iid(x: str) -> str:  # an interrupt id, or a call's (frontend waits, gated answers)
        if x in CALLS:
            return f"{x}#{labels['call']}"
        if x not in INTERRUPTS:  # a lone answer's, a legacy key naming no interrupt
            return run(x)
        return THREAD if labels["interrupt"] == "crew" else f"{x}#{labels['interrupt']}"

    def rid(x: str | None) -> str | None:
        if x is None:
            return None
        if x.startswith(f"{THREAD}/"):
            tail = x[len(THREAD) + 1 :]
            i, _, r = tail.partition("@")
            return f"{THREAD}/{iid(i)}" + (f"@{run(r)}" if r else "")
        return f"{x}#{labels['request']}"

    names = {"run_id": run, "interrupt_id": iid, "tool_call_id": lambda x: f"{x}#{labels['call']}"}

    def one(f: Any) -> Any:
        changes: dict[str, Any] = {"at": f.at + offset, "seq": f.seq + seq}
        for field, name in names.items():
            if getattr(f, field, None) is not None:
                changes[field] = name(getattr(f, field))
        if hasattr(f, "request_id"):
            changes["request_id"] = rid(f.request_id)
        if isinstance(f, LegacyResumeFact):
            changes["entries"] = tuple((key_hash(iid(HASHED[h])), c, d) for h, c, d in f.entries)
        if isinstance(f, InterruptFact) and f.expires_at is not None:
            changes["expires_at"] = f.expires_at + offset
        if isinstance(f, SubagentFact):
            changes["interrupt_ids"] = tuple(map(iid, f.interrupt_ids))
        return replace(f, **changes)

    return _thread([one(f) for f in _arrived(facts)])


def _bound(f: object) -> bool:
    return isinstance(f, HeartbeatFact) and f.bound


@st.composite
def services(draw: st.DrawFn) -> tuple[ThreadFacts, int]:
    """blocks(), with services bound to some of its runs, to a run it never uses, or to the
    thread (store.services.expand's facts, `bound`): each binding a handle, then beats of the
    service from then on, timed before or after any cut and arriving at any point (the
    binding too: a run's waits may be bound after they were announced, or before)."""
    facts, now = draw(blocks())
    arrived = _arrived(facts)
    runs = sorted({r for f in arrived if (r := getattr(f, "run_id", None)) is not None})
    times = sorted({f.at for f in arrived})  # type: ignore[attr-defined]
    last = max(f.seq for f in arrived) + 10  # type: ignore[attr-defined]
    out = list(arrived)
    for _ in range(draw(st.integers(0, 3))):
        run = draw(st.sampled_from((*runs, "unused", None)))  # None: bound to the thread
        at = draw(st.sampled_from(times)) + draw(st.sampled_from((-1, 0, 1)))
        out.append(
            HeartbeatFact(
                thread_id=THREAD,
                at=at,
                seq=draw(st.integers(0, last)),
                run_id=run,
                handle=True,
                bound=True,
            )
        )
        for _ in range(draw(st.integers(0, 2))):  # the first and the latest beat since
            out.append(
                HeartbeatFact(
                    thread_id=THREAD,
                    at=at + draw(st.sampled_from((0, 1, MIN, 5 * MIN, 40 * MIN))),
                    seq=draw(st.integers(0, last)),
                    run_id=run,
                    bound=True,
                )
            )
    return _thread(sorted(out, key=lambda f: f.seq)), now  # type: ignore[attr-defined]


@settings(max_examples=250, deadline=None)
@given(services(), policies(), st.integers(0, 20 * MIN), st.booleans(), st.booleans())
def test_a_checkpoint_resumed_at_every_cut_gives_the_whole_evaluation(
    history: tuple[ThreadFacts, int],
    pair: tuple[Policy, Policy],
    wait: int,
    beats: bool,
    bound: bool,
) -> None:
    facts, now = history
    if not beats:  # without thread-wide heartbeats (in the suffix whatever their time)
        facts = _thread([f for f in _arrived(facts) if not _thread_wide(f)])
    if not bound:  # without bound services' beats
        facts = _thread([f for f in _arrived(facts) if not _bound(f)])
    deploys, default = pair

    def policy_for(action: str | None, reason: str | None) -> Policy:
        return deploys if action == "deploy" else default

    arrived = _arrived(facts)
    cuts = sorted({f.at for f in arrived if f.at <= now})  # type: ignore[attr-defined]
    for k in range(1, len(arrived) + 1, max(1, len(arrived) // 6)):
        first = _thread(arrived[:k])
        for cut in cuts:
            _resumed(first, facts, cut, policy_for, now, now + wait)
    plain = _thread([f for f in arrived if not _bound(f)])
    for cut in cuts:  # everything arrived before the checkpoint
        got = _resumed(facts, facts, cut, policy_for, now, now + wait)
        # A bound service's beats, whenever timed, keep no cut from holding: the suffix has
        # those of its runs, and those of the other runs reach none of its waits.
        if got is None and plain != facts:
            assert _resumed(plain, plain, cut, policy_for, now, now + wait) is None


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


def _checkpoint(facts: ThreadFacts, now: int, policy: Any = _policy) -> Checkpoint:
    cp = choose(facts, evaluate(facts, policy, now), now, lambda f: evaluate(f, policy, now))
    assert cp is not None
    return cp


def _holds(first: list[object], more: list[object], now: int, policy: Any = _policy) -> bool:
    thread = _thread(first)
    cp = _checkpoint(thread, now, policy)
    recorded = [
        w.evidence.request_id
        for w in evaluate(thread, policy, now).waits
        if w.evidence.requested_at < cp.cut
    ]
    facts = _thread(first + more)
    prefix, suffix = split(facts, cp.cut)
    seen = seen_in(prefix, recorded, facts.signals)
    part = evaluate(seeded(suffix, seen, cp.cut), policy, now)
    if not holds(cp, suffix, part, seen):
        return False
    whole = evaluate(facts, policy, now)  # where it holds, it gives the whole thread's
    assert [w for w in whole.waits if w.evidence.requested_at >= cp.cut] == list(part.waits)
    assert _records(whole, cp.cut) == _records(evaluate(thread, policy, now), cp.cut)
    return True


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


def _beat(at: int, seq: int, **kw: Any) -> HeartbeatFact:
    return HeartbeatFact(thread_id=THREAD, at=at, seq=seq, **kw)


def _beating(waits: int) -> list[object]:
    """The long thread, beating thread-wide through it: a beat after each wait's answer, the
    last one a span that goes on past the last wait's run (so past any cut) to NOW + MIN."""
    beats = [_beat(n * 10 * MIN + 2 * MIN, 10**5 + n, handle=True) for n in range(waits - 1)]
    last = (waits - 1) * 10 * MIN - MIN
    beats.append(_beat(last, 10**5 + waits, handle=True, last_at=NOW + MIN, last_seq=10**7))
    return [*_long_thread(waits), *beats]


def test_a_thread_wide_heartbeat_after_the_cut_keeps_the_checkpoint() -> None:
    assert _holds(_long_thread(6), [_beat(NOW, 10**6)], NOW)


def test_a_thread_beating_thread_wide_is_cut_and_its_beats_stay_in_the_suffix() -> None:
    first = _thread(_beating(6))
    cp = _checkpoint(first, NOW)
    assert cp.cut == 5 * 10 * MIN
    prefix, suffix = split(first, cp.cut)
    assert prefix.heartbeats == ()
    assert suffix.heartbeats == first.heartbeats  # every later wait is fed each of them


def test_a_wait_after_the_cut_gets_the_thread_wide_beats_before_it() -> None:
    policy = replace(_policy(None, None), heartbeat=Need.REQUIRED, handle=Need.REQUIRED)
    first, more = _beating(6), _later_wait("new")
    assert _holds(first, more, NOW + MIN, lambda a, r: policy)  # equal to the whole thread's
    new = evaluate(_thread(first + more), lambda a, r: policy, NOW + MIN).waits[-1]
    assert new.evidence.interrupt_id == "new"
    beats = [i for i in new.evidence.items if isinstance(i, Heartbeat)]
    assert [b.at for b in beats] == [h.at for h in _beating(6) if isinstance(h, HeartbeatFact)]
    # The span from before the cut keeps it fresh with a handle (its beats arrived later).
    assert new.verdict is not None and new.verdict.missing == ()


def test_a_thread_wide_beat_timed_before_the_cut_that_arrived_later_keeps_it() -> None:
    # The thread-wide beats are the suffix's: not in the prefix's count.
    assert _holds(_beating(6), [_beat(MIN + 1, 10**6, handle=False)], NOW)


def test_a_run_s_beat_timed_before_the_cut_that_arrived_later_ends_it() -> None:
    assert not _holds(_beating(6), [_beat(MIN + 1, 10**6, run_id="ask-1")], NOW)


def test_a_thread_wide_beat_after_the_cut_leaves_the_settled_waits_records() -> None:
    # Fed to every wait, the settled ones too: their verdicts' `missing` changes (the beat
    # reached them), what the store keeps of them does not (a closed state rests on no beat).
    policy = replace(_policy(None, None), heartbeat=Need.REQUIRED, handle=Need.REQUIRED)
    first = _long_thread(6)
    more = [_beat(NOW, 10**6, handle=False)]

    def settled(facts: list[object]) -> Any:
        return evaluate(_thread(facts), lambda a, r: policy, NOW).waits[0]

    before, after = settled(first), settled(first + more)
    assert before.verdict.missing != after.verdict.missing
    assert _holds(first, more, NOW, lambda a, r: policy)  # records compared there


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


def _crew(facts: list[object]) -> list[object]:
    """The history with one interrupt id for every wait (CrewAI: the thread's id)."""
    return [
        replace(f, interrupt_id="crew") if isinstance(f, (InterruptFact, AnswerFact)) else f
        for f in facts
    ]


def _gated(facts: list[object], call: str) -> list[object]:
    """Each wait gated by a tool call `call` of its run (a scripted id, the same every time)."""
    out: list[object] = []
    for f in facts:
        if isinstance(f, InterruptFact):
            c = ToolCallFact(
                thread_id=THREAD,
                tool_call_id=call,
                run_id=f.run_id,
                name="deploy",
                digest=f"d-{f.run_id}",
                at=f.at,
                seq=f.seq,
            )
            out += [c, replace(f, tool_call_id=call)]
        else:
            out.append(f)
    return out


def _later_wait(iid: str, at: int = NOW, **kw: Any) -> list[object]:
    run = "later"
    return [
        RunFact(run_id=run, thread_id=THREAD, mark=RunMark.STARTED, at=at, seq=10**6),
        InterruptFact(thread_id=THREAD, run_id=run, interrupt_id=iid, at=at, seq=10**6 + 1, **kw),
    ]


def test_a_thread_reusing_one_interrupt_id_keeps_its_checkpoint_and_the_id_takes_its_run() -> None:
    first = _crew(_long_thread(6))
    cp = _checkpoint(_thread(first), NOW)
    answer = AnswerFact(
        thread_id=THREAD, run_id="then", interrupt_id="crew", code=Code.ACCEPT, at=NOW, seq=10**7
    )
    more = [*_later_wait("crew"), answer]
    facts = _thread(first + more)
    prefix, suffix = split(facts, cp.cut)
    recorded = [w.evidence.request_id for w in evaluate(_thread(first), _policy, NOW).waits]
    seen = seen_in(prefix, recorded[:5], facts.signals)
    part = evaluate(seeded(suffix, seen, cp.cut), _policy, NOW)

    assert _holds(first, more, NOW)
    assert [f"{THREAD}/crew@ask-5", f"{THREAD}/crew@later"] == [
        w.evidence.request_id for w in part.waits
    ]


def test_an_answer_naming_a_reused_id_before_the_suffix_asks_with_it_ends_the_checkpoint() -> None:
    # At the cut, before the wait after it is announced: the latest wait with the id is a
    # settled one, before the cut.
    # That answer's run then fails: in the whole thread, a finding on the settled wait.
    start = RunFact(run_id="new", thread_id=THREAD, mark=RunMark.STARTED, at=50 * MIN, seq=1)
    early = AnswerFact(
        thread_id=THREAD, run_id="new", interrupt_id="crew", code=Code.ACCEPT, at=50 * MIN, seq=2
    )
    error = replace(start, mark=RunMark.ERROR, at=NOW, seq=10**6)
    assert _holds(_crew(_long_thread(6)), [start, replace(early, seq=10**5), error], NOW)
    assert not _holds(_crew(_long_thread(6)), [start, early, error], NOW)


def test_a_reused_id_named_after_the_cut_but_never_asked_again_ends_the_checkpoint() -> None:
    idle = RunFact(run_id="idle", thread_id=THREAD, mark=RunMark.STARTED, at=60 * MIN, seq=10**5)
    first = [*_crew(_long_thread(6)), idle]  # cut at the idle run: every wait before it
    answer = AnswerFact(
        thread_id=THREAD, run_id="new", interrupt_id="other", code=Code.DECLINE, at=NOW, seq=10**6
    )
    assert _checkpoint(_thread(first), NOW).cut == 60 * MIN
    assert _holds(first, [answer], NOW)
    assert not _holds(first, [replace(answer, interrupt_id="crew")], NOW)


def test_a_tombstone_of_a_reused_id_after_the_cut_ends_the_checkpoint() -> None:
    assert not _holds(_crew(_long_thread(6)), _later_wait("crew", pruned=True), NOW)


def test_a_tool_message_on_a_thread_reusing_an_interrupt_id_ends_the_checkpoint() -> None:
    message = AnswerFact(
        thread_id=THREAD,
        run_id="then",
        interrupt_id="crew",
        code=Code.ACCEPT,
        at=NOW,
        seq=10**7,
        via=VIA_TOOL_MESSAGE,
    )
    assert _holds(_crew(_long_thread(6)), _later_wait("crew"), NOW)
    assert not _holds(_crew(_long_thread(6)), [*_later_wait("crew"), message], NOW)


def test_an_ungated_tool_call_id_used_again_keeps_the_checkpoint() -> None:
    call = ToolCallFact(
        thread_id=THREAD, tool_call_id="c", run_id="ask-0", name="x", digest=None, at=0, seq=12
    )
    again = replace(call, run_id="later", at=NOW, seq=10**6 + 2)
    result = ToolResultFact(
        thread_id=THREAD, run_id="later", tool_call_id="c", at=NOW, seq=10**6 + 3
    )
    assert _holds([*_long_thread(6), call], [*_later_wait("w"), again, result], NOW)


def test_a_result_for_the_call_id_of_a_settled_wait_ends_the_checkpoint() -> None:
    result = ToolResultFact(thread_id=THREAD, run_id="new", tool_call_id="c", at=NOW, seq=10**6)
    assert not _holds(_gated(_long_thread(6), "c")[:-8] + _long_thread(6)[-7:], [result], NOW)


def test_a_wait_gated_by_a_call_id_with_a_result_before_the_cut_ends_the_checkpoint() -> None:
    result = ToolResultFact(thread_id=THREAD, run_id="answer-0", tool_call_id="c", at=MIN, seq=14)
    wait = _gated(_later_wait("w"), "c")
    assert _holds([*_long_thread(6), replace(result, tool_call_id="other")], wait, NOW)
    assert not _holds([*_long_thread(6), result], wait, NOW)


def test_a_wait_gated_by_a_reused_call_id_without_its_call_after_the_cut_ends_it() -> None:
    call = ToolCallFact(
        thread_id=THREAD, tool_call_id="c", run_id="ask-0", name="x", digest="d", at=0, seq=12
    )
    wait = _later_wait("w", tool_call_id="c")  # its run's call not reported: the latest one
    assert _holds(_long_thread(6), wait, NOW)
    assert not _holds([*_long_thread(6), call], wait, NOW)


def test_a_subagent_invocation_with_steps_before_the_cut_ends_the_checkpoint() -> None:
    step = SubagentFact(
        thread_id=THREAD,
        run_id="ask-0",
        subagent_run_id="sub",
        state=SubagentState.RUNNING,
        at=0,
        seq=12,
    )
    wait = _later_wait("w", subagent_run_id="sub")
    assert _holds([*_long_thread(6), replace(step, subagent_run_id="other")], wait, NOW)
    assert not _holds([*_long_thread(6), step], wait, NOW)


def test_a_tool_message_before_the_cut_naming_the_call_of_a_later_wait_ends_the_checkpoint() -> (
    None
):
    message = AnswerFact(
        thread_id=THREAD,
        run_id="ask-0",
        interrupt_id="c",
        code=Code.ACCEPT,
        at=0,
        seq=12,
        via=VIA_GATED_CALL,
    )
    wait = _gated(_later_wait("w"), "c")
    assert _holds([*_long_thread(6), replace(message, interrupt_id="other")], wait, NOW)
    assert not _holds([*_long_thread(6), message], wait, NOW)


def test_a_service_bound_to_a_run_gives_its_beats_to_that_run_s_wait_after_the_cut() -> None:
    policy = replace(_policy(None, None), heartbeat=Need.REQUIRED, handle=Need.REQUIRED)
    first = _long_thread(6)
    bound = [
        # The later wait's run bound long before the cut, and a beat of the service since.
        _beat(MIN, 10**5, run_id="later", handle=True, bound=True),
        _beat(NOW + 1, 10**5 + 1, run_id="later", bound=True),
        # A settled wait's run bound after the cut: that wait only is fed its beats.
        _beat(NOW + 1, 10**5 + 2, run_id="ask-1", handle=True, bound=True),
    ]
    more = [*_later_wait("new"), *bound]
    assert _holds(first, more, NOW + MIN, lambda a, r: policy)  # equal to the whole thread's
    facts = _thread(first + more)
    prefix, suffix = split(facts, _checkpoint(_thread(first), NOW + MIN).cut)
    assert (prefix.heartbeats, suffix.heartbeats) == ((bound[2],), tuple(bound[:2]))
    new = evaluate(facts, lambda a, r: policy, NOW + MIN).waits[-1]
    alone = evaluate(_thread(first + more[:2]), lambda a, r: policy, NOW + MIN).waits[-1]
    assert new.verdict is not None and new.verdict.missing == ()  # fresh, with a handle
    assert alone.verdict is not None and alone.verdict.missing != ()
