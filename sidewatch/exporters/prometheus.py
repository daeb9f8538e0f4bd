"""`/metrics`: a custom collector that yields fresh metric families from the latest snapshot
(no timer-mutated globals, no timestamps). Every known label value is present, with 0."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from sidewatch.core.model import (
    ALLOWED_TRANSITIONS,
    CLOSED_STATES,
    OPEN_STATES,
    UNREPORTED_LABELS,
    State,
)
from sidewatch.core.vocab import FindingRule, LineKind, RejectReason
from sidewatch.exporters.alertmanager import AlertmanagerPush
from sidewatch.exporters.snapshot import (
    DECISION_BUCKETS,
    RESUME_BUCKETS,
    Histogram,
    IngestCounters,
    Snapshot,
)

# Every member of each vocabulary is exported from the start, at 0.
INGEST_KINDS = tuple(LineKind)
REJECT_REASONS = tuple(RejectReason)
FINDING_RULES = tuple(FindingRule)


class SnapshotCollector(Collector):
    """The store-wide families come from the replica holding the audit lease only (`snapshot`
    gives None on the others), so summing over replicas never counts anything twice."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot | None],
        ingest: IngestCounters,
        lease_held: Callable[[], bool] = lambda: True,
        skipped: Callable[[], int] | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._ingest = ingest
        self._lease_held = lease_held
        # This replica's skipped ticks, exported whether or not it holds the lease now (an
        # outage skips ticks and loses the lease together); None: the snapshot's count.
        self._skipped = skipped

    def collect(self) -> Iterator[Metric]:
        lease = GaugeMetricFamily(
            "sidewatch_audit_lease_held",
            "1 on the replica that holds the audit lease (it audits and exports the "
            "store-wide metrics), 0 on a standby.",
        )
        lease.add_metric([], 1 if self._lease_held() else 0)
        yield lease
        if self._skipped is not None:
            yield self._skipped_family(self._skipped())
        s = self._snapshot()
        if s is None:
            return
        # Configured policies, and any a stored verdict still names (renamed or removed).
        policies = tuple(
            dict.fromkeys(
                (*s.policies, *(p for _, p in s.open_waits), *(p for _, p in s.closed_total))
            )
        ) or ("default",)

        waits = GaugeMetricFamily(
            "sidewatch_waits", "Open approval waits now, by state.", labels=["state", "policy"]
        )
        for state in OPEN_STATES:
            for policy in policies:
                waits.add_metric([state.value, policy], s.open_waits.get((state.value, policy), 0))
        yield waits

        unreported = GaugeMetricFamily(
            "sidewatch_waits_unreported",
            "Open waits whose state rests on evidence nobody reported (a subset of "
            "sidewatch_waits), by the missing evidence; each wait counts once.",
            labels=["state", "policy", "missing"],
        )
        for state, labels in UNREPORTED_LABELS.items():
            for policy in policies:
                for missing in labels:
                    key = (state.value, policy, missing)
                    unreported.add_metric(list(key), s.unreported.get(key, 0))
        yield unreported

        closed = CounterMetricFamily(
            "sidewatch_waits_closed",
            "Waits that entered a closed state.",
            labels=["state", "policy"],
        )
        for state in CLOSED_STATES:
            for policy in policies:
                closed.add_metric(
                    [state.value, policy], s.closed_total.get((state.value, policy), 0)
                )
        yield closed

        oldest = GaugeMetricFamily(
            "sidewatch_wait_oldest_start_timestamp_seconds",
            "When the oldest open wait in the state entered it (absent when none is).",
            labels=["state"],
        )
        for name, at in sorted(s.oldest_start.items()):
            oldest.add_metric([name], at)
        yield oldest

        trans = CounterMetricFamily(
            "sidewatch_state_transitions",
            "Transitions between wait states (from none: a new wait).",
            labels=["from", "to"],
        )
        # Every possible pair from the start, at 0: rate() cannot see a series' first count.
        for frm, to in sorted(_PAIRS | set(s.transitions_total)):
            trans.add_metric([frm, to], s.transitions_total.get((frm, to), 0))
        yield trans

        yield _histograms(
            "sidewatch_decision_latency_seconds",
            "Time from a request to its decision.",
            s.decision_latency,
            policies,
            DECISION_BUCKETS,
        )
        yield _histograms(
            "sidewatch_resume_latency_seconds",
            "Time from an accept to its continuation receipt.",
            s.resume_latency,
            policies,
            RESUME_BUCKETS,
        )

        ingested, rejected = self._ingest.read()
        lines = CounterMetricFamily(
            "sidewatch_ingested_lines",
            "Lines ingested (accepted or skipped), by kind.",
            labels=["kind"],
        )
        for kind in sorted({*INGEST_KINDS, *ingested}):
            lines.add_metric([kind], ingested.get(kind, 0))
        yield lines
        rej = CounterMetricFamily(
            "sidewatch_rejected_lines", "Lines rejected, by reason.", labels=["reason"]
        )
        for reason in sorted({*REJECT_REASONS, *rejected}):
            rej.add_metric([reason], rejected.get(reason, 0))
        yield rej

        finds = CounterMetricFamily(
            "sidewatch_protocol_findings", "Protocol findings, by rule.", labels=["rule"]
        )
        for rule in sorted({*FINDING_RULES, *s.findings}):
            finds.add_metric([rule], s.findings.get(rule, 0))
        yield finds

        duration = HistogramMetricFamily(
            "sidewatch_audit_duration_seconds", "Duration of auditor ticks."
        )
        duration.add_metric([], _buckets(s.audit_duration), s.audit_duration.total)
        yield duration
        last = GaugeMetricFamily(
            "sidewatch_audit_last_success_timestamp_seconds",
            "When the auditor last finished a tick.",
        )
        last.add_metric([], s.audit_last_success or 0.0)
        yield last
        backlog = GaugeMetricFamily(
            "sidewatch_audit_backlog_threads",
            "Threads with new evidence or a due change that the last tick left for the next "
            "(a tick works under a time budget; a long re-audit shows here, going down).",
        )
        backlog.add_metric([], s.audit_backlog)
        yield backlog
        errors = CounterMetricFamily(
            "sidewatch_audit_errors", "Waits whose classification raised (logged, skipped)."
        )
        errors.add_metric([], s.audit_errors)
        yield errors
        if self._skipped is None:
            yield self._skipped_family(s.audit_skipped)

    @staticmethod
    def _skipped_family(n: int) -> Metric:
        skipped = CounterMetricFamily(
            "sidewatch_audit_skipped", "Audit ticks skipped because the store was unavailable."
        )
        skipped.add_metric([], n)
        return skipped


class AlertPushCollector(Collector):
    """The Alertmanager push's backlog and failures, 0 when no push is configured."""

    def __init__(self, push: Callable[[], AlertmanagerPush | None]) -> None:
        self._push = push

    def collect(self) -> Iterator[Metric]:
        push = self._push()
        held = GaugeMetricFamily(
            "sidewatch_alertmanager_alerts_held_back",
            "Alerts due at the last Alertmanager push that it did not carry (past "
            "alertmanager.maxAlertsPerPush, or in the back-off after a failed push); the next "
            "pushes carry them.",
        )
        held.add_metric([], push.held_back if push else 0)
        yield held
        failed = CounterMetricFamily(
            "sidewatch_alertmanager_push_failures",
            "Alertmanager pushes that failed (each one followed by a back-off).",
        )
        failed.add_metric([], push.failures if push else 0)
        yield failed


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*h.buckets, float("inf")), h.counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


def _histograms(
    name: str,
    doc: str,
    hists: Mapping[str, Histogram],
    policies: tuple[str, ...],
    buckets: tuple[float, ...],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=["policy"])
    empty = Histogram(buckets, (0,) * (len(buckets) + 1), 0.0)
    for policy in sorted({*policies, *hists}):
        h = hists.get(policy, empty)
        family.add_metric([policy], _buckets(h), h.total)
    return family


# "none" is where a new wait comes from; closed states never move but RESUMED, which may
# reopen as STUCK_AFTER_DECISION.
_PAIRS = {(a.value, b.value) for a, b in ALLOWED_TRANSITIONS} | {("none", s.value) for s in State}
