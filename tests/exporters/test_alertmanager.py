"""The optional Alertmanager push, against a real Alertmanager (Debian's package)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.daemon.test_e2e import Server, _seed_relative_to_now, _start, _stop

ROOT = Path(__file__).resolve().parents[2]
UNPACKED = ROOT / ".tools" / "alertmanager" / "usr" / "bin" / "prometheus-alertmanager"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    binary = os.environ.get("SIDEWATCH_ALERTMANAGER") or str(UNPACKED)
    if not Path(binary).is_file():
        pytest.fail(f"Alertmanager not found at {binary}: `make test` unpacks it")
    port = _free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text("route: {receiver: nobody}\nreceivers: [{name: nobody}]\n")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _active(url: str) -> dict[str, dict]:
    alerts = httpx.get(f"{url}/api/v2/alerts", params={"active": "true"}).json()
    return {
        a["labels"]["requestId"]: a
        for a in alerts
        if a["labels"].get("alertname") == "SidewatchWait" and a["status"]["state"] == "active"
    }


def _until(fn, seconds: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


@pytest.fixture
def sidewatch(tmp_path: Path, db_url: str, alertmanager: str) -> Iterator[Server]:
    extra = f"alertmanager: {{url: '{alertmanager}', resendInterval: 2s}}\n"
    server = _start(tmp_path, db_url, extra=extra)
    yield server
    _stop(server)


def test_each_problem_wait_is_one_alert_with_its_owner_and_next_move(
    alertmanager: str, sidewatch: Server
) -> None:
    body, _ = _seed_relative_to_now()
    httpx.post(
        f"{sidewatch.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )

    active = _until(lambda: len(_active(alertmanager)) == 4 and _active(alertmanager))

    assert {
        "thread-delete/int-delete": ("STALE", "requester", "ticket"),
        "thread-rotation/int-rotation": ("UNROUTABLE", "policy_owner", "page"),
        "thread-invoice/int-invoice": ("ORPHANED", "runtime_owner", "page"),
        "thread-deploy/int-deploy": ("STUCK_AFTER_DECISION", "runtime_owner", "page"),
    } == {
        k: (a["labels"]["state"], a["labels"]["owner"], a["labels"]["severity"])
        for k, a in active.items()
    }
    deploy = active["thread-deploy/int-deploy"]
    assert "default" == deploy["labels"]["policy"]
    assert deploy["annotations"]["nextMove"].startswith("Investigate the continuation path")
    assert "accept" == json.loads(deploy["annotations"]["evidence"])["decision"]
    assert 300 == json.loads(deploy["annotations"]["thresholds"])["resumeGraceSeconds"]


def test_an_alert_resolves_when_its_wait_leaves_the_state(
    alertmanager: str, sidewatch: Server
) -> None:
    body, _ = _seed_relative_to_now()
    httpx.post(
        f"{sidewatch.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert _until(lambda: "thread-deploy/int-deploy" in _active(alertmanager))

    receipt = {
        "type": "CUSTOM",
        "name": "sidewatch.receipt",
        "value": {"threadId": "thread-deploy", "interruptId": "int-deploy"},
    }
    httpx.post(
        f"{sidewatch.url}/v1/events",
        content=json.dumps(receipt).encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    gone = _until(lambda: "thread-deploy/int-deploy" not in _active(alertmanager))

    assert gone
    assert {
        "thread-delete/int-delete",
        "thread-rotation/int-rotation",
        "thread-invoice/int-invoice",
    } == set(_active(alertmanager))
