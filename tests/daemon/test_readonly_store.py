"""A PostgreSQL store that turns read-only under a running daemon (what a failover to a
standby, or an operator's `default_transaction_read_only`, does), or whose role loses its
write privilege: every write is refused while reads still work. /readyz is 503 and names it,
whatever the audit lease says, and the daemon is ready again by itself once writes are
taken."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from sqlalchemy import make_url

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.daemon.writes import RETRY_S
from sidewatch.store.db import open_store
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


@contextmanager
def role_of_its_own(url: str) -> Iterator[tuple[str, str]]:
    """A login role with every privilege on the store's schema (and the store's URL as that
    role); dropped afterwards. The daemon's usual role is a superuser, whom no REVOKE binds."""
    u = make_url(url)
    schema, role = str(u.query["application_name"]), f"sw_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, dbname=u.database, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        try:
            admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
            admin.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
            admin.execute(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
            yield role, u.set(username=role).render_as_string(hide_password=False)
        finally:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


def test_a_revoked_write_privilege_is_not_ready_and_says_so_until_granted_again(
    pg_url: str,
) -> None:
    open_store(pg_url).dispose()  # migrated by its owner
    with role_of_its_own(pg_url) as (role, url):
        daemon = Daemon(
            dataclasses.replace(Config(), db_url=url, allowed_hosts=("testserver",)),
            migrate=False,
        )
        client = TestClient(daemon.app)
        u = make_url(pg_url)
        grant = f'ON ALL TABLES IN SCHEMA "{u.query["application_name"]}"'
        try:
            ready_before = client.get("/readyz")
            with psycopg.connect(PG_ADMIN, dbname=u.database, autocommit=True) as admin:
                admin.execute(f'REVOKE INSERT, UPDATE, DELETE {grant} FROM "{role}"')
                time.sleep(RETRY_S)
                asyncio.run(daemon.claim())
                ready = client.get("/readyz")
                admin.execute(f'GRANT INSERT, UPDATE, DELETE {grant} TO "{role}"')
            time.sleep(RETRY_S)
            asyncio.run(daemon.claim())
            ready_after = client.get("/readyz")
        finally:
            daemon.engine.dispose()

    assert 200 == ready_before.status_code, ready_before.json()
    assert 503 == ready.status_code
    assert [
        p
        for p in ready.json()["problems"]
        if p.startswith("store refuses writes: permission denied (")
    ], ready.json()
    assert "audit lease neither renewed nor taken: permission denied" in ready.json()["problems"]
    assert {"status": "ready", "auditLease": True} == ready_after.json()
