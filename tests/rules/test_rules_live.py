"""The rules in a real Prometheus scraping a real sidewatch fed with the reference stream."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.daemon.test_e2e import _seed_relative_to_now, _start, _stop
from tests.ports import free_port
from tests.realprom import RealPrometheus

RULES = Path(__file__).resolve().parents[2] / "rules" / "sidewatch.rules.yml"


def test_the_expected_alerts_fire_for_the_reference_stream(tmp_path: Path, db_url: str) -> None:
    server = _start(tmp_path, db_url)
    prometheus = RealPrometheus(tmp_path, server.url.removeprefix("http://"), [RULES])
    try:
        prometheus.start()
        body, _ = _seed_relative_to_now()
        httpx.post(
            f"{server.url}/v1/events",
            content=body,
            headers={"content-type": "application/x-ndjson"},
        )
        deadline, firing = time.monotonic() + 30, {}
        while time.monotonic() < deadline and len(firing) < 4:
            firing = {
                a["labels"]["alertname"]: a["labels"]
                for a in prometheus.alerts()
                if a["state"] == "firing"
            }
            time.sleep(0.5)
        recorded = prometheus.wait_for('sidewatch:waits:sum_by_state{state="STALE"}')
    finally:
        prometheus.stop()
        _stop(server)

    assert {
        "SidewatchStuckAfterDecision": ("critical", "runtime_owner"),
        "SidewatchOrphaned": ("critical", "runtime_owner"),
        "SidewatchUnroutable": ("critical", "policy_owner"),
        "SidewatchStale": ("warning", "requester"),
    } == {name: (labels["severity"], labels["owner"]) for name, labels in firing.items()}
    assert 1.0 == float(recorded[0]["value"][1])


def test_a_daemon_cut_off_from_nats_is_a_pending_jetstream_page_and_no_lag_ticket(
    tmp_path: Path, db_url: str
) -> None:
    nowhere = free_port()  # nothing listens: NATS is unreachable from the start
    server = _start(
        tmp_path,
        db_url,
        extra=f"nats: {{url: 'nats://127.0.0.1:{nowhere}', stream: SIDEWATCH}}\n",
    )
    prometheus = RealPrometheus(tmp_path, server.url.removeprefix("http://"), [RULES])
    try:
        prometheus.start()
        consuming = prometheus.wait_for("sidewatch_jetstream_consuming == 0")
        deadline, alerts = time.monotonic() + 30, {}
        while time.monotonic() < deadline and "SidewatchJetStreamNotConsuming" not in alerts:
            alerts = {a["labels"]["alertname"]: a for a in prometheus.alerts()}
            time.sleep(0.5)
        pending = prometheus.query("sidewatch_jetstream_pending")
    finally:
        prometheus.stop()
        _stop(server)

    assert consuming
    # for: 5m, so pending here; the lag gauge is not exported before a first report
    assert {"SidewatchJetStreamNotConsuming": ("pending", "critical")} == {
        name: (a["state"], a["labels"]["severity"])
        for name, a in alerts.items()
        if name.startswith("SidewatchJetStream")
    }
    assert [] == pending
