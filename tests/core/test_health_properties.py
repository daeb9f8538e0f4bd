"""Invariants of the health model, over random timelines of evidence.

Each timeline is one wait requested at 16:00 and up to a dozen items at distinct times in the
following 40 minutes, under a random policy. About half the times fall on whole seconds, so
that the thresholds' exact boundaries (whole seconds or minutes) are hit.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from sidewatch.core.health import classify
from sidewatch.core.model import (
    ALLOWED_TRANSITIONS,
    ActionChange,
    Code,
    Decision,
    Heartbeat,
    Item,
    Missing,
    Receipt,
    Route,
    RunEvent,
    RunStep,
    State,
    Thresholds,
    Verdict,
    WaitEvidence,
)
from sidewatch.core.policy import DEFAULT_POLICY, Need, Policy, ReceiptKind
from sidewatch.core.vocab import FindingRule

SECOND = 1_000
MINUTE = 60 * SECOND
T0 = int(datetime(2026, 7, 26, 16, tzinfo=UTC).timestamp() * 1000)
HORIZON = 40 * MINUTE

DIGESTS = ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
RUNS = ("run-2", "run-3", "run-4")
PROBLEM_STATES = (
    State.STALE,
    State.UNROUTABLE,
    State.ORPHANED,
    State.STUCK_AFTER_DECISION,
)

property_settings = settings(max_examples=200, deadline=None)

# --- strategies ------------------------------------------------------------------------

offsets = st.one_of(
    st.integers(1, HORIZON // SECOND).map(lambda s: s * SECOND),
    st.integers(1, HORIZON),
)
instants = st.integers(0, HORIZON + 5 * MINUTE).map(lambda ms: T0 + ms)
later_by = st.integers(1, 30 * MINUTE)


def any_item(runs: tuple[str, ...] = RUNS) -> st.SearchStrategy[Item]:
    """Any one item of evidence; `at` and `seq` are placed once the timeline is drawn."""
    return st.one_of(
        st.builds(
            Route,
            st.just(0),
            st.just(0),
            st.sampled_from(["role:release-owner", None]),
            st.booleans(),
            st.booleans(),
        ),
        st.builds(
            Decision,
            st.just(0),
            st.just(0),
            st.sampled_from(Code),
            st.sampled_from([None, *DIGESTS]),
            st.sampled_from([None, *runs]),
        ),
        st.builds(ActionChange, st.just(0), st.just(0), st.sampled_from(DIGESTS)),
        st.builds(Heartbeat, st.just(0), st.just(0), st.sampled_from([None, True, False])),
        st.builds(Receipt, st.just(0), st.just(0)),
        st.builds(
            RunEvent,
            st.just(0),
            st.just(0),
            st.sampled_from(runs),
            st.sampled_from(RunStep),
            st.booleans(),
        ),
    )


evidence_items = any_item()
# After a wait closed: anything, weighted towards what the continuing run `run-5` may still do.
late_items = st.one_of(
    any_item((*RUNS, "run-5")),
    st.builds(
        RunEvent,
        st.just(0),
        st.just(0),
        st.just("run-5"),
        st.sampled_from([RunStep.ERROR, RunStep.FINISHED]),
    ),
)


policies = st.builds(
    Policy,
    name=st.sampled_from(["default", "content-preview", "maintenance-window"]),
    thresholds=st.builds(
        Thresholds,
        resume_grace_ms=st.sampled_from([10 * SECOND, 5 * MINUTE, 20 * MINUTE]),
        heartbeat_freshness_ms=st.sampled_from([30 * SECOND, 10 * MINUTE]),
        route_grace_ms=st.sampled_from([5 * SECOND, 2 * MINUTE]),
    ),
    require_acknowledgement=st.booleans(),
    receipt=st.sampled_from(ReceiptKind),
    route=st.sampled_from(Need),
    handle=st.sampled_from(Need),
    heartbeat=st.sampled_from(Need),
)


def wait(
    items: list[Item] | tuple[Item, ...],
    *,
    expires_at: int | None = None,
    digest: str | None = DIGESTS[0],
    handle: bool | None = True,
) -> WaitEvidence:
    """A wait requested at 16:00 by run-1, with this timeline."""
    return WaitEvidence(
        request_id="thread-deploy/int-deploy",
        thread_id="thread-deploy",
        run_id="run-1",
        interrupt_id="int-deploy",
        requested_at=T0,
        action="deploy_service",
        reason="tool_call",
        tool_call_id="call-1",
        expires_at=expires_at,
        digest=digest,
        handle=handle,
        items=tuple(items),
    )


@st.composite
def waits(draw: st.DrawFn) -> tuple[WaitEvidence, Policy]:
    """A wait, its timeline (distinct times, seq in time order) and the policy it falls under."""
    times = sorted(draw(st.lists(offsets, unique=True, max_size=12)))
    items: list[Item] = []
    answered: set[str] = set()
    for seq, offset in enumerate(times, start=1):
        item = replace(draw(evidence_items), at=T0 + offset, seq=seq)
        if isinstance(item, Decision) and item.run_id is not None:
            if item.run_id in answered:
                continue  # a run's input answers a wait once (an answer's natural key)
            answered.add(item.run_id)
        items.append(item)
    expires = draw(st.none() | st.integers(0, HORIZON // SECOND).map(lambda s: T0 + s * SECOND))
    evidence = wait(
        items,
        expires_at=expires,
        digest=draw(st.sampled_from([None, DIGESTS[0]])),
        handle=draw(st.sampled_from([None, True, False])),
    )
    return evidence, draw(policies)


@st.composite
def closed_waits(draw: st.DrawFn) -> tuple[WaitEvidence, Policy]:
    """A random timeline, then one of the endings that close a wait, by a fresh run `run-5`:
    a decline or a cancel, an accept and its receipt, or a later run that drops the wait."""
    evidence, policy = draw(waits())
    at = max((i.at for i in evidence.items), default=T0) + draw(st.integers(1, 5 * MINUTE))
    ending = draw(st.sampled_from(["decline", "cancel", "resume", "receipt", "drop"]))
    run = "run-5"
    steps: list[Item]
    if ending in ("decline", "cancel"):
        code = Code.DECLINE if ending == "decline" else Code.CANCEL
        steps = [Decision(at, 0, code, run_id=draw(st.sampled_from([None, run])))]
    elif ending == "resume":
        steps = [
            Decision(at, 0, Code.ACCEPT, run_id=run),
            RunEvent(at + 1, 0, run, RunStep.STARTED),
            RunEvent(at + 2, 0, run, RunStep.TOOL_RESULT),
        ]
        if draw(st.booleans()):
            steps.append(RunEvent(at + 3, 0, run, RunStep.FINISHED))
    elif ending == "receipt":
        steps = [Decision(at, 0, Code.ACCEPT), Receipt(at + 1, 0)]
    else:
        steps = [RunEvent(at, 0, run, RunStep.STARTED), RunEvent(at + 1, 0, run, RunStep.FINISHED)]
    first = len(evidence.items) + 1
    ended = [replace(item, seq=seq) for seq, item in enumerate(steps, start=first)]
    return replace(evidence, items=(*evidence.items, *ended)), policy


@st.composite
def closed_then_more(
    draw: st.DrawFn,
) -> tuple[WaitEvidence, Policy, int, tuple[Item, ...]]:
    """A closed wait as known at t1, and a few items that arrive after t1, in time order."""
    evidence, policy = draw(closed_waits())
    t1 = max(i.at for i in evidence.items) + draw(st.integers(0, 5 * MINUTE))
    gaps = sorted(draw(st.lists(later_by, unique=True, min_size=1, max_size=4)))
    first = len(evidence.items) + 1
    late = tuple(
        replace(draw(late_items), at=t1 + gap, seq=seq) for seq, gap in enumerate(gaps, first)
    )
    return evidence, policy, t1, late


def known_at(evidence: WaitEvidence, t: int) -> WaitEvidence:
    """The wait as known at `t`: no evidence after it."""
    return replace(evidence, items=tuple(i for i in evidence.items if i.at <= t))


def continuation_failure(evidence: WaitEvidence, policy: Policy, item: Item) -> bool:
    """The one thing that reopens a RESUMED wait: the continuing run (one whose input carried
    the accept) raised RUN_ERROR, or ended without the tool result its policy requires."""
    if not isinstance(item, RunEvent):
        return False
    accepting_runs = {
        i.run_id for i in evidence.items if isinstance(i, Decision) and i.code is Code.ACCEPT
    }
    if item.run_id not in accepting_runs:
        return False
    if item.step is RunStep.ERROR:
        return True
    produced_result = any(
        isinstance(i, RunEvent) and i.run_id == item.run_id and i.step is RunStep.TOOL_RESULT
        for i in evidence.items
    )
    return (
        item.step in (RunStep.FINISHED, RunStep.INTERRUPTED)  # it ended, maybe asking anew
        and not item.reannounced
        and policy.receipt is ReceiptKind.TOOL_RESULT
        and not produced_result
    )


# A RESUMED wait (run-5 consumed the accept at 16:10:01), whose action digest then changes and
# whose continuing run then raises RUN_ERROR: the spec's one reopening, so STUCK_AFTER_DECISION.
_resumed = wait(
    [
        Route(T0 + 1 * SECOND, 1, "role:release-owner", delivered=True),
        Heartbeat(T0 + 2 * SECOND, 2),
        Decision(T0 + 10 * MINUTE, 3, Code.ACCEPT, run_id="run-5"),
        RunEvent(T0 + 10 * MINUTE + SECOND, 4, "run-5", RunStep.STARTED),
    ]
)
_after = (
    ActionChange(T0 + 10 * MINUTE + 30 * SECOND, 5, DIGESTS[1]),
    RunEvent(T0 + 11 * MINUTE, 6, "run-5", RunStep.ERROR),
)
RESUMED_THEN_ACTION_CHANGED_THEN_FAILED = (
    _resumed,
    DEFAULT_POLICY,
    T0 + 10 * MINUTE + SECOND,
    _after,
)

# A wait a later run (run-5) moved past unanswered at 16:06, then answered in run-4's input:
# provisionally CANCELLED, then reopened (the spec's second exception).
_moved_past = wait(
    [
        Route(T0 + 1 * SECOND, 1, "role:release-owner", delivered=True),
        Heartbeat(T0 + 2 * SECOND, 2),
        RunEvent(T0 + 5 * MINUTE, 3, "run-5", RunStep.STARTED),
        RunEvent(T0 + 6 * MINUTE, 4, "run-5", RunStep.FINISHED),
    ]
)
MOVED_PAST_THEN_ANSWERED = (
    _moved_past,
    DEFAULT_POLICY,
    T0 + 6 * MINUTE,
    (Decision(T0 + 10 * MINUTE, 5, Code.ACCEPT, run_id="run-4"),),
)


def reopens(closed: Verdict, item: Item) -> bool:
    """The other thing that reopens a closed wait: a run's answer for a wait a later run moved
    past unanswered (CANCELLED, missing its decision)."""
    moved_past = closed.state is State.CANCELLED and Missing.DECISION in closed.missing
    return moved_past and isinstance(item, Decision) and item.run_id is not None


# --- properties ---------------------------------------------------------------------------


@property_settings
@given(case=closed_waits(), wait_more=st.integers(0, 5 * MINUTE), dt=later_by)
def test_a_closed_wait_stays_closed_as_time_passes(case, wait_more, dt):
    evidence, policy = case
    t1 = max(i.at for i in evidence.items) + wait_more  # nothing new after t1
    closed = classify(evidence, policy, t1)
    assume(closed.closed)

    later = classify(evidence, policy, t1 + dt)

    assert (closed.state, closed.since) == (later.state, later.since)


@property_settings
@example(case=RESUMED_THEN_ACTION_CHANGED_THEN_FAILED)
@example(case=MOVED_PAST_THEN_ANSWERED)
@given(case=closed_then_more())
def test_evidence_after_a_wait_closed_changes_nothing_but_a_failed_continuation_or_an_answer(
    case,
):
    evidence, policy, t1, late = case
    closed = classify(evidence, policy, t1)
    assume(closed.closed)
    expected, actual = [], []
    timeline = evidence
    for item in late:
        timeline = replace(timeline, items=(*timeline.items, item))
        verdict = classify(timeline, policy, item.at)
        actual.append((verdict.state, verdict.since))
        if closed.state is State.RESUMED and continuation_failure(timeline, policy, item):
            expected.append((State.STUCK_AFTER_DECISION, item.at))
            break  # reopened: what follows is an open wait's business
        if reopens(closed, item):
            found = FindingRule.ANSWERED_AFTER_MOVED_PAST in verdict.findings
            actual[-1] = (found, Missing.DECISION in verdict.missing)
            expected.append((True, False))
            break  # reopened, and evaluated as if open since (tests/core/test_late_answers.py)
        expected.append((closed.state, closed.since))

    assert expected == actual


@property_settings
@given(case=waits(), t1=instants, dt=later_by)
def test_time_alone_never_moves_a_problem_back_to_waiting(case, t1, dt):
    evidence, policy = case
    known = known_at(evidence, t1)
    problem = classify(known, policy, t1)
    assume(problem.state in PROBLEM_STATES)

    later = classify(known, policy, t1 + dt)

    assert State.WAITING != later.state, f"{problem.state} at t1 became WAITING"


@property_settings
@given(case=waits(), now=instants, data=st.data())
def test_the_verdict_does_not_depend_on_arrival_order_across_sources(case, now, data):
    evidence, policy = case
    seqs = data.draw(st.permutations([i.seq for i in evidence.items]))
    renumbered = [replace(i, seq=s) for i, s in zip(evidence.items, seqs, strict=True)]
    shuffled = replace(evidence, items=tuple(data.draw(st.permutations(renumbered))))

    in_time_order = classify(evidence, policy, now)
    in_another_order = classify(shuffled, policy, now)

    assert in_time_order == in_another_order


@property_settings
@given(case=waits(), now=instants)
def test_since_lies_between_the_request_and_now(case, now):
    evidence, policy = case

    verdict = classify(evidence, policy, now)

    assert evidence.requested_at <= verdict.since <= now


@property_settings
@example(
    case=(replace(_resumed, items=(*_resumed.items, *_after)), DEFAULT_POLICY),
    now=T0 + 12 * MINUTE,
)
@given(case=waits(), now=instants)
def test_transitions_run_forward_in_time_and_are_all_allowed(case, now):
    evidence, policy = case

    verdict = classify(evidence, policy, now)
    times = [tr.at for tr in verdict.transitions]
    pairs = [(tr.from_state, tr.to_state) for tr in verdict.transitions]

    assert sorted(times) == times
    assert [] == [p for p in pairs if p[0] is not None and p not in ALLOWED_TRANSITIONS]
    assert [0] == [n for n, p in enumerate(pairs) if p[0] is None]  # only the first state
    assert (verdict.since, verdict.state) == (times[-1], pairs[-1][1])


@property_settings
@given(case=waits(), now=instants)
def test_every_verdict_records_the_policy_and_thresholds_it_used(case, now):
    evidence, policy = case

    verdict = classify(evidence, policy, now)

    assert (policy.name, policy.thresholds) == (verdict.policy, verdict.thresholds)


def handle_never_reported(evidence: WaitEvidence) -> bool:
    return evidence.handle is None and not any(
        isinstance(i, Heartbeat) and i.handle is not None for i in evidence.items
    )


@property_settings
@given(case=waits(), now=instants)
@example(case=(wait([Route(T0 + SECOND, 1, "role:x", True)], handle=None), DEFAULT_POLICY), now=T0)
def test_a_handle_never_reported_orphans_no_wait_before_heartbeat_freshness(case, now):
    evidence, policy = case
    assume(handle_never_reported(evidence))
    verdict = classify(evidence, policy, now)
    if verdict.state is State.ORPHANED:
        # The evidence put it there no earlier than the freshness a heartbeat would have had.
        assert verdict.since >= evidence.requested_at + policy.thresholds.heartbeat_freshness_ms
    for step in verdict.transitions:
        if step.to_state is State.ORPHANED:
            assert step.at >= evidence.requested_at + policy.thresholds.heartbeat_freshness_ms


@property_settings
@given(case=waits(), now=instants)
def test_an_orphaned_wait_that_rests_on_a_handle_reported_gone_is_certain(case, now):
    evidence, policy = case
    hb_policy = replace(policy, heartbeat=Need.IGNORED, handle=Need.REQUIRED)
    reported = [i.handle for i in evidence.items if isinstance(i, Heartbeat) and i.at <= now]
    latest = ([evidence.handle, *(h for h in reported if h is not None)])[-1]
    assume(latest is False)
    verdict = classify(evidence, hb_policy, now)
    if verdict.state is State.ORPHANED:
        assert not verdict.uncertain
