"""The engine's one pass gives what the straightforward reference (`tests/oracle.py`) gives:
the same waits, verdicts (state, since, transitions, findings, uncertain, missing, phase, due)
and thread findings, on generated thread histories in every dialect the facts represent."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sidewatch.core.engine import evaluate
from sidewatch.core.facts import (
    AnswerFact,
    FindingFact,
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
from sidewatch.core.model import Code, SubagentState, Thresholds
from sidewatch.core.policy import Need, Policy, ReceiptKind
from tests.oracle import oracle_verdicts

MIN = 60_000
THREAD = "t /@1"
INTERRUPTS = ("i1", "i2", "i3")
RUNS = ("r1", "r2", "r3", "r4")
CALLS = ("c1", "c2")
SUBAGENTS = ("s1", "s2")
REQUESTS = (f"{THREAD}/i1", f"{THREAD}/i2", f"{THREAD}/i1@r3", "req-a", "req-b")

maybe_digest = st.sampled_from((None, "d1", "d2"))
codes = st.sampled_from(Code)
runs = st.sampled_from(RUNS)
interrupts = st.sampled_from(INTERRUPTS)


def interrupt(at: int, seq: int) -> st.SearchStrategy[InterruptFact]:
    return st.builds(
        InterruptFact,
        thread_id=st.just(THREAD),
        run_id=runs,
        interrupt_id=interrupts,
        at=st.just(at),
        seq=st.just(seq),
        reason=st.sampled_from((None, "risky")),
        tool_call_id=st.sampled_from((None, *CALLS)),
        expires_at=st.sampled_from((None, at + 3 * MIN, at + 20 * MIN)),
        digest=maybe_digest,
        handle=st.sampled_from((None, True, False)),
        request_id=st.sampled_from((None, None, None, "req-a", "req-b")),
        action=st.sampled_from((None, "deploy")),
        tool_result_receipt=st.sampled_from((False, False, False, True)),
        subagent_run_id=st.sampled_from((None, None, None, "", *SUBAGENTS)),
    )


@st.composite
def subagent(draw: st.DrawFn, at: int, seq: int, run: str | None = None) -> SubagentFact:
    state = draw(st.sampled_from(SubagentState))
    suspended = state is SubagentState.SUSPENDED
    return SubagentFact(
        thread_id=THREAD,
        run_id=run if run is not None else draw(runs),
        subagent_run_id=draw(st.sampled_from(SUBAGENTS)),
        state=state,
        at=at,
        seq=seq,
        name=draw(st.sampled_from((None, "researcher")))
        if state is SubagentState.RUNNING
        else None,
        interrupt_ids=tuple(draw(st.lists(interrupts, max_size=2))) if suspended else (),
    )


def answer(at: int, seq: int) -> st.SearchStrategy[AnswerFact]:
    return st.builds(
        AnswerFact,
        thread_id=st.just(THREAD),
        run_id=runs,
        interrupt_id=st.sampled_from((*INTERRUPTS, *CALLS, "elsewhere")),
        code=codes,
        at=st.just(at),
        seq=st.just(seq),
        digest=maybe_digest,
        via=st.sampled_from(("resume", "resume", "tool_message", "gated_call")),
    )


@st.composite
def legacy(draw: st.DrawFn, at: int, seq: int) -> LegacyResumeFact:
    keys = draw(st.lists(st.sampled_from((*INTERRUPTS, "field")), max_size=2))
    entries = tuple((key_hash(k), draw(codes), draw(maybe_digest)) for k in keys)
    return LegacyResumeFact(
        thread_id=THREAD,
        run_id=draw(runs),
        code=draw(codes),
        at=at,
        seq=seq,
        digest=draw(maybe_digest),
        entries=entries,
    )


@st.composite
def signal(draw: st.DrawFn, at: int, seq: int) -> SignalFact:
    by_request = draw(st.booleans())
    return SignalFact(
        kind=draw(st.sampled_from(SignalKind)),
        at=at,
        seq=seq,
        request_id=draw(st.sampled_from(REQUESTS)) if by_request else None,
        thread_id=None if by_request else draw(st.sampled_from((THREAD, THREAD, "other"))),
        interrupt_id=None if by_request else draw(interrupts),
        approver_ref=draw(st.sampled_from((None, "ops"))),
        delivered=draw(st.booleans()),
        acknowledged=draw(st.booleans()),
        code=draw(st.sampled_from((None, *Code))),
        digest=draw(maybe_digest),
    )


def fact(at: int, seq: int) -> st.SearchStrategy[object]:
    return st.one_of(
        interrupt(at, seq),
        interrupt(at, seq),
        st.builds(
            RunFact,
            run_id=runs,
            thread_id=st.just(THREAD),
            mark=st.sampled_from(RunMark),
            at=st.just(at),
            seq=st.just(seq),
        ),
        st.builds(
            RunFact,
            run_id=runs,
            thread_id=st.just(THREAD),
            mark=st.sampled_from((RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED)),
            at=st.just(at),
            seq=st.just(seq),
        ),
        answer(at, seq),
        answer(at, seq),
        legacy(at, seq),
        signal(at, seq),
        subagent(at, seq),
        st.builds(
            HeartbeatFact,
            thread_id=st.just(THREAD),
            at=st.just(at),
            seq=st.just(seq),
            run_id=st.sampled_from((None, *RUNS)),
            handle=st.sampled_from((None, True, False)),
            # a compacted span of beats (store.heartbeats), some past later facts
            last_at=st.sampled_from((None, None, at + 30_000, at + 20 * MIN)),
            last_seq=st.just(seq),
            beats=st.just(3),
        ),
        st.builds(
            ToolCallFact,
            thread_id=st.just(THREAD),
            tool_call_id=st.sampled_from(CALLS),
            run_id=runs,
            name=st.sampled_from(("deploy", "delete")),
            digest=st.sampled_from(("d1", "d2")),
            at=st.just(at),
            seq=st.just(seq),
        ),
        st.builds(
            ToolResultFact,
            thread_id=st.just(THREAD),
            run_id=runs,
            tool_call_id=st.sampled_from(CALLS),
            at=st.just(at),
            seq=st.just(seq),
        ),
        st.builds(
            FindingFact,
            rule=st.sampled_from(("expires_unparsed", "resume_unknown")),
            at=st.just(at),
            seq=st.just(seq),
            thread_id=st.just(THREAD),
            run_id=runs,
            interrupt_id=interrupts,
        ),
    )


RUN_MARKS = (RunMark.FINISHED, RunMark.ERROR, RunMark.ERROR, RunMark.CANCELLED, None, None, None)


@st.composite
def episode(
    draw: st.DrawFn, at: int, seq: int, fresh: str, announced: tuple[str, ...]
) -> list[object]:
    """One run as producers send it: its input (maybe answering waits, in one of the
    dialects), its start, maybe a gated tool call and its result, and its end (or an
    interrupt, maybe asking again for a wait already announced)."""
    run = draw(st.sampled_from((fresh, fresh, fresh, *RUNS)))
    out: list[object] = [
        RunFact(run_id=run, thread_id=THREAD, mark=RunMark.INPUT, at=at, seq=seq),
    ]
    dialect = draw(
        st.sampled_from(
            ("none", "resume", "resume", "legacy", "lone", "tool_message", "frontend", "gated")
        )
    )
    if dialect in ("resume", "tool_message", "lone", "frontend", "gated"):
        named = st.sampled_from(announced) if announced else interrupts
        if dialect in ("frontend", "gated"):  # a tool message for a call, or its gated call
            named = st.sampled_from(CALLS)
        for iid in draw(st.lists(st.one_of(named, named, interrupts), min_size=1, max_size=2)):
            via = {"tool_message": "tool_message", "frontend": "tool_message"}.get(
                dialect, "gated_call" if dialect == "gated" else "resume"
            )
            out.append(
                AnswerFact(
                    thread_id=THREAD,
                    run_id=run,
                    interrupt_id="elsewhere" if dialect == "lone" else iid,
                    code=draw(st.sampled_from((Code.ACCEPT, Code.ACCEPT, Code.DECLINE))),
                    at=at,
                    seq=seq,
                    digest=draw(maybe_digest),
                    via=via,
                )
            )
    elif dialect == "legacy":
        out.append(draw(legacy(at, seq)))
    step = draw(st.sampled_from((0, 0, 1, MIN)))
    out.append(
        RunFact(run_id=run, thread_id=THREAD, mark=RunMark.STARTED, at=at + step, seq=seq + 1)
    )
    call = draw(st.sampled_from((None, *CALLS)))
    if call is not None:
        out.append(
            ToolCallFact(
                thread_id=THREAD,
                tool_call_id=call,
                run_id=run,
                name=draw(st.sampled_from(("deploy", "delete"))),
                digest=draw(st.sampled_from(("d1", "d2"))),
                at=at + step,
                seq=seq + 2,
            )
        )
        if draw(st.booleans()):
            out.append(
                ToolResultFact(
                    thread_id=THREAD, run_id=run, tool_call_id=call, at=at + step, seq=seq + 3
                )
            )
    if draw(st.booleans()):
        out.append(
            HeartbeatFact(
                thread_id=THREAD,
                at=at + step,
                seq=seq + 3,
                run_id=draw(st.sampled_from((None, run))),
                handle=draw(st.sampled_from((None, True, False))),
                last_at=draw(st.sampled_from((None, at + step + 2 * MIN))),
                last_seq=seq + 3,
            )
        )
    end = draw(st.sampled_from(RUN_MARKS))
    if end is None:  # interrupted: a wait announced, maybe again
        f = draw(interrupt(at + step, seq + 4))
        if draw(st.booleans()):  # raised by a subagent, which suspends naming it (or not)
            sub = draw(subagent(at + step, seq + 3, run))
            named = (f.interrupt_id,) if draw(st.booleans()) else sub.interrupt_ids
            out.append(replace(sub, state=SubagentState.SUSPENDED, interrupt_ids=named))
        out.append(replace(f, run_id=run, tool_call_id=call if draw(st.booleans()) else None))
        out.append(
            RunFact(
                run_id=run, thread_id=THREAD, mark=RunMark.INTERRUPTED, at=at + step, seq=seq + 4
            )
        )
    elif end is RunMark.FINISHED and call is not None and draw(st.booleans()):
        # a success that left a frontend call to the application: a wait named by the call
        out.append(
            InterruptFact(
                thread_id=THREAD,
                run_id=run,
                interrupt_id=call,
                at=at + step,
                seq=seq + 4,
                reason="frontend_tool",
                tool_call_id=call,
                handle=draw(st.sampled_from((None, True))),
            )
        )
        out.append(RunFact(run_id=run, thread_id=THREAD, mark=end, at=at + step, seq=seq + 4))
    else:
        out.append(RunFact(run_id=run, thread_id=THREAD, mark=end, at=at + step, seq=seq + 4))
    return out


@st.composite
def histories(draw: st.DrawFn) -> tuple[ThreadFacts, int]:
    """Facts in arrival order; times mostly move forward, sometimes back (sources are not
    ordered with each other), often equal (a unit without timestamps); a line may give
    several facts one seq; some facts are delivered again."""
    out: list[object] = []
    announced: list[str] = []
    at, seq = 0, 0
    for n in range(draw(st.integers(3, 14))):
        step = draw(st.sampled_from((0, 0, 1, 2, 4, 7, 12, -3)))
        at = max(0, at + step * MIN // 2)
        if draw(st.integers(0, 3)):
            seq += 5  # else the same line gave this fact too
        if draw(st.integers(0, 3)):
            new = draw(episode(at, seq, f"run {n}", tuple(dict.fromkeys(announced))))
        else:
            new = [draw(fact(at, seq))]
        out += new
        announced += [f.interrupt_id for f in new if isinstance(f, InterruptFact)]
        if draw(st.integers(0, 9)) == 0:  # delivered again, later
            seq += 5
            out.append(replace(new[-1], seq=seq))  # type: ignore[type-var]
    now = draw(st.one_of(st.integers(0, at + 30 * MIN), st.integers(at, at + 30 * MIN)))
    return _thread(out), now


def _thread(facts: list[object]) -> ThreadFacts:
    def of(kind: type) -> tuple:  # type: ignore[type-arg]
        return tuple(f for f in facts if isinstance(f, kind))

    return ThreadFacts(
        thread_id=THREAD,
        interrupts=of(InterruptFact),
        tool_calls=of(ToolCallFact),
        runs=of(RunFact),
        answers=of(AnswerFact),
        tool_results=of(ToolResultFact),
        signals=of(SignalFact),
        heartbeats=of(HeartbeatFact),
        legacy_resumes=of(LegacyResumeFact),
        findings=of(FindingFact),
        subagents=of(SubagentFact),
    )


@st.composite
def policies(draw: st.DrawFn) -> tuple[Policy, Policy]:
    def one(name: str) -> Policy:
        return Policy(
            name=name,
            thresholds=Thresholds(
                resume_grace_ms=draw(st.sampled_from((MIN, 5 * MIN))),
                heartbeat_freshness_ms=draw(st.sampled_from((2 * MIN, 10 * MIN))),
                route_grace_ms=draw(st.sampled_from((MIN, 2 * MIN))),
            ),
            require_acknowledgement=draw(st.booleans()),
            receipt=draw(st.sampled_from(ReceiptKind)),
            route=draw(st.sampled_from(Need)),
            handle=draw(st.sampled_from(Need)),
            heartbeat=draw(st.sampled_from(Need)),
        )

    return one("deploys"), one("default")


@settings(max_examples=300, deadline=None)
@given(histories(), policies())
def test_the_engine_gives_the_verdicts_of_the_reference_replay(
    history: tuple[ThreadFacts, int], pair: tuple[Policy, Policy]
) -> None:
    facts, now = history
    deploys, default = pair

    def policy_for(action: str | None, reason: str | None) -> Policy:
        return deploys if action == "deploy" else default

    expected, expected_findings = oracle_verdicts(facts, policy_for, now)
    result = evaluate(facts, policy_for, now)

    assert [(ev.request_id, ev.run_id, ev.findings, v) for ev, v in expected] == [
        (w.evidence.request_id, w.evidence.run_id, w.evidence.findings, w.verdict)
        for w in result.waits
    ]
    assert expected_findings == result.findings
