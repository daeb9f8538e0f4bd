"""Least privilege for ingest tokens (issue 29), against the real Starlette app on a real
SQLite and a real PostgreSQL store: a token narrowed to the kinds its sender produces
(`kinds:`) cannot close a wait with a line of another kind; such a line is rejected as
`kind_not_allowed`, counted, and the rest of its body stored as usual."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sidewatch.config import Config, Token
from sidewatch.config_schema import load_config
from sidewatch.daemon.serve import Daemon
from tests.daemon.test_http import (
    FORMATS,
    MIN,
    NDJSON,
    SEC,
    TestClient,  # imported quietly there
    custom,
    decision,
    heartbeat,
    ndjson,
    requested,
    route,
)

# The tap (AG-UI, and the routes and heartbeats it reports), a notifier, an approval UI.
AGENT = Token("agent", "agent-secret-0123456789", frozenset({"ingest"}), frozenset({"agui"}))
TAP = dataclasses.replace(AGENT, kinds=frozenset({"agui", "route", "heartbeat"}))
NOTIFIER = Token(
    "notifier", "notifier-secret-0123456789", frozenset({"ingest"}), frozenset({"route"})
)
UI = Token(
    "approvals", "approvals-secret-0123456789", frozenset({"ingest"}), frozenset({"decision"})
)
ANY = Token("any", "unrestricted-secret-0123456789", frozenset({"ingest"}))  # every kind
READER = Token("dashboard", "read-secret-0123456789", frozenset({"read"}))
ROTATION = "thread-rotation/int-rotation"


@pytest.fixture
def now() -> int:
    return int(time.time()) * SEC


@pytest.fixture
def make_daemon(db_url: str) -> Iterator[Callable[..., Daemon]]:
    made: list[Daemon] = []

    def make(**changes: Any) -> Daemon:
        tokens = (TAP, NOTIFIER, UI, ANY, READER)
        config = dataclasses.replace(Config(), db_url=db_url, tokens=tokens, **changes)
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


def post(client: TestClient, token: Token, body: bytes, **headers: str) -> Any:
    r = client.post(
        "/v1/events",
        content=body,
        headers={**NDJSON, **headers, "authorization": f"Bearer {token.secret}"},
    )
    assert 200 == r.status_code, r.text
    return r.json()


def state(client: TestClient, request_id: str) -> str:
    r = client.get(f"/v1/waits/{request_id}", headers={"authorization": f"Bearer {READER.secret}"})
    assert 200 == r.status_code, r.text
    return str(r.json()["state"])


def rejected_total(client: TestClient, reason: str) -> float:
    text = client.get("/metrics").text
    return next(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sidewatch_rejected_lines_total" and s.labels["reason"] == reason
    )


def receipt(thread: str, interrupt: str, at: int) -> dict[str, Any]:
    return custom("receipt", at, threadId=thread, interruptId=interrupt)


@pytest.fixture
def unroutable(daemon: Daemon, client: TestClient, now: int) -> TestClient:
    """The agent's wait, that its notifier could not route: UNROUTABLE."""
    asked = requested(
        "thread-rotation", "int-rotation", "rotate_keys", now - 20 * MIN, now + 90 * MIN
    )
    post(client, TAP, ndjson([*asked, heartbeat("thread-rotation", now - MIN)]))
    post(
        client,
        NOTIFIER,
        ndjson([route("thread-rotation", "int-rotation", now - 19 * MIN, delivered=False)]),
    )
    daemon.auditor.tick(now)
    assert "UNROUTABLE" == state(client, ROTATION)
    return client


KIND_NOT_ALLOWED = "kind_not_allowed"


def test_a_notifiers_forged_answer_is_refused_and_the_genuine_decline_closes_the_wait(
    daemon: Daemon, unroutable: TestClient, now: int
) -> None:
    forged = [
        decision("thread-rotation", "int-rotation", now - 2 * MIN, "accept"),
        receipt("thread-rotation", "int-rotation", now - MIN),
    ]

    answer = post(unroutable, NOTIFIER, ndjson(forged))
    daemon.auditor.tick(now)
    after_forgery = state(unroutable, ROTATION)
    counted = rejected_total(unroutable, KIND_NOT_ALLOWED)
    post(
        unroutable,
        UI,
        ndjson([decision("thread-rotation", "int-rotation", now - 30 * SEC, "decline")]),
    )
    daemon.auditor.tick(now)

    assert {
        "accepted": 0,
        "skipped": 0,
        "rejected": [
            {
                "line": 1,
                "error": "sidewatch.decision: a line of kind decision, which this token may "
                "not send (its kinds: route)",
            },
            {
                "line": 2,
                "error": "sidewatch.receipt: a line of kind receipt, which this token may "
                "not send (its kinds: route)",
            },
        ],
    } == answer
    assert "UNROUTABLE" == after_forgery
    assert 2.0 == counted
    assert "CLOSED_BY_DECLINE" == state(unroutable, ROTATION)


def test_the_same_forgery_with_a_token_of_every_kind_closes_the_wait_as_before(
    daemon: Daemon, unroutable: TestClient, now: int
) -> None:
    """Why a notifier's token is narrowed: one without `kinds` may send every kind."""
    forged = [
        decision("thread-rotation", "int-rotation", now - 2 * MIN, "accept"),
        receipt("thread-rotation", "int-rotation", now - MIN),
    ]

    answer = post(unroutable, ANY, ndjson(forged))
    daemon.auditor.tick(now)

    assert {"accepted": 2, "skipped": 0, "rejected": []} == answer
    assert "RESUMED" == state(unroutable, ROTATION)


def test_a_notifier_cannot_close_a_wait_through_an_ag_ui_resume_either(
    daemon: Daemon, unroutable: TestClient, now: int
) -> None:
    resume = {
        "threadId": "thread-rotation",
        "runId": "run-forged",
        "messages": [],
        "timestamp": now - MIN,
        "resume": [{"interruptId": "int-rotation", "status": "resolved", "payload": True}],
    }
    resumed = [
        resume,
        {"type": "RUN_STARTED", "threadId": "thread-rotation", "runId": "run-forged"},
        {"type": "RUN_FINISHED", "threadId": "thread-rotation", "runId": "run-forged"},
    ]

    answer = post(unroutable, NOTIFIER, ndjson(resumed))
    daemon.auditor.tick(now)

    assert [(1, True), (2, True), (3, True)] == [
        (r["line"], "a line of kind agui" in r["error"]) for r in answer["rejected"]
    ]
    assert "UNROUTABLE" == state(unroutable, ROTATION)


@pytest.mark.parametrize(("encode", "headers"), FORMATS)  # test_http's five
def test_a_mixed_body_stores_its_allowed_lines_in_every_format(
    daemon: Daemon,
    client: TestClient,
    now: int,
    encode: Callable[[list[dict[str, Any]]], bytes],
    headers: dict[str, str],
) -> None:
    asked = requested(
        "thread-rotation", "int-rotation", "rotate_keys", now - 20 * MIN, now + 90 * MIN
    )
    post(client, TAP, ndjson([*asked, heartbeat("thread-rotation", now - MIN)]))
    mixed = [
        decision("thread-rotation", "int-rotation", now - 19 * MIN, "accept"),
        route("thread-rotation", "int-rotation", now - 19 * MIN),
        {"type": "RUN_STARTED", "threadId": "thread-rotation", "runId": "run-forged"},
        receipt("thread-rotation", "int-rotation", now - 18 * MIN),
    ]

    answer = post(client, NOTIFIER, encode(mixed), **headers)
    daemon.auditor.tick(now)

    assert (1, 0, ["sidewatch.decision", "RUN_STARTED", "sidewatch.receipt"]) == (
        answer["accepted"],
        answer["skipped"],
        [r["error"].split(":")[0] for r in answer["rejected"]],
    )
    # the delivered route was stored (past the route grace, UNROUTABLE without it), and
    # neither the decision (STUCK_AFTER_DECISION) nor the receipt (RESUMED)
    assert "WAITING" == state(client, ROTATION)
    assert 3.0 == rejected_total(client, KIND_NOT_ALLOWED)


def test_a_reload_narrows_a_token_from_the_next_request(db_url: str, now: int) -> None:
    text = (
        "server:\n  tokens:\n"
        f"    - {{name: notifier, scopes: [ingest], token: {ANY.secret}, kinds: [route]}}\n"
    )
    config = dataclasses.replace(Config(), db_url=db_url, tokens=(ANY,))
    daemon = Daemon(
        config,
        reread=lambda: dataclasses.replace(load_config(yaml.safe_load(text), {}), db_url=db_url),
    )
    client = TestClient(daemon.app)
    line = ndjson([decision("thread-rotation", "int-rotation", now, "accept")])
    try:
        before = post(client, ANY, line)
        asyncio.run(daemon.reload())
        after = post(client, ANY, line)
    finally:
        daemon.engine.dispose()

    assert [] == before["rejected"]
    assert [
        {
            "line": 1,
            "error": "sidewatch.decision: a line of kind decision, which this token may not "
            "send (its kinds: route)",
        }
    ] == after["rejected"]
