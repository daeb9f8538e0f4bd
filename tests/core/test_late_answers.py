"""A wait a later run moved past unanswered is CANCELLED only provisionally (health-model.md,
closed states; input.md, "Runs that move past a wait"): a run's answer for it that arrives
later reopens it, evaluated as if it had stayed open, with `answered_after_moved_past`. The
engine's one pass and the reference replay (tests/oracle.py) agree on it; a certain CANCELLED
(an explicit cancel) never reopens."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sidewatch.core.engine import Evaluated, evaluate
from sidewatch.core.facts import (
    AnswerFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    ThreadFacts,
    key_hash,
)
from sidewatch.core.facts import ToolResultFact as Result
from sidewatch.core.model import Code, State, Transition
from sidewatch.core.policy import DEFAULT_POLICY, Need, Policy, ReceiptKind
from sidewatch.core.vocab import FindingRule
from tests.core.test_checkpoint import _holds, _thread
from tests.core.test_engine_differential import THREAD
from tests.oracle import oracle_verdicts

MIN = 60_000
T0 = 1_785_083_400_000
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)
REOPENED = FindingRule.ANSWERED_AFTER_MOVED_PAST


def run(run_id: str, at: int, seq: int, *marks: RunMark) -> list[RunFact]:
    return [
        RunFact(run_id=run_id, thread_id=THREAD, mark=mark, at=at, seq=seq + n)
        for n, mark in enumerate(marks)
    ]


def answer(run_id: str, code: Code, at: int, seq: int) -> AnswerFact:
    return AnswerFact(
        thread_id=THREAD, run_id=run_id, interrupt_id="call-1", code=code, at=at, seq=seq
    )


def thread(*answers: AnswerFact, answered_run: list[RunFact] | None = None) -> ThreadFacts:
    """run-1 asks (16:00); run-2, a new message, finishes in success (16:05) and moves past
    the wait; then run-3's input carries `answers` (16:10), and run-3 goes on as given."""
    runs = [
        *run("run-1", T0, 1, RunMark.INPUT, RunMark.STARTED, RunMark.INTERRUPTED),
        *run("run-2", T0 + 5 * MIN, 10, RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED),
        *(answered_run or []),
    ]
    interrupt = InterruptFact(
        thread_id=THREAD, run_id="run-1", interrupt_id="call-1", at=T0, seq=3, tool_call_id="call-1"
    )
    results = [
        Result(thread_id=THREAD, run_id=r.run_id, tool_call_id="call-1", at=r.at, seq=r.seq - 1)
        for r in answered_run or []
        if r.mark is RunMark.FINISHED
    ]
    return ThreadFacts(
        thread_id=THREAD,
        interrupts=(interrupt,),
        runs=tuple(runs),
        answers=answers,
        tool_results=tuple(results),
    )


def continued(*marks: RunMark) -> list[RunFact]:
    """run-3 at 16:10, its steps a second apart (a result before a FINISHED)."""
    return [
        RunFact(
            run_id="run-3", thread_id=THREAD, mark=m, at=T0 + 10 * MIN + n * 1000, seq=21 + 2 * n
        )
        for n, m in enumerate(marks)
    ]


def verdict_of(facts: ThreadFacts, now: int) -> Evaluated:
    """The thread's one wait, evaluated at `now` under QUIET."""
    (w,) = evaluate(facts, lambda a, r: QUIET, now).waits
    assert w.verdict is not None
    return w


def test_a_later_accept_reopens_a_wait_moved_past_and_its_run_resumes_it() -> None:
    facts = thread(
        answer("run-3", Code.ACCEPT, T0 + 10 * MIN, 20),
        answered_run=continued(RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED),
    )

    w = verdict_of(facts, T0 + 30 * MIN)

    v = w.verdict
    assert (State.RESUMED, "accept", False, ()) == (
        v.state,
        v.facts.decision,
        v.uncertain,
        v.missing,
    )
    assert (FindingRule.DROPPED_UNANSWERED, REOPENED) == tuple(
        f for f in v.findings if f in (FindingRule.DROPPED_UNANSWERED, REOPENED)
    )
    assert [
        Transition(T0, None, State.WAITING),
        Transition(T0 + 5 * MIN, State.WAITING, State.CANCELLED),
        Transition(T0 + 10 * MIN, State.CANCELLED, State.WAITING),
        Transition(T0 + 10 * MIN + 1000, State.WAITING, State.RESUMED),
    ] == list(v.transitions)
    assert w.settled_at == T0 + 10 * MIN + 1000


def test_a_late_accept_whose_run_fails_is_stuck_after_decision() -> None:
    # run-3 carried the accept and failed: the continuation failed, as for an open wait
    facts = thread(
        answer("run-3", Code.ACCEPT, T0 + 10 * MIN, 20),
        answered_run=continued(RunMark.INPUT, RunMark.STARTED, RunMark.ERROR),
    )

    v = verdict_of(facts, T0 + 30 * MIN).verdict

    assert (State.STUCK_AFTER_DECISION, T0 + 10 * MIN + 2000) == (v.state, v.since)
    assert {REOPENED, FindingRule.RESUME_REJECTED} <= set(v.findings)


def test_a_late_decline_closes_a_wait_moved_past_by_the_decline() -> None:
    facts = thread(
        answer("run-3", Code.DECLINE, T0 + 10 * MIN, 20),
        answered_run=continued(RunMark.INPUT, RunMark.STARTED),
    )

    v = verdict_of(facts, T0 + 30 * MIN).verdict

    assert (State.CLOSED_BY_DECLINE, T0 + 10 * MIN, False) == (v.state, v.since, v.uncertain)
    assert REOPENED in v.findings


def test_the_reopened_wait_is_as_the_moved_past_one_until_the_answer() -> None:
    facts = thread(
        answer("run-3", Code.ACCEPT, T0 + 10 * MIN, 20),
        answered_run=continued(RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED),
    )

    v = verdict_of(facts, T0 + 9 * MIN).verdict

    assert (State.CANCELLED, True, ()) == (
        v.state,
        v.uncertain,
        tuple(f for f in v.findings if f is REOPENED),
    )


def test_a_certain_cancel_never_reopens_even_when_a_later_run_consumes_an_accept() -> None:
    # Mastra's adapter answers a cancelled entry alone and keeps the suspension: a later
    # accept runs the action (mastra-cancel-then-answer). The spec keeps a cancel closed.
    facts = thread(
        answer("run-2", Code.CANCEL, T0 + 5 * MIN, 10),
        answer("run-3", Code.ACCEPT, T0 + 10 * MIN, 20),
        answered_run=continued(RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED),
    )

    v = verdict_of(facts, T0 + 30 * MIN).verdict

    assert (State.CANCELLED, "cancel", False, T0 + 5 * MIN) == (
        v.state,
        v.facts.decision,
        v.uncertain,
        v.since,
    )
    assert REOPENED not in v.findings


def test_the_engine_and_the_reference_replay_agree_on_late_answers() -> None:
    receipt_policy = replace(QUIET, name="adk", receipt=ReceiptKind.TOOL_RESULT)
    cases = [
        thread(
            answer("run-3", code, T0 + 10 * MIN, 20),
            answered_run=continued(RunMark.INPUT, RunMark.STARTED, *end),
        )
        for code in Code
        for end in ((RunMark.FINISHED,), (RunMark.ERROR,), ())
    ]
    # the answering run announced first at its RUN_STARTED, and one more run moving past
    cases.append(
        thread(
            answer("run-3", Code.ACCEPT, T0 + 10 * MIN, 20),
            answered_run=[
                *continued(RunMark.STARTED),
                *run("run-4", T0 + 20 * MIN, 40, RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED),
            ],
        )
    )
    for facts in cases:
        for policy in (QUIET, receipt_policy):
            for now in (T0 + 6 * MIN, T0 + 10 * MIN, T0 + 12 * MIN, T0 + 40 * MIN):

                def policy_for(
                    action: str | None, reason: str | None, p: Policy = policy
                ) -> Policy:
                    return p

                expected, findings = oracle_verdicts(facts, policy_for, now)
                result = evaluate(facts, policy_for, now)

                assert [(ev.findings, v) for ev, v in expected] == [
                    (w.evidence.findings, w.verdict) for w in result.waits
                ]
                assert findings == result.findings


# --- past a checkpoint (core.checkpoint): a wait moved past is settled only provisionally ---


def _ignored_thread(waits: int) -> list[object]:
    """Waits one after another, each moved past by the next run, a new message nobody answers
    it in (CANCELLED, uncertain: settled, for now)."""
    out: list[object] = []
    for n in range(waits):
        at, seq = n * 10 * MIN, 10 * (n + 1)
        ask, moved = f"ask-{n}", f"moved-{n}"
        out += [
            *(run(ask, at, seq, RunMark.STARTED)),
            InterruptFact(thread_id=THREAD, run_id=ask, interrupt_id=f"i{n}", at=at, seq=seq + 1),
            *(run(ask, at, seq + 2, RunMark.INTERRUPTED)),
            *(run(moved, at + MIN, seq + 3, RunMark.INPUT, RunMark.STARTED, RunMark.FINISHED)),
        ]
    return out


def _late(answer_fact: object) -> list[object]:
    """A new run at 16:40 whose input carries `answer_fact`, and that then goes on."""
    at, seq = 100 * MIN, 10**6
    return [
        RunFact(run_id="late", thread_id=THREAD, mark=RunMark.INPUT, at=at, seq=seq),
        answer_fact,
        *(
            RunFact(run_id="late", thread_id=THREAD, mark=m, at=at, seq=seq + n)
            for n, m in ((1, RunMark.STARTED), (2, RunMark.FINISHED))
        ),
    ]


LATE_ANSWERS = {
    "resume entry": AnswerFact(
        thread_id=THREAD,
        run_id="late",
        interrupt_id="i1",
        code=Code.ACCEPT,
        at=100 * MIN,
        seq=10**6,
    ),
    "tool message": AnswerFact(
        thread_id=THREAD,
        run_id="late",
        interrupt_id="i1",
        code=Code.ACCEPT,
        at=100 * MIN,
        seq=10**6,
        via="tool_message",
    ),
    "legacy resume map": LegacyResumeFact(
        thread_id=THREAD,
        run_id="late",
        code=Code.ACCEPT,
        at=100 * MIN,
        seq=10**6,
        entries=((key_hash("i1"), Code.ACCEPT, None),),
    ),
}


@pytest.mark.parametrize("answer_fact", LATE_ANSWERS.values(), ids=list(LATE_ANSWERS))
def test_a_late_answer_to_a_wait_moved_past_before_the_cut_ends_the_checkpoint(
    answer_fact: object,
) -> None:
    history, more = _ignored_thread(6), _late(answer_fact)
    whole = evaluate(_thread(history + more), lambda a, r: QUIET, 100 * MIN)

    assert not _holds(history, more, 100 * MIN, lambda a, r: QUIET)
    assert (State.RESUMED, True) == (
        whole.waits[1].verdict and whole.waits[1].verdict.state,
        REOPENED in whole.waits[1].evidence.findings + whole.waits[1].verdict.findings,
    )


def test_a_thread_of_waits_moved_past_keeps_its_checkpoint_while_nobody_answers_them() -> None:
    new = RunFact(run_id="new", thread_id=THREAD, mark=RunMark.STARTED, at=100 * MIN, seq=10**6)

    assert _holds(_ignored_thread(6), [new], 100 * MIN, lambda a, r: QUIET)
