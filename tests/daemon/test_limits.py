"""Every route is held to server.maxBodyBytes and server.requestTimeout, `/ui` forms and routes
that take no body included, before any of the body is read. The routes are enumerated from the
application itself, so a route added later is held to them too. Driven through the real
Starlette application (its ASGI interface, for a body that arrives slowly) on a real SQLite
store; the real daemon process is tested in tests/daemon/test_limits_daemon.py."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from starlette.routing import Route
from starlette.types import Message

from sidewatch.config import Config
from sidewatch.daemon.limits import BODILESS
from sidewatch.daemon.serve import Daemon

LIMIT = 4096
DEADLINE_MS = 300
TRICKLE_S = 0.05  # a byte this often: alive, but it would take minutes to finish


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    store = tmp_path_factory.mktemp("limits") / "sidewatch.db"
    config = dataclasses.replace(
        Config(),
        db_url=f"sqlite:///{store}",
        max_body_bytes=LIMIT,
        request_timeout_ms=DEADLINE_MS,
    )
    d = Daemon(config)
    yield d
    d.engine.dispose()


def _every_route_and_method() -> list[tuple[str, str]]:
    """(method, a path the route matches) for every route of the application and every
    method it takes: read from the app, so no route escapes by being added later."""
    probe = Daemon(dataclasses.replace(Config(), db_url="sqlite://"))
    pairs = []
    for route in probe.app.routes:
        assert isinstance(route, Route), f"{route!r}: not a Route; hold it to the limits too"
        path = re.sub(r"\{[^}]+\}", "x", route.path)
        pairs.extend((method, path) for method in sorted(route.methods or ()))
    probe.engine.dispose()
    return pairs


def _ids(routes: list[tuple[str, str]]) -> list[str]:
    return [f"{m} {p}" for m, p in routes]


ROUTES = _every_route_and_method()
IDS = _ids(ROUTES)
BODILESS_ROUTES = [(m, p) for m, p in ROUTES if m in BODILESS]
TAKING_A_BODY = [(m, p) for m, p in ROUTES if m not in BODILESS]


def _limit(method: str) -> int:
    return 0 if method in BODILESS else LIMIT


def _too_large(method: str, message: str) -> str:
    """What a body over the limit is told: a GET or HEAD takes none at all."""
    return f"a {method} request takes no body" if method in BODILESS else message


def _framing(declared: bool, length: int) -> tuple[bytes, bytes]:
    if declared:
        return (b"content-length", str(length).encode())
    return (b"transfer-encoding", b"chunked")


class Client:
    """One request to the ASGI app: the body messages it is given, what it answered, and
    how much of the body the app asked for."""

    def __init__(self, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:9477"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 9477),
        }
        self.sent: list[Message] = []
        self.received = 0  # body bytes the app took

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(next(m["status"] for m in self.sent if m["type"] == "http.response.start"))

    @property
    def headers(self) -> dict[bytes, bytes]:
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        return dict(start["headers"])

    @property
    def error(self) -> str:
        body = b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        return str(orjson.loads(body)["error"])


def _run(daemon: Daemon, client: Client, chunks: list[bytes], pause: float = 0.0) -> float:
    """Runs the request, the body given as `chunks` (one a `pause` apart, the last one
    ending it); returns how long the app took to answer, in seconds."""
    left = iter(range(len(chunks) - 1, -1, -1))  # chunks still to come after this one

    async def receive() -> Message:
        more = next(left, None)
        if more is None:  # the client waits for its answer
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}
        chunk = chunks[len(chunks) - 1 - more]
        await asyncio.sleep(pause)
        client.received += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": more > 0}

    async def go() -> float:
        start = time.monotonic()
        await asyncio.wait_for(daemon.app(client.scope, receive, client.send), 30)
        return time.monotonic() - start

    return asyncio.run(go())


def test_the_routes_held_to_the_limits_are_read_from_the_app() -> None:
    expected = {"POST /v1/events", "POST /ui/login", "GET /healthz", "GET /ui/waits/x"}

    assert expected <= set(IDS)
    assert len(IDS) == len(BODILESS_ROUTES) + len(TAKING_A_BODY)


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=IDS)
def test_a_declared_body_over_the_limit_is_413_before_a_byte_of_it_is_read(
    daemon: Daemon, method: str, path: str
) -> None:
    client = Client(method, path, [(b"content-length", str(64 * 1024 * 1024).encode())])

    _run(daemon, client, [b"x" * 65536] * 1024)

    assert 413 == client.status
    assert _too_large(method, f"body of {64 * 1024 * 1024} bytes is over the limit of {LIMIT}") == (
        client.error
    )
    assert b"close" == client.headers[b"connection"]
    assert 0 == client.received


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=IDS)
def test_a_streamed_body_is_cut_at_the_limit_with_413(
    daemon: Daemon, method: str, path: str
) -> None:
    client = Client(method, path, [(b"transfer-encoding", b"chunked")])

    _run(daemon, client, [b"x" * 1000] * 64 * 1024)

    assert 413 == client.status
    assert _too_large(method, f"body is over the limit of {LIMIT} bytes") == client.error
    assert b"close" == client.headers[b"connection"]
    assert (0 if method in BODILESS else LIMIT) < client.received <= _limit(method) + 1000


@pytest.mark.parametrize(("method", "path"), TAKING_A_BODY, ids=_ids(TAKING_A_BODY))
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_trickled_body_is_408_at_the_request_deadline(
    daemon: Daemon, method: str, path: str, declared: bool
) -> None:
    client = Client(method, path, [_framing(declared, 1000)])

    took = _run(daemon, client, [b"x"] * 1000, pause=TRICKLE_S)

    assert 408 == client.status
    assert "did not arrive within 0.3s (server.requestTimeout" in client.error
    assert b"close" == client.headers[b"connection"]
    assert DEADLINE_MS / 1000 <= took < 5 * DEADLINE_MS / 1000


@pytest.mark.parametrize(("method", "path"), BODILESS_ROUTES, ids=_ids(BODILESS_ROUTES))
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_trickled_body_to_a_get_is_413_at_its_first_byte(
    daemon: Daemon, method: str, path: str, declared: bool
) -> None:
    client = Client(method, path, [_framing(declared, 1000)])

    took = _run(daemon, client, [b"x"] * 1000, pause=TRICKLE_S)

    assert 413 == client.status
    assert f"a {method} request takes no body" == client.error
    assert b"close" == client.headers[b"connection"]
    assert took < DEADLINE_MS / 1000
    assert (0 if declared else 1) == client.received


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/events", 405), ("POST", "/v1/waits", 405), ("POST", "/nowhere", 404)],
    ids=["get-to-a-post-route", "post-to-a-get-route", "no-route"],
)
def test_a_body_no_route_takes_is_answered_unread_and_the_connection_closed(
    daemon: Daemon, method: str, path: str, status: int
) -> None:
    client = Client(method, path, [(b"content-length", str(64 * 1024 * 1024).encode())])

    _run(daemon, client, [b"x" * 65536] * 1024)

    assert status == client.status
    assert b"close" == client.headers[b"connection"]
    assert 0 == client.received


def test_a_get_without_a_body_is_served() -> None:
    """What the limits leave alone: the ordinary request, with an empty body or none."""
    probe = Daemon(dataclasses.replace(Config(), db_url="sqlite://"))
    client = Client("GET", "/healthz", [(b"content-length", b"0")])

    _run(probe, client, [b""])

    assert 200 == client.status
    probe.engine.dispose()
