"""The HTTP API, through Starlette's TestClient on a real SQLite and a real PostgreSQL store:
ingest in every body format, its status codes, tokens and limits, the read API, readiness and
`/metrics`. The client is not entered as a context manager, so no scheduler runs: tests tick
the auditor."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import logging
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import make_url

from sidewatch.cli.main import cli
from sidewatch.config import Config, Token
from sidewatch.daemon.serve import Daemon
from tests.conftest import PG_ADMIN

with warnings.catch_warnings():
    # Starlette 1.x prefers `httpx2` for its TestClient and warns when it falls back to
    # `httpx`, the client our test extra installs; the fallback works the same.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SEC = 1000
MIN = 60 * SEC
NDJSON = {"content-type": "application/x-ndjson"}
INGEST_TOKEN = Token("agent", "ingest-secret-0123456789", frozenset({"ingest"}))
READ_TOKEN = Token("dashboard", "read-secret-0123456789", frozenset({"read"}))
DEPLOY = "thread-deploy/int-deploy"
EXPECTED_STATES = {
    "thread-export/int-export": "WAITING",
    "thread-delete/int-delete": "STALE",
    "thread-rotation/int-rotation": "UNROUTABLE",
    "thread-invoice/int-invoice": "ORPHANED",
    DEPLOY: "STUCK_AFTER_DECISION",
    "thread-message/int-message": "CLOSED_BY_DECLINE",
}
OPEN_STATES = ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")
# Every line of the scenario: per request 5 accepted lines and 1 skipped text delta, and 14
# evidence lines.
SUMMARY = {"accepted": 44, "skipped": 6, "rejected": []}


# -- AG-UI lines, placed relative to `now` ----------------------------------------------


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def requested(
    thread: str, interrupt: str, action: str, at: int, expires: int, handle: bool = True
) -> list[dict[str, Any]]:
    """A run that calls a tool and finishes interrupted, waiting for a person."""
    run, call = f"run-{thread}", f"call-{interrupt}"
    wait: dict[str, Any] = {
        "id": interrupt,
        "reason": "tool_call",
        "message": f"Approve {interrupt}?",
        "toolCallId": call,
        "expiresAt": iso(expires),
    }
    if handle:
        wait["metadata"] = {"resumeHandle": f"ckpt:{thread}:{run}"}
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at - 20 * SEC},
        {
            "type": "TEXT_MESSAGE_CONTENT",
            "messageId": f"{run}-m1",
            "delta": "I will need approval for this.",
            "timestamp": at - 15 * SEC,
        },
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call,
            "toolCallName": action,
            "timestamp": at - 10 * SEC,
        },
        {
            "type": "TOOL_CALL_ARGS",
            "toolCallId": call,
            "delta": '{"service":"checkout"}',
            "timestamp": at - 9 * SEC,
        },
        {"type": "TOOL_CALL_END", "toolCallId": call, "timestamp": at - 8 * SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "timestamp": at,
            "outcome": {"type": "interrupt", "interrupts": [wait]},
        },
    ]


def custom(name: str, at: int, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": f"sidewatch.{name}", "value": value, "timestamp": at}


def route(thread: str, interrupt: str, at: int, delivered: bool = True) -> dict[str, Any]:
    if not delivered:
        return custom(
            "route",
            at,
            threadId=thread,
            interruptId=interrupt,
            channel="chat",
            delivered=False,
            error="no approver is attached to this policy",
        )
    return custom(
        "route",
        at,
        threadId=thread,
        interruptId=interrupt,
        channel="chat",
        delivered=True,
        approverRef="role:owner",
    )


def heartbeat(thread: str, at: int, handle: bool = True) -> dict[str, Any]:
    return custom(
        "heartbeat", at, threadId=thread, resumeHandle=f"ckpt:{thread}" if handle else None
    )


def decision(thread: str, interrupt: str, at: int, code: str) -> dict[str, Any]:
    return custom(
        "decision",
        at,
        threadId=thread,
        interruptId=interrupt,
        decision=code,
        approverRef="role:owner",
    )


def scenario(now: int) -> list[dict[str, Any]]:
    """The reference six requests, one in each state of EXPECTED_STATES at `now`."""
    return [
        *requested("thread-export", "int-export", "export_dataset", now - 25 * MIN, now + 90 * MIN),
        route("thread-export", "int-export", now - 24 * MIN),
        heartbeat("thread-export", now - 2 * MIN),
        # expired ten minutes ago, unanswered
        *requested("thread-delete", "int-delete", "delete_records", now - 50 * MIN, now - 10 * MIN),
        route("thread-delete", "int-delete", now - 49 * MIN),
        heartbeat("thread-delete", now - 3 * MIN),
        # nobody could be notified
        *requested(
            "thread-rotation", "int-rotation", "rotate_keys", now - 20 * MIN, now + 90 * MIN
        ),
        route("thread-rotation", "int-rotation", now - 19 * MIN, delivered=False),
        heartbeat("thread-rotation", now - MIN),
        # no resume handle: nothing could continue the run after a decision
        *requested(
            "thread-invoice",
            "int-invoice",
            "send_invoice",
            now - 30 * MIN,
            now + 90 * MIN,
            handle=False,
        ),
        route("thread-invoice", "int-invoice", now - 29 * MIN),
        heartbeat("thread-invoice", now - 4 * MIN, handle=False),
        # accepted ten minutes ago, never resumed: stuck since the 5-minute resume grace ran out
        *requested("thread-deploy", "int-deploy", "deploy_service", now - 30 * MIN, now + 90 * MIN),
        route("thread-deploy", "int-deploy", now - 29 * MIN),
        decision("thread-deploy", "int-deploy", now - 10 * MIN, "accept"),
        heartbeat("thread-deploy", now - 30 * SEC),
        *requested("thread-message", "int-message", "send_message", now - 40 * MIN, now - 20 * MIN),
        route("thread-message", "int-message", now - 39 * MIN),
        decision("thread-message", "int-message", now - 30 * MIN, "decline"),
        heartbeat("thread-message", now - 35 * MIN),
    ]


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def sse(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(line) + b"\n\n" for line in lines)


# -- the daemon under test ----------------------------------------------------------------


@pytest.fixture
def now() -> int:
    return int(time.time()) * SEC


@pytest.fixture
def make_daemon(db_url: str) -> Iterator[Callable[..., Daemon]]:
    """A Daemon on this test's own store, with `Config` fields changed as given."""
    made: list[Daemon] = []

    def make(**changes: Any) -> Daemon:
        # TestClient sends `Host: testserver`, which a token-less daemon refuses unless named.
        changes = {"allowed_hosts": ("testserver",), **changes}
        config = dataclasses.replace(Config(), db_url=db_url, **changes)
        made.append(Daemon(config))
        return made[-1]

    yield make
    for daemon in made:
        daemon.engine.dispose()


@pytest.fixture
def daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    return make_daemon()


@pytest.fixture
def client(daemon: Daemon) -> TestClient:
    return TestClient(daemon.app)


@pytest.fixture
def audited(daemon: Daemon, client: TestClient, now: int) -> TestClient:
    """A client of a daemon that holds the scenario and has audited it at `now`."""
    r = client.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)
    assert 200 == r.status_code, r.text
    daemon.auditor.tick(now)
    return client


def states(client: TestClient, query: str = "", **headers: str) -> dict[str, str]:
    r = client.get(f"/v1/waits{query}", headers=headers)
    assert 200 == r.status_code, r.text
    return {w["requestId"]: w["state"] for w in r.json()["waits"]}


def bearer(token: Token) -> dict[str, str]:
    return {"authorization": f"Bearer {token.secret}"}


@contextmanager
def store_outage(daemon: Daemon, db_url: str) -> Iterator[None]:
    """A real outage. SQLite: the file is moved away and a directory stands in its place, so
    no connection can open the store; afterwards the file is put back. PostgreSQL: the
    database refuses new connections and the daemon's are ended; afterwards it accepts them
    again."""
    url = make_url(db_url)
    if url.get_backend_name() == "postgresql":
        with _pg_refusing(str(url.database), str(url.query["application_name"])):
            yield
        return
    db_path = Path(str(url.database))
    away = db_path.with_name("away.db")
    daemon.engine.dispose()  # pooled connections would keep the moved file open
    db_path.rename(away)
    db_path.mkdir()
    try:
        yield
    finally:
        db_path.rmdir()
        away.rename(db_path)
        daemon.engine.dispose()


@contextmanager
def _pg_refusing(database: str, application_name: str) -> Iterator[None]:
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND application_name = %s",
                (database, application_name),
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


# -- POST /v1/events: body formats ---------------------------------------------------------


FORMATS = [
    pytest.param(ndjson, NDJSON, id="ndjson"),
    pytest.param(orjson.dumps, {"content-type": "application/json"}, id="json-array"),
    pytest.param(sse, {"content-type": "text/event-stream"}, id="sse"),
    pytest.param(
        lambda lines: gzip.compress(ndjson(lines)),
        {**NDJSON, "content-encoding": "gzip"},
        id="gzip-ndjson",
    ),
    pytest.param(
        lambda lines: gzip.compress(sse(lines)),
        {"content-type": "text/event-stream", "content-encoding": "gzip"},
        id="gzip-sse",
    ),
]


@pytest.mark.parametrize(("encode", "headers"), FORMATS)
def test_every_body_format_is_ingested_whole(
    daemon: Daemon,
    client: TestClient,
    now: int,
    encode: Callable[[list[dict[str, Any]]], bytes],
    headers: dict[str, str],
) -> None:
    r = client.post("/v1/events", content=encode(scenario(now)), headers=headers)
    daemon.auditor.tick(now)

    assert 200 == r.status_code
    assert SUMMARY == r.json()
    assert EXPECTED_STATES == states(client)


def test_a_single_json_object_is_one_line(daemon: Daemon, client: TestClient, now: int) -> None:
    accept = decision("thread-deploy", "int-deploy", now - 10 * MIN, "accept")
    client.post(
        "/v1/events", content=ndjson([x for x in scenario(now) if x != accept]), headers=NDJSON
    )

    r = client.post(
        "/v1/events",
        content=orjson.dumps(accept, option=orjson.OPT_INDENT_2),
        headers={"content-type": "application/json"},
    )
    daemon.auditor.tick(now)

    assert 200 == r.status_code
    assert {"accepted": 1, "skipped": 0, "rejected": []} == r.json()
    assert "STUCK_AFTER_DECISION" == states(client)[DEPLOY]


def bad_ndjson(lines: list[dict[str, Any]]) -> bytes:
    """The lines with two bad ones after the first request: lines 7 and 8."""
    bad = [b"not json", b'{"type":"NO_SUCH_EVENT","note":"hunter2"}']
    raw = [orjson.dumps(line) for line in lines]
    return b"\n".join([*raw[:6], *bad, *raw[6:]]) + b"\n"


def bad_array(lines: list[dict[str, Any]]) -> bytes:
    """The lines as a JSON array with two bad elements after the first request: 7 and 8."""
    return orjson.dumps([*lines[:6], 42, {"type": "NO_SUCH_EVENT", "note": "hunter2"}, *lines[6:]])


@pytest.mark.parametrize(
    ("encode", "headers"),
    [
        pytest.param(bad_ndjson, NDJSON, id="ndjson"),
        pytest.param(bad_array, {"content-type": "application/json"}, id="json-array"),
    ],
)
def test_a_partly_bad_body_rejects_its_bad_lines_and_stores_its_good_ones(
    daemon: Daemon,
    client: TestClient,
    now: int,
    encode: Callable[[list[dict[str, Any]]], bytes],
    headers: dict[str, str],
) -> None:
    r = client.post("/v1/events", content=encode(scenario(now)), headers=headers)
    daemon.auditor.tick(now)

    assert 200 == r.status_code
    body = r.json()
    assert (44, 6) == (body["accepted"], body["skipped"])
    assert [7, 8] == [reject["line"] for reject in body["rejected"]]
    for reject in body["rejected"]:
        assert reject["error"]
        assert "hunter2" not in reject["error"]  # an error names the problem, not the content
    assert EXPECTED_STATES == states(client)


# -- POST /v1/events: refusals ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("encode", "headers"),
    [
        pytest.param(
            lambda lines: b"[" + b",".join(orjson.dumps(line) for line in lines),
            {"content-type": "application/json"},
            id="unclosed-json-array",
        ),
        pytest.param(ndjson, {**NDJSON, "content-encoding": "gzip"}, id="not-gzip"),
        pytest.param(
            lambda lines: (z := gzip.compress(ndjson(lines)))[: len(z) // 2],
            {**NDJSON, "content-encoding": "gzip"},
            id="truncated-gzip",
        ),
    ],
)
def test_a_body_that_cannot_be_read_is_400_and_stores_nothing(
    daemon: Daemon,
    client: TestClient,
    now: int,
    encode: Callable[[list[dict[str, Any]]], bytes],
    headers: dict[str, str],
) -> None:
    r = client.post("/v1/events", content=encode(scenario(now)), headers=headers)
    daemon.auditor.tick(now)

    assert 400 == r.status_code
    assert r.json()["error"]
    assert {} == states(client)
    assert 404 == client.get(f"/v1/waits/{DEPLOY}").status_code


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"content-type": "application/x-www-form-urlencoded"}, id="form"),
        pytest.param({**NDJSON, "content-encoding": "br"}, id="brotli"),
    ],
)
def test_an_unsupported_media_type_or_encoding_is_415(
    client: TestClient, now: int, headers: dict[str, str]
) -> None:
    r = client.post("/v1/events", content=ndjson(scenario(now)), headers=headers)

    assert 415 == r.status_code
    assert r.json()["error"]
    assert 404 == client.get(f"/v1/waits/{DEPLOY}").status_code


def test_a_body_over_the_size_limit_is_413_by_its_content_length(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    client = TestClient(make_daemon(max_body_bytes=1024).app)
    body = ndjson(scenario(now))

    r = client.post("/v1/events", content=body, headers=NDJSON)

    assert 1024 < len(body)
    assert 413 == r.status_code
    assert 404 == client.get(f"/v1/waits/{DEPLOY}").status_code


def test_a_streamed_body_over_the_size_limit_is_413(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    client = TestClient(make_daemon(max_body_bytes=1024).app)
    lines = [orjson.dumps(line) + b"\n" for line in scenario(now)]

    # a generator is sent chunked, without a Content-Length to refuse it by
    r = client.post("/v1/events", content=iter(lines), headers=NDJSON)

    assert 413 == r.status_code
    assert 404 == client.get(f"/v1/waits/{DEPLOY}").status_code


def test_a_gzip_body_that_inflates_past_the_limit_is_413(
    make_daemon: Callable[..., Daemon],
) -> None:
    client = TestClient(make_daemon(max_body_bytes=64 * 1024, max_inflated_bytes=1024 * 1024).app)
    bomb = gzip.compress(b"\n" * 16 * 1024 * 1024)

    r = client.post("/v1/events", content=bomb, headers={**NDJSON, "content-encoding": "gzip"})

    assert 64 * 1024 > len(bomb)
    assert 413 == r.status_code


def test_a_gzip_file_sent_gzip_encoded_is_held_to_the_limit_once_inflated_twice(
    make_daemon: Callable[..., Daemon],
) -> None:
    """A `.gz` file sent with `Content-Encoding: gzip` is undone twice; the inner bomb is
    refused by the same limit as the outer one (it used to inflate without one)."""
    client = TestClient(make_daemon(max_body_bytes=64 * 1024, max_inflated_bytes=1024 * 1024).app)
    inner = gzip.compress(b"\n" * 16 * 1024 * 1024)
    twice = gzip.compress(inner)

    r = client.post("/v1/events", content=twice, headers={**NDJSON, "content-encoding": "gzip"})

    assert len(inner) < 1024 * 1024
    assert 413 == r.status_code


def test_ingest_is_503_while_the_store_is_unavailable_and_a_retry_succeeds_after(
    daemon: Daemon, client: TestClient, db_url: str, now: int
) -> None:
    body = ndjson(scenario(now))

    with store_outage(daemon, db_url):
        during = client.post("/v1/events", content=body, headers=NDJSON)
        health = client.get("/healthz")
        ready = client.get("/readyz")
    nothing_stored = client.get(f"/v1/waits/{DEPLOY}")
    retry = client.post("/v1/events", content=body, headers=NDJSON)
    daemon.auditor.tick(now)

    assert 503 == during.status_code
    assert during.json()["error"]
    assert 200 == health.status_code
    assert 503 == ready.status_code
    assert any("store" in problem for problem in ready.json()["problems"])
    assert 404 == nothing_stored.status_code
    assert 200 == retry.status_code
    assert SUMMARY == retry.json()
    assert EXPECTED_STATES == states(client)
    assert 200 == client.get("/readyz").status_code


def test_posting_the_same_body_again_changes_nothing(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    body = ndjson(scenario(now))
    client.post("/v1/events", content=body, headers=NDJSON)
    daemon.auditor.tick(now)
    before = [client.get(f"/v1/waits/{request_id}").json() for request_id in EXPECTED_STATES]

    again = client.post("/v1/events", content=body, headers=NDJSON)
    daemon.auditor.tick(now + SEC)
    after = [client.get(f"/v1/waits/{request_id}").json() for request_id in EXPECTED_STATES]

    assert 200 == again.status_code
    assert [without_evaluated_at(w) for w in before] == [without_evaluated_at(w) for w in after]


def without_evaluated_at(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "evaluatedAt"}


# -- tokens ------------------------------------------------------------------------------------


@pytest.fixture
def guarded(make_daemon: Callable[..., Daemon]) -> TestClient:
    return TestClient(make_daemon(tokens=(INGEST_TOKEN, READ_TOKEN)).app)


def test_ingest_without_a_token_is_401_with_a_bearer_challenge(
    guarded: TestClient, now: int
) -> None:
    r = guarded.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)

    assert 401 == r.status_code
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert 404 == guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).status_code


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param("Bearer not-a-configured-token-at-all", id="unknown-token"),
        pytest.param(f"Basic {INGEST_TOKEN.secret}", id="not-bearer"),
    ],
)
def test_ingest_with_a_wrong_token_is_401(
    guarded: TestClient, now: int, authorization: str
) -> None:
    r = guarded.post(
        "/v1/events",
        content=ndjson(scenario(now)),
        headers={**NDJSON, "authorization": authorization},
    )

    assert 401 == r.status_code
    assert 404 == guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).status_code


def test_ingest_with_a_token_without_the_ingest_scope_is_403(guarded: TestClient, now: int) -> None:
    r = guarded.post(
        "/v1/events", content=ndjson(scenario(now)), headers={**NDJSON, **bearer(READ_TOKEN)}
    )

    assert 403 == r.status_code
    assert 404 == guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).status_code


def test_ingest_with_an_ingest_token_is_accepted(guarded: TestClient, now: int) -> None:
    r = guarded.post(
        "/v1/events", content=ndjson(scenario(now)), headers={**NDJSON, **bearer(INGEST_TOKEN)}
    )

    assert 200 == r.status_code
    assert SUMMARY == r.json()
    assert 200 == guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN)).status_code


READ_PATHS = [
    pytest.param("/v1/waits", id="list"),
    pytest.param(f"/v1/waits/{DEPLOY}", id="one"),
]


@pytest.mark.parametrize("path", READ_PATHS)
def test_reads_without_a_token_are_401(guarded: TestClient, path: str) -> None:
    r = guarded.get(path)

    assert 401 == r.status_code


@pytest.mark.parametrize("path", READ_PATHS)
def test_reads_with_an_ingest_only_token_are_403(guarded: TestClient, path: str) -> None:
    r = guarded.get(path, headers=bearer(INGEST_TOKEN))

    assert 403 == r.status_code


def test_reads_with_a_read_token_are_answered(guarded: TestClient, now: int) -> None:
    guarded.post(
        "/v1/events", content=ndjson(scenario(now)), headers={**NDJSON, **bearer(INGEST_TOKEN)}
    )

    r = guarded.get(f"/v1/waits/{DEPLOY}", headers=bearer(READ_TOKEN))

    assert 200 == r.status_code
    assert "STUCK_AFTER_DECISION" == r.json()["state"]


# -- GET /v1/waits ---------------------------------------------------------------------------


def test_waits_lists_every_known_wait_with_its_state_now(audited: TestClient) -> None:
    assert EXPECTED_STATES == states(audited)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("?state=STALE", {"thread-delete/int-delete"}, id="state"),
        pytest.param("?state=STUCK_AFTER_DECISION", {DEPLOY}, id="state-stuck"),
        pytest.param("?state=RESUMED", set(), id="state-none"),
        pytest.param(
            "?open=true",
            {r for r, s in EXPECTED_STATES.items() if s != "CLOSED_BY_DECLINE"},
            id="open",
        ),
        pytest.param("?open=false", {"thread-message/int-message"}, id="closed"),
    ],
)
def test_waits_are_filtered_by_state_and_openness(
    audited: TestClient, query: str, expected: set[str]
) -> None:
    assert expected == set(states(audited, query))


def test_waits_are_limited_to_limit(audited: TestClient) -> None:
    got = states(audited, "?limit=2")

    assert 2 == len(got)
    assert set(got) <= set(EXPECTED_STATES)


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("?state=STUCK", id="unknown-state"),
        pytest.param("?state=waiting", id="lower-case-state"),
        pytest.param("?open=yes", id="open-not-boolean"),
        pytest.param("?limit=0", id="limit-zero"),
        pytest.param("?limit=-1", id="limit-negative"),
        pytest.param("?limit=10001", id="limit-too-large"),
        pytest.param("?limit=ten", id="limit-not-a-number"),
    ],
)
def test_waits_with_a_bad_filter_are_400(audited: TestClient, query: str) -> None:
    r = audited.get(f"/v1/waits{query}")

    assert 400 == r.status_code
    assert r.json()["error"]


# The fields of the `audit --format json` example in interfaces.md.
VERDICT_FIELDS = {
    "requestId",
    "threadId",
    "runId",
    "interruptId",
    "action",
    "reason",
    "policy",
    "state",
    "phase",
    "closed",
    "owner",
    "nextMove",
    "since",
    "uncertain",
    "missing",
    "thresholds",
    "evidence",
}
THRESHOLD_FIELDS = {"resumeGraceSeconds", "heartbeatFreshnessSeconds", "routeGraceSeconds"}
EVIDENCE_FIELDS = {
    "requestedAt",
    "expiresAt",
    "actionDigest",
    "digestChanged",
    "route",
    "approverRef",
    "resumeHandle",
    "lastHeartbeatAt",
    "decision",
    "decidedAt",
    "receiptAt",
    "continuationFailed",
    "continuationFailure",
    "actionEdited",
}


def test_waits_are_verdict_objects_with_the_audit_json_fields(audited: TestClient) -> None:
    body = audited.get("/v1/waits").json()

    assert body["evaluatedAt"].endswith("Z")
    assert 6 == len(body["waits"])
    for wait in body["waits"]:
        assert VERDICT_FIELDS <= set(wait)
        assert THRESHOLD_FIELDS <= set(wait["thresholds"])
        assert EVIDENCE_FIELDS <= set(wait["evidence"])
        assert wait["since"].endswith("Z")
        assert wait["evidence"]["requestedAt"].endswith("Z")


def test_waits_are_the_same_verdicts_as_the_audit_command(
    audited: TestClient, db_url: str, now: int
) -> None:
    result = CliRunner().invoke(
        cli, ["audit", "--db", db_url, "--at", iso(now), "--format", "json"]
    )

    served = {w["requestId"]: w for w in audited.get("/v1/waits").json()["waits"]}
    printed = {w["requestId"]: w for w in orjson.loads(result.output)["waits"]}
    assert 0 == result.exit_code, result.output
    assert printed == served


# -- GET /v1/waits/{requestId} ---------------------------------------------------------------


def test_one_wait_has_its_verdict_its_timeline_and_its_transitions(
    audited: TestClient, now: int
) -> None:
    r = audited.get(f"/v1/waits/{DEPLOY}")

    assert 200 == r.status_code
    wait = r.json()
    assert VERDICT_FIELDS <= set(wait)
    assert (DEPLOY, "STUCK_AFTER_DECISION", iso(now - 5 * MIN)) == (
        wait["requestId"],
        wait["state"],
        wait["since"],
    )
    assert [
        ("requested", iso(now - 30 * MIN)),
        ("route", iso(now - 29 * MIN)),
        ("decision", iso(now - 10 * MIN)),
        ("heartbeat", iso(now - 30 * SEC)),
    ] == [(item["kind"], item["at"]) for item in wait["timeline"]]
    assert {"from": "WAITING", "to": "STUCK_AFTER_DECISION", "at": iso(now - 5 * MIN)} == {
        k: wait["transitions"][-1][k] for k in ("from", "to", "at")
    }
    assert None is wait["transitions"][0]["from"]


def test_one_wait_carries_no_content(audited: TestClient) -> None:
    r = audited.get(f"/v1/waits/{DEPLOY}")

    # the tool's arguments and the message text are digested or dropped, never served
    assert "checkout" not in r.text
    assert "I will need approval" not in r.text
    assert "Approve int-deploy" not in r.text


def test_a_request_id_is_found_with_its_slash_escaped(audited: TestClient) -> None:
    r = audited.get("/v1/waits/thread-deploy%2Fint-deploy")

    assert 200 == r.status_code
    assert DEPLOY == r.json()["requestId"]


def test_a_request_id_whose_thread_id_holds_a_slash_is_found(client: TestClient, now: int) -> None:
    lines = [
        *requested("team/ops", "int-1", "deploy_service", now - 5 * MIN, now + 90 * MIN),
        route("team/ops", "int-1", now - 4 * MIN),
        heartbeat("team/ops", now - MIN),
    ]
    client.post("/v1/events", content=ndjson(lines), headers=NDJSON)

    r = client.get("/v1/waits/team/ops/int-1")

    assert 200 == r.status_code
    assert ("team/ops/int-1", "WAITING") == (r.json()["requestId"], r.json()["state"])


def test_a_wait_s_compacted_heartbeats_are_one_timeline_item_with_their_count(
    client: TestClient, now: int
) -> None:
    # Twenty beats 30 s apart, sent in two units, the second twice: one span of twenty.
    beats = [heartbeat("thread-beats", now - 10 * MIN + k * 30 * SEC) for k in range(20)]
    lines = requested("thread-beats", "int-1", "deploy_service", now - 11 * MIN, now + 90 * MIN)
    for body in (lines + beats[:10], beats[10:], beats[10:]):
        assert 200 == client.post("/v1/events", content=ndjson(body), headers=NDJSON).status_code

    r = client.get("/v1/waits/thread-beats/int-1")

    assert [
        {
            "at": iso(now - 10 * MIN),
            "kind": "heartbeat",
            "resumeHandle": True,
            "lastAt": iso(now - 10 * MIN + 19 * 30 * SEC),
            "beats": 20,
        }
    ] == [item for item in r.json()["timeline"] if item["kind"] == "heartbeat"]


def test_an_unknown_wait_is_404(audited: TestClient) -> None:
    r = audited.get("/v1/waits/thread-deploy/int-nothing")

    assert 404 == r.status_code
    assert r.json()["error"]


# -- /healthz and /readyz --------------------------------------------------------------------


def test_healthz_answers_ok(client: TestClient) -> None:
    r = client.get("/healthz")

    assert 200 == r.status_code
    assert {"status": "ok"} == r.json()


def test_readyz_is_ready_after_an_audit_tick(make_daemon: Callable[..., Daemon], now: int) -> None:
    daemon = make_daemon(audit_interval_ms=1000)
    daemon.state.started = time.time() - 3600
    daemon.auditor.tick(now)
    daemon.auditor.succeeded(time.time())

    r = TestClient(daemon.app).get("/readyz")

    assert 200 == r.status_code
    assert {"status": "ready", "auditLease": True} == r.json()


def test_readyz_is_503_when_the_auditor_never_ticked_within_three_intervals(
    make_daemon: Callable[..., Daemon],
) -> None:
    daemon = make_daemon(audit_interval_ms=1000)
    daemon.state.started = time.time() - 3600

    r = TestClient(daemon.app).get("/readyz")

    assert 503 == r.status_code
    assert "not ready" == r.json()["status"]
    assert any("auditor" in problem for problem in r.json()["problems"])


@pytest.mark.parametrize("stop_after", [0.0, 0.05, 0.15])
def test_the_store_is_closed_only_after_the_running_tick_finished(
    daemon: Daemon, stop_after: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler's first tick is due at start and takes 0.1 s here; the daemon is stopped
    before it begins, while it runs, or after it ended. The store is closed after the tick,
    or the tick never runs, and no tick runs on a closed store."""
    events: list[str] = []
    tick, dispose = daemon.auditor.tick, daemon.engine.dispose

    def slow_tick(now: int) -> Any:
        events.append("tick")
        time.sleep(0.1)
        report = tick(now)
        events.append("ticked")
        return report

    def closing() -> None:
        events.append("closed")
        dispose()

    monkeypatch.setattr(daemon.auditor, "tick", slow_tick)
    monkeypatch.setattr(daemon.engine, "dispose", closing)

    async def start_and_stop() -> None:
        async with daemon.app.router.lifespan_context(daemon.app):
            await asyncio.sleep(stop_after)
        await asyncio.sleep(0.3)  # the loop runs on, as a server's or a test client's may

    asyncio.run(start_and_stop())

    assert events in (["closed"], ["tick", "ticked", "closed"])


def test_readyz_is_503_when_the_last_tick_is_older_than_three_intervals(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    daemon = make_daemon(audit_interval_ms=1000)
    daemon.state.started = time.time() - 3600
    daemon.auditor.tick(now)
    daemon.auditor.succeeded(time.time() - 60)

    r = TestClient(daemon.app).get("/readyz")

    assert 503 == r.status_code
    assert any("auditor" in problem for problem in r.json()["problems"])


# -- /metrics ----------------------------------------------------------------------------------


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The values of one metric's samples, by their sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def open_waits(text: str) -> dict[str, float]:
    return {
        dict(labels)["state"]: value
        for labels, value in samples(text, "sidewatch_waits").items()
        if dict(labels)["policy"] == "default"
    }


def test_metrics_are_prometheus_text_with_every_open_state_at_zero_before_any_wait(
    client: TestClient,
) -> None:
    r = client.get("/metrics")

    assert 200 == r.status_code
    assert r.headers["content-type"].startswith("text/plain; version=")
    assert dict.fromkeys(OPEN_STATES, 0.0) == open_waits(r.text)


def test_metrics_count_the_open_waits_by_state_after_a_tick(audited: TestClient) -> None:
    text = audited.get("/metrics").text

    assert 'sidewatch_waits{policy="default",state="WAITING"} 1.0' in text.splitlines()
    assert dict.fromkeys(OPEN_STATES, 1.0) == open_waits(text)
    assert (
        1.0
        == samples(text, "sidewatch_waits_closed_total")[
            (("policy", "default"), ("state", "CLOSED_BY_DECLINE"))
        ]
    )


# The metrics table of interfaces.md.
REQUIRED_METRICS = {
    "sidewatch_waits": "gauge",
    "sidewatch_waits_closed_total": "counter",
    "sidewatch_wait_oldest_start_timestamp_seconds": "gauge",
    "sidewatch_state_transitions_total": "counter",
    "sidewatch_decision_latency_seconds": "histogram",
    "sidewatch_resume_latency_seconds": "histogram",
    "sidewatch_ingested_lines_total": "counter",
    "sidewatch_rejected_lines_total": "counter",
    "sidewatch_protocol_findings_total": "counter",
    "sidewatch_audit_duration_seconds": "histogram",
    "sidewatch_audit_last_success_timestamp_seconds": "gauge",
}
# `missing`: the unreported evidence a state rests on, four combinations (core.model).
BOUNDED_LABELS = {
    "state",
    "policy",
    "from",
    "to",
    "kind",
    "reason",
    "rule",
    "le",
    "version",
    "missing",
    # sidewatch_http_responses_total: a route's template (or "other"), an HTTP status code
    "route",
    "code",
}


def test_metrics_export_every_required_name_with_its_type_and_only_bounded_labels(
    audited: TestClient,
) -> None:
    text = audited.get("/metrics").text

    types = dict(
        line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE sidewatch_")
    )
    labels = {
        label
        for family in text_string_to_metric_families(text)
        if family.name.startswith("sidewatch_")
        for s in family.samples
        for label in s.labels
    }
    assert REQUIRED_METRICS == {name: types.get(name) for name in REQUIRED_METRICS}
    assert labels <= BOUNDED_LABELS


def test_metrics_count_ingested_and_rejected_lines(client: TestClient, now: int) -> None:
    client.post("/v1/events", content=bad_ndjson(scenario(now)), headers=NDJSON)

    text = client.get("/metrics").text

    assert 50.0 == sum(samples(text, "sidewatch_ingested_lines_total").values())
    assert 6.0 == samples(text, "sidewatch_ingested_lines_total")[(("kind", "content"),)]
    assert 2.0 == sum(samples(text, "sidewatch_rejected_lines_total").values())
    assert 1.0 == samples(text, "sidewatch_rejected_lines_total")[(("reason", "not_json"),)]


def test_the_state_filter_selects_by_the_state_now_not_at_the_last_tick(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    lines = [
        *requested("thread-late", "int-late", "deploy_service", now - 30 * MIN, now - 2 * MIN),
        route("thread-late", "int-late", now - 29 * MIN),
        heartbeat("thread-late", now - 6 * MIN),
    ]
    client.post("/v1/events", content=ndjson(lines), headers=NDJSON)
    daemon.auditor.tick(now - 5 * MIN)  # the last tick saw it open; it expired since

    assert {"thread-late/int-late": "STALE"} == states(client)
    assert {"thread-late/int-late": "STALE"} == states(client, "?state=STALE")


def test_metrics_can_require_a_read_token(make_daemon: Callable[..., Daemon]) -> None:
    daemon = make_daemon(tokens=(INGEST_TOKEN, READ_TOKEN), protect_metrics=True)
    client = TestClient(daemon.app)

    anonymous = client.get("/metrics")
    ingest_only = client.get("/metrics", headers=bearer(INGEST_TOKEN))
    reader = client.get("/metrics", headers=bearer(READ_TOKEN))

    assert (401, 403, 200) == (anonymous.status_code, ingest_only.status_code, reader.status_code)
    assert "sidewatch_waits" in reader.text


def test_metrics_are_open_by_default_even_with_tokens(make_daemon: Callable[..., Daemon]) -> None:
    client = TestClient(make_daemon(tokens=(INGEST_TOKEN, READ_TOKEN)).app)

    assert 200 == client.get("/metrics").status_code


def test_the_auditor_skips_a_tick_while_the_store_is_away_and_says_so(
    daemon: Daemon, client: TestClient, db_url: str, now: int
) -> None:
    client.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)

    with store_outage(daemon, db_url):
        asyncio.run(daemon.tick())
        skipped = client.get("/metrics").text
    asyncio.run(daemon.tick())
    recovered = client.get("/metrics").text

    assert "sidewatch_audit_skipped_total 1.0" in skipped
    assert 'sidewatch_waits{policy="default",state="STUCK_AFTER_DECISION"} 0.0' in skipped
    assert "sidewatch_audit_skipped_total 1.0" in recovered
    assert 'sidewatch_waits{policy="default",state="STUCK_AFTER_DECISION"} 1.0' in recovered


# SQLite only: its one-writer lock and busy timeout have no PostgreSQL counterpart (there a
# writer waits for row locks only, which ingest's inserts of new rows do not take).
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_ingest_is_503_while_another_process_holds_the_sqlite_lock(
    make_daemon: Callable[..., Daemon], db_url: str, now: int
) -> None:
    daemon = make_daemon(store_busy_timeout_ms=300)
    client = TestClient(daemon.app)
    body = ndjson(scenario(now))
    other = sqlite3.connect(make_url(db_url).database or "", isolation_level=None)

    other.execute("BEGIN EXCLUSIVE")
    locked = client.post("/v1/events", content=body, headers=NDJSON)
    other.execute("ROLLBACK")
    other.close()
    unlocked = client.post("/v1/events", content=body, headers=NDJSON)

    assert 503 == locked.status_code
    assert "nothing of this body was stored" in locked.json()["error"]
    assert (200, SUMMARY) == (unlocked.status_code, unlocked.json())


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"], ids=["lf", "crlf"])
def test_a_body_of_exactly_the_line_limit_is_taken_and_one_line_more_is_413_counted_right(
    make_daemon: Callable[..., Daemon], now: int, ending: bytes
) -> None:
    """Issue 33: the newline ending the last line starts no line (3 lines were counted as 4)."""
    lines = [orjson.dumps(e) for e in scenario(now)]
    client = TestClient(make_daemon(max_lines_per_unit=len(lines)).app)
    over = ending.join([*lines, b'{"type":"STEP_STARTED","stepName":"plan"}']) + ending

    refused = client.post("/v1/events", content=over, headers=NDJSON)
    taken = client.post("/v1/events", content=ending.join(lines) + ending, headers=NDJSON)

    assert 413 == refused.status_code
    assert (
        f"{len(lines) + 1} lines, over the limit of {len(lines)} a unit"
        in (refused.json()["error"])
    )
    assert (200, len(lines)) == (
        taken.status_code,
        taken.json()["accepted"] + taken.json()["skipped"],
    )


def test_a_body_with_too_many_lines_is_413_and_stores_nothing(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    client = TestClient(make_daemon(max_lines_per_unit=5).app)

    answer = client.post("/v1/events", content=ndjson(scenario(now)), headers=NDJSON)

    assert 413 == answer.status_code
    assert "over the limit of 5 a unit" in answer.json()["error"]
    assert 404 == client.get(f"/v1/waits/{DEPLOY}").status_code


def test_a_line_over_the_length_limit_is_a_reject_and_the_rest_is_stored(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    client = TestClient(make_daemon(max_line_bytes=2048).app)
    long_line = b'{"type":"RUN_STARTED","threadId":"' + b"x" * 5000 + b'","runId":"r"}'

    answer = client.post(
        "/v1/events", content=ndjson(scenario(now)) + b"\n" + long_line, headers=NDJSON
    )

    rejected = answer.json()["rejected"]
    assert 200 == answer.status_code
    assert 1 == len(rejected)
    assert "over the limit of 2048" in rejected[0]["error"]
    assert SUMMARY["accepted"] == answer.json()["accepted"]


def test_tokens_never_reach_the_logs(
    make_daemon: Callable[..., Daemon], now: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = TestClient(make_daemon(tokens=(INGEST_TOKEN, READ_TOKEN)).app)
    wrong = {"authorization": "Bearer wrong-secret-that-is-long-enough"}

    client.post("/v1/events", content=ndjson(scenario(now)), headers=bearer(INGEST_TOKEN))
    client.post("/v1/events", content=b"not json\n", headers=wrong)
    client.get("/v1/waits", headers=bearer(INGEST_TOKEN))

    for secret in (INGEST_TOKEN.secret, READ_TOKEN.secret, "wrong-secret-that-is-long-enough"):
        assert secret not in caplog.text


def test_an_unknown_route_or_method_is_a_json_error(client: TestClient) -> None:
    missing = client.get("/v1/nowhere")
    newline = client.get("/v1/waits/a%0Ab")
    method = client.delete("/v1/events")

    assert (404, 404, 405) == (missing.status_code, newline.status_code, method.status_code)
    assert all(
        r.headers["content-type"] == "application/json" and r.json()["error"]
        for r in (missing, newline, method)
    )


def test_ingest_reads_answers_by_the_configured_decision_labels(
    make_daemon: Callable[..., Daemon], now: int
) -> None:
    policy = dataclasses.replace(Config().policies[0], decline_labels=("hold_for_window",))
    daemon = make_daemon(policies=(policy,))
    client = TestClient(daemon.app)
    ask = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "tool_call"}]}
    answer = {"interruptId": "i", "status": "resolved", "payload": "hold_for_window"}
    lines = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1", "timestamp": now - 9 * SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r1",
            "timestamp": now - 8 * SEC,
            "outcome": ask,
        },
        {
            "threadId": "t",
            "runId": "r2",
            "messages": [],
            "timestamp": now - 7 * SEC,
            "resume": [answer],
        },
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r2", "timestamp": now - 6 * SEC},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r2", "timestamp": now - 5 * SEC},
    ]

    r = client.post("/v1/events", content=ndjson(lines), headers=NDJSON)
    daemon.auditor.tick(now)

    assert 200 == r.status_code, r.text
    assert {"t/i": "CLOSED_BY_DECLINE"} == states(client)


def test_every_member_of_a_multi_member_gzip_body_is_ingested(
    daemon: Daemon, client: TestClient, now: int
) -> None:
    lines = scenario(now)
    body = gzip.compress(ndjson(lines[:3])) + gzip.compress(ndjson(lines[3:]))

    r = client.post("/v1/events", content=body, headers={**NDJSON, "content-encoding": "gzip"})
    daemon.auditor.tick(now)

    assert (200, SUMMARY) == (r.status_code, r.json())
    assert EXPECTED_STATES == states(client)


def test_a_wait_asked_for_by_a_thread_id_says_what_a_request_id_looks_like(
    audited: TestClient,
) -> None:
    r = audited.get("/v1/waits/thread-a")

    assert 404 == r.status_code
    assert {
        "error": "no wait with requestId 'thread-a': a requestId is threadId/interruptId, "
        "as GET /v1/waits lists them"
    } == r.json()


def test_a_wait_pruned_past_the_retention_is_a_404_that_names_the_retention(
    daemon: Daemon, audited: TestClient, now: int
) -> None:
    message = "thread-message/int-message"  # closed by a decline: its thread goes whole
    later = now + 31 * 86_400_000
    unknown = audited.get("/v1/waits/thread-none/i").json()["error"]
    # A month on, evidence still comes: the clock is not ahead of it (store.retention).
    beat = {"type": "CUSTOM", "name": "sidewatch.heartbeat", "timestamp": later}
    beat["value"] = {"threadId": "thread-later"}
    assert 200 == audited.post("/v1/events", content=ndjson([beat]), headers=NDJSON).status_code

    daemon.auditor.prune(later, 60)
    r = audited.get(f"/v1/waits/{message}")

    assert "no wait with requestId 'thread-none/i'" == unknown
    cutoff = datetime.fromtimestamp((later - 30 * 86_400_000) / 1000, UTC)
    assert (
        404,
        {
            "error": f"no wait with requestId {message!r}; it may have been pruned: "
            f"store.retention is 30d, and waits closed before {cutoff:%Y-%m-%dT%H:%M:%SZ} are "
            "pruned with their facts"
        },
    ) == (r.status_code, r.json())


def test_metrics_are_gzip_for_a_client_that_asks_and_plain_for_one_that_does_not(
    client: TestClient,
) -> None:
    asked = client.get("/metrics", headers={"accept-encoding": "gzip"})
    plain = client.get("/metrics", headers={"accept-encoding": "identity"})

    assert ("gzip", None) == (
        asked.headers.get("content-encoding"),
        plain.headers.get("content-encoding"),
    )
    assert plain.text.split("\n")[0] == asked.text.split("\n")[0]  # the same exposition


def test_metrics_count_the_lines_of_a_body_delivered_again_apart(
    client: TestClient, now: int
) -> None:
    body = ndjson(scenario(now))
    client.post("/v1/events", content=body, headers=NDJSON)
    first = sum(samples(client.get("/metrics").text, "sidewatch_ingested_lines_total").values())

    client.post("/v1/events", content=body, headers=NDJSON)
    text = client.get("/metrics").text

    again = samples(text, "sidewatch_ingested_lines_total")
    assert first == again[(("kind", "redelivered"),)]
    assert 2 * first == sum(again.values())
