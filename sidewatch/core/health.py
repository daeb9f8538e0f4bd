"""The health model: classify one wait from its evidence, its policy and `now`.

The wait's timeline is replayed in (time, arrival) order. Between items, time alone may move
the wait (expiry, graces, heartbeat freshness); each such instant is evaluated too, so every
transition carries the time the evidence put the wait in its state, and a closed wait stays
closed whatever comes after (but for a RESUMED wait whose continuing run then fails, and a wait
a later run moved past unanswered, which a run's answer for it reopens).
"""

from __future__ import annotations

from operator import attrgetter

from sidewatch.core.model import (
    ActionChange,
    Code,
    Decision,
    Facts,
    Heartbeat,
    Item,
    Missing,
    Phase,
    Receipt,
    Route,
    RouteStatus,
    RunEvent,
    RunStep,
    State,
    Subagent,
    SubagentTrace,
    Transition,
    Verdict,
    WaitEvidence,
)
from sidewatch.core.policy import Need, Policy, ReceiptKind
from sidewatch.core.vocab import FindingRule

FINDING_LATE_ANSWER = FindingRule.ANSWERED_AFTER_EXPIRY
FINDING_DROPPED = FindingRule.DROPPED_UNANSWERED
FINDING_LONE_ANSWER = FindingRule.ANSWER_MATCHED_BY_LONE_WAIT
FINDING_REOPENED = FindingRule.ANSWERED_AFTER_MOVED_PAST
# Read several times at every instant of every wait: Python 3.11 reads an enum's member
# (`Need.REQUIRED`) several times slower than a module's global.
_REQUIRED = Need.REQUIRED
_ORDER = attrgetter("at", "seq")  # a timeline's (time, arrival) order


class _Acc:
    """What the replay knows so far. Mutable, private to one classification."""

    __slots__ = (
        "accept",
        "acked_at",
        "answer_runs",
        "approved",
        "approver_ref",
        "closed",
        "closed_at",
        "consumed",
        "decided_at",
        "decision",
        "delivered_at",
        "digest",
        "digest_at",
        "dropped",
        "failed_at",
        "failure_at",
        "failure_cause",
        "findings",
        "handle",
        "handle_lost_at",
        "handle_reported",
        "hb_beyond",
        "hb_seq_at",
        "hb_until",
        "last_cont",
        "last_hb",
        "original",
        "pending_receipt",
        "receipt_at",
        "repeats",
        "route_seen",
        "settled",
        "tool_result_runs",
        "uncertain_answer",
    )

    def __init__(self, ev: WaitEvidence) -> None:
        self.original: str | None = ev.digest
        self.digest: str | None = ev.digest
        self.digest_at = ev.requested_at
        self.route_seen = False
        self.approver_ref: str | None = None
        self.delivered_at: int | None = None
        self.acked_at: int | None = None
        self.failed_at: int | None = None
        self.handle = ev.handle is True
        self.handle_reported = ev.handle is not None
        self.handle_lost_at = ev.requested_at
        self.last_hb = ev.requested_at  # the interrupted run's own end is the first heartbeat
        self.hb_beyond = False
        # Spans of beats (a compacted run): fresh through the latest `last_at` fed; from
        # `hb_seq_at` on, a span's last beat that arrived after the request counts as beyond.
        self.hb_until = ev.requested_at
        self.hb_seq_at: int | None = None
        self.decision: Code | None = None
        self.decided_at: int | None = None
        self.accept: Decision | None = None
        self.approved: str | None = None
        self.answer_runs: dict[str, Code] = {}
        self.tool_result_runs: set[str] = set()
        self.pending_receipt: int | None = None
        self.receipt_at: int | None = None
        self.failure_at: int | None = None
        self.failure_cause: str | None = None  # why the latest continuation failed
        self.last_cont: str | None = None  # "receipt" | "failure": the latest attempt decides
        self.closed: State | None = None
        self.closed_at = 0
        self.consumed = False
        # A run consumed the accept and ended without failing: later runs that answer it
        # again only repeat the answer (their failure is a finding, not a failed continuation).
        self.settled = False
        self.repeats: set[str] = set()
        self.dropped = False
        self.uncertain_answer = False
        self.findings: list[str] = []


class Replay:
    """One wait's timeline replayed as it is fed: items in (time, arrival) order, the state at
    any later instant in O(1), and the verdict at `now` without ending the replay (the
    engine keeps feeding it to answer "was it open then?")."""

    __slots__ = (
        "acc",
        "due",
        "ev",
        "phase",
        "policy",
        "since",
        "started",
        "state",
        "t",
        "transitions",
    )

    def __init__(self, ev: WaitEvidence, policy: Policy) -> None:
        """`ev` gives the wait's identity and what it asked; its `items` are not read."""
        self.ev, self.policy = ev, policy
        self.acc = _Acc(ev)
        self.transitions: list[Transition] = []
        self.state: State | None = None
        self.since = ev.requested_at
        self.phase: Phase | None = None
        self.due: int | None = None
        self.t = ev.requested_at  # the time of the latest item applied after the start
        self.started = False  # items timed at or before the request are applied before it

    @property
    def closed(self) -> State | None:
        """The closed state the evidence so far put the wait in (time alone never closes)."""
        return self.acc.closed

    @property
    def closed_at(self) -> int:
        """When the evidence closed it (meaningful only while `closed`)."""
        return self.acc.closed_at

    @property
    def repeats(self) -> frozenset[str]:
        """Runs whose input answered the wait again after its continuation had ended."""
        return frozenset(self.acc.repeats)

    def feed(self, item: Item) -> None:
        """Apply the next item; items come in (at, seq) order."""
        if not self.started and item.at <= self.ev.requested_at:
            _apply(self.acc, item, self.ev, self.policy)
            return
        self._advance(item.at)
        self.t = item.at
        _apply(self.acc, item, self.ev, self.policy)
        current, self.phase, _, self.due = _evaluate(self.acc, self.ev, self.policy, item.at)
        self._observe(current, item.at)

    def state_at(self, t: int) -> State:
        """The state at `t`, no earlier than the latest item fed."""
        return _evaluate(self.acc, self.ev, self.policy, t)[0]

    def verdict(self, now: int) -> Verdict:
        """The verdict at `now` (no item after `now` fed); the replay can go on afterwards."""
        self._advance(now)
        current, phase, cause, due = _evaluate(self.acc, self.ev, self.policy, now)
        transitions, state, since = self.transitions, self.state, self.since
        if current is not state:
            since = min(max(cause, self.t), now)
            transitions = [*transitions, Transition(since, state, current)]
            state = current
        return _verdict(self.acc, self.ev, self.policy, now, state, phase, since, due, transitions)

    def _observe(self, new: State, at: int) -> None:
        if new is not self.state:
            self.transitions.append(Transition(at, self.state, new))
            self.state, self.since = new, at

    def _advance(self, until: int) -> None:
        """Start the replay if it has not, then visit every instant up to `until` at which
        time alone could move the wait."""
        if not self.started:
            self.started = True
            current, self.phase, _, self.due = _evaluate(
                self.acc, self.ev, self.policy, self.ev.requested_at
            )
            self._observe(current, self.ev.requested_at)
        while self.due is not None and self.due <= until:
            current, self.phase, cause, self.due = _evaluate(
                self.acc, self.ev, self.policy, self.due
            )
            self._observe(current, min(max(cause, self.t), until))


def classify(ev: WaitEvidence, policy: Policy, now: int) -> Verdict:
    """The verdict for one wait at `now` (ms since the epoch); evidence after `now` is ignored."""
    replay = Replay(ev, policy)
    for item in sorted([i for i in ev.items if i.at <= now], key=_ORDER):
        replay.feed(item)
    return replay.verdict(now)


# --------------------------------------------------------------------------------------
# Applying one item of evidence


def _apply(acc: _Acc, item: Item, ev: WaitEvidence, policy: Policy) -> None:
    at = item.at
    if isinstance(item, Route):
        acc.route_seen = True
        ref = item.approver_ref
        if ref is not None:
            acc.approver_ref = ref
        if (item.delivered or item.acknowledged) and ref is not None and acc.delivered_at is None:
            acc.delivered_at = at
        if item.acknowledged and acc.acked_at is None and acc.delivered_at is not None:
            acc.acked_at = at
        if (not (item.delivered or item.acknowledged) or ref is None) and acc.failed_at is None:
            acc.failed_at = at
    elif isinstance(item, Heartbeat):
        acc.hb_beyond = acc.hb_beyond or at > ev.requested_at or item.seq > ev.requested_seq
        acc.last_hb = max(acc.last_hb, at)
        if item.last_at is not None and item.last_at > at:
            acc.hb_until = max(acc.hb_until, item.last_at)
            if item.last_seq is not None and item.last_seq > ev.requested_seq:
                seq_at = acc.hb_seq_at
                acc.hb_seq_at = item.last_at if seq_at is None else min(seq_at, item.last_at)
        if item.handle is not None:
            if (acc.handle and not item.handle) or (not acc.handle_reported and not item.handle):
                acc.handle_lost_at = at
            acc.handle, acc.handle_reported = item.handle, True
    elif isinstance(item, ActionChange):
        if acc.original is None:
            acc.original = item.digest  # the first digest anyone reported is the baseline
        if item.digest != acc.digest:
            acc.digest, acc.digest_at = item.digest, at
    elif isinstance(item, Decision):
        _decide(acc, item, ev)
    elif isinstance(item, Receipt):
        _receipt(acc, at, ev)
    elif isinstance(item, RunEvent):
        _run_event(acc, item, ev, policy)


def _decide(acc: _Acc, d: Decision, ev: WaitEvidence) -> None:
    if d.run_id is not None:
        if acc.settled and d.run_id not in acc.answer_runs:
            acc.repeats.add(d.run_id)  # not a continuation: the wait is settled
            return
        acc.answer_runs.setdefault(d.run_id, d.code)
        if acc.dropped:  # the producer kept the suspension after all (agno, Mastra)
            _reopen(acc)
    if ev.expires_at is not None and d.at >= ev.expires_at and acc.closed is None:
        _finding(acc, FINDING_LATE_ANSWER)
    if acc.closed is not None or acc.consumed:
        return  # recorded, but a closed wait does not change (a decline after RESUMED is late)
    if d.code is Code.ACCEPT:
        if acc.accept is None:
            acc.accept, acc.decision, acc.decided_at = d, d.code, d.at
            acc.approved = d.digest if d.digest is not None else acc.digest
            acc.uncertain_answer = d.uncertain
            if d.uncertain:
                _finding(acc, FINDING_LONE_ANSWER)
            if acc.pending_receipt is not None:
                _receipt(acc, d.at, ev)
        return
    acc.decision, acc.decided_at, acc.uncertain_answer = d.code, d.at, d.uncertain
    if d.uncertain:
        _finding(acc, FINDING_LONE_ANSWER)
    _close(acc, State.CLOSED_BY_DECLINE if d.code is Code.DECLINE else State.CANCELLED, d.at)


def _run_event(acc: _Acc, r: RunEvent, ev: WaitEvidence, policy: Policy) -> None:
    answered = acc.answer_runs.get(r.run_id)
    if r.step is RunStep.TOOL_RESULT:
        acc.tool_result_runs.add(r.run_id)
        _receipt(acc, r.at, ev)
    elif r.step is RunStep.STARTED:
        if answered is Code.ACCEPT and _receipt_kind(policy, ev) is ReceiptKind.RUN_STARTED:
            _receipt(acc, r.at, ev)
    elif r.step is RunStep.ERROR:
        if answered is Code.ACCEPT:
            _failure(acc, r.at, "run_error")
    elif r.reannounced:
        return  # the run asked for the same wait again: it did not move past it
    elif answered is Code.ACCEPT:
        _continuation_ended(acc, r, ev, policy)
    elif r.step is RunStep.INTERRUPTED:
        return  # a run that stops for input moves past nothing
    elif answered is None and acc.closed is None and acc.last_cont != "receipt":
        # A later run completed while this wait was open and did not consume an answer for it.
        if acc.accept is not None:
            _failure(acc, r.at, "moved_on")  # moved on without consuming the decision
        else:
            acc.dropped = True
            _finding(acc, FINDING_DROPPED)
            _close(acc, State.CANCELLED, r.at)


def _continuation_ended(acc: _Acc, r: RunEvent, ev: WaitEvidence, policy: Policy) -> None:
    """The run whose input carried the accept ended, in success or with a new interrupt.
    Without the gated call's result it dropped the call when that result is the receipt
    (policy or producer), or when it reported the results of the other calls answered with
    this one (the producer evidently reports them); otherwise its start stays the receipt."""
    if r.run_id not in acc.tool_result_runs:
        if _receipt_kind(policy, ev) is ReceiptKind.TOOL_RESULT:
            _failure(acc, r.at, "no_tool_result")
            return
        if r.others_reported and ev.tool_call_id is not None:
            _failure(acc, r.at, "dropped_in_resume")
            return
    if r.step is RunStep.FINISHED and acc.last_cont != "receipt":
        _receipt(acc, r.at, ev)
    if acc.closed is State.RESUMED:
        acc.settled = True


def _receipt_kind(policy: Policy, ev: WaitEvidence) -> ReceiptKind:
    """The policy's receipt, unless the producer only ever consumes with the call's result."""
    return ReceiptKind.TOOL_RESULT if ev.tool_result_receipt else policy.receipt


def _receipt(acc: _Acc, at: int, ev: WaitEvidence) -> None:
    if acc.accept is None:
        if acc.pending_receipt is None:
            acc.pending_receipt = at  # a receipt before its accept: applied when the accept comes
        return
    if acc.closed is not None or _accept_stale(acc, ev):
        return  # a consumed stale accept stays STALE
    acc.receipt_at, acc.last_cont, acc.consumed = max(at, acc.accept.at), "receipt", True
    _close(acc, State.RESUMED, acc.receipt_at)


def _failure(acc: _Acc, at: int, cause: str) -> None:
    if acc.accept is None or acc.closed not in (None, State.RESUMED):
        return
    acc.failure_at, acc.last_cont, acc.failure_cause = at, "failure", cause
    if acc.closed is State.RESUMED:
        acc.closed = None  # the one way a closed wait reopens


def _reopen(acc: _Acc) -> None:
    """A run's answer for a wait a later run moved past unanswered: the wait is evaluated as
    if it had stayed open (its CANCELLED was provisional; a certain one never reopens)."""
    acc.closed, acc.dropped = None, False
    _finding(acc, FINDING_REOPENED)


def _close(acc: _Acc, state: State, at: int) -> None:
    acc.closed, acc.closed_at = state, at


def _finding(acc: _Acc, rule: str) -> None:
    if rule not in acc.findings:
        acc.findings.append(rule)


def _accept_stale(acc: _Acc, ev: WaitEvidence) -> bool:
    assert acc.decided_at is not None
    late = ev.expires_at is not None and acc.decided_at >= ev.expires_at
    return late or (
        acc.approved is not None and acc.digest is not None and acc.approved != acc.digest
    )


# --------------------------------------------------------------------------------------
# Evaluating at one instant: (state, phase, when its cause began, next time-driven change)


def _evaluate(
    acc: _Acc, ev: WaitEvidence, policy: Policy, t: int
) -> tuple[State, Phase | None, int, int | None]:
    if acc.closed is not None:
        return acc.closed, None, acc.closed_at, None
    th = policy.thresholds
    if acc.accept is not None:
        decided = acc.accept.at
        # An accept consumed while it was current stays consumed: a later digest change does
        # not make a failed continuation STALE (RESUMED only ever reopens as STUCK).
        if not acc.consumed and _accept_stale(acc, ev):
            return State.STALE, None, t, None
        if acc.last_cont == "failure":
            assert acc.failure_at is not None
            return State.STUCK_AFTER_DECISION, None, acc.failure_at, None
        if t - decided > th.resume_grace_ms:
            return State.STUCK_AFTER_DECISION, None, decided + th.resume_grace_ms, None
        return State.WAITING, Phase.AWAITING_RECEIPT, t, decided + th.resume_grace_ms + 1

    due = ev.expires_at
    stale_since = None  # the earliest cause of STALE that holds at `t`
    if due is not None and due <= t:
        stale_since, due = due, None
    if acc.original is not None and acc.digest != acc.original:
        stale_since = acc.digest_at if stale_since is None else min(stale_since, acc.digest_at)
    if stale_since is not None:
        return State.STALE, None, stale_since, None

    phase = Phase.AWAITING_DECISION
    if policy.route is _REQUIRED and not _route_verified(acc, policy):
        if acc.failed_at is not None and acc.delivered_at is None:
            return State.UNROUTABLE, None, acc.failed_at, due
        deadline = ev.requested_at + th.route_grace_ms
        if t > deadline:
            return State.UNROUTABLE, None, deadline, due
        phase = Phase.AWAITING_ROUTE
        due = _earliest(due, deadline + 1)

    orphaned = None  # the earliest cause of ORPHANED that holds at `t`
    if policy.handle is _REQUIRED and not acc.handle:
        if acc.handle_reported:
            orphaned = acc.handle_lost_at  # reported gone: orphaned at once
        else:
            # Never reported, like a route never reported: not orphaned until the freshness
            # a heartbeat would have had has passed since the request.
            deadline = ev.requested_at + th.heartbeat_freshness_ms
            if t > deadline:
                orphaned = deadline
            else:
                due = _earliest(due, deadline + 1)
    if policy.heartbeat is _REQUIRED:
        fresh_until = _last_hb(acc, t) + th.heartbeat_freshness_ms
        if t > fresh_until:
            orphaned = fresh_until if orphaned is None else min(orphaned, fresh_until)
        else:  # a span fed beats through its last one: fresh until that one's freshness ends
            due = _earliest(due, max(fresh_until, acc.hb_until + th.heartbeat_freshness_ms) + 1)
    if orphaned is not None:
        return State.ORPHANED, None, orphaned, due
    return State.WAITING, phase, ev.requested_at, due


def _route_verified(acc: _Acc, policy: Policy) -> bool:
    if policy.require_acknowledgement:
        return acc.acked_at is not None
    return acc.delivered_at is not None


def _earliest(a: int | None, b: int) -> int:
    return b if a is None or b < a else a


def _last_hb(acc: _Acc, t: int) -> int:
    """The latest heartbeat by `t`: a span fed so far beat through `t`, up to its last beat."""
    return max(acc.last_hb, min(acc.hb_until, t))


def _hb_beyond(acc: _Acc, ev: WaitEvidence, t: int) -> bool:
    """Some heartbeat by `t` came after the request (by its time, or by its arrival)."""
    if acc.hb_beyond or min(acc.hb_until, t) > ev.requested_at:
        return True
    return acc.hb_seq_at is not None and acc.hb_seq_at <= t


# --------------------------------------------------------------------------------------


def _verdict(
    acc: _Acc,
    ev: WaitEvidence,
    policy: Policy,
    now: int,
    state: State,
    phase: Phase | None,
    since: int,
    due: int | None,
    transitions: list[Transition],
) -> Verdict:
    missing: list[Missing] = []
    if policy.route is _REQUIRED and not acc.route_seen:
        missing.append(Missing.ROUTE)
    if policy.handle is _REQUIRED and not acc.handle_reported:
        missing.append(Missing.HANDLE)
    last_hb, hb_beyond = _last_hb(acc, now), _hb_beyond(acc, ev, now)
    if policy.heartbeat is _REQUIRED and not hb_beyond:
        missing.append(Missing.HEARTBEAT)
    if acc.dropped:
        missing.append(Missing.DECISION)

    uncertain = acc.uncertain_answer or acc.dropped
    if state is State.UNROUTABLE:
        uncertain = uncertain or not acc.route_seen
    elif state is State.ORPHANED:
        # Uncertain unless some cause that holds was reported as failing.
        handle_gone = policy.handle is _REQUIRED and acc.handle_reported and not acc.handle
        hb_stale = (
            policy.heartbeat is _REQUIRED
            and hb_beyond
            and now - last_hb > policy.thresholds.heartbeat_freshness_ms
        )
        uncertain = uncertain or not (handle_gone or hb_stale)

    if acc.acked_at is not None:
        route = RouteStatus.ACKNOWLEDGED
    elif acc.delivered_at is not None:
        route = RouteStatus.DELIVERED
    elif acc.failed_at is not None:
        route = RouteStatus.FAILED
    else:
        route = RouteStatus.NONE
    digest_changed = (acc.original is not None and acc.digest != acc.original) or (
        acc.accept is not None and acc.approved is not None and acc.approved != acc.digest
    )
    facts = Facts(
        requested_at=ev.requested_at,
        expires_at=ev.expires_at,
        action_digest=acc.digest,
        digest_changed=digest_changed,
        route=route,
        approver_ref=acc.approver_ref,
        resume_handle=acc.handle,
        last_heartbeat_at=last_hb,
        decision=acc.decision,
        decided_at=acc.decided_at,
        receipt_at=acc.receipt_at,
        continuation_failed=acc.last_cont == "failure",
        continuation_failure=acc.failure_cause if acc.last_cont == "failure" else None,
        action_edited=(
            acc.accept is not None and acc.accept.edited and acc.decision is Code.ACCEPT
        ),
        subagent=None if ev.subagent is None else _subagent(ev.subagent, now),
    )
    return Verdict(
        request_id=ev.request_id,
        state=state,
        phase=phase,
        since=since,
        uncertain=uncertain,
        missing=tuple(missing),
        policy=policy.name,
        thresholds=policy.thresholds,
        facts=facts,
        findings=tuple(dict.fromkeys((*ev.findings, *acc.findings))),
        transitions=tuple(transitions),
        due_at=due,
    )


def _subagent(trace: SubagentTrace, now: int) -> Subagent:
    """The wait's subagent at `now`: the state of its latest event until then, and the name
    its latest start gave. Evidence only: no state of the wait depends on it."""
    name, state, since = None, None, None
    for step in trace.steps:  # in (at, seq) order
        if step.at > now:
            break
        state, since = step.state, step.at
        if step.name is not None:
            name = step.name
    return Subagent(trace.run_id, name, state, since)
