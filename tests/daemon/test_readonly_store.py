"""A PostgreSQL store that turns read-only under a running daemon (what a failover to a
standby, or an operator's `default_transaction_read_only`, does): every write is refused while
reads still work. /readyz is 503 and names it, whatever the audit lease says, and the daemon
is ready again by itself once writes are taken."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy import make_url

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.daemon.writes import RETRY_S
from tests.conftest import PG_ADMIN
from tests.daemon.test_e2e import _seed_relative_to_now

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient


@contextmanager
def read_only(url: str) -> Iterator[None]:
    """New sessions of the store's database are read-only, and the daemon's present ones are
    ended (its pool opens new ones). The database is this test session's own."""
    u = make_url(url)
    database, name = str(u.database), str(u.query["application_name"])
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = %s",
                (database, name),
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = %s",
                (database, name),
            )


# PostgreSQL only: root, which runs the tests, writes an SQLite file whatever its mode (a file
# system remounted read-only is in test_disk_full).
def test_a_read_only_postgresql_store_is_not_ready_and_says_so_until_it_takes_writes(
    pg_url: str,
) -> None:
    daemon = Daemon(dataclasses.replace(Config(), db_url=pg_url, allowed_hosts=("testserver",)))
    client = TestClient(daemon.app)
    body, _ = _seed_relative_to_now()
    headers = {"content-type": "application/x-ndjson"}
    try:
        asyncio.run(daemon.tick())
        ready_before = client.get("/readyz")
        with read_only(pg_url):
            asyncio.run(daemon.claim())
            ingest = client.post("/v1/events", content=body, headers=headers)
            waits = client.get("/v1/waits")  # reads still work
            ready = client.get("/readyz")
        time.sleep(RETRY_S)
        asyncio.run(daemon.claim())
        ingest_after = client.post("/v1/events", content=body, headers=headers)
        ready_after = client.get("/readyz")
    finally:
        daemon.engine.dispose()

    assert {"status": "ready", "auditLease": True} == ready_before.json()
    assert 503 == ingest.status_code
    assert 200 == waits.status_code
    assert 503 == ready.status_code
    assert False is ready.json()["auditLease"]
    assert [
        p for p in ready.json()["problems"] if p.startswith("store refuses writes: read-only (")
    ], ready.json()
    assert "audit lease neither renewed nor taken: read-only" in ready.json()["problems"]
    assert 200 == ingest_after.status_code
    assert {"status": "ready", "auditLease": True} == ready_after.json()
