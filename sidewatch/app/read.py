"""Read: the waits in some states, and one wait with its evidence timeline and recorded
transitions, each evaluated at the `now` it is given (the read API's and the wait pages')."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from sidewatch.core.engine import evaluate
from sidewatch.core.model import (
    ActionChange,
    Decision,
    Heartbeat,
    Item,
    Receipt,
    Route,
    RunEvent,
    SubagentState,
    WaitEvidence,
)
from sidewatch.core.policy import Policy
from sidewatch.report.verdicts import iso, verdict_json
from sidewatch.store.auditstate import AuditState
from sidewatch.store.repo import Store

log = logging.getLogger("sidewatch.http")


PolicyFor = Callable[[str | None, str | None], Policy]


class Read:
    """What the read API and the wait pages answer. `policy_for` chooses a wait's policy as
    the auditor does (a reload changes both); what the auditor last recorded is read from the
    store."""

    def __init__(self, store: Store, policy_for: PolicyFor) -> None:
        self.store = store
        self.recorded = AuditState(store.engine)
        self.policy_for = policy_for

    def waits(self, states: Collection[str], limit: int, now: int) -> dict[str, Any]:
        """Waits in `states` at `now`. Candidates: those the auditor last saw in one of the
        states, and every wait whose verdict may have changed since (due by time, or on a
        thread with new evidence, new waits included); each is classified again at `now`."""
        return _waits(self.store, self.recorded, self.policy_for, states, limit, now)

    def wait(self, request_id: str, now: int) -> dict[str, Any] | None:
        """One wait's verdict at `now`, its evidence timeline and its recorded transitions."""
        return _wait(self.store, self.recorded, self.policy_for, request_id, now)

    def pruned_before(self) -> int | None:
        """The cutoff before which closed waits were pruned (store.retention), None while
        nothing was: a wait not found may have been one of them."""
        return self.store.pruned_before()


def _waits(
    store: Store,
    recorded: AuditState,
    policy_for: PolicyFor,
    states: Collection[str],
    limit: int,
    now: int,
) -> dict[str, Any]:
    chosen = recorded.select(states, limit)
    wanted = {request_id for request_id, _ in chosen}
    threads = {thread for _, thread in chosen}
    changed = set(recorded.due(now)) | {t for t, _ in recorded.dirty()}
    threads |= changed
    out = []
    for facts in store.threads(threads):
        try:
            evaluated = evaluate(facts, policy_for, now)
        except Exception:  # one thread that cannot be evaluated never fails the list
            log.exception("thread %s could not be evaluated; left out", facts.thread_id)
            continue
        for w in evaluated.waits:
            ev, v = w.evidence, w.verdict
            if ev.request_id in wanted or (ev.thread_id in changed and ev.requested_at <= now):
                try:
                    if v is None:
                        raise w.error or ValueError("no verdict")
                    body = verdict_json(ev, v)
                except Exception:  # one wait that cannot be shown never fails the list
                    log.exception("wait %s could not be listed; left out", ev.request_id)
                    continue
                if v.state.value in states:
                    out.append((v.since, body))
    out.sort(key=lambda p: (p[0], p[1]["requestId"]))
    return {"evaluatedAt": iso(now), "waits": [body for _, body in out[:limit]]}


def _wait(
    store: Store, recorded: AuditState, policy_for: PolicyFor, request_id: str, now: int
) -> dict[str, Any] | None:
    # Looked up, never parsed: ids may hold `/` and `@`.
    # A long thread from its checkpoint, when the wait is after its cut (store.checkpoint).
    threads = store.threads_of(request_id)
    for out in store.evaluations(threads, policy_for, now, keep=False, want=request_id):
        if out.result is None:
            raise out.error or ValueError("not evaluated")
        for w in out.result.waits:
            ev, v = w.evidence, w.verdict
            if ev.request_id != request_id:
                continue
            if v is None:
                raise w.error or ValueError("no verdict")
            body = verdict_json(ev, v)
            body["evaluatedAt"] = iso(now)
            body["timeline"] = _timeline(ev)
            body["transitions"] = [
                {
                    "from": t.from_state,
                    "to": t.to_state,
                    "at": iso(t.at),
                    "recordedAt": iso(t.recorded_at),
                }
                for t in recorded.transitions_of(request_id)
            ]
            return body
    return None


def _timeline(ev: WaitEvidence) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "at": iso(ev.requested_at),
            "kind": "requested",
            "runId": ev.run_id,
            "expiresAt": iso(ev.expires_at),
            "actionDigest": ev.digest,
        }
    ]
    steps: list[tuple[int, int, dict[str, Any]]] = [
        (item.at, item.seq, _describe(item)) for item in ev.items
    ]
    if ev.subagent is not None:  # the subagent that raised the wait: evidence only
        steps += [
            (
                s.at,
                s.seq,
                {
                    "kind": _SUBAGENT_KINDS[s.state],
                    "subagentRunId": ev.subagent.run_id,
                    "runId": s.run_id,
                },
            )
            for s in ev.subagent.steps
        ]
    for at, _, described in sorted(steps, key=lambda s: (s[0], s[1])):
        out.append({"at": iso(at), **described})
    return out


_SUBAGENT_KINDS = {
    SubagentState.RUNNING: "subagent_started",
    SubagentState.SUSPENDED: "subagent_suspended",
    SubagentState.FINISHED: "subagent_finished",
    SubagentState.ERROR: "subagent_error",
}


def _describe(item: Item) -> dict[str, Any]:
    if isinstance(item, Route):
        return {
            "kind": "route",
            "approverRef": item.approver_ref,
            "delivered": item.delivered,
            "acknowledged": item.acknowledged,
        }
    if isinstance(item, Decision):
        return {
            "kind": "decision",
            "decision": item.code.value,
            "runId": item.run_id,
            "actionDigest": item.digest,
            "uncertain": item.uncertain,
            "edited": item.edited,
        }
    if isinstance(item, ActionChange):
        return {"kind": "action", "actionDigest": item.digest}
    if isinstance(item, Heartbeat):
        if item.last_at is None or item.beats == 1:
            return {"kind": "heartbeat", "resumeHandle": item.handle}
        # A compacted span: one item, its beats counted, its first (`at`) and last beat.
        span = {"lastAt": iso(item.last_at), "beats": item.beats}
        return {"kind": "heartbeat", "resumeHandle": item.handle, **span}
    if isinstance(item, Receipt):
        return {"kind": "receipt"}
    assert isinstance(item, RunEvent)
    return {"kind": f"run_{item.step.value}", "runId": item.run_id}
