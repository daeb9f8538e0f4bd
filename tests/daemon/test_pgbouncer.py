"""A real PgBouncer (Debian's package, `make test` unpacks it into .tools) in transaction mode
in front of the running PostgreSQL: with server-side prepares off (store.prepareThreshold:
null, or `?prepare_threshold=None` in the URL) every concurrent post is stored."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import create_engine, text

from tests.conftest import _PARAMS, PG_ADMIN
from tests.daemon.test_e2e import _free_port, _start, _stop

ROOT = Path(__file__).resolve().parents[2]
POSTS = 40


def _pgbouncer() -> Path:
    found = Path(
        os.environ.get("SIDEWATCH_PGBOUNCER") or ROOT / ".tools/pgbouncer/usr/sbin/pgbouncer"
    )
    if not found.is_file():
        pytest.fail(f"PgBouncer is not at {found}: run `make .tools/pgbouncer/usr/sbin/pgbouncer`")
    return found


@dataclass
class Bouncer:
    port: int
    database: str

    def url(self, query: str = "") -> str:
        return (
            f"postgresql+psycopg://{_PARAMS['user']}@127.0.0.1:{self.port}/{self.database}{query}"
        )


@pytest.fixture
def bouncer() -> Iterator[Bouncer]:
    """PgBouncer on its own port, pool_mode=transaction, few server connections (so that a
    client's transactions do move between them), and a database of its own."""
    database = f"sidewatch_pgb_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    root = Path(tempfile.mkdtemp(prefix="sidewatch-pgb-"))
    root.chmod(0o755)
    port = _free_port()
    (root / "users.txt").write_text(f'"{_PARAMS["user"]}" ""\n')
    (root / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={_PARAMS['host']} port={_PARAMS['port']}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {root / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 4\nmax_client_conn = 500\n"
        f"logfile = {root / 'pgbouncer.log'}\npidfile = {root / 'pgbouncer.pid'}\n"
    )
    for f in root.iterdir():
        shutil.chown(f, "postgres", "postgres")
    shutil.chown(root, "postgres", "postgres")
    binary = _pgbouncer()
    libs = ":".join(glob.glob(str(binary.parents[2] / "usr/lib/*-linux-gnu")))
    proc = subprocess.Popen(
        ["runuser", "-u", "postgres", "--", str(binary), str(root / "pgbouncer.ini")],
        env={**os.environ, "LD_LIBRARY_PATH": libs},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            psycopg.connect(
                f"host=127.0.0.1 port={port} user={_PARAMS['user']} dbname={database}"
            ).close()
            break
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                _, err = proc.communicate()
                pytest.fail(f"PgBouncer did not start: {err.decode()}")
            time.sleep(0.1)
    yield Bouncer(port, database)
    proc.terminate()
    proc.communicate(timeout=10)
    shutil.rmtree(root, ignore_errors=True)
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _body(n: int) -> bytes:
    now = int(time.time() * 1000)
    lines = [
        {"type": "RUN_STARTED", "threadId": f"t-{n}", "runId": f"r-{n}"},
        {
            "type": "RUN_FINISHED",
            "threadId": f"t-{n}",
            "runId": f"r-{n}",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": f"int-pgb-{n}", "reason": "tool_call"}],
            },
        },
    ]
    return "".join(json.dumps({**line, "timestamp": now}) + "\n" for line in lines).encode()


def _posts(url: str) -> list[int]:
    def post(n: int) -> int:
        r = httpx.post(
            f"{url}/v1/events",
            content=_body(n),
            headers={"content-type": "application/x-ndjson"},
            timeout=30,
        )
        return r.status_code

    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(post, range(POSTS)))


@pytest.mark.parametrize(
    ("query", "store"),
    [("", ", prepareThreshold: null"), ("?prepare_threshold=None", "")],
    ids=["setting", "url"],
)
def test_concurrent_posts_through_pgbouncer_in_transaction_mode_are_all_stored(
    tmp_path: Path, bouncer: Bouncer, query: str, store: str
) -> None:
    replicas = [_start(tmp_path, bouncer.url(query), "1s", store=store) for _ in range(2)]
    try:
        codes = _posts(replicas[0].url) + _posts(replicas[1].url)
        waits = httpx.get(f"{replicas[0].url}/v1/waits?limit=1000", timeout=10).json()
    finally:
        for r in replicas:
            _stop(r)
    logs = "".join(r.log.read_text() for r in replicas)
    assert codes == [200] * (2 * POSTS), logs
    assert "prepared statement" not in logs
    # The same interrupts went to both replicas: each is one wait, stored once.
    engine = create_engine(
        f"postgresql+psycopg://{_PARAMS['user']}@{_PARAMS['host']}:{_PARAMS['port']}/"
        f"{bouncer.database}"
    )
    with engine.connect() as conn:
        units = conn.execute(text("SELECT count(*) FROM unit")).scalar_one()
    engine.dispose()
    assert units == 2 * POSTS
    assert {w["requestId"] for w in waits["waits"]} >= {f"t-{n}/int-pgb-{n}" for n in range(POSTS)}
