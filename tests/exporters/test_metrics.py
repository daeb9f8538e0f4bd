"""`/metrics` as Prometheus reads it: the required families of interfaces.md, built from the
auditor's snapshot at scrape time, every open state present, no per-request label, and text
that `promtool check metrics` accepts."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.exporters.alertmanager import AlertmanagerPush, ProblemWait
from sidewatch.exporters.prometheus import FINDING_RULES, AlertPushCollector, SnapshotCollector
from sidewatch.exporters.snapshot import IngestCounters
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

SEED = Path("/work/shared/fixtures/seed-audit.ndjson")
AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z, the reference audit's time
OPEN_STATES = ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")
CLOSED_STATES = ("CLOSED_BY_DECLINE", "RESUMED", "CANCELLED")
# family name (as the text format's TYPE line names it) -> type, labels (interfaces.md)
REQUIRED = {
    "sidewatch_waits": ("gauge", {"state", "policy"}),
    "sidewatch_waits_closed_total": ("counter", {"state", "policy"}),
    "sidewatch_wait_oldest_start_timestamp_seconds": ("gauge", {"state"}),
    "sidewatch_state_transitions_total": ("counter", {"from", "to"}),
    "sidewatch_decision_latency_seconds": ("histogram", {"policy"}),
    "sidewatch_resume_latency_seconds": ("histogram", {"policy"}),
    "sidewatch_ingested_lines_total": ("counter", {"kind"}),
    "sidewatch_rejected_lines_total": ("counter", {"reason"}),
    "sidewatch_protocol_findings_total": ("counter", {"rule"}),
    "sidewatch_audit_duration_seconds": ("histogram", set()),
    "sidewatch_audit_last_success_timestamp_seconds": ("gauge", set()),
}
FORBIDDEN_LABELS = {
    "request",
    "request_id",
    "requestId",
    "thread",
    "thread_id",
    "threadId",
    "run",
    "run_id",
    "runId",
    "interrupt",
    "interrupt_id",
    "interruptId",
    "approver",
    "approver_ref",
    "approverRef",
}


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    engine = open_store(db_url)
    yield Store(engine)
    engine.dispose()


def seeded(store: Store) -> Store:
    """The reference six-request stream, received at 16:30."""
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "seed", SEED.read_bytes(), AT
    )
    return store


def scrape(auditor: Auditor) -> str:
    """What `/metrics` serves: a fresh registry holding only the snapshot collector."""
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: auditor.snapshot, auditor.ingest))
    return generate_latest(registry).decode()


def declared(text: str) -> dict[str, str]:
    """Family name -> type, from the `# TYPE` lines (a family may have no sample yet)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            out[name] = kind
    return out


def samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """Every sample called `name`, keyed by its labels."""
    return {
        frozenset(s.labels.items()): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def waits_by_state(text: str) -> dict[str, float]:
    return {
        dict(labels)["state"]: value
        for labels, value in samples(text, "sidewatch_waits").items()
        if dict(labels)["policy"] == "default"
    }


def seed_identities() -> set[str]:
    """Every request, thread, run and interrupt id and approver ref of the reference stream."""
    found: set[str] = set()

    def walk(node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in {"threadId", "runId", "id", "approverRef"}:
            found.add(node)

    for line in SEED.read_bytes().splitlines():
        walk(orjson.loads(line))
    expected = orjson.loads(SEED.with_name("seed-audit.expected.json").read_bytes())
    return found | set(expected["expected"])


UNPACKED = (
    Path(__file__).resolve().parents[2] / ".tools" / "prometheus" / "usr" / "bin" / "promtool"
)


def promtool() -> str:
    """promtool as `make test` unpacks it (or SIDEWATCH_PROMTOOL); missing is a failure."""
    path = os.environ.get("SIDEWATCH_PROMTOOL") or str(UNPACKED)
    if not Path(path).is_file():
        pytest.fail(f"SIDEWATCH_PROMTOOL={path} does not exist: `make test` downloads promtool")
    return path


# -- the families ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [False, True], ids=["empty store", "reference stream"])
def test_every_required_metric_is_exported_with_its_type(store: Store, seed: bool) -> None:
    if seed:
        seeded(store)
    auditor = Auditor(store, Config().policies)
    if seed:
        auditor.tick(AT)

    families = declared(scrape(auditor))

    assert {name: kind for name, (kind, _) in REQUIRED.items()} == {
        name: families.get(name) for name in REQUIRED
    }


def test_every_required_metric_carries_exactly_its_contract_labels(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)
    auditor.tick(AT)
    text = scrape(auditor)
    labels: dict[str, set[str]] = {name: set() for name in REQUIRED}

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if family.name in labels or f"{family.name}_total" in labels:
                name = family.name if family.name in labels else f"{family.name}_total"
                labels[name] |= set(s.labels) - {"le"}

    assert {name: want for name, (_, want) in REQUIRED.items()} == labels


def test_every_open_state_is_present_with_zero_on_an_empty_store(store: Store) -> None:
    auditor = Auditor(store, Config().policies)

    text = scrape(auditor)

    assert dict.fromkeys(OPEN_STATES, 0.0) == waits_by_state(text)


def test_every_unreported_evidence_series_is_present_with_zero_on_an_empty_store(
    store: Store,
) -> None:
    auditor = Auditor(store, Config().policies)

    text = scrape(auditor)

    assert {
        frozenset({("state", state), ("policy", "default"), ("missing", missing)}): 0.0
        for state, missing in (
            ("UNROUTABLE", "route"),
            ("ORPHANED", "handle"),
            ("ORPHANED", "heartbeat"),
            ("ORPHANED", "handle,heartbeat"),
        )
    } == samples(text, "sidewatch_waits_unreported")


def test_every_closed_state_counter_starts_at_zero_on_an_empty_store(store: Store) -> None:
    auditor = Auditor(store, Config().policies)

    closed = samples(scrape(auditor), "sidewatch_waits_closed_total")

    assert dict.fromkeys(CLOSED_STATES, 0.0) == {
        dict(labels)["state"]: value for labels, value in closed.items()
    }


def test_every_finding_rule_is_present_with_zero_on_an_empty_store(store: Store) -> None:
    auditor = Auditor(store, Config().policies)

    findings = samples(scrape(auditor), "sidewatch_protocol_findings_total")

    assert "repeated_answer_rejected" in FINDING_RULES
    assert dict.fromkeys(FINDING_RULES, 0.0) == {
        dict(labels)["rule"]: value for labels, value in findings.items()
    }


def test_the_metrics_reference_lists_every_finding_rule() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md").read_text()
    (row,) = [line for line in readme.splitlines() if "`sidewatch_protocol_findings_total`" in line]

    missing = [rule for rule in FINDING_RULES if f"`{rule}`" not in row]
    assert [] == missing


def test_the_reference_audit_reads_one_wait_in_each_state(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)
    auditor.tick(AT)

    text = scrape(auditor)
    closed = samples(text, "sidewatch_waits_closed_total")

    assert dict.fromkeys(OPEN_STATES, 1.0) == waits_by_state(text)
    assert {"CLOSED_BY_DECLINE": 1.0, "RESUMED": 0.0, "CANCELLED": 0.0} == {
        dict(labels)["state"]: value for labels, value in closed.items()
    }


def test_the_metrics_follow_the_snapshot_of_the_latest_tick(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: auditor.snapshot, IngestCounters()))
    before = waits_by_state(generate_latest(registry).decode())

    auditor.tick(AT)
    after = waits_by_state(generate_latest(registry).decode())

    assert dict.fromkeys(OPEN_STATES, 0.0) == before
    assert dict.fromkeys(OPEN_STATES, 1.0) == after


def test_the_decision_latency_histogram_counts_each_decided_wait_once(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)
    auditor.tick(AT)
    auditor.tick(AT)

    text = scrape(auditor)

    # deploy accepted 20 minutes after its request, message declined 10 minutes after
    assert {frozenset({("policy", "default")}): 2.0} == samples(
        text, "sidewatch_decision_latency_seconds_count"
    )
    assert {frozenset({("policy", "default")}): 1800.0} == samples(
        text, "sidewatch_decision_latency_seconds_sum"
    )


def test_the_ingest_counters_count_the_reference_stream_lines(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)

    ingested = samples(scrape(auditor), "sidewatch_ingested_lines_total")

    assert len(SEED.read_bytes().splitlines()) == sum(ingested.values())


def test_no_label_names_a_request_thread_run_or_approver(store: Store) -> None:
    auditor = Auditor(seeded(store), Config().policies)
    auditor.tick(AT)
    identities = seed_identities()

    leaks = [
        (s.name, key, value)
        for family in text_string_to_metric_families(scrape(auditor))
        for s in family.samples
        for key, value in s.labels.items()
        if key in FORBIDDEN_LABELS or any(i in value for i in identities)
    ]

    assert [] == leaks


# -- promtool ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [False, True], ids=["empty store", "reference stream"])
def test_promtool_accepts_the_exposition(store: Store, seed: bool) -> None:
    tool = promtool()
    if seed:
        seeded(store)
    auditor = Auditor(store, Config().policies)
    if seed:
        auditor.tick(AT)

    checked = subprocess.run(
        [tool, "check", "metrics"],
        input=scrape(auditor),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert (0, "") == (checked.returncode, checked.stdout + checked.stderr)


def test_every_possible_transition_and_latency_bucket_is_there_before_it_happens(
    store: Store,
) -> None:
    text = scrape(Auditor(store, Config().policies))

    transitions = samples(text, "sidewatch_state_transitions_total")
    assert {frozenset({("from", "WAITING"), ("to", "STUCK_AFTER_DECISION")})} <= set(transitions)
    assert {frozenset({("from", "RESUMED"), ("to", "STUCK_AFTER_DECISION")})} <= set(transitions)
    assert {frozenset({("from", "none"), ("to", "WAITING")})} <= set(transitions)
    assert {0.0} == set(transitions.values())
    assert not any(("from", "CLOSED_BY_DECLINE") in k for k in transitions)
    buckets = samples(text, "sidewatch_decision_latency_seconds_bucket")
    assert 14 == len(buckets)  # 13 bounds and +Inf, all at 0, for the default policy


# -- the Alertmanager push -------------------------------------------------------------------


def alert_metrics(push: AlertmanagerPush | None) -> str:
    registry = CollectorRegistry()
    registry.register(AlertPushCollector(lambda: push))
    return generate_latest(registry).decode()


def test_the_alertmanager_push_families_are_there_at_zero_without_a_push() -> None:
    text = alert_metrics(None)

    assert {"sidewatch_alertmanager_alerts_held_back": "gauge"} | {
        "sidewatch_alertmanager_push_failures_total": "counter"
    } == {k: v for k, v in declared(text).items() if "alertmanager" in k}
    assert ({frozenset(): 0.0}, {frozenset(): 0.0}) == (
        samples(text, "sidewatch_alertmanager_alerts_held_back"),
        samples(text, "sidewatch_alertmanager_push_failures_total"),
    )


def test_the_held_back_gauge_and_failure_counter_follow_the_push() -> None:
    push = AlertmanagerPush("http://127.0.0.1:9", 60_000)  # nothing listens: the push fails
    waits = [
        ProblemWait(f"t/{i}", "STALE", "requester", "default", AT, "Cancel.", "{}", "{}")
        for i in range(3)
    ]
    push.push(waits, AT)

    text = alert_metrics(push)

    assert {frozenset(): 3.0} == samples(text, "sidewatch_alertmanager_alerts_held_back")
    assert {frozenset(): 1.0} == samples(text, "sidewatch_alertmanager_push_failures_total")


def test_promtool_accepts_the_alertmanager_push_families() -> None:
    checked = subprocess.run(
        [promtool(), "check", "metrics"],
        input=alert_metrics(None),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )

    assert (0, "") == (checked.returncode, checked.stdout + checked.stderr)
