"""Optional push of one alert per problem wait to Alertmanager's v2 API.

Each wait in STALE, UNROUTABLE, ORPHANED or STUCK_AFTER_DECISION is an alert labelled with its
requestId, state, owner and policy and annotated with its next safe move, evidence and
thresholds. Active alerts are re-sent every `resend` interval (and expire by themselves three
intervals after the last send, should sidewatch stop); an alert is resolved as soon as its wait
leaves the state. A decline is an answer and never an alert.

A wait whose state rests on evidence nobody reported (`unreported`, e.g. "route") is not the
wait owner's problem but the deployment's reporting: its alert is a ticket (`warning`) labelled
`owner="sidewatch_operator"`, `evidence="unreported"` and `missing`, says "uncertain: never
reported", and carries the verdict's own next move (spec: "Missing evidence never pages").

A flood of problem waits cannot flood Alertmanager: one push (one a tick) carries at most
`max_per_push` alerts (resolutions first, then new alerts, `critical` before `warning` and oldest
first, then the resends that are due, longest unsent first) and the rest wait for the next
ticks; after a failed push the next waits 10 s, doubling to 5 min. A resolution never ends
before it starts, and an alert sent by a clock that has gone back since is resolved and sent
afresh with its true times (`AHEAD_MS`). Label values are clean and at most 128 characters
(`core.text.label`), the summary is escaped Markdown. With the daemon's `server.externalUrl`,
each alert's `generatorURL` is the wait's page. Each alert is annotated `runbook_url`, its
state's runbook the daemon serves (absolute with the external URL, else a path, as the rules'
links), and `dashboard_url` with `alertmanager.dashboardUrl`.
"""

from __future__ import annotations

import json
import logging
import math
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sidewatch.core import model
from sidewatch.core.text import label, md_text, safe, wait_page_url

log = logging.getLogger("sidewatch.alertmanager")
NO_ID = "a wait whose requestId is blank"  # the summary of an id with nothing to show

# The states that alert (the problem states) with their severity, from the one table of core.
SEVERITY = {s: v for s, v in model.SEVERITY.items() if s in model.PROBLEM_STATES}
OPERATOR = "sidewatch_operator"  # whoever runs sidewatch: the owner of unreported evidence
MAX_PER_PUSH = 500  # the default of alertmanager.maxAlertsPerPush
BACKOFF_MS = 10_000  # the wait after a failed push, doubled with each failure in a row...
BACKOFF_MAX_MS = 300_000  # ...up to this
# An alert sent more than this ahead of a push's time was sent by a clock that has gone back
# since: its times are corrected (resolved, and sent again if it still fires).
AHEAD_MS = 60_000
SUMMARY_LIMIT = 200
VALUE_LIMIT = 200  # each string of the evidence annotation
_Item = tuple[str, dict[str, Any], bool]  # requestId, the alert, whether it fires (or resolves)
UNREPORTED_RUNBOOK = "evidence-unreported.md"  # a ticket to the operator, whatever its state
_OPEN = frozenset(s.value for s in model.OPEN_STATES)


def runbook_path(state: str, unreported: bool = False) -> str | None:
    """The path of the runbook the daemon serves for a wait in `state` (daemon/runbooks: one
    per open state, `STUCK_AFTER_DECISION` as `stuck-after-decision.md`), or for one resting on
    unreported evidence; None for a closed state (none to follow)."""
    if unreported and state in SEVERITY:
        return f"/runbooks/{UNREPORTED_RUNBOOK}"
    if state not in _OPEN:
        return None
    return f"/runbooks/{state.lower().replace('_', '-')}.md"


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
    unreported: str = ""  # the never-reported evidence the state rests on, e.g. "route"

    @property
    def severity(self) -> str:
        return model.Severity.WARNING if self.unreported else SEVERITY[model.State(self.state)]


def _clean_json(text: str) -> str:
    """The stored evidence (JSON) with each string in it clean and capped: it holds the
    producer's approverRef and digest."""
    try:
        data = json.loads(text)
    except ValueError:
        return "{}"
    if not isinstance(data, dict):
        return "{}"
    shown = {k: safe(v, VALUE_LIMIT) if isinstance(v, str) else v for k, v in data.items()}
    return json.dumps(shown, ensure_ascii=False, separators=(",", ":"))


def _iso(ms: int) -> str | None:
    """RFC 3339 UTC; None for a time no calendar date shows (a bad value already stored)."""
    try:
        dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _resolution(sent: dict[str, Any], now: int) -> dict[str, Any]:
    """The alert `sent`, resolved at `now`; never ending before it starts (Alertmanager
    refuses the whole push then): a start sent by a clock ahead of `now` is moved to `now`.
    The times are `_iso`'s, of one width, so their text sorts as they do."""
    ends = _iso(now)
    out = {**sent, "endsAt": ends}
    starts = sent.get("startsAt")
    if ends is not None and starts is not None and starts > ends:
        out["startsAt"] = ends
    return out


class AlertmanagerPush:
    """Keeps what Alertmanager was sent, so that a wait leaving its state resolves its alert,
    and what is held back for the next pushes."""

    def __init__(
        self,
        url: str,
        resend_ms: int,
        max_per_push: int = MAX_PER_PUSH,
        tick_ms: int = 30_000,
        timeout_seconds: float = 5.0,
        external_url: str | None = None,
        dashboard_url: str | None = None,
    ) -> None:
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.external_url = external_url  # None: alerts carry no generatorURL
        self.dashboard_url = dashboard_url  # None: no dashboard_url annotation
        self.resend_ms = resend_ms
        self.max_per_push = max_per_push
        self.tick_ms = tick_ms
        self.timeout_seconds = timeout_seconds
        self.active: dict[str, dict[str, Any]] = {}  # requestId -> the alert last sent
        self.sent_at: dict[str, int] = {}  # requestId -> when it was last sent
        self.failures = 0  # failed pushes, in all
        self.retry_at = 0  # no push before this (ms), after failures in a row
        self.in_a_row = 0
        self.held_back = 0  # alerts due at the last push that it did not carry

    def push(self, problems: Sequence[ProblemWait], now: int) -> int:
        """Send what changed and the resends due, at most `max_per_push` of them; returns the
        alerts sent."""
        waits = [p for p in problems if p.state in SEVERITY]
        # With more alerts than the pushes of a resend interval carry, each is re-sent once a
        # round of them (and expires three rounds later), so that a backlog never makes
        # alerts flap.
        period = max(self.resend_ms, math.ceil(len(waits) / self.max_per_push) * self.tick_ms)
        current = {p.request_id: self._alert(p, now, now + 3 * period) for p in waits}
        due = self._due(waits, current, now, period)
        if self.retry_at - now > BACKOFF_MAX_MS:  # set by a clock that has gone back since
            self.retry_at = 0
        if now < self.retry_at:
            self.held_back = len(due)
            return 0
        batch = due[: self.max_per_push]
        if batch and not self._send([alert for _, alert, _ in batch]):
            self.in_a_row += 1
            self.retry_at = now + min(BACKOFF_MAX_MS, BACKOFF_MS << min(self.in_a_row - 1, 16))
            self.held_back = len(due)
            return 0  # what is active stays as it was
        self.in_a_row, self.retry_at = 0, 0
        for request_id, alert, firing in batch:
            if firing:
                self.active[request_id] = alert
                self.sent_at[request_id] = now
            else:
                del self.active[request_id], self.sent_at[request_id]
        self.held_back = len(due) - len(batch)
        return len(batch)

    def _due(
        self, waits: list[ProblemWait], current: dict[str, dict[str, Any]], now: int, period: int
    ) -> list[_Item]:
        """What to send, in order: resolutions, new or changed alerts (pages first, the
        oldest first), then the resends due (the longest unsent first). An alert sent by a
        clock ahead of `now` (gone back since) is resolved and, if it still fires, sent
        afresh: Alertmanager keeps the later end of two overlapping sends of one alert."""
        resolved: list[_Item] = []
        new: list[_Item] = []
        resend: list[_Item] = []
        ahead = {r for r, at in self.sent_at.items() if at - now > AHEAD_MS}
        for request_id, sent in self.active.items():
            fresh = current.get(request_id)
            if fresh is None or fresh["labels"] != sent["labels"] or request_id in ahead:
                resolved.append((request_id, _resolution(sent, now), False))
        for p in sorted(waits, key=lambda p: (p.severity != model.Severity.CRITICAL, p.since)):
            before = self.active.get(p.request_id)
            if (
                before is None
                or before["labels"] != current[p.request_id]["labels"]
                or p.request_id in ahead
            ):
                new.append((p.request_id, current[p.request_id], True))
            elif now - self.sent_at[p.request_id] >= period:
                resend.append((p.request_id, current[p.request_id], True))
        resend.sort(key=lambda item: self.sent_at[item[0]])
        return resolved + new + resend

    def _alert(self, p: ProblemWait, now: int, expiry: int) -> dict[str, Any]:
        alert: dict[str, Any] = {
            "labels": {
                "alertname": "SidewatchWait",
                "requestId": label(p.request_id),
                "state": p.state,
                "owner": OPERATOR if p.unreported else label(p.owner),
                "policy": label(p.policy),
                "severity": p.severity,
            },
            "annotations": {
                "summary": f"{md_text(label(p.request_id), SUMMARY_LIMIT) or NO_ID} is {p.state}",
                "nextMove": p.next_move,
                "evidence": _clean_json(p.evidence),
                "thresholds": p.thresholds,
            },
            "endsAt": _iso(expiry),
        }
        if self.external_url:
            alert["generatorURL"] = wait_page_url(self.external_url, p.request_id)
        runbook = runbook_path(p.state, bool(p.unreported))
        if runbook is not None:  # every state that alerts has one
            alert["annotations"]["runbook_url"] = (self.external_url or "") + runbook
        if self.dashboard_url:
            alert["annotations"]["dashboard_url"] = self.dashboard_url
        if p.unreported:
            alert["labels"] |= {"evidence": "unreported", "missing": p.unreported}
            alert["annotations"]["summary"] += f" (uncertain: never reported: {p.unreported})"
            alert["annotations"]["stateOwner"] = label(p.owner)
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
