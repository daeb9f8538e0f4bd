"""A full disk is reported, not hidden: ingest answers 503 naming it, stores nothing, and
works again once there is room; /readyz is 503 naming the disk for as long as writes are
refused, whatever the audit lease says, and ready again once there is room. A store on a file
system remounted read-only is not ready either, and says why. The disk is a 2 MiB tmpfs this
test mounts."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.daemon.writes import RETRY_S
from tests.daemon.test_e2e import _seed_relative_to_now

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient


@pytest.fixture
def small_disk() -> Iterator[Path]:
    mount = Path(tempfile.mkdtemp(prefix="sidewatch-disk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2M", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the full-disk test: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)
        mount.rmdir()


# SQLite only: the store must be a file on the small disk; the PostgreSQL server's disk is not
# the test's to fill (test_pg_outage covers that server becoming unusable).
def test_a_full_disk_is_a_503_that_says_so_and_ingest_recovers(small_disk: Path) -> None:
    daemon = Daemon(
        replace(Config(), db_url=f"sqlite:///{small_disk / 's.db'}", allowed_hosts=("testserver",))
    )
    client = TestClient(daemon.app)
    body, _ = _seed_relative_to_now()
    headers = {"content-type": "application/x-ndjson"}
    filler = _fill(small_disk)

    full = client.post("/v1/events", content=body, headers=headers)
    filler.unlink()
    room = client.post("/v1/events", content=body, headers=headers)
    daemon.engine.dispose()

    assert 503 == full.status_code
    assert "full" in full.json()["error"]
    assert "nothing of this body was stored" in full.json()["error"]
    assert 200 == room.status_code


def _fill(disk: Path) -> Path:
    """A file that takes every byte left on `disk`."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def _daemon(disk: Path) -> Daemon:
    return Daemon(
        replace(Config(), db_url=f"sqlite:///{disk / 's.db'}", allowed_hosts=("testserver",))
    )


def test_readyz_is_503_naming_the_full_disk_while_the_lease_cannot_be_renewed(
    small_disk: Path,
) -> None:
    """The issue's run: the holder's lease renewal fails on the full disk, so it no longer
    holds the lease; it used to answer 200 "ready" (taken for a standby) while every ingest
    got 503 and its ticks were skipped."""
    daemon = _daemon(small_disk)
    client = TestClient(daemon.app)
    body, _ = _seed_relative_to_now()
    headers = {"content-type": "application/x-ndjson"}
    asyncio.run(daemon.tick())
    ready_before = client.get("/readyz")
    filler = _fill(small_disk)
    during = []
    for _ in range(3):  # each round: a lease renewal, a tick, an ingest, /readyz probing again
        time.sleep(RETRY_S)
        asyncio.run(daemon.claim())
        asyncio.run(daemon.tick())
        ingest = client.post("/v1/events", content=body, headers=headers)
        ready = client.get("/readyz")
        during.append((ingest.status_code, ready.status_code, ready.json()))
    filler.unlink()
    asyncio.run(daemon.claim())  # the next renewal, every half interval
    ingest_after = client.post("/v1/events", content=body, headers=headers)
    ready_after = client.get("/readyz")
    daemon.engine.dispose()

    assert {"status": "ready", "auditLease": True} == ready_before.json()
    for ingest_status, ready_status, ready_body in during:
        assert (503, 503) == (ingest_status, ready_status)
        assert "not ready" == ready_body["status"]
        assert False is ready_body["auditLease"]
        assert any(
            p.startswith("store refuses writes: disk full (") for p in ready_body["problems"]
        ), ready_body
        assert "audit lease neither renewed nor taken: disk full" in ready_body["problems"]
    assert 200 == ingest_after.status_code
    assert {"status": "ready", "auditLease": True} == ready_after.json()


def test_readyz_writes_to_learn_the_disk_is_full_when_nothing_else_wrote(
    small_disk: Path,
) -> None:
    """No ingest, no tick, the lease renewed before the disk filled: /readyz's own write
    finds it out (daemon.writes), and finds the room again."""
    daemon = _daemon(small_disk)
    client = TestClient(daemon.app)
    filler = _fill(small_disk)

    ready = client.get("/readyz")
    filler.unlink()
    time.sleep(RETRY_S)
    ready_again = client.get("/readyz")
    daemon.engine.dispose()

    assert 503 == ready.status_code
    assert [p for p in ready.json()["problems"] if p.startswith("store refuses writes: disk full")]
    assert True is ready.json()["auditLease"]  # the lease was renewed before the disk filled
    assert 200 == ready_again.status_code


def test_a_store_on_a_file_system_remounted_read_only_is_not_ready_and_says_why(
    small_disk: Path,
) -> None:
    """SQLite cannot open a WAL store on a read-only file system (no -shm can be made): its
    reads fail as well as its writes. Root ignores a file's mode, so the file system it is."""
    daemon = _daemon(small_disk)
    client = TestClient(daemon.app)
    ready_before = client.get("/readyz")
    daemon.engine.dispose()  # the daemon's files are closed before the file system can be
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        ingest = client.post(
            "/v1/events",
            content=b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n',
            headers={"content-type": "application/x-ndjson"},
        )
        ready = client.get("/readyz")
        daemon.engine.dispose()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    time.sleep(RETRY_S)  # the refused ingest is the latest write until /readyz writes again
    ready_again = client.get("/readyz")
    daemon.engine.dispose()

    assert 200 == ready_before.status_code
    assert 503 == ingest.status_code
    assert 503 == ready.status_code
    assert [
        "store unreachable: cannot open the store "
        "(OperationalError SQLITE_CANTOPEN: unable to open database file)"
    ] == ready.json()["problems"]
    assert 200 == ready_again.status_code
