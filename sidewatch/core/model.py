"""States, owners, next safe moves and the records the health model reads and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class State(StrEnum):
    """Where a wait stands by its evidence: five open states and three closed ones."""

    WAITING = "WAITING"
    STALE = "STALE"
    UNROUTABLE = "UNROUTABLE"
    ORPHANED = "ORPHANED"
    STUCK_AFTER_DECISION = "STUCK_AFTER_DECISION"
    CLOSED_BY_DECLINE = "CLOSED_BY_DECLINE"
    RESUMED = "RESUMED"
    CANCELLED = "CANCELLED"


OPEN_STATES: tuple[State, ...] = (
    State.WAITING,
    State.STALE,
    State.UNROUTABLE,
    State.ORPHANED,
    State.STUCK_AFTER_DECISION,
)
CLOSED_STATES: tuple[State, ...] = (State.CLOSED_BY_DECLINE, State.RESUMED, State.CANCELLED)
# The open states that are someone's problem (WAITING is the normal wait): each one an alert.
PROBLEM_STATES: tuple[State, ...] = (
    State.STALE,
    State.UNROUTABLE,
    State.ORPHANED,
    State.STUCK_AFTER_DECISION,
)

# Every open state may move to any other state; a closed state never moves, with the two
# documented exceptions: a RESUMED wait whose continuing run then fails, and a wait CANCELLED
# because a later run moved past it unanswered, which a run's answer for it reopens (to what
# a decision gives: awaiting its receipt, stale, stuck, or closed by it at once).
ALLOWED_TRANSITIONS: frozenset[tuple[State, State]] = frozenset(
    {(a, b) for a in OPEN_STATES for b in State if a != b}
    | {(State.RESUMED, State.STUCK_AFTER_DECISION)}
    | {
        (State.CANCELLED, b)
        for b in (
            State.WAITING,
            State.STALE,
            State.STUCK_AFTER_DECISION,
            State.RESUMED,
            State.CLOSED_BY_DECLINE,
        )
    }
)


class Owner(StrEnum):
    """Who holds the next move of a wait in a state (`OWNER`)."""

    APPROVER = "approver"
    REQUESTER = "requester"
    POLICY_OWNER = "policy_owner"
    RUNTIME_OWNER = "runtime_owner"


class Phase(StrEnum):
    """What a WAITING wait waits for: its route's grace, a decision, or the receipt of one."""

    AWAITING_ROUTE = "awaiting_route"
    AWAITING_DECISION = "awaiting_decision"
    AWAITING_RECEIPT = "awaiting_receipt"


class Code(StrEnum):
    """What the person did, in the MCP elicitation vocabulary."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


class Missing(StrEnum):
    """Evidence nobody ever reported for a wait (a decision: the producer dropped it)."""

    ROUTE = "route"
    HANDLE = "handle"
    HEARTBEAT = "heartbeat"
    DECISION = "decision"


class Severity(StrEnum):
    """How loudly a state is raised: the alert label `severity` of the rules and of the
    Alertmanager push, in the monitoring-mixin vocabulary routing trees expect: `critical`
    pages (wakes someone), `warning` is a ticket (the next working day), `info` a nudge."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


# The severity of each alertable open state. A wait resting on never-reported evidence is a
# warning (a ticket) whatever its state (spec: "Missing evidence never pages"); WAITING is
# info only after a long wait (a rule of rules/), and a closed state never alerts.
SEVERITY: dict[State, Severity] = {
    State.STUCK_AFTER_DECISION: Severity.CRITICAL,
    State.ORPHANED: Severity.CRITICAL,
    State.UNROUTABLE: Severity.CRITICAL,
    State.STALE: Severity.WARNING,
    State.WAITING: Severity.INFO,
}


class RouteStatus(StrEnum):
    """The best route evidence of a wait (`evidence.route` of a verdict)."""

    NONE = "none"  # nothing reported
    FAILED = "failed"  # a notification that reached no approver
    DELIVERED = "delivered"
    ACKNOWLEDGED = "acknowledged"


OWNER: dict[State, Owner | None] = {
    State.WAITING: Owner.APPROVER,
    State.STALE: Owner.REQUESTER,
    State.UNROUTABLE: Owner.POLICY_OWNER,
    State.ORPHANED: Owner.RUNTIME_OWNER,
    State.STUCK_AFTER_DECISION: Owner.RUNTIME_OWNER,
    State.CLOSED_BY_DECLINE: Owner.REQUESTER,
    State.RESUMED: None,
    State.CANCELLED: None,
}

NEXT_MOVE: dict[State, str] = {
    State.WAITING: (
        "Keep the run paused; notify only per the agreed escalation policy. Restarting it "
        "would create a second request and lose the decision context."
    ),
    State.STALE: (
        "Cancel the stale request; create a new one only if the current run still needs authority."
    ),
    State.UNROUTABLE: "Repair routing or escalate to the policy owner; do not restart the work.",
    State.ORPHANED: "Preserve the decision record, and recover the run with explicit authority.",
    State.STUCK_AFTER_DECISION: (
        "Investigate the continuation path; do not ask for the same approval again."
    ),
    State.CLOSED_BY_DECLINE: (
        "Stop the action, or offer a non-destructive alternative. Never re-ask."
    ),
    State.RESUMED: "Nothing.",
    State.CANCELLED: (
        "Nothing; a dismissal is not a decline, so a new request may be raised if the work "
        "still needs it."
    ),
}


# ---------------------------------------------------------------------------------------
# Evidence items. Every item carries `at` (ms since the epoch) and `seq` (arrival order);
# the model orders items by (at, seq): by time, then by arrival.


@dataclass(frozen=True, slots=True)
class Route:
    """A notification attempt: `delivered` is transport evidence only, never a decision."""

    at: int
    seq: int
    approver_ref: str | None
    delivered: bool
    acknowledged: bool = False
    channel: str | None = None  # the producer's code of the way it notified (`slack`)


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's answer: from the approval UI (`run_id` None) or a run's resume input."""

    at: int
    seq: int
    code: Code
    digest: str | None = None  # the digest the person approved, when the answer names it
    run_id: str | None = None  # the continuing run whose input carried this answer
    uncertain: bool = False  # matched by the lone-answer rule, not by id
    edited: bool = False  # an accept of the edited action (`editedArgs`)


@dataclass(frozen=True, slots=True)
class ActionChange:
    """The proposed action now has this digest (changed, or re-confirmed)."""

    at: int
    seq: int
    digest: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The requester is alive; `handle` True/False reports the resume handle, None leaves it.
    A span (`last_at` set): `beats` beats of that handle from `at` to `last_at`, each within
    the compaction gap of the one before, so the requester was fresh throughout; its latest
    beat by any `t` in it reads as `t`, its last one carries `last_seq`."""

    at: int
    seq: int
    handle: bool | None = None
    last_at: int | None = None
    last_seq: int | None = None
    beats: int = 1


@dataclass(frozen=True, slots=True)
class Receipt:
    """A runtime reported directly that the run consumed the decision (`sidewatch.receipt`)."""

    at: int
    seq: int


class RunStep(StrEnum):
    """What a later run of the wait's thread did, as the model reads it."""

    STARTED = "started"
    FINISHED = "finished"  # finished with no outcome or `success`
    INTERRUPTED = "interrupted"  # finished with a (new) interrupt outcome
    ERROR = "error"
    TOOL_RESULT = "tool_result"  # TOOL_CALL_RESULT of the wait's gated call in this run


@dataclass(frozen=True, slots=True)
class RunEvent:
    """Something a later run on the wait's thread did."""

    at: int
    seq: int
    run_id: str
    step: RunStep
    reannounced: bool = False  # on FINISHED: the run announced this wait again
    # On FINISHED/INTERRUPTED: the run reported the TOOL_CALL_RESULT of another gated call its
    # input answered, none for this wait's call, and did not ask for this call again.
    others_reported: bool = False


Item = Route | Decision | ActionChange | Heartbeat | Receipt | RunEvent


class SubagentState(StrEnum):
    """Where a subagent invocation stands by the `SUBAGENT_*` events seen (AG-UI 1.0)."""

    RUNNING = "running"  # SUBAGENT_STARTED
    SUSPENDED = "suspended"  # SUBAGENT_FINISHED with the suspended outcome
    FINISHED = "finished"  # SUBAGENT_FINISHED with no outcome or `success`
    ERROR = "error"  # SUBAGENT_ERROR


@dataclass(frozen=True, slots=True)
class SubagentStep:
    """A `SUBAGENT_*` event of the wait's subagent, reported by parent run `run_id`."""

    at: int
    seq: int
    state: SubagentState
    run_id: str
    name: str | None = None  # on SUBAGENT_STARTED only


@dataclass(frozen=True, slots=True)
class SubagentTrace:
    """The subagent invocation (`subagentRunId`) that raised a wait, and its events on the
    thread in (time, arrival) order. Evidence only: it never moves the wait's state."""

    run_id: str
    steps: tuple[SubagentStep, ...] = ()


@dataclass(frozen=True, slots=True)
class WaitEvidence:
    """Everything known about one wait: its identity, what it asked, and its timeline."""

    request_id: str
    thread_id: str
    run_id: str
    interrupt_id: str
    requested_at: int
    requested_seq: int = 0
    action: str | None = None
    reason: str | None = None
    tool_call_id: str | None = None
    expires_at: int | None = None
    digest: str | None = None
    handle: bool | None = None  # metadata.resumeHandle at request time (None: not reported)
    items: tuple[Item, ...] = ()
    tool_result_receipt: bool = False  # the producer consumes it only with the call's result
    findings: tuple[str, ...] = ()  # protocol findings about this wait noticed before the model
    subagent: SubagentTrace | None = None  # the subagent that raised it (AG-UI 1.0)


# ---------------------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True, slots=True)
class Thresholds:
    """A policy's times, in ms: how long an accept may wait for its receipt, how long a
    heartbeat stays fresh, and how long a request may wait for its route."""

    resume_grace_ms: int
    heartbeat_freshness_ms: int
    route_grace_ms: int


@dataclass(frozen=True, slots=True)
class Facts:
    """The evidence a verdict rests on, as of the evaluation time."""

    requested_at: int
    expires_at: int | None
    action_digest: str | None
    digest_changed: bool
    route: RouteStatus
    approver_ref: str | None
    resume_handle: bool
    last_heartbeat_at: int
    decision: Code | None
    decided_at: int | None
    receipt_at: int | None
    continuation_failed: bool
    # Why the continuation failed (None: it did not): `run_error`, `no_tool_result` (the run
    # ended without the gated call's result, which the policy or the producer requires),
    # `dropped_in_resume` (the run reported the results of the other calls answered with
    # this one, not this one's), `moved_on` (a later run completed without consuming it).
    continuation_failure: str | None = None
    action_edited: bool = False  # the approved action is the edited one (`editedArgs`)
    subagent: Subagent | None = None  # the subagent that raised the wait, as of now


@dataclass(frozen=True, slots=True)
class Subagent:
    """The subagent that raised a wait, as of the evaluation time: its invocation id, its name
    and state by the latest `SUBAGENT_*` event then (None: none seen yet) and since when."""

    run_id: str
    name: str | None = None
    state: SubagentState | None = None
    since: int | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """The wait entered `to` at `at` (the time the evidence put it there)."""

    at: int
    from_state: State | None
    to_state: State


@dataclass(frozen=True, slots=True)
class Verdict:
    """One wait's state at the evaluation time, with what it rests on: `since` is when the
    evidence put it there, `uncertain` says the state rests on an inference (a lone answer,
    evidence never reported), `missing` lists what nobody reported, `transitions` the path
    to it, and `due_at` the next instant at which time alone would move it."""

    request_id: str
    state: State
    phase: Phase | None
    since: int
    uncertain: bool
    missing: tuple[Missing, ...]
    policy: str
    thresholds: Thresholds
    facts: Facts
    findings: tuple[str, ...] = ()
    transitions: tuple[Transition, ...] = field(default=())
    due_at: int | None = None  # when time alone would next change this verdict

    @property
    def closed(self) -> bool:
        """Whether the state is closed (it then never moves, but for a failed RESUMED)."""
        return self.state in CLOSED_STATES

    @property
    def owner(self) -> Owner | None:
        """Who holds the next move; None for a wait that needs nothing."""
        return OWNER[self.state]

    @property
    def unreported(self) -> tuple[Missing, ...]:
        """The never-reported evidence this open problem state rests on: empty when it rests
        on evidence reported as failing (spec: "Missing evidence never pages")."""
        if not self.uncertain or self.state not in UNREPORTED_CAUSES:
            return ()
        return tuple(m for m in self.missing if m in UNREPORTED_CAUSES[self.state])

    @property
    def next_move(self) -> str:
        """What the owner should do next, or, for an uncertain state, what to report."""
        if self.unreported:
            return uncertain_move(self.unreported)
        return NEXT_MOVE[self.state]


# What each problem state can rest on when nothing was reported. The label values a metric
# may carry are these combinations, joined in this order (bounded: four in all).
UNREPORTED_CAUSES: dict[State, tuple[Missing, ...]] = {
    State.UNROUTABLE: (Missing.ROUTE,),
    State.ORPHANED: (Missing.HANDLE, Missing.HEARTBEAT),
}
UNREPORTED_LABELS: dict[State, tuple[str, ...]] = {
    State.UNROUTABLE: ("route",),
    State.ORPHANED: ("handle", "heartbeat", "handle,heartbeat"),
}


def unreported_label(items: tuple[Missing, ...]) -> str:
    """The `missing` label value of never-reported evidence (one of `UNREPORTED_LABELS`)."""
    return ",".join(items)


def uncertain_move(items: tuple[Missing, ...]) -> str:
    """The next move of a verdict that rests on evidence nobody reported: a fix of the
    deployment's reporting, for whoever runs sidewatch, never a page to the wait's owner."""
    what = " and ".join(items)
    return (
        f"Uncertain: never reported ({what}). Whoever runs sidewatch: have the deployment "
        f"report {what} evidence, or mark it ignored in this policy's evidence setting; "
        "do not page the wait's owner, and keep the run paused."
    )
