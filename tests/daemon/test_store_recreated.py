"""A store recreated empty under a running `sidewatch serve` (a PostgreSQL database dropped and
created again, an SQLite file deleted): /readyz says not ready, a POST is a 503 with a JSON
body, and the read API a JSON error; never a plain-text 500."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import psycopg

from tests.conftest import _PARAMS, PG_ADMIN
from tests.daemon.test_e2e import Server, _start, _stop, _wait_for

WAIT = "".join(
    json.dumps(x) + "\n"
    for x in (
        {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r-1"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t-1",
            "runId": "r-1",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i-1"}]},
        },
    )
)


def _answers(server: Server) -> tuple[httpx.Response, httpx.Response, httpx.Response]:
    """/readyz, a POST and /v1/waits, as the running daemon answers them now."""
    return (
        httpx.get(f"{server.url}/readyz", timeout=10),
        httpx.post(f"{server.url}/v1/events", content=WAIT, timeout=30),
        httpx.get(f"{server.url}/v1/waits", timeout=30),
    )


def _json(r: httpx.Response) -> dict[str, object]:
    assert r.headers["content-type"] == "application/json", r.text
    body = r.json()
    assert isinstance(body, dict)
    return body


def _check(server: Server, recreate: object) -> None:
    before = _answers(server)
    assert [200, 200, 200] == [r.status_code for r in before]
    assert callable(recreate)
    recreate()
    # the next answers, once the daemon has seen the empty store
    assert _wait_for(lambda: httpx.get(f"{server.url}/readyz", timeout=10).status_code == 503)
    ready, posted, waits = _answers(server)

    assert "not ready" == _json(ready)["status"]
    assert any("schema" in str(p) or "store" in str(p) for p in _json(ready)["problems"])  # type: ignore[attr-defined]
    assert 503 == posted.status_code
    assert "store unavailable" in str(_json(posted)["error"])
    assert waits.status_code in (503,), waits.text
    assert "error" in _json(waits)
    assert server.proc.poll() is None  # still serving, not crashed


def test_a_postgresql_database_dropped_and_created_again_is_not_ready_and_answers_json(
    tmp_path: Path,
) -> None:
    name = f"sidewatch_recreated_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://{_PARAMS['user']}@{_PARAMS['host']}:{_PARAMS['port']}/{name}"

    def recreate() -> None:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')

    server = _start(tmp_path, url)
    try:
        _check(server, recreate)
    finally:
        _stop(server)
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_an_sqlite_file_deleted_under_the_daemon_is_not_ready_and_answers_json(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sidewatch.db"

    def recreate() -> None:
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            path.unlink(missing_ok=True)

    server = _start(tmp_path, f"sqlite:///{db}")
    try:
        _check(server, recreate)
    finally:
        _stop(server)


def test_an_sqlite_file_deleted_under_the_daemon_comes_back_0600_with_its_wal_and_shm(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sidewatch.db"
    files = (db, Path(f"{db}-wal"), Path(f"{db}-shm"))

    def recreate() -> None:
        for path in files:
            path.unlink(missing_ok=True)

    server = _start(tmp_path, f"sqlite:///{db}")
    try:
        _check(server, recreate)  # the daemon has connected to the file it created again
        modes = {path.name: oct(path.stat().st_mode & 0o777) for path in files}
    finally:
        _stop(server)

    assert {path.name: "0o600" for path in files} == modes
