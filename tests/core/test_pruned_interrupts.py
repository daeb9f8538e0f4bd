"""An interrupt kept after its wait was pruned (store.retention): no wait of its own, but its
id is taken and closed. A later announcement of the id is a new wait `{thread}/{id}@{run}`,
a legacy resume map keyed by it is a map, and an answer naming it is no lone answer."""

from __future__ import annotations

from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import (
    AnswerFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    ThreadFacts,
    key_hash,
)
from sidewatch.core.model import Code, State
from sidewatch.core.policy import Policy, select

T0 = 1_785_081_600_000
MIN = 60_000
POLICIES = Config().policies


def policy_for(action: str | None, reason: str | None) -> Policy:
    return select(POLICIES, action, reason)


def run(run_id: str, at: int, *marks: RunMark) -> tuple[RunFact, ...]:
    return tuple(
        RunFact(run_id=run_id, thread_id="t", mark=m, at=at + k, seq=at + k)
        for k, m in enumerate(marks)
    )


PRUNED = InterruptFact(thread_id="t", run_id="r1", interrupt_id="i", at=T0, seq=1, pruned=True)
OPEN = InterruptFact(thread_id="t", run_id="r3", interrupt_id="i", at=T0 + 2 * MIN, seq=5)
OTHER = InterruptFact(thread_id="t", run_id="r3", interrupt_id="j", at=T0 + 2 * MIN, seq=5)
STARTED = run("r3", T0 + 2 * MIN - 2, RunMark.STARTED, RunMark.INTERRUPTED)


def test_a_pruned_interrupt_is_no_wait_and_its_reused_id_is_a_new_wait_of_its_run() -> None:
    facts = ThreadFacts(thread_id="t", interrupts=(PRUNED, OPEN), runs=STARTED)

    waits = evaluate(facts, policy_for, T0 + 3 * MIN).waits

    assert ["t/i@r3"] == [w.evidence.request_id for w in waits]


def test_a_legacy_resume_map_keyed_by_a_pruned_interrupt_is_a_map() -> None:
    # Keyed by i (pruned): it answers i, not the thread's one open wait j.
    at = T0 + 4 * MIN
    legacy = LegacyResumeFact(
        thread_id="t",
        run_id="r4",
        code=Code.DECLINE,
        at=at,
        seq=9,
        entries=((key_hash("i"), Code.DECLINE, None),),
    )
    facts = ThreadFacts(
        thread_id="t", interrupts=(PRUNED, OTHER), runs=STARTED, legacy_resumes=(legacy,)
    )

    (wait,) = evaluate(facts, policy_for, at + MIN).waits

    assert wait.verdict is not None
    assert State.CLOSED_BY_DECLINE != wait.verdict.state
    assert "j" == wait.evidence.interrupt_id


def test_an_answer_naming_a_pruned_interrupt_is_no_lone_answer() -> None:
    at = T0 + 4 * MIN
    answer = AnswerFact(
        thread_id="t", run_id="r4", interrupt_id="i", code=Code.DECLINE, at=at, seq=9
    )
    runs = (*STARTED, *run("r4", at + 1, RunMark.STARTED, RunMark.FINISHED))
    facts = ThreadFacts(thread_id="t", interrupts=(PRUNED, OTHER), runs=runs, answers=(answer,))

    (wait,) = evaluate(facts, policy_for, at + MIN).waits

    assert wait.verdict is not None
    assert State.CLOSED_BY_DECLINE != wait.verdict.state
