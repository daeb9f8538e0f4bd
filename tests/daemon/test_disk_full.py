"""A full disk is reported, not hidden: ingest answers 503 naming it, stores nothing, and
works again once there is room. The disk is a 2 MiB tmpfs this test mounts."""

from __future__ import annotations

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
    filler = small_disk / "filler"
    with filler.open("wb") as fh:  # take every byte left
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass

    full = client.post("/v1/events", content=body, headers=headers)
    filler.unlink()
    room = client.post("/v1/events", content=body, headers=headers)
    daemon.engine.dispose()

    assert 503 == full.status_code
    assert "full" in full.json()["error"]
    assert "nothing of this body was stored" in full.json()["error"]
    assert 200 == room.status_code
