"""The read API's answers: verdicts evaluated now, and one wait with its evidence timeline."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
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
    WaitEvidence,
)
from sidewatch.daemon.auditor import Auditor
from sidewatch.report.verdicts import iso, verdict_json
from sidewatch.store.repo import Store

log = logging.getLogger("sidewatch.http")


def _now() -> int:
    return int(time.time() * 1000)


def waits_now(
    store: Store, auditor: Auditor, states: Collection[str], limit: int
) -> dict[str, Any]:
    """Waits in `states` now. Candidates: those the auditor last saw in one of the states,
    and every wait whose verdict may have changed since (due by time, or on a thread with new
    evidence, new waits included); each is classified again at this moment."""
    now = _now()
    chosen = auditor.state.select(states, limit)
    wanted = {request_id for request_id, _ in chosen}
    threads = {thread for _, thread in chosen}
    changed = set(auditor.state.due(now)) | {t for t, _ in auditor.state.dirty()}
    threads |= changed
    out = []
    for facts in store.threads(threads):
        try:
            evaluated = evaluate(facts, auditor.policy_for, now)
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


def wait_detail(store: Store, auditor: Auditor, request_id: str) -> dict[str, Any] | None:
    """One wait's verdict now, its evidence timeline and its recorded transitions."""
    now = _now()
    # Looked up, never parsed: ids may hold `/` and `@`.
    for facts in store.threads(store.threads_of(request_id)):
        for w in evaluate(facts, auditor.policy_for, now).waits:
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
                for t in auditor.state.transitions_of(request_id)
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
    for item in sorted(ev.items, key=lambda i: (i.at, i.seq)):
        out.append({"at": iso(item.at), **_describe(item)})
    return out


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
