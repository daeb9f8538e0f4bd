"""The real daemon process: `sidewatch serve` on a free port, driven over HTTP, on SQLite and
on PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.ports import free_port as _free_port

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
SEED_AT = 1_785_083_400_000  # the reference audit's evaluation time


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    db_url: str


def _start(
    tmp: Path,
    db_url: str,
    interval: str = "1s",
    extra: str = "",
    server: str = "",
    store: str = "",
    launcher: Sequence[str] = (),
    tls: ssl.SSLContext | None = None,
) -> Server:
    """`sidewatch serve` on a free port; `server` and `store` add keys to their sections,
    `extra` whole sections. `launcher` comes before the command (e.g. `prlimit ...`); with
    `tls`, the daemon is reached over https and verified with that context."""
    port = _free_port()
    cfg = tmp / f"sidewatch-{port}.yaml"
    cfg.write_text(
        f"store: {{url: '{db_url}'{store}}}\n"
        f"server: {{listen: '127.0.0.1:{port}', maxBodyBytes: 65536{server}}}\n"
        f"auditor: {{interval: {interval}}}\n" + extra
    )
    log = tmp / f"serve-{port}.log"
    with log.open("wb") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [*launcher, sys.executable, "-m", "sidewatch", "serve", "--config", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    deadline = time.monotonic() + 60  # a loaded 2-core machine may take 20 s and more
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1, verify=tls or True).status_code == 200:
                return Server(url, proc, log, db_url)
        except httpx.TransportError:
            time.sleep(0.1)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"sidewatch serve did not start:\n{log.read_text()}")


def _stop(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            return server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.proc.kill()
            raise
    return server.proc.returncode


@pytest.fixture
def server(tmp_path: Path, db_url: str) -> Iterator[Server]:
    s = _start(tmp_path, db_url)
    yield s
    _stop(s)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Server]:
    """One daemon for the tests that only need one serving (each start costs a second)."""
    s = _start(tmp_path_factory.mktemp("shared"), module_db_url)
    yield s
    _stop(s)


def _seed_relative_to_now() -> tuple[bytes, int]:
    """The reference stream, shifted so that its evaluation time is now."""
    now = int(time.time() * 1000)
    shift = now - SEED_AT
    out = []
    for line in (SHARED / "seed-audit.ndjson").read_text().splitlines():
        event = json.loads(line)
        event["timestamp"] += shift
        for it in (event.get("outcome") or {}).get("interrupts", []):
            at = datetime.fromisoformat(it["expiresAt"]).timestamp() * 1000 + shift
            it["expiresAt"] = datetime.fromtimestamp(at / 1000, UTC).isoformat()
        out.append(json.dumps(event))
    return ("\n".join(out) + "\n").encode(), now


def _wait_for(fn, seconds: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_posted_stream_gets_its_verdicts_and_metrics_after_one_tick(server: Server) -> None:
    body, _ = _seed_relative_to_now()

    posted = httpx.post(
        f"{server.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )
    ticked = _wait_for(lambda: _audited(server, 6))
    waits = httpx.get(f"{server.url}/v1/waits").json()["waits"]
    metrics = httpx.get(f"{server.url}/metrics").text

    assert (200, 50, 18, []) == (posted.status_code, *posted.json().values())
    assert ticked
    expected = json.loads((SHARED / "seed-audit.expected.json").read_text())["expected"]
    assert expected == {w["requestId"]: w["state"] for w in waits}
    for state in ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION"):
        assert f'sidewatch_waits{{policy="default",state="{state}"}} 1.0' in metrics
    assert 'sidewatch_waits_closed_total{policy="default",state="CLOSED_BY_DECLINE"} 1.0' in metrics
    assert 'sidewatch_ingested_lines_total{kind="content"} 18.0' in metrics


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"content-type": "application/x-www-form-urlencoded"}, b"a=1", 415),
        ({"content-type": "application/json"}, b"[{not json", 400),
        ({"content-type": "application/x-ndjson"}, b"x" * 70_000, 413),
        ({"content-type": "application/x-ndjson", "content-encoding": "gzip"}, b"nope", 400),
    ],
    ids=["form-body-415", "broken-array-400", "over-the-limit-413", "bad-gzip-400"],
)
def test_bad_bodies_get_their_status_and_the_server_keeps_serving(
    shared_server: Server, headers: dict[str, str], body: bytes, status: int
) -> None:
    server = shared_server
    answer = httpx.post(f"{server.url}/v1/events", content=body, headers=headers)

    assert status == answer.status_code
    assert "error" in answer.json()
    assert 200 == httpx.get(f"{server.url}/healthz").status_code
    assert (
        200
        == httpx.post(
            f"{server.url}/v1/events",
            content=b'{"type":"RAW","event":1}\n',
            headers={"content-type": "application/x-ndjson"},
        ).status_code
    )


def _unit(n: int) -> bytes:
    t = f"kill-thread-{n}"
    lines = [
        {"type": "RUN_STARTED", "threadId": t, "runId": f"{t}-run"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"} for _ in range(50)),
        {
            "type": "RUN_FINISHED",
            "threadId": t,
            "runId": f"{t}-run",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i", "reason": "tool_call"}]},
        },
        {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": {"threadId": t}},
    ]
    return ("\n".join(json.dumps(x) for x in lines) + "\n").encode()


def test_every_line_that_got_a_200_survives_a_sigkill(tmp_path: Path, db_url: str) -> None:
    server = _start(tmp_path, db_url)
    acked: list[int] = []
    stop = threading.Event()

    def post_forever() -> None:
        n = 0
        with httpx.Client(timeout=5) as client:
            while not stop.is_set():
                n += 1
                try:
                    r = client.post(
                        f"{server.url}/v1/events",
                        content=_unit(n),
                        headers={"content-type": "application/x-ndjson"},
                    )
                except httpx.TransportError:
                    return  # the server is gone
                if r.status_code == 200:
                    acked.append(n)

    poster = threading.Thread(target=post_forever)
    poster.start()
    _wait_for(lambda: len(acked) > 30)
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=10)
    stop.set()
    poster.join(timeout=10)
    restarted = _start(tmp_path, db_url)
    _stop(restarted)

    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = {r[0] for r in conn.execute(text("SELECT thread_id FROM interrupt"))}
        beats = {r[0] for r in conn.execute(text("SELECT thread_id FROM heartbeat"))}
    engine.dispose()
    missing = [n for n in acked if f"kill-thread-{n}" not in stored & beats]
    assert len(acked) > 30
    assert [] == missing


def test_sigterm_drains_and_closes_the_store(tmp_path: Path, db_url: str) -> None:
    server = _start(tmp_path, db_url)

    code = _stop(server)

    # uvicorn re-raises SIGTERM once shut down, so the parent sees how the process ended.
    assert -signal.SIGTERM == code
    log = server.log.read_text()
    assert "store closed" in log
    assert all(json.loads(line)["level"] for line in log.splitlines() if line.startswith("{"))


def test_a_restart_continues_from_the_store_without_counting_twice(
    tmp_path: Path, db_url: str
) -> None:
    first = _start(tmp_path, db_url)
    body, _ = _seed_relative_to_now()
    httpx.post(
        f"{first.url}/v1/events", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert _wait_for(lambda: _audited(first, 6))
    before = _series(httpx.get(f"{first.url}/metrics").text)
    _stop(first)

    second = _start(tmp_path, db_url)
    time.sleep(1.5)  # at least one tick of the restarted daemon
    after = _series(httpx.get(f"{second.url}/metrics").text)
    _stop(second)

    keys = [
        k
        for k in before
        if k.startswith(
            ("sidewatch_waits", "sidewatch_state_transitions", "sidewatch_ingested_lines")
        )
    ]
    assert {k: before[k] for k in keys} == {k: after.get(k) for k in keys}


def _audited(server: Server, waits: int) -> bool:
    """True once a tick has recorded `waits` new waits (transitions from none)."""
    series = _series(httpx.get(f"{server.url}/metrics").text)
    new = sum(
        v
        for k, v in series.items()
        if k.startswith('sidewatch_state_transitions_total{from="none"')
    )
    return new >= waits


def _series(exposition: str) -> dict[str, float]:
    out = {}
    for line in exposition.splitlines():
        if line.startswith("sidewatch_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# Store-independent: serve refuses the address before it opens the store.
def test_refuses_a_public_address_without_tokens(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidewatch",
            "serve",
            "--db",
            f"sqlite:///{tmp_path}/s.db",
            "--listen",
            "0.0.0.0:9477",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert 1 == result.returncode
    assert result.stderr.startswith("sidewatch: error: refusing to listen on 0.0.0.0:9477")
