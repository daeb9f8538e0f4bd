"""Read: the waits in some states, and one wait with its evidence timeline and recorded
transitions, each evaluated at the `now` it is given (the read API's and the wait pages')."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from sidewatch.core.engine import Evaluated
from sidewatch.core.model import (
    CLOSED_STATES,
    ActionChange,
    Decision,
    Heartbeat,
    Item,
    Receipt,
    Route,
    RunEvent,
    SubagentState,
    Verdict,
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
    wanted: dict[str, set[str]] = defaultdict(set)
    for request_id, thread in chosen:
        wanted[thread].add(request_id)
    changed = set(recorded.due(now)) | {t for t, _ in recorded.dirty()}
    pick = _Pick(states, {rid for rid, _ in chosen}, changed, now)
    found = _found(store, policy_for, wanted.keys() | changed, wanted, pick)
    # A long thread is read from its checkpoint (store.checkpoint); a wait chosen before its
    # cut is read back from what was kept of it (or the thread whole, without it). Its
    # settled waits there, not evaluated, are closed and recorded as they stay: they may rank
    # only when closed states are listed and the recorded ones filled the limit (else each
    # would be chosen). Those that rank are read again: from what was kept of them where the
    # checkpoint still holds, else their thread evaluated whole.
    if len(chosen) == limit and not _CLOSED.isdisjoint(states):
        top = _top(found, limit)
        until = top[-1][0] if len(top) == limit else None
        for thread, f in found.items():
            # A thread not changed is here for a wait chosen after its cut; each settled wait
            # of it in these states has been in its state since earlier, so was chosen too
            # (and the thread evaluated whole).
            if f.resumed and thread in changed:
                f.rows += [
                    (since, rid, thread, None)
                    for rid, since in recorded.recorded_in(thread, states, now, until)
                    if rid not in f.rids
                ]
        again: dict[str, set[str]] = defaultdict(set)
        for _, rid, thread, body in _top(found, limit):
            if body is None:
                again[thread] |= {rid, *wanted.get(thread, ())}
        if again:
            for thread in again:  # left out if it cannot be evaluated whole, as before
                del found[thread]
            found |= _found(store, policy_for, again.keys(), again, pick)
    # Every row that ranks now was evaluated (no None is left out).
    waits = [body for *_, body in _top(found, limit) if body is not None]
    return {"evaluatedAt": iso(now), "waits": waits}


_CLOSED = frozenset(s.value for s in CLOSED_STATES)
# since, requestId, thread, body (None: a settled wait's record, not evaluated)
_Row = tuple[int, str, str, dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class _Pick:
    """Which evaluated waits the list shows: in `states`, and chosen from the records by
    requestId or on a thread whose verdicts may have changed since they were recorded."""

    states: Collection[str]
    wanted: set[str]
    changed: set[str]
    at: int  # the time the list is evaluated at


@dataclass(slots=True)
class _Found:
    """One thread's rows of the list; `resumed`: evaluated from its checkpoint, `rids` being
    the waits after its cut."""

    rows: list[_Row]
    resumed: bool = False
    rids: set[str] = field(default_factory=set)


def _found(
    store: Store,
    policy_for: PolicyFor,
    threads: Collection[str],
    want: dict[str, set[str]],
    pick: _Pick,
) -> dict[str, _Found]:
    out: dict[str, _Found] = {}
    # Read-only, as the GET of one wait: no checkpoint is chosen (keep=False).
    for o in store.evaluations(threads, policy_for, now=pick.at, keep=False, want=want):
        if o.result is None:  # one thread that cannot be evaluated never fails the list
            log.error("thread %s could not be evaluated; left out", o.thread_id, exc_info=o.error)
            continue
        f = out[o.thread_id] = _Found([], o.resumed)
        for w in o.result.waits:
            ev = w.evidence
            f.rids.add(ev.request_id)
            if ev.request_id in pick.wanted or (
                ev.thread_id in pick.changed and ev.requested_at <= pick.at
            ):
                _listed(f, o.thread_id, w, pick.states)
        for rid, settled in o.settled.items():  # asked for, settled before the cut: kept
            f.rids.add(rid)
            _listed(f, o.thread_id, settled, pick.states)
    return out


def _listed(f: _Found, thread: str, w: Evaluated, states: Collection[str]) -> None:
    """`w`'s row of the list, when it is in one of `states`."""
    ev, v = w.evidence, w.verdict
    try:
        if v is None:
            raise w.error or ValueError("no verdict")
        body = verdict_json(ev, v)
    except Exception:  # one wait that cannot be shown never fails the list
        log.exception("wait %s could not be listed; left out", ev.request_id)
        return
    if v.state.value in states:
        f.rows.append((v.since, body["requestId"], thread, body))


def _top(found: dict[str, _Found], limit: int) -> list[_Row]:
    rows = [r for f in found.values() for r in f.rows]
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows[:limit]


def _wait(
    store: Store, recorded: AuditState, policy_for: PolicyFor, request_id: str, now: int
) -> dict[str, Any] | None:
    # Looked up, never parsed: ids may hold `/` and `@`.
    # A long thread from its checkpoint, when the wait is after its cut (store.checkpoint);
    # one settled before it is read back from what was kept of it, while the checkpoint holds.
    threads = store.threads_of(request_id)
    want = {thread: {request_id} for thread in threads}
    for out in store.evaluations(threads, policy_for, now, keep=False, want=want):
        if out.result is None:
            raise out.error or ValueError("not evaluated")
        found = out.settled.get(request_id)
        waits = out.result.waits if found is None else (found,)
        body = None
        for w in waits:
            ev, v = w.evidence, w.verdict
            if ev.request_id != request_id:
                continue
            if v is None:
                raise w.error or ValueError("no verdict")
            body = settled_body(ev, v)
            break
        if body is None:
            continue
        timeline = body.pop("timeline")
        body["evaluatedAt"] = iso(now)
        body["timeline"] = timeline
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


def settled_body(ev: WaitEvidence, v: Verdict) -> dict[str, Any]:
    """What `GET /v1/waits/{requestId}` shows of a wait but `evaluatedAt` and `transitions`
    (added at read time): its verdict and its timeline."""
    return {**verdict_json(ev, v), "timeline": _timeline(ev)}


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
            "channel": item.channel,
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
