"""The verdict object of `audit --format json` and `GET /v1/waits`, and the audit table."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sidewatch.core.model import OPEN_STATES, Subagent, Thresholds, Verdict, WaitEvidence
from sidewatch.core.text import safe

TABLE_LIMIT = 120  # characters of a request id or action in the audit table

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST_MS = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
_YEAR_10000 = 253_402_300_800_000  # ms


def iso(ms: int | None) -> str | None:
    """ISO 8601 UTC with a `Z`; whole seconds unless the time has milliseconds. A time no
    calendar date shows (before the year 1 or after 9999: a producer's bad clock or unit,
    stored before ingest checked the range) is `out of range (<ms> ms)`, never an error."""
    if ms is None:
        return None
    if 0 <= ms < _YEAR_10000:  # the common case, without datetime objects: a full audit
        seconds, milli = divmod(ms, 1000)  # writes several times per wait
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        return f"{text}.{milli:03d}Z" if milli else f"{text}Z"
    try:
        dt = EPOCH + timedelta(milliseconds=ms)  # exact: no float rounding at the edges
    except OverflowError:
        return f"out of range ({ms} ms)"
    text = dt.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def _seconds(ms: int) -> int | float:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def verdict_json(ev: WaitEvidence, v: Verdict) -> dict[str, Any]:
    return {
        "requestId": v.request_id,
        "threadId": ev.thread_id,
        "runId": ev.run_id,
        "interruptId": ev.interrupt_id,
        "action": ev.action,
        "reason": ev.reason,
        "policy": v.policy,
        "state": v.state.value,
        "phase": v.phase.value if v.phase else None,
        "closed": v.closed,
        "owner": v.owner.value if v.owner else None,
        "nextMove": v.next_move,
        "since": iso(v.since),
        "uncertain": v.uncertain,
        "missing": [m.value for m in v.missing],
        "thresholds": thresholds_json(v),
        "evidence": evidence_json(v),
        "findings": list(v.findings),
    }


def thresholds_json(v: Verdict) -> dict[str, int | float]:
    return thresholds_of(v.thresholds)


def thresholds_of(th: Thresholds) -> dict[str, int | float]:
    return {
        "resumeGraceSeconds": _seconds(th.resume_grace_ms),
        "heartbeatFreshnessSeconds": _seconds(th.heartbeat_freshness_ms),
        "routeGraceSeconds": _seconds(th.route_grace_ms),
    }


def evidence_json(v: Verdict) -> dict[str, Any]:
    f = v.facts
    return {
        "requestedAt": iso(f.requested_at),
        "expiresAt": iso(f.expires_at),
        "actionDigest": f.action_digest,
        "digestChanged": f.digest_changed,
        "route": f.route,
        "approverRef": f.approver_ref,
        "resumeHandle": f.resume_handle,
        "lastHeartbeatAt": iso(f.last_heartbeat_at),
        "decision": f.decision.value if f.decision else None,
        "decidedAt": iso(f.decided_at),
        "receiptAt": iso(f.receipt_at),
        "continuationFailed": f.continuation_failed,
        "continuationFailure": f.continuation_failure,
        "actionEdited": f.action_edited,
        "subagent": subagent_json(f.subagent),
    }


def subagent_json(s: Subagent | None) -> dict[str, Any] | None:
    """The subagent that raised the wait (`subagentRunId` as `runId`), as of the verdict:
    `state` by its latest `SUBAGENT_*` event (null: none seen), `since` that event's time."""
    if s is None:
        return None
    return {
        "runId": s.run_id,
        "name": s.name,
        "state": s.state.value if s.state else None,
        "since": iso(s.since),
    }


def audit_json(at: int, waits: Sequence[tuple[WaitEvidence, Verdict]]) -> dict[str, Any]:
    return {"evaluatedAt": iso(at), "waits": [verdict_json(ev, v) for ev, v in waits]}


def audit_table(at: int, waits: Sequence[tuple[WaitEvidence, Verdict]]) -> str:
    """A table a person reads at 3 a.m.: one row a wait, then the next safe move per state."""
    head = ("REQUEST", "STATE", "OWNER", "SINCE", "ACTION", "NOTE")
    rows = [head]
    for ev, v in waits:
        notes = [v.phase.value] if v.phase else []
        if v.uncertain:
            notes.append("uncertain")
        if v.missing:
            notes.append("missing " + ",".join(m.value for m in v.missing))
        rows.append(
            (  # a producer's strings, cleaned: a terminal must not read escape sequences
                safe(v.request_id, TABLE_LIMIT),
                v.state.value,
                v.owner.value if v.owner else "-",
                iso(v.since) or "-",
                safe(ev.action or ev.reason or "-", TABLE_LIMIT),
                "; ".join(notes) or "-",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    lines = [
        f"Audit at {iso(at)}: {len(waits)} wait(s), "
        f"{sum(1 for _, v in waits if v.state in OPEN_STATES)} open",
        "",
    ]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    moves: dict[str, str] = {}
    for _, v in waits:
        moves.setdefault(v.state.value, v.next_move)
    if moves:
        lines += ["", "Next safe move:"]
        lines += [f"  {state}: {move}" for state, move in moves.items()]
    return "\n".join(lines)
