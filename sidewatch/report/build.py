"""The audit report of a window: what the morning reader needs, as one JSON-able object.

Built from the evidence (every wait classified at the window's end, its transitions from its
own history), so it reads the same with or without a running daemon. Schema: docs/reports.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sidewatch.core.model import (
    CLOSED_STATES,
    OPEN_STATES,
    PROBLEM_STATES,
    Verdict,
    WaitEvidence,
)
from sidewatch.report.verdicts import iso, verdict_json

SCHEMA_VERSION = 1
LONGEST = 10


@dataclass(frozen=True, slots=True)
class IngestHealth:
    units: int
    accepted: int
    skipped: int
    rejected: dict[str, int]  # reason -> lines
    redelivered_units: int = 0  # units whose every fact was already stored
    redelivered_lines: int = 0  # their lines (not in accepted and skipped)


@dataclass(frozen=True, slots=True)
class Retained:
    """What the store pruned: the cutoff (ms), the pruned rows' counts (lines, rejects,
    transitions, findings), and evidence for unknown waits by table, pruned and kept."""

    pruned_before: int | None = None
    pruned: dict[str, int] = field(default_factory=dict)
    unknown_pruned: dict[str, int] = field(default_factory=dict)
    unknown_kept: dict[str, int] = field(default_factory=dict)


def build_report(
    end: int,
    window_ms: int,
    now_waits: Sequence[tuple[WaitEvidence, Verdict]],
    before_waits: Sequence[tuple[WaitEvidence, Verdict]],
    findings: Iterable[tuple[str, int]],
    ingest: IngestHealth,
    previous_ingest: IngestHealth,
    retention: Retained | None = None,
) -> dict[str, Any]:
    """`now_waits` classified at `end`, `before_waits` at `end - window` (the previous window's
    end); `findings`: (rule, at) of every protocol finding noticed; `retention`: what the
    store pruned (store.retention), None when it never did."""
    start = end - window_ms
    retention = retention or Retained()
    findings = list(findings)
    this = _summary(now_waits, start, end, findings, ingest)
    previous = _summary(before_waits, start - window_ms, start, findings, previous_ingest)
    # `unreported`: what the state rests on that nobody reported (not a page: a reporting fix)
    problems = [
        {**verdict_json(ev, v), "unreported": [m.value for m in v.unreported]}
        for ev, v in now_waits
        if v.state in PROBLEM_STATES
    ]
    problems.sort(key=lambda w: (w["state"], w["since"] or ""))
    # The audit trail of the window: every other wait that moved in it (closed, resumed, …).
    changed = [
        verdict_json(ev, v)
        for ev, v in now_waits
        if v.state not in PROBLEM_STATES and any(start < t.at <= end for t in v.transitions)
    ]
    changed.sort(key=lambda w: (w["state"], w["since"] or ""))
    open_waits = [(ev, v) for ev, v in now_waits if not v.closed]
    open_waits.sort(key=lambda p: p[0].requested_at)
    return {
        "schemaVersion": SCHEMA_VERSION,
        "window": {"start": iso(start), "end": iso(end), "seconds": window_ms // 1000},
        "countsAtEnd": this["counts"],
        "problemWaits": problems,
        "changedWaits": changed,
        "transitions": this["transitions"],
        "transitionCounts": this["transitionCounts"],
        "latency": this["latency"],
        "longestWaits": [
            {
                "requestId": v.request_id,
                "state": v.state.value,
                "owner": _owner(v),
                "requestedAt": iso(ev.requested_at),
                "ageSeconds": (end - ev.requested_at) // 1000,
                "action": ev.action,
                "policy": v.policy,
            }
            for ev, v in open_waits[:LONGEST]
        ],
        "findings": this["findings"],
        "ingest": this["ingest"],
        "retention": {
            "prunedBefore": None
            if retention.pruned_before is None
            else iso(retention.pruned_before),
            # A window (or the previous one) reaching back before it shows what is kept only.
            "windowPruned": retention.pruned_before is not None
            and start - window_ms < retention.pruned_before,
            "pruned": dict(sorted(retention.pruned.items())),
            "unknownWaitEvidence": {
                "kept": dict(sorted(retention.unknown_kept.items())),
                "pruned": dict(sorted(retention.unknown_pruned.items())),
            },
        },
        "previous": {k: previous[k] for k in ("counts", "transitionCounts", "findings", "ingest")},
        "change": {
            "counts": _delta(this["counts"], previous["counts"]),
            "findings": _delta(this["findings"], previous["findings"]),
            "rejectedLines": this["ingest"]["rejectedLines"] - previous["ingest"]["rejectedLines"],
        },
    }


def _owner(v: Verdict) -> str | None:
    return v.owner.value if v.owner else None


def _summary(
    waits: Sequence[tuple[WaitEvidence, Verdict]],
    start: int,
    end: int,
    findings: list[tuple[str, int]],
    ingest: IngestHealth,
) -> dict[str, Any]:
    counts = {s.value: 0 for s in (*OPEN_STATES, *CLOSED_STATES)}
    transitions: list[dict[str, Any]] = []
    decision: dict[str, list[float]] = {}
    resume: dict[str, list[float]] = {}
    for ev, v in waits:
        counts[v.state.value] += 1
        transitions += [
            {
                "requestId": v.request_id,
                "at": iso(t.at),
                "from": t.from_state.value if t.from_state else None,
                "to": t.to_state.value,
            }
            for t in v.transitions
            if start < t.at <= end
        ]
        f = v.facts
        if f.decided_at is not None and start < f.decided_at <= end:
            decision.setdefault(v.policy, []).append((f.decided_at - ev.requested_at) / 1000)
        if f.receipt_at is not None and f.decided_at is not None and start < f.receipt_at <= end:
            resume.setdefault(v.policy, []).append((f.receipt_at - f.decided_at) / 1000)
    transitions.sort(key=lambda t: (t["at"], t["requestId"]))
    pairs = Counter(f"{t['from'] or 'none'}->{t['to']}" for t in transitions)
    return {
        "counts": counts,
        "transitions": transitions,
        "transitionCounts": dict(sorted(pairs.items())),
        "latency": {
            "decisionSeconds": {p: _percentiles(xs) for p, xs in sorted(decision.items())},
            "resumeSeconds": {p: _percentiles(xs) for p, xs in sorted(resume.items())},
        },
        "findings": dict(sorted(Counter(r for r, at in findings if start < at <= end).items())),
        "ingest": {
            "units": ingest.units,
            "acceptedLines": ingest.accepted,
            "redeliveredUnits": ingest.redelivered_units,
            "redeliveredLines": ingest.redelivered_lines,
            "skippedLines": ingest.skipped,
            "rejectedLines": sum(ingest.rejected.values()),
            "rejectedByReason": dict(sorted(ingest.rejected.items())),
        },
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    """Nearest-rank percentiles; `values` holds every observation (at least one)."""
    xs = sorted(values)

    def rank(p: int) -> float:
        return xs[max(0, -(-len(xs) * p // 100) - 1)] if p else xs[0]

    return {"count": len(xs), "p50": rank(50), "p90": rank(90), "p99": rank(99), "max": xs[-1]}


def _delta(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: now.get(k, 0) - before.get(k, 0) for k in sorted({*now, *before})}
