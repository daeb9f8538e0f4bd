"""A PostgreSQL store that stops in the middle of a run: ingest answers 503 and stores nothing,
the auditor skips its ticks, and both recover by themselves when the server is back. The
server is a private cluster this test starts, never the shared one."""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from tests.daemon.test_e2e import _seed_relative_to_now

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        pytest.fail(f"PostgreSQL's {name} is not installed (Debian's postgresql package)")
    return found[-1]


def _as_postgres(*args: str) -> None:
    subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], check=True, capture_output=True, timeout=60
    )


class Cluster:
    def __init__(self, root: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.data = root / "pgdata"
        self.sock = root / "sock"

    def init(self) -> None:
        for d in (self.data, self.sock):
            d.mkdir(parents=True)
            shutil.chown(d, "postgres", "postgres")
        _as_postgres(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off"
        _as_postgres(
            _bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            opts,
            "-l",
            str(self.data / "server.log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        _as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=3"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    # Not pytest's tmp_path: its parents are private to root, and the server runs as postgres.
    root = Path(tempfile.mkdtemp(prefix="sidewatch-pg-"))
    os.chmod(root, 0o755)
    c = Cluster(root)
    try:
        c.init()
        c.start()
        yield c
    finally:
        subprocess.run(
            [
                "runuser",
                "-u",
                "postgres",
                "--",
                _bin("pg_ctl"),
                "-D",
                str(c.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(root, ignore_errors=True)


# PostgreSQL only: stopping the server is what is tested (SQLite's outages are in test_http).
def test_ingest_and_audit_survive_postgresql_stopping_and_recover(cluster: Cluster) -> None:
    daemon = Daemon(replace(Config(), db_url=cluster.url, allowed_hosts=("testserver",)))
    client = TestClient(daemon.app)
    body, _ = _seed_relative_to_now()
    headers = {"content-type": "application/x-ndjson"}

    before = client.post("/v1/events", content=body, headers=headers)
    cluster.stop()
    during = client.post(
        "/v1/events",
        content=b'{"type":"RUN_STARTED","threadId":"x","runId":"y"}\n',
        headers=headers,
    )
    asyncio.run(daemon.tick())
    skipped = daemon.auditor.snapshot.audit_skipped
    ready_during = client.get("/readyz")
    cluster.start()
    after = client.post("/v1/events", content=body, headers=headers)
    asyncio.run(daemon.tick())
    waits = client.get("/v1/waits").json()["waits"]
    daemon.engine.dispose()

    assert (200, 503, 200) == (before.status_code, during.status_code, after.status_code)
    assert "nothing of this body was stored" in during.json()["error"]
    assert 1 == skipped
    assert 503 == ready_during.status_code
    assert 6 == len(waits)
    assert "x/" not in " ".join(w["requestId"] for w in waits)


def test_readyz_names_the_lost_connection_whatever_the_lease_says_and_recovers(
    cluster: Cluster,
) -> None:
    """The server stops under the lease's holder: its renewal fails, so it holds no lease,
    and it is not ready (no healthy standby either: it could not take over) until the server
    is back and it renewed."""
    daemon = Daemon(replace(Config(), db_url=cluster.url, allowed_hosts=("testserver",)))
    client = TestClient(daemon.app)
    try:
        asyncio.run(daemon.tick())
        ready_before = client.get("/readyz")
        cluster.stop()
        asyncio.run(daemon.claim())
        asyncio.run(daemon.tick())
        ready = client.get("/readyz")
        cluster.start()
        asyncio.run(daemon.claim())
        ready_after = client.get("/readyz")
    finally:
        daemon.engine.dispose()

    assert {"status": "ready", "auditLease": True} == ready_before.json()
    assert 503 == ready.status_code
    assert False is ready.json()["auditLease"]
    problems = ready.json()["problems"]
    assert [p for p in problems if p.startswith("store unreachable: connection lost (")], problems
    assert "audit lease neither renewed nor taken: connection lost" in problems
    assert {"status": "ready", "auditLease": True} == ready_after.json()
