"""The health model's truth table: one row per rule of spec/health-model.md, and its boundaries.

Every row is one wait requested at 16:00:00 (its interrupted run's RUN_FINISHED), the evidence
that followed, the policy, `now`, and the verdict the spec asks for:
(state, phase, since, uncertain, missing). `since` is when the evidence put the wait in its
state (e.g. decidedAt + resumeGrace for a wait stuck by grace), not when it was noticed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from sidewatch.core.health import classify
from sidewatch.core.model import (
    ActionChange,
    Code,
    Decision,
    Heartbeat,
    Item,
    Missing,
    Phase,
    Receipt,
    Route,
    RunEvent,
    RunStep,
    State,
    Thresholds,
    WaitEvidence,
)
from sidewatch.core.policy import DEFAULT_POLICY, Need, ReceiptKind

SECOND = 1_000
MINUTE = 60 * SECOND
T0 = int(datetime(2026, 7, 26, 16, tzinfo=UTC).timestamp() * 1000)

DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
APPROVER = "role:release-owner"


def t(minutes: int, seconds: int = 0) -> int:
    """16:mm:ss on the day of the reference audit, in ms since the epoch."""
    return T0 + minutes * MINUTE + seconds * SECOND


# --- evidence, one helper per kind of item ------------------------------------------------


def wait(
    *items: Item,
    handle: bool | None = True,
    expires_at: int | None = None,
    digest: str | None = DIGEST,
) -> WaitEvidence:
    """A wait requested at 16:00; its items arrive in the order given."""
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
        items=tuple(replace(item, seq=n) for n, item in enumerate(items, start=1)),
    )


def delivered(at: int, approver: str | None = APPROVER) -> Route:
    return Route(at, 0, approver, delivered=True)


def acknowledged(at: int) -> Route:
    return Route(at, 0, APPROVER, delivered=True, acknowledged=True)


def failed(at: int) -> Route:
    return Route(at, 0, None, delivered=False)


def beat(at: int, handle: bool | None = None) -> Heartbeat:
    return Heartbeat(at, 0, handle)


def action(at: int, digest: str) -> ActionChange:
    return ActionChange(at, 0, digest)


def accept(at: int, run: str | None = None, digest: str | None = None) -> Decision:
    return Decision(at, 0, Code.ACCEPT, digest, run_id=run)


def decline(at: int, run: str | None = None) -> Decision:
    return Decision(at, 0, Code.DECLINE, run_id=run)


def cancel(at: int, run: str | None = None) -> Decision:
    return Decision(at, 0, Code.CANCEL, run_id=run)


def receipt(at: int) -> Receipt:
    return Receipt(at, 0)


def started(at: int, run: str) -> RunEvent:
    return RunEvent(at, 0, run, RunStep.STARTED)


def finished(at: int, run: str, reannounced: bool = False) -> RunEvent:
    return RunEvent(at, 0, run, RunStep.FINISHED, reannounced)


def errored(at: int, run: str) -> RunEvent:
    return RunEvent(at, 0, run, RunStep.ERROR)


def tool_result(at: int, run: str) -> RunEvent:
    return RunEvent(at, 0, run, RunStep.TOOL_RESULT)


def ended(at: int, run: str, *, others_reported: bool, interrupted: bool = False) -> RunEvent:
    """The run finished (or ended with a new interrupt); `others_reported`: it reported the
    results of other gated calls its input answered, not this wait's."""
    step = RunStep.INTERRUPTED if interrupted else RunStep.FINISHED
    return RunEvent(at, 0, run, step, others_reported=others_reported)


# --- policies ----------------------------------------------------------------------------

DEFAULT = DEFAULT_POLICY
ACK_REQUIRED = replace(DEFAULT_POLICY, name="ack-required", require_acknowledgement=True)
TOOL_RESULT_RECEIPT = replace(DEFAULT_POLICY, name="adk", receipt=ReceiptKind.TOOL_RESULT)
NO_HANDLE = replace(DEFAULT_POLICY, name="no-handle", handle=Need.IGNORED)
NO_HEARTBEAT = replace(DEFAULT_POLICY, name="no-heartbeat", heartbeat=Need.IGNORED)
NO_ROUTE = replace(DEFAULT_POLICY, name="no-route", route=Need.IGNORED)
PREVIEW = replace(
    DEFAULT_POLICY,
    name="content-preview",
    thresholds=Thresholds(
        resume_grace_ms=10 * SECOND, heartbeat_freshness_ms=30 * SECOND, route_grace_ms=5 * SECOND
    ),
)

# --- shorthands for the expected verdicts -------------------------------------------------

WAITING = State.WAITING
STALE = State.STALE
UNROUTABLE = State.UNROUTABLE
ORPHANED = State.ORPHANED
STUCK = State.STUCK_AFTER_DECISION
DECLINED = State.CLOSED_BY_DECLINE
RESUMED = State.RESUMED
CANCELLED = State.CANCELLED
ROUTE_PHASE = Phase.AWAITING_ROUTE
DECISION_PHASE = Phase.AWAITING_DECISION
RECEIPT_PHASE = Phase.AWAITING_RECEIPT
CERTAIN = False
UNCERTAIN = True
NOTHING: tuple[Missing, ...] = ()

LIVE = (delivered(t(0, 1)), beat(t(0, 2)))  # routed, handle in metadata, fresh until 16:10:02
# A later run (run-3) finished at 16:06 while the wait was open and unanswered: CANCELLED, for now.
MOVED_PAST = (*LIVE, started(t(5), "run-3"), finished(t(6), "run-3"))

# (id, evidence, policy, now, (state, phase, since, uncertain, missing))
TRUTH_TABLE = [
    # --- WAITING, in each of its phases -------------------------------------------------
    (
        "WAITING awaiting_decision: current, delivered, handle, fresh heartbeat, quiet 25 min",
        wait(delivered(t(0, 1)), beat(t(8)), beat(t(16)), beat(t(24))),
        DEFAULT,
        t(25),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_route: no route evidence, exactly routeGrace after the request",
        wait(beat(t(1))),
        DEFAULT,
        t(2),
        (WAITING, ROUTE_PHASE, t(0), CERTAIN, (Missing.ROUTE,)),
    ),
    (
        "WAITING awaiting_receipt: accepted, exactly resumeGrace after decidedAt",
        wait(*LIVE, accept(t(10))),
        DEFAULT,
        t(15),
        (WAITING, RECEIPT_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING says what is missing: no heartbeat beyond the run's own end, still fresh",
        wait(delivered(t(0, 1))),
        DEFAULT,
        t(10),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, (Missing.HEARTBEAT,)),
    ),
    # --- STALE ---------------------------------------------------------------------------
    (
        "WAITING one ms before expiresAt",
        wait(*LIVE, expires_at=t(5)),
        DEFAULT,
        t(5) - 1,
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "STALE at expiresAt exactly (expiresAt <= now), since expiresAt",
        wait(*LIVE, expires_at=t(5)),
        DEFAULT,
        t(5),
        (STALE, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "STALE by expiry, since expiresAt, however long after",
        wait(*LIVE, expires_at=t(5)),
        DEFAULT,
        t(30),
        (STALE, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "STALE when the action digest changed, since the change",
        wait(*LIVE, action(t(6), OTHER)),
        DEFAULT,
        t(8),
        (STALE, None, t(6), CERTAIN, NOTHING),
    ),
    (
        "WAITING when the action is re-confirmed with the same digest",
        wait(*LIVE, action(t(6), DIGEST)),
        DEFAULT,
        t(8),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "STALE by digest before expiry: since the earlier cause",
        wait(*LIVE, action(t(3), OTHER), expires_at=t(5)),
        DEFAULT,
        t(8),
        (STALE, None, t(3), CERTAIN, NOTHING),
    ),
    (
        "STALE when the accept names a digest that no longer matches, though a run consumed it",
        wait(*LIVE, accept(t(5), run="run-2", digest=OTHER), started(t(5, 1), "run-2")),
        DEFAULT,
        t(8),
        (STALE, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "STALE when the digest changes after the accept, before any receipt",
        wait(*LIVE, accept(t(5)), action(t(6), OTHER)),
        DEFAULT,
        t(8),
        (STALE, None, t(6), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_receipt when the accept came after a digest change (approves it)",
        wait(*LIVE, action(t(3), OTHER), accept(t(5))),
        DEFAULT,
        t(8),
        (WAITING, RECEIPT_PHASE, t(5), CERTAIN, NOTHING),
    ),
    (
        "STALE when the accept came at expiresAt, even though the continuation consumed it",
        wait(*LIVE, accept(t(5), run="run-2"), started(t(5, 1), "run-2"), expires_at=t(5)),
        DEFAULT,
        t(8),
        (STALE, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "STALE when the accept came after expiresAt and was consumed, since expiresAt",
        wait(*LIVE, accept(t(6), run="run-2"), started(t(6, 1), "run-2"), expires_at=t(5)),
        DEFAULT,
        t(8),
        (STALE, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "RESUMED when the accept came one ms before expiresAt, consumed after it",
        wait(*LIVE, accept(t(5) - 1, run="run-2"), started(t(5, 30), "run-2"), expires_at=t(5)),
        DEFAULT,
        t(8),
        (RESUMED, None, t(5, 30), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_receipt: an accept before expiry is not made stale by the expiry",
        wait(*LIVE, accept(t(4)), expires_at=t(5)),
        DEFAULT,
        t(6),
        (WAITING, RECEIPT_PHASE, t(0), CERTAIN, NOTHING),
    ),
    # --- UNROUTABLE ----------------------------------------------------------------------
    (
        "UNROUTABLE (uncertain) one ms past routeGrace with no route evidence at all",
        wait(beat(t(1))),
        DEFAULT,
        t(2) + 1,
        (UNROUTABLE, None, t(2), UNCERTAIN, (Missing.ROUTE,)),
    ),
    (
        "UNROUTABLE at once when delivery failed with no approver attached",
        wait(failed(t(0, 1)), beat(t(0, 2))),
        DEFAULT,
        t(1),
        (UNROUTABLE, None, t(0, 1), CERTAIN, NOTHING),
    ),
    (
        "UNROUTABLE at once when a delivery named no approver",
        wait(delivered(t(0, 1), approver=None), beat(t(0, 2))),
        DEFAULT,
        t(1),
        (UNROUTABLE, None, t(0, 1), CERTAIN, NOTHING),
    ),
    (
        "WAITING when a later failed attempt follows a delivery (it does not undo it)",
        wait(*LIVE, failed(t(0, 30))),
        DEFAULT,
        t(1),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING since the delivery that repaired a failed attempt",
        wait(failed(t(0, 1)), beat(t(0, 2)), delivered(t(0, 30))),
        DEFAULT,
        t(1),
        (WAITING, DECISION_PHASE, t(0, 30), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_route: delivered, not yet acknowledged where required, within grace",
        wait(*LIVE),
        ACK_REQUIRED,
        t(2),
        (WAITING, ROUTE_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "UNROUTABLE: delivered but never acknowledged where required, past routeGrace",
        wait(*LIVE),
        ACK_REQUIRED,
        t(2) + 1,
        (UNROUTABLE, None, t(2), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_decision once acknowledged where required",
        wait(*LIVE, acknowledged(t(1))),
        ACK_REQUIRED,
        t(3),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    # --- ORPHANED ------------------------------------------------------------------------
    (
        "WAITING with handle missing while no resume handle was ever reported",
        wait(*LIVE, handle=None),
        DEFAULT,
        t(1),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, (Missing.HANDLE,)),
    ),
    (
        "WAITING with handle missing exactly heartbeatFreshness after the request",
        wait(*LIVE, handle=None),
        DEFAULT,
        t(10),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, (Missing.HANDLE,)),
    ),
    (
        "ORPHANED (uncertain) one ms past heartbeatFreshness when no handle was ever reported",
        wait(*LIVE, handle=None),
        DEFAULT,
        t(10) + 1,
        (ORPHANED, None, t(10), UNCERTAIN, (Missing.HANDLE,)),
    ),
    (
        "ORPHANED (certain) when metadata.resumeHandle was reported null",
        wait(*LIVE, handle=False),
        DEFAULT,
        t(1),
        (ORPHANED, None, t(0), CERTAIN, NOTHING),
    ),
    (
        "ORPHANED (certain) since a heartbeat reported resumeHandle null",
        wait(*LIVE, beat(t(3), handle=False)),
        DEFAULT,
        t(4),
        (ORPHANED, None, t(3), CERTAIN, NOTHING),
    ),
    (
        "WAITING again since a heartbeat reported a handle after a null one (latest wins)",
        wait(*LIVE, beat(t(3), handle=False), beat(t(4), handle=True)),
        DEFAULT,
        t(5),
        (WAITING, DECISION_PHASE, t(4), CERTAIN, NOTHING),
    ),
    (
        "ORPHANED (certain) by a stale heartbeat, though no handle was ever reported",
        wait(delivered(t(0, 1)), beat(t(0, 30), handle=None), handle=None),
        DEFAULT,
        t(11),
        (ORPHANED, None, t(10), CERTAIN, (Missing.HANDLE,)),
    ),
    (
        "WAITING throughout when a heartbeat brought the handle the metadata lacked in time",
        wait(delivered(t(0, 1)), beat(t(0, 30), handle=True), handle=None),
        DEFAULT,
        t(1),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING again since a heartbeat brought the handle after heartbeatFreshness",
        wait(delivered(t(0, 1)), beat(t(5)), beat(t(12), handle=True), handle=None),
        DEFAULT,
        t(13),
        (WAITING, DECISION_PHASE, t(12), CERTAIN, NOTHING),
    ),
    (
        "WAITING with a heartbeat exactly heartbeatFreshness old (still fresh)",
        wait(delivered(t(0, 1)), beat(t(1))),
        DEFAULT,
        t(11),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "ORPHANED one ms past heartbeatFreshness, since the heartbeat went stale",
        wait(delivered(t(0, 1)), beat(t(1))),
        DEFAULT,
        t(11) + 1,
        (ORPHANED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "WAITING again since a heartbeat ended a stale stretch",
        wait(delivered(t(0, 1)), beat(t(1)), beat(t(14))),
        DEFAULT,
        t(15),
        (WAITING, DECISION_PHASE, t(14), CERTAIN, NOTHING),
    ),
    (
        "ORPHANED (uncertain) when the only heartbeat is the interrupted run's own end",
        wait(delivered(t(0, 1))),
        DEFAULT,
        t(10) + 1,
        (ORPHANED, None, t(10), UNCERTAIN, (Missing.HEARTBEAT,)),
    ),
    # --- evaluation order without a decision ---------------------------------------------
    (
        "STALE before UNROUTABLE and ORPHANED",
        wait(failed(t(0, 1)), expires_at=t(5), handle=False),
        DEFAULT,
        t(6),
        (STALE, None, t(5), CERTAIN, (Missing.HEARTBEAT,)),
    ),
    (
        "UNROUTABLE before ORPHANED",
        wait(failed(t(0, 1)), beat(t(0, 2)), handle=False),
        DEFAULT,
        t(1),
        (UNROUTABLE, None, t(0, 1), CERTAIN, NOTHING),
    ),
    (
        "ORPHANED while awaiting route: the later checks apply within routeGrace",
        wait(beat(t(0, 30)), handle=False),
        DEFAULT,
        t(1),
        (ORPHANED, None, t(0), CERTAIN, (Missing.ROUTE,)),
    ),
    # --- STUCK_AFTER_DECISION ------------------------------------------------------------
    (
        "STUCK one ms past resumeGrace without a receipt, since decidedAt + resumeGrace",
        wait(*LIVE, accept(t(10))),
        DEFAULT,
        t(15) + 1,
        (STUCK, None, t(15), CERTAIN, NOTHING),
    ),
    (
        "STUCK by grace: decidedAt is the first accept's time",
        wait(*LIVE, accept(t(10)), accept(t(14))),
        DEFAULT,
        t(15) + 1,
        (STUCK, None, t(15), CERTAIN, NOTHING),
    ),
    (
        "STUCK when the continuation (the run that carried the accept) raised RUN_ERROR",
        wait(*LIVE, accept(t(10), run="run-2"), errored(t(10, 5), "run-2")),
        DEFAULT,
        t(11),
        (STUCK, None, t(10, 5), CERTAIN, NOTHING),
    ),
    (
        "STUCK since resumeGrace ran out, not since the continuation's later RUN_ERROR",
        wait(*LIVE, accept(t(10), run="run-2"), errored(t(16), "run-2")),
        DEFAULT,
        t(17),
        (STUCK, None, t(15), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_receipt: RUN_ERROR of a run that carried no answer is not a failure",
        wait(*LIVE, accept(t(10)), errored(t(10, 5), "run-3")),
        DEFAULT,
        t(11),
        (WAITING, RECEIPT_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "STUCK at once when a later run finished without consuming the approval UI's accept",
        wait(*LIVE, accept(t(10)), started(t(11), "run-3"), finished(t(12), "run-3")),
        DEFAULT,
        t(13),
        (STUCK, None, t(12), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_receipt: a run start is no receipt where the tool result is required",
        wait(*LIVE, accept(t(10), run="run-2"), started(t(10, 1), "run-2")),
        TOOL_RESULT_RECEIPT,
        t(11),
        (WAITING, RECEIPT_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "STUCK when the continuation finished without the tool result its policy requires",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            finished(t(11), "run-2"),
        ),
        TOOL_RESULT_RECEIPT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    # --- RESUMED -------------------------------------------------------------------------
    (
        "RESUMED since the continuing run (accept in its input) started",
        wait(*LIVE, accept(t(10), run="run-2"), started(t(10, 1), "run-2")),
        DEFAULT,
        t(30),
        (RESUMED, None, t(10, 1), CERTAIN, NOTHING),
    ),
    (
        "RESUMED (uncertain) when the accept was matched to the lone open wait, not by id",
        wait(
            *LIVE,
            Decision(t(10), 0, Code.ACCEPT, run_id="run-2", uncertain=True),
            started(t(10, 1), "run-2"),
        ),
        DEFAULT,
        t(30),
        (RESUMED, None, t(10, 1), UNCERTAIN, NOTHING),
    ),
    (
        "RESUMED since the continuing run finished having consumed the accept",
        wait(*LIVE, accept(t(10), run="run-2"), finished(t(11), "run-2")),
        DEFAULT,
        t(30),
        (RESUMED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED since the runtime's receipt for the approval UI's accept",
        wait(*LIVE, accept(t(10)), receipt(t(11))),
        DEFAULT,
        t(30),
        (RESUMED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED since the gated call's result, in a later run, for the UI's accept",
        wait(*LIVE, accept(t(10)), tool_result(t(11), "run-3")),
        DEFAULT,
        t(30),
        (RESUMED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED since the gated call's result where the policy requires it",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            tool_result(t(10, 30), "run-2"),
            finished(t(11), "run-2"),
        ),
        TOOL_RESULT_RECEIPT,
        t(30),
        (RESUMED, None, t(10, 30), CERTAIN, NOTHING),
    ),
    (
        "RESUMED by a receipt that came after resumeGrace (stuck, then resumed)",
        wait(*LIVE, accept(t(10)), receipt(t(16))),
        DEFAULT,
        t(30),
        (RESUMED, None, t(16), CERTAIN, NOTHING),
    ),
    (
        "STUCK when a RESUMED wait's continuation then raised RUN_ERROR",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            errored(t(11), "run-2"),
        ),
        DEFAULT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED again since a later continuation started after the failed one",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            errored(t(11), "run-2"),
            accept(t(12), run="run-4"),
            started(t(12, 1), "run-4"),
        ),
        DEFAULT,
        t(13),
        (RESUMED, None, t(12, 1), CERTAIN, NOTHING),
    ),
    (
        "STUCK when a RESUMED wait's continuation fails after a later digest change",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            action(t(10, 30), OTHER),
            errored(t(11), "run-2"),
        ),
        DEFAULT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED unchanged by a decline that came after it (the run already acted)",
        wait(*LIVE, accept(t(10), run="run-2"), started(t(10, 1), "run-2"), decline(t(11))),
        DEFAULT,
        t(30),
        (RESUMED, None, t(10, 1), CERTAIN, NOTHING),
    ),
    (
        "RESUMED unchanged by a later run that finished without an answer",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            started(t(11), "run-3"),
            finished(t(12), "run-3"),
        ),
        DEFAULT,
        t(30),
        (RESUMED, None, t(10, 1), CERTAIN, NOTHING),
    ),
    (
        "STUCK when the continuing run reported the other answered calls' results, not this one",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            ended(t(11), "run-2", others_reported=True),
        ),
        DEFAULT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "STUCK when that run ended with a new interrupt outcome instead",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            ended(t(11), "run-2", others_reported=True, interrupted=True),
        ),
        DEFAULT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "STUCK when a run ended with a new interrupt without the result the policy requires",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            ended(t(11), "run-2", others_reported=False, interrupted=True),
        ),
        TOOL_RESULT_RECEIPT,
        t(12),
        (STUCK, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "RESUMED when the continuing run reported no result at all (no evidence of a drop)",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            ended(t(11), "run-2", others_reported=False),
        ),
        DEFAULT,
        t(12),
        (RESUMED, None, t(10, 1), CERTAIN, NOTHING),
    ),
    (
        "RESUMED when a run that repeats the consumed answer fails (the wait was settled)",
        wait(
            *LIVE,
            accept(t(10), run="run-2"),
            started(t(10, 1), "run-2"),
            tool_result(t(10, 2), "run-2"),
            finished(t(11), "run-2"),
            accept(t(12), run="run-3"),
            started(t(12, 1), "run-3"),
            errored(t(12, 2), "run-3"),
        ),
        DEFAULT,
        t(13),
        (RESUMED, None, t(10, 1), CERTAIN, NOTHING),
    ),
    # --- CLOSED_BY_DECLINE ---------------------------------------------------------------
    (
        "CLOSED_BY_DECLINE since a decline in the approval UI",
        wait(*LIVE, decline(t(5))),
        DEFAULT,
        t(30),
        (DECLINED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE since a decline in the resume input",
        wait(*LIVE, decline(t(5), run="run-2"), started(t(5, 1), "run-2"), finished(t(6), "run-2")),
        DEFAULT,
        t(30),
        (DECLINED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE over expiry (a decline after expiresAt still closes)",
        wait(*LIVE, decline(t(25)), expires_at=t(20)),
        DEFAULT,
        t(30),
        (DECLINED, None, t(25), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE over a failed delivery",
        wait(failed(t(0, 1)), beat(t(0, 2)), decline(t(5))),
        DEFAULT,
        t(30),
        (DECLINED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE over a null handle and a stale heartbeat",
        wait(*LIVE, decline(t(20)), handle=False),
        DEFAULT,
        t(30),
        (DECLINED, None, t(20), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE when a decline follows an accept not yet consumed",
        wait(*LIVE, accept(t(10)), decline(t(11))),
        DEFAULT,
        t(30),
        (DECLINED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE unchanged by an accept consumed after it",
        wait(*LIVE, decline(t(5)), accept(t(6), run="run-2"), started(t(6, 1), "run-2")),
        DEFAULT,
        t(30),
        (DECLINED, None, t(5), CERTAIN, NOTHING),
    ),
    # --- CANCELLED -----------------------------------------------------------------------
    (
        "CANCELLED (not CLOSED_BY_DECLINE) since a cancel decision",
        wait(*LIVE, cancel(t(5))),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CANCELLED since a cancelled resume entry",
        wait(*LIVE, cancel(t(5), run="run-2"), started(t(5, 1), "run-2"), finished(t(6), "run-2")),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CANCELLED unchanged by a decline after the cancel",
        wait(*LIVE, cancel(t(5)), decline(t(6))),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(5), CERTAIN, NOTHING),
    ),
    (
        "CANCELLED when a cancel follows an accept not yet consumed",
        wait(*LIVE, accept(t(10)), cancel(t(11))),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(11), CERTAIN, NOTHING),
    ),
    (
        "CANCELLED (uncertain, missing decision) when a later run finished and nobody answered",
        wait(*LIVE, started(t(5), "run-3"), finished(t(6), "run-3")),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(6), UNCERTAIN, (Missing.DECISION,)),
    ),
    (
        "WAITING when the later run announced the wait again (it did not move past it)",
        wait(*LIVE, started(t(5), "run-3"), finished(t(6), "run-3", reannounced=True)),
        DEFAULT,
        t(7),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    # --- a wait a later run moved past, answered later (the producer kept it) ---------------
    (
        "WAITING awaiting_receipt when a run's accept reopens a wait a later run moved past",
        wait(*MOVED_PAST, accept(t(10), "run-4")),
        DEFAULT,
        t(12),
        (WAITING, RECEIPT_PHASE, t(10), CERTAIN, NOTHING),
    ),
    (
        "RESUMED when the run whose input accepted a wait moved past starts",
        wait(*MOVED_PAST, accept(t(10), "run-4"), started(t(10), "run-4")),
        DEFAULT,
        t(30),
        (RESUMED, None, t(10), CERTAIN, NOTHING),
    ),
    (
        "STUCK one ms past resumeGrace after a late accept that no run consumed",
        wait(*MOVED_PAST, accept(t(10), "run-4")),
        DEFAULT,
        t(15) + 1,
        (STUCK, None, t(15), CERTAIN, NOTHING),
    ),
    (
        "STALE when the late accept of a wait moved past came after expiresAt",
        wait(*MOVED_PAST, accept(t(10), "run-4"), started(t(10), "run-4"), expires_at=t(8)),
        DEFAULT,
        t(30),
        (STALE, None, t(10), CERTAIN, NOTHING),
    ),
    (
        "CLOSED_BY_DECLINE when a run's decline answers a wait a later run moved past",
        wait(*MOVED_PAST, decline(t(10), "run-4")),
        DEFAULT,
        t(30),
        (DECLINED, None, t(10), CERTAIN, NOTHING),
    ),
    (
        "CANCELLED (uncertain) unchanged by an approval UI's accept after the run moved past",
        wait(*MOVED_PAST, accept(t(10))),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(6), UNCERTAIN, (Missing.DECISION,)),
    ),
    (
        "CANCELLED (certain) never reopens: a run's accept after an explicit cancel",
        wait(*LIVE, cancel(t(5), "run-3"), accept(t(10), "run-4"), started(t(10), "run-4")),
        DEFAULT,
        t(30),
        (CANCELLED, None, t(5), CERTAIN, NOTHING),
    ),
    # --- evidence a deployment never reports (Need.IGNORED) ------------------------------
    (
        "WAITING when the policy ignores handles and none was ever reported",
        wait(*LIVE, handle=None),
        NO_HANDLE,
        t(1),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING when the policy ignores heartbeats and none came after the run's end",
        wait(delivered(t(0, 1))),
        NO_HEARTBEAT,
        t(30),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    (
        "WAITING awaiting_decision when the policy ignores routes and none was reported",
        wait(beat(t(8)), beat(t(16)), beat(t(24))),
        NO_ROUTE,
        t(30),
        (WAITING, DECISION_PHASE, t(0), CERTAIN, NOTHING),
    ),
    # --- thresholds are policy ------------------------------------------------------------
    (
        "WAITING awaiting_receipt at a content-preview policy's 10 s resumeGrace exactly",
        wait(*LIVE, accept(t(10))),
        PREVIEW,
        t(10, 10),
        (WAITING, RECEIPT_PHASE, t(10), CERTAIN, NOTHING),  # orphaned (30 s) until the accept
    ),
    (
        "STUCK one ms past a content-preview policy's 10 s resumeGrace",
        wait(*LIVE, accept(t(10))),
        PREVIEW,
        t(10, 10) + 1,
        (STUCK, None, t(10, 10), CERTAIN, NOTHING),
    ),
    (
        "UNROUTABLE one s past a content-preview policy's 5 s routeGrace",
        wait(beat(t(0, 2))),
        PREVIEW,
        t(0, 6),
        (UNROUTABLE, None, t(0, 5), UNCERTAIN, (Missing.ROUTE,)),
    ),
    (
        "ORPHANED past a content-preview policy's 30 s heartbeatFreshness",
        wait(*LIVE),
        PREVIEW,
        t(0, 33),
        (ORPHANED, None, t(0, 32), CERTAIN, NOTHING),
    ),
]


@pytest.mark.parametrize(
    ("evidence", "policy", "now", "expected"),
    [row[1:] for row in TRUTH_TABLE],
    ids=[row[0] for row in TRUTH_TABLE],
)
def test_classify_gives_the_verdict_the_spec_asks_for(evidence, policy, now, expected):
    verdict = classify(evidence, policy, now)
    actual = (verdict.state, verdict.phase, verdict.since, verdict.uncertain, verdict.missing)

    assert expected == actual
    assert (policy.name, policy.thresholds) == (verdict.policy, verdict.thresholds)
