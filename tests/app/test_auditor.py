"""The scheduled auditor on SQLite and PostgreSQL: which threads a tick re-classifies, the
transitions it records (effective time, thresholds, evidence), counters that survive a
restart, and a wait whose classification raises."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from sidewatch.app.audit import Auditor, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.model import Thresholds
from sidewatch.core.policy import DEFAULT_POLICY, Policy
from sidewatch.errors import StoreError
from sidewatch.exporters.snapshot import Snapshot
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.transitions import StoredTransition
from tests.storefaults import impatient, refusing_thread, writes_blocked

SEED = Path("/work/shared/fixtures/seed-audit.ndjson")
SEED_AT = 1_785_083_400_000  # 2026-07-26T16:30:00Z, the reference audit's time
BASE = 1_785_081_600_000  # 2026-07-26T16:00:00Z
SEC = 1000
MIN = 60_000
POLICIES = Config().policies
DEPLOY = "t-deploy/i-deploy"
EXPORT = "t-export/i-export"
EVIDENCE_KEYS = {
    "requestedAt",
    "expiresAt",
    "actionDigest",
    "digestChanged",
    "route",
    "approverRef",
    "resumeHandle",
    "lastHeartbeatAt",
    "decision",
    "decidedAt",
    "receiptAt",
    "continuationFailed",
    "continuationFailure",
    "actionEdited",
    "subagent",
}


@pytest.fixture
def store(open_stores: Callable[[], Store]) -> Store:
    return open_stores()


def seeded(store: Store) -> Store:
    """The reference six-request stream, received at 16:30."""
    Ingest(store, ref_protector(store.engine, Config()), Config()).body(
        "seed", SEED.read_bytes(), SEED_AT
    )
    return store


def ingest(store: Store, lines: list[dict[str, Any]], received_at: int) -> None:
    body = b"\n".join(orjson.dumps(line) for line in lines)
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("test", body, received_at)


# -- wire lines ------------------------------------------------------------------------


def custom(name: str, at: int, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": name, "value": value, "timestamp": at}


def asked(thread: str, tool: str, at: int = BASE, **interrupt: Any) -> list[dict[str, Any]]:
    """A run proposes a gated tool call, stops on the interrupt for it (with a resume
    handle), and the request is delivered to a role."""
    run, interrupt_id, call = f"r-{thread}", f"i-{thread[2:]}", f"call-{thread}"
    outcome = {
        "type": "interrupt",
        "interrupts": [
            {
                "id": interrupt_id,
                "reason": "tool_call",
                "toolCallId": call,
                "metadata": {"resumeHandle": f"ckpt:{thread}"},
                **interrupt,
            }
        ],
    }
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at - 10 * SEC},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call,
            "toolCallName": tool,
            "timestamp": at - 9 * SEC,
        },
        {"type": "TOOL_CALL_END", "toolCallId": call, "timestamp": at - 8 * SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "outcome": outcome,
            "timestamp": at,
        },
        custom(
            "sidewatch.route",
            at + 30 * SEC,
            threadId=thread,
            interruptId=interrupt_id,
            delivered=True,
            approverRef="role:release-owner",
        ),
    ]


def heartbeat(thread: str, at: int) -> dict[str, Any]:
    return custom("sidewatch.heartbeat", at, threadId=thread, resumeHandle=f"ckpt:{thread}")


def accepted(thread: str, at: int) -> dict[str, Any]:
    return custom(
        "sidewatch.decision",
        at,
        threadId=thread,
        interruptId=f"i-{thread[2:]}",
        decision="accept",
        approverRef="role:release-owner",
    )


def two_waits() -> list[dict[str, Any]]:
    """deploy: accepted at 16:02, stuck once its 5-minute resume grace runs out (16:07);
    export: undecided, heartbeat at 16:02, fresh until 16:12."""
    return [
        *asked("t-deploy", "deploy_service"),
        accepted("t-deploy", BASE + 2 * MIN),
        *asked("t-export", "export_dataset"),
        heartbeat("t-export", BASE + 2 * MIN),
    ]


def states(auditor: Auditor, *threads: str) -> dict[str, str]:
    return {r: s.state for r, s in auditor.state.states(threads).items()}


def counters(s: Snapshot) -> dict[str, Any]:
    """Everything of a snapshot that a restart must continue, not reset or double."""
    return {
        "open_waits": dict(s.open_waits),
        "unreported": dict(s.unreported),
        "oldest_start": dict(s.oldest_start),
        "closed_total": dict(s.closed_total),
        "transitions_total": dict(s.transitions_total),
        "decision_latency": {p: (h.counts, h.total) for p, h in s.decision_latency.items()},
        "resume_latency": {p: (h.counts, h.total) for p, h in s.resume_latency.items()},
        "findings": dict(s.findings),
    }


# -- which threads a tick touches --------------------------------------------------------


def test_a_tick_classifies_every_wait_of_the_threads_with_new_evidence(store: Store) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)

    report = auditor.tick(BASE + 3 * MIN)

    assert (2, 2, 0) == (report.threads, report.waits, report.errors)
    assert {DEPLOY: "WAITING", EXPORT: "WAITING"} == states(auditor, "t-deploy", "t-export")


def test_a_second_tick_at_the_same_time_with_nothing_new_touches_no_thread(
    store: Store,
) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)
    auditor.tick(BASE + 3 * MIN)

    report = auditor.tick(BASE + 3 * MIN)

    assert (0, 0, 0) == (report.threads, report.waits, report.transitions)


def test_a_time_driven_change_reclassifies_only_its_thread_at_its_effective_time(
    store: Store,
) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)
    auditor.tick(BASE + 3 * MIN)

    report = auditor.tick(BASE + 10 * MIN)

    assert (1, 1, 1) == (report.threads, report.waits, report.transitions)
    assert {DEPLOY: "STUCK_AFTER_DECISION", EXPORT: "WAITING"} == states(
        auditor, "t-deploy", "t-export"
    )
    last = auditor.state.transitions_of(DEPLOY)[-1]
    assert ("WAITING", "STUCK_AFTER_DECISION") == (last.from_state, last.to_state)
    # decidedAt + resumeGrace, not the tick that noticed it
    assert BASE + 2 * MIN + 5 * MIN == last.at
    assert BASE + 10 * MIN == last.recorded_at


def test_an_expiry_is_recorded_at_expires_at_by_the_next_tick(store: Store) -> None:
    expires = BASE + 5 * MIN
    ingest(
        store,
        [*asked("t-export", "export_dataset", expiresAt="2026-07-26T16:05:00Z")],
        BASE + 3 * MIN,
    )
    auditor = Auditor(store, POLICIES)
    auditor.tick(BASE + 3 * MIN)

    report = auditor.tick(BASE + 6 * MIN)

    assert 1 == report.threads
    assert [
        (None, "WAITING", BASE, BASE + 3 * MIN),
        ("WAITING", "STALE", expires, BASE + 6 * MIN),
    ] == [
        (t.from_state, t.to_state, t.at, t.recorded_at)
        for t in auditor.state.transitions_of(EXPORT)
    ]


def test_a_transition_carries_its_policy_thresholds_and_evidence(store: Store) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)
    auditor.tick(BASE + 3 * MIN)
    auditor.tick(BASE + 10 * MIN)

    last: StoredTransition = auditor.state.transitions_of(DEPLOY)[-1]
    evidence = orjson.loads(last.evidence)

    assert "default" == last.policy
    assert {
        "resumeGraceSeconds": 300,
        "heartbeatFreshnessSeconds": 600,
        "routeGraceSeconds": 120,
    } == orjson.loads(last.thresholds)
    assert EVIDENCE_KEYS == set(evidence)
    assert ("accept", "2026-07-26T16:02:00Z", "delivered") == (
        evidence["decision"],
        evidence["decidedAt"],
        evidence["route"],
    )


def test_the_first_tick_records_each_new_wait_from_none_at_its_request_time(
    store: Store,
) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)

    auditor.tick(BASE + 3 * MIN)

    assert [(None, "WAITING", BASE, BASE + 3 * MIN)] == [
        (t.from_state, t.to_state, t.at, t.recorded_at)
        for t in auditor.state.transitions_of(DEPLOY)
    ]


# -- dirty marks -------------------------------------------------------------------------


def test_evidence_ingested_between_ticks_marks_its_thread_dirty_until_the_next_tick(
    store: Store,
) -> None:
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)
    auditor.tick(BASE + 3 * MIN)
    clean = auditor.state.dirty()

    ingest(store, [heartbeat("t-export", BASE + 4 * MIN)], BASE + 4 * MIN)
    marked = [thread for thread, _ in auditor.state.dirty()]
    report = auditor.tick(BASE + 5 * MIN)

    assert [] == clean
    assert ["t-export"] == marked
    assert 1 == report.threads
    assert [] == auditor.state.dirty()


def test_evidence_stored_before_a_tick_but_dated_after_it_counts_once_its_time_comes(
    store: Store,
) -> None:
    # Producers' clocks may run ahead of the daemon's: the tick at 16:21 already holds
    # export's 16:28 heartbeat. The incremental auditor must end where a full audit does.
    auditor = Auditor(seeded(store), POLICIES)
    auditor.tick(SEED_AT - 9 * MIN)

    auditor.tick(SEED_AT)

    expected = {
        a.verdict.request_id: a.verdict.state.value for a in audit(store, POLICIES, SEED_AT)
    }
    assert expected == states(auditor, *{r.split("/")[0] for r in expected})


# -- restart continuity ------------------------------------------------------------------


def test_a_new_auditor_on_the_same_store_continues_every_counter(
    open_stores: Callable[[], Store],
) -> None:
    first = seeded(open_stores())
    before = Auditor(first, POLICIES)
    before.tick(SEED_AT)
    first.engine.dispose()

    after = Auditor(open_stores(), POLICIES)

    assert counters(before.snapshot) == counters(after.snapshot)


def test_a_restarted_auditor_counts_nothing_twice_on_further_ticks(
    open_stores: Callable[[], Store],
) -> None:
    first = seeded(open_stores())
    before = Auditor(first, POLICIES)
    before.tick(SEED_AT)
    first.engine.dispose()
    after = Auditor(open_stores(), POLICIES)

    same_time = after.tick(SEED_AT)
    # 16:37: invoice's heartbeat goes stale too, but it is ORPHANED already (no handle)
    later = after.tick(SEED_AT + 7 * MIN)

    assert 0 == same_time.threads
    assert (1, 0) == (later.waits, later.transitions)
    assert counters(before.snapshot) == counters(after.snapshot)


def test_a_restarted_auditor_continues_the_reference_audit_totals(
    open_stores: Callable[[], Store],
) -> None:
    first = seeded(open_stores())
    Auditor(first, POLICIES).tick(SEED_AT)
    first.engine.dispose()

    snapshot = Auditor(open_stores(), POLICIES).snapshot

    assert {
        ("WAITING", "default"): 1,
        ("STALE", "default"): 1,
        ("UNROUTABLE", "default"): 1,
        ("ORPHANED", "default"): 1,
        ("STUCK_AFTER_DECISION", "default"): 1,
    } == dict(snapshot.open_waits)
    assert {("CLOSED_BY_DECLINE", "default"): 1} == dict(snapshot.closed_total)
    # deploy accepted 20 minutes after its request, message declined 10 minutes after
    assert (2, 1800.0) == (
        snapshot.decision_latency["default"].count,
        snapshot.decision_latency["default"].total,
    )


# -- a wait whose classification raises ---------------------------------------------------


def test_a_wait_whose_classification_raises_is_logged_counted_and_skipped(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # Thresholds that make the model's arithmetic fail, for one tool only.
    broken = Thresholds(
        resume_grace_ms=None,  # type: ignore[arg-type]
        heartbeat_freshness_ms=None,  # type: ignore[arg-type]
        route_grace_ms=None,  # type: ignore[arg-type]
    )
    policies = (Policy(name="explode", thresholds=broken, tools=("explode_*",)), DEFAULT_POLICY)
    ingest(store, [*asked("t-boom", "explode_now"), *two_waits()], BASE + 3 * MIN)
    auditor = Auditor(store, policies)

    with caplog.at_level(logging.ERROR, logger="sidewatch.auditor"):
        report = auditor.tick(BASE + 3 * MIN)

    assert (3, 2, 1) == (report.threads, report.waits, report.errors)
    assert 1 == auditor.snapshot.audit_errors
    assert "t-boom/i-boom" in caplog.text
    assert {DEPLOY: "WAITING", EXPORT: "WAITING"} == states(
        auditor, "t-boom", "t-deploy", "t-export"
    )


# -- counters move only with what was committed -----------------------------------------


def test_a_thread_whose_verdicts_the_store_refuses_is_held_back_and_counted_once_saved(
    db_url: str, open_stores: Callable[[], Store], caplog: pytest.LogCaptureFixture
) -> None:
    store = open_stores()
    ingest(store, two_waits(), BASE + 3 * MIN)
    auditor = Auditor(store, POLICIES)

    with (
        refusing_thread(db_url, "t-deploy", table="wait_state"),
        caplog.at_level(logging.ERROR, logger="sidewatch.auditor"),
    ):
        refused = auditor.tick(BASE + 3 * MIN)
    saved = auditor.tick(BASE + 4 * MIN)

    assert (2, 1, 1) == (refused.threads, refused.waits, refused.errors)
    assert "t-deploy" in caplog.text
    assert 1 == saved.threads  # the refused thread stayed dirty; the other was saved
    assert {DEPLOY: "WAITING", EXPORT: "WAITING"} == states(auditor, "t-deploy", "t-export")
    # as many as the store holds: the refused verdicts were not counted, the saved ones once
    assert counters(Auditor(open_stores(), POLICIES).snapshot) == counters(auditor.snapshot)
    assert 2 == auditor.snapshot.transitions_total[("none", "WAITING")]


def test_a_tick_whose_save_meets_an_outage_counts_nothing_and_the_next_counts_once(
    db_url: str, open_stores: Callable[[], Store]
) -> None:
    engine = open_store(impatient(db_url), busy_timeout_ms=300)
    try:
        store = Store(engine)
        ingest(store, two_waits(), BASE + 3 * MIN)
        auditor = Auditor(store, POLICIES)
        auditor.tick(BASE + 3 * MIN)
        before = counters(auditor.snapshot)

        # 16:08: deploy is stuck (its resume grace ran out); the save of that meets an outage
        with writes_blocked(db_url, "wait_state"), pytest.raises(StoreError):
            auditor.tick(BASE + 8 * MIN)
        unchanged = counters(auditor.snapshot)
        auditor.tick(BASE + 8 * MIN)

        assert before == unchanged
        assert 1 == auditor.snapshot.transitions_total[("WAITING", "STUCK_AFTER_DECISION")]
        assert counters(Auditor(open_stores(), POLICIES).snapshot) == counters(auditor.snapshot)
    finally:
        engine.dispose()


def test_a_tick_classifies_with_the_cycle_collector_paused_and_resumes_it_after_an_outage(
    db_url: str,
) -> None:
    paused: list[bool] = []

    class Watched(Store):
        def reading(self) -> Any:  # the read session of a batch's evaluation
            paused.append(not gc.isenabled())
            return super().reading()

    engine = open_store(impatient(db_url), busy_timeout_ms=300)
    try:
        store = Watched(engine)
        ingest(store, two_waits(), BASE + 3 * MIN)
        auditor = Auditor(store, POLICIES)
        with writes_blocked(db_url, "wait_state"), pytest.raises(StoreError):
            auditor.tick(BASE + 3 * MIN)

        assert [True] == paused
        assert gc.isenabled()
    finally:
        engine.dispose()


def test_protocol_findings_are_counted_once_per_wait_and_rule(store: Store) -> None:
    producers = Path(__file__).resolve().parents[1] / "ingest" / "producers" / "fixtures"
    for name in (
        "langgraph-two-interrupts-resume10",
        "adk-outcome-resume10-wrong-id",
        "langgraph-approve-legacy-noraw",
    ):
        body = (producers / f"{name}.ndjson").read_bytes()
        Ingest(store, ref_protector(store.engine, Config()), Config()).body(
            name, body, 1_785_083_340_000
        )
    auditor = Auditor(store, POLICIES)

    auditor.tick(1_785_083_400_000)
    auditor.tick(1_785_083_460_000)

    found = auditor.snapshot.findings
    assert 2 == found["resume_rejected"]
    assert 1 == found["answer_unknown_interrupt"]
    assert 1 == found["legacy_interrupt_without_id"]


def test_waits_resting_on_unreported_evidence_are_counted_apart_once_saved(
    db_url: str, open_stores: Callable[[], Store]
) -> None:
    """deploy: AG-UI only (no route evidence): UNROUTABLE past routeGrace, on `route`; export:
    delivered, but no heartbeat beyond its run's end: ORPHANED past heartbeatFreshness."""
    engine = open_store(impatient(db_url), busy_timeout_ms=300)
    try:
        store = Store(engine)
        ingest(store, [*asked("t-deploy", "deploy_service")[:-1], *asked("t-export", "x")], BASE)
        auditor = Auditor(store, POLICIES)
        auditor.tick(BASE + 3 * MIN)
        assert {("UNROUTABLE", "default", "route"): 1} == dict(auditor.snapshot.unreported)

        auditor.tick(BASE + 11 * MIN)
        both = {("UNROUTABLE", "default", "route"): 1, ("ORPHANED", "default", "heartbeat"): 1}
        assert both == dict(auditor.snapshot.unreported)
        assert counters(Auditor(open_stores(), POLICIES).snapshot) == counters(auditor.snapshot)

        # deploy's delivery is reported failing: UNROUTABLE still, but on reported evidence
        failed = custom(
            "sidewatch.route", BASE + 12 * MIN, threadId="t-deploy", interruptId="i-deploy",
            delivered=False, approverRef="role:release-owner",
        )  # fmt: skip
        ingest(store, [failed], BASE + 12 * MIN)
        with writes_blocked(db_url, "wait_state"), pytest.raises(StoreError):
            auditor.tick(BASE + 12 * MIN)
        assert both == dict(auditor.snapshot.unreported)  # not saved: nothing moved
        auditor.tick(BASE + 12 * MIN)

        assert {("ORPHANED", "default", "heartbeat"): 1} == dict(auditor.snapshot.unreported)
        assert 1 == auditor.snapshot.open_waits[("UNROUTABLE", "default")]
        assert counters(Auditor(open_stores(), POLICIES).snapshot) == counters(auditor.snapshot)
    finally:
        engine.dispose()
