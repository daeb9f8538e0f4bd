"""The auditor's snapshot: frozen numbers the exporters read at scrape time."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

DECISION_BUCKETS = (
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
    43200.0,
    86400.0,
)
RESUME_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
AUDIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: tuple[int, ...]  # per bucket, not cumulative; one more for +Inf
    total: float

    @property
    def count(self) -> int:
        return sum(self.counts)


class HistogramAcc:
    """A histogram being filled; `freeze()` gives the immutable view."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.total += value

    def freeze(self) -> Histogram:
        return Histogram(self.buckets, tuple(self.counts), self.total)


@dataclass(frozen=True, slots=True)
class Snapshot:
    policies: tuple[str, ...] = ()
    open_waits: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # (state, policy, unreported) -> open waits whose verdict rests on evidence nobody reported
    unreported: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    oldest_start: Mapping[str, float] = field(default_factory=dict)
    closed_total: Mapping[tuple[str, str], int] = field(default_factory=dict)
    transitions_total: Mapping[tuple[str, str], int] = field(default_factory=dict)
    decision_latency: Mapping[str, Histogram] = field(default_factory=dict)
    resume_latency: Mapping[str, Histogram] = field(default_factory=dict)
    findings: Mapping[str, int] = field(default_factory=dict)
    audit_duration: Histogram = field(default_factory=lambda: HistogramAcc(AUDIT_BUCKETS).freeze())
    audit_last_success: float | None = None
    audit_errors: int = 0
    audit_skipped: int = 0  # ticks skipped because the store was unavailable
    audit_backlog: int = 0  # threads due or dirty the last (budgeted) tick left for the next
    ticks: int = 0


class IngestCounters:
    """Lines ingested by kind and rejected by reason; bumped by ingest between ticks."""

    def __init__(
        self, ingested: Mapping[str, int] | None = None, rejected: Mapping[str, int] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self.ingested: Counter[str] = Counter(ingested or {})
        self.rejected: Counter[str] = Counter(rejected or {})

    def add(self, kinds: Mapping[str, int], reasons: Mapping[str, int]) -> None:
        with self._lock:
            self.ingested.update(kinds)
            self.rejected.update(reasons)

    def catch_up(self, ingested: Mapping[str, int], rejected: Mapping[str, int]) -> None:
        """Raise each count to the store's total where that is higher (lines other replicas
        ingested): never lower, so a counter never goes back, and never above the store."""
        with self._lock:
            for counts, totals in ((self.ingested, ingested), (self.rejected, rejected)):
                for key, n in totals.items():
                    counts[key] = max(counts[key], n)

    def read(self) -> tuple[dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self.ingested), dict(self.rejected)
