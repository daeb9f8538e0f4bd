"""The evidence client against a real daemon: each event is accepted and has its effect."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sidewatch_tap.evidence import Evidence, evidence_line
from tests.daemon import test_e2e
from tests.daemon.test_e2e import Server, _start, _stop
from tests.tap.test_tap import _wait, deploy_wait

DIGEST = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def sidewatch(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Server]:
    server = _start(tmp_path_factory.mktemp("evidence"), module_db_url)
    yield server
    _stop(server)


def _announce(server: Server, thread: str) -> str:
    """A wait (interrupt i1 of run r1, the tool `deploy`), as an agent's stream announces it."""
    lines = deploy_wait(thread)
    body = "".join(json.dumps(line) + "\n" for line in lines)
    answer = httpx.post(
        f"{server.url}/v1/events",
        content=body,
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert 200 == answer.status_code, answer.text
    return f"{thread}/i1"


def _rejected(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    counts = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("sidewatch_rejected_lines_total{")
    ]
    assert counts, "the daemon exports its rejected lines"
    return sum(counts)


def test_each_evidence_event_is_accepted_and_has_its_effect(sidewatch: Server) -> None:
    thread = f"ev-{uuid.uuid4().hex[:8]}"
    request_id = _announce(sidewatch, thread)
    before = _rejected(sidewatch)
    evidence = Evidence(f"{sidewatch.url}/v1/events", flush_seconds=0.1)

    evidence.route(
        thread_id=thread,
        interrupt_id="i1",
        delivered=True,
        acknowledged=True,
        approver_ref="team:payments",
        channel="slack",
    )
    evidence.heartbeat(thread, run_id="r1", resume_handle="checkpoint:r1")
    assert evidence.flush()
    waiting = _wait(sidewatch, request_id, "WAITING")

    evidence.action(DIGEST, request_id=request_id)
    evidence.decision("accept", request_id=request_id, approver_ref="user:ana")
    assert evidence.flush()
    decided = _wait(sidewatch, request_id)
    evidence.receipt(thread_id=thread, interrupt_id="i1")
    evidence.close()
    resumed = _wait(sidewatch, request_id, "RESUMED")

    assert (False, []) == (waiting["uncertain"], waiting["missing"])
    assert "acknowledged" == waiting["evidence"]["route"]
    assert waiting["evidence"]["resumeHandle"]
    assert waiting["evidence"]["lastHeartbeatAt"] is not None
    assert (DIGEST, True) == (
        decided["evidence"]["actionDigest"],
        decided["evidence"]["digestChanged"],
    )
    assert "accept" == decided["evidence"]["decision"]
    assert resumed["evidence"]["receiptAt"] is not None
    assert (0, before) == (evidence.tap.dropped, _rejected(sidewatch))


def test_a_heartbeat_can_say_the_handle_is_gone_or_leave_it_unsaid() -> None:
    kept = json.loads(evidence_line("heartbeat", {"threadId": "t"}))
    assert {"threadId": "t"} == kept["value"]
    assert "sidewatch.heartbeat" == kept["name"]
    assert isinstance(kept["timestamp"], int)

    sent: list[bytes] = []

    class _Sink:
        def record_line(self, line: bytes) -> None:
            sent.append(line)

    evidence = Evidence(tap=_Sink())  # type: ignore[arg-type]
    evidence.heartbeat("t", resume_handle=None)
    evidence.heartbeat("t")
    values = [json.loads(line)["value"] for line in sent]
    assert [{"threadId": "t", "resumeHandle": None}, {"threadId": "t"}] == values


@pytest.mark.parametrize(
    "call",
    [
        lambda e: e.route(delivered=True),  # names no wait
        lambda e: e.receipt(thread_id="t"),  # a thread alone names no wait
        lambda e: e.decision("approve", request_id="t/i1"),  # not a decision word
        lambda e: e.heartbeat("t", resume_handle=1),
    ],
)
def test_an_event_sidewatch_would_reject_is_refused_at_the_call(call) -> None:  # type: ignore[no-untyped-def]
    class _Sink:
        def record_line(self, line: bytes) -> None:
            raise AssertionError("nothing is sent")

    with pytest.raises(ValueError):
        call(Evidence(tap=_Sink()))  # type: ignore[arg-type]


def test_evidence_reported_while_the_daemon_restarts_is_not_lost(
    tmp_path: Path, module_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = test_e2e._free_port()
    monkeypatch.setattr(test_e2e, "_free_port", lambda: port)
    daemon = _start(tmp_path, module_db_url)
    thread = f"ev-{uuid.uuid4().hex[:8]}"
    request_id = _announce(daemon, thread)
    _stop(daemon)
    evidence = Evidence(
        f"{daemon.url}/v1/events", flush_seconds=0.1, retry_base_seconds=0.2, retry_max_seconds=1
    )
    try:
        evidence.decision("accept", request_id=request_id)
        deadline = time.monotonic() + 20
        while evidence.tap.retries < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        retried = evidence.tap.retries
        daemon = _start(tmp_path, module_db_url)
        assert evidence.flush(timeout=30)
        wait = _wait(daemon, request_id)
    finally:
        evidence.close()
        _stop(daemon)

    assert retried >= 2
    assert ("accept", 1, 0) == (
        wait["evidence"]["decision"],
        evidence.tap.sent,
        evidence.tap.dropped,
    )
