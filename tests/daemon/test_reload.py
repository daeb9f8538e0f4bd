"""SIGHUP to a real `sidewatch serve`: the config file is read again, what may change while
running changes (tokens, policies), a changed key that needs a restart is refused by name
with its old value kept, and a file with problems changes nothing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import time
from pathlib import Path

import httpx

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from tests.daemon.test_e2e import Server, _stop, _wait_for
from tests.daemon.test_e2e import _start as _serve
from tests.daemon.test_http import NDJSON, TestClient  # imported quietly there

OLD_READ, NEW_READ, INGEST = (
    "read-old-5f1c2a9e",
    "read-new-8d3b7c41",
    "ingest-2e9a6f0d7c3b",
)


def _config(port: int, db_url: str, read: str, policies: str = "", interval: str = "1s") -> str:
    return (
        f"store: {{url: '{db_url}'}}\n"
        f"server: {{listen: '127.0.0.1:{port}', maxBodyBytes: 65536, tokens: ["
        f"{{name: reader, token: {read}, scopes: [read]}}, "
        f"{{name: tee, token: {INGEST}, scopes: [ingest]}}]}}\n"
        f"auditor: {{interval: {interval}}}\n" + policies
    )


RELOADED_POLICY = (
    "policies:\n"
    "  - name: confirmations\n"
    "    match: {reasons: [confirmation]}\n"
    "    resumeGrace: 1h\n"
    "  - name: default\n"
)


def _hup(server: Server, config: Path, text: str) -> int:
    """Writes `text` as the config, sends SIGHUP, and waits for the daemon to have read it;
    returns where its log stood before."""
    before = len(server.log.read_text())
    config.write_text(text)
    server.proc.send_signal(signal.SIGHUP)
    assert _wait_for(lambda: "SIGHUP: config" in server.log.read_text()[before:])
    return before


def _status(server: Server, token: str) -> int:
    auth = {"authorization": f"Bearer {token}"}
    return httpx.get(f"{server.url}/v1/waits", headers=auth, timeout=5).status_code


def _policies(server: Server, token: str) -> list[str]:
    auth = {"authorization": f"Bearer {token}"}
    waits = httpx.get(f"{server.url}/v1/waits", headers=auth, timeout=5).json()["waits"]
    return [w["policy"] for w in waits]


def test_sighup_reloads_tokens_and_policies_and_refuses_what_needs_a_restart(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite:///{tmp_path / 'sidewatch.db'}"
    server = _serve(
        tmp_path,
        db_url,
        server=f", tokens: [{{name: reader, token: {OLD_READ}, scopes: [read]}}, "
        f"{{name: tee, token: {INGEST}, scopes: [ingest]}}]",
    )
    port = int(server.url.rsplit(":", 1)[1])
    (config,) = tmp_path.glob("sidewatch-*.yaml")
    try:
        wait = [
            {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r-1"},
            {
                "type": "RUN_FINISHED",
                "threadId": "t-1",
                "runId": "r-1",
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [{"id": "i-1", "reason": "confirmation"}],
                },
            },
        ]
        posted = httpx.post(
            f"{server.url}/v1/events",
            content="".join(json.dumps(x) + "\n" for x in wait),
            headers={"authorization": f"Bearer {INGEST}"},
        ).status_code
        before = (_status(server, OLD_READ), _status(server, NEW_READ), _policies(server, OLD_READ))

        # a new read token and a policy for confirmations; the interval takes a restart
        at = _hup(server, config, _config(port, db_url, NEW_READ, RELOADED_POLICY, "7s"))
        reloaded = (_status(server, OLD_READ), _status(server, NEW_READ))
        policies = _policies(server, NEW_READ)
        log = server.log.read_text()[at:]

        # a file with problems: nothing changes, the daemon runs on
        at = _hup(server, config, _config(port, db_url, OLD_READ) + "nonsense: 1\n")
        bad = (_status(server, OLD_READ), _status(server, NEW_READ))
        bad_log = server.log.read_text()[at:]
        at = _hup(server, config, "server: [unclosed\n")
        unparsable = _status(server, NEW_READ)
        unparsable_log = server.log.read_text()[at:]
        time.sleep(2.5)  # the audit interval still 1s: two ticks' worth, still serving
        alive = server.proc.poll() is None
        healthy = httpx.get(f"{server.url}/healthz", timeout=5).status_code
    finally:
        code = _stop(server)

    assert 200 == posted
    assert (200, 401, ["default"]) == before
    assert (401, 200) == reloaded
    assert ["confirmations"] == policies
    assert "auditor.interval changed but takes a restart to change" in log
    assert "config reloaded: policies, server.tokens" in log
    assert (401, 200) == bad
    assert "config refused, the running one stays in force" in bad_log
    assert "nonsense: unknown key" in bad_log
    assert 200 == unparsable
    assert "not valid YAML" in unparsable_log
    assert (True, 200) == (alive, healthy)
    for secret in (OLD_READ, NEW_READ, INGEST):
        assert secret not in log + bad_log + unparsable_log
    assert code in (0, -15)


def test_a_reload_changes_the_limits_of_the_next_unit_ingested(db_url: str) -> None:
    """The limits of ingest are the reloaded config's from the next unit on (the ingest use
    case holds the config the daemon reloads)."""
    config = dataclasses.replace(Config(), db_url=db_url, allowed_hosts=("testserver",))
    daemon = Daemon(config, reread=lambda: dataclasses.replace(config, max_lines_per_unit=2))
    body = "".join(
        json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": f"r-{n}"}) + "\n"
        for n in range(3)
    )
    client = TestClient(daemon.app)
    try:
        before = client.post("/v1/events", content=body, headers=NDJSON).status_code
        asyncio.run(daemon.reload())
        after = client.post("/v1/events", content=body, headers=NDJSON)
    finally:
        daemon.engine.dispose()

    assert 200 == before
    assert (413, "3 lines, over the limit of 2 a unit: split the body") == (
        after.status_code,
        after.json()["error"],
    )
