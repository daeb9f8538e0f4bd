"""Optional push of one alert per problem wait to Alertmanager's v2 API.

Each wait in STALE, UNROUTABLE, ORPHANED or STUCK_AFTER_DECISION is an alert labelled with its
requestId, state, owner and policy and annotated with its next safe move, evidence and
thresholds. Active alerts are re-sent every `resend` interval (and expire by themselves three
intervals after the last send, should sidewatch stop); an alert is resolved as soon as its wait
leaves the state. A decline is an answer and never an alert.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

log = logging.getLogger("sidewatch.alertmanager")

SEVERITY = {
    "STUCK_AFTER_DECISION": "page",
    "ORPHANED": "page",
    "UNROUTABLE": "page",
    "STALE": "ticket",
}


@dataclass(frozen=True, slots=True)
class ProblemWait:
    request_id: str
    state: str
    owner: str
    policy: str
    since: int  # ms
    next_move: str
    evidence: str  # JSON, content-free
    thresholds: str  # JSON


def _iso(ms: int) -> str | None:
    """RFC 3339 UTC; None for a time no calendar date shows (a bad value already stored)."""
    try:
        dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class AlertmanagerPush:
    """Keeps what was sent, so that a wait leaving its state resolves its alert."""

    def __init__(self, url: str, resend_ms: int, timeout_seconds: float = 5.0) -> None:
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.resend_ms = resend_ms
        self.timeout_seconds = timeout_seconds
        self.active: dict[str, dict[str, Any]] = {}  # requestId -> the alert last sent
        self.last_full = 0
        self.failures = 0

    def push(self, problems: Sequence[ProblemWait], now: int) -> int:
        """Send what changed (and everything when a resend is due); returns alerts sent."""
        current = {p.request_id: self._alert(p, now) for p in problems if p.state in SEVERITY}
        out: list[dict[str, Any]] = []
        for request_id, sent in self.active.items():
            fresh = current.get(request_id)
            if fresh is None or fresh["labels"] != sent["labels"]:
                out.append({**sent, "endsAt": _iso(now)})  # left the state: resolved
        full = now - self.last_full >= self.resend_ms
        for request_id, alert in current.items():
            before = self.active.get(request_id)
            if full or before is None or before["labels"] != alert["labels"]:
                out.append(alert)
        if out and not self._send(out):
            return 0  # try again next tick: what is active stays as it was
        if full:
            self.last_full = now
        self.active = current
        return len(out)

    def _alert(self, p: ProblemWait, now: int) -> dict[str, Any]:
        alert: dict[str, Any] = {
            "labels": {
                "alertname": "SidewatchWait",
                "requestId": p.request_id,
                "state": p.state,
                "owner": p.owner,
                "policy": p.policy,
                "severity": SEVERITY[p.state],
            },
            "annotations": {
                "summary": f"{p.request_id} is {p.state}",
                "nextMove": p.next_move,
                "evidence": p.evidence,
                "thresholds": p.thresholds,
            },
            "endsAt": _iso(now + 3 * self.resend_ms),
        }
        # A start Alertmanager would refuse (no date, or after the end) would fail the whole
        # push: without one, Alertmanager starts the alert when it receives it.
        starts = _iso(p.since) if p.since <= now else None
        if starts is not None:
            alert["startsAt"] = starts
        return alert

    def _send(self, alerts: list[dict[str, Any]]) -> bool:
        body = json.dumps(alerts).encode()
        request = urllib.request.Request(  # noqa: S310 (the configured Alertmanager URL)
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as answer:  # noqa: S310
                answer.read()
        except Exception as e:  # Alertmanager away: verdicts and metrics go on regardless
            self.failures += 1
            log.warning("alertmanager push failed (%d alerts): %s", len(alerts), e)
            return False
        return True
