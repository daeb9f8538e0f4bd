"""Slow and stalled clients against the real daemon process: a body that does not arrive
within `server.requestTimeout` gets a `408`, nothing of it is stored, and the daemon serves
everyone else meanwhile."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.daemon.test_e2e import Server, _start, _stop, _unit

# Far longer than the limit, so only the limit can end the wait: without it, the test fails.
PATIENCE = 60.0


@pytest.fixture
def server(tmp_path: Path, db_url: str) -> Iterator[Server]:
    s = _start(tmp_path, db_url, server=", requestTimeout: 2s")
    yield s
    _stop(s)


def _headers(server: Server, length: int) -> bytes:
    host = server.url.removeprefix("http://")
    return (
        f"POST /v1/events HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one answer, read until the server closes."""
    sock.settimeout(PATIENCE)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            # A byte that reached the daemon after its answer makes the close a reset; the
            # answer read before it stands (and with none, the assertions below fail).
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    return int(status_line.split()[1]), headers, body


def _stored_threads(db_url: str) -> set[str]:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        threads = {r[0] for r in conn.execute(text("SELECT thread_id FROM interrupt"))}
    engine.dispose()
    return threads


@contextmanager
def _dribbling(sock: socket.socket, byte: bytes, on: bool) -> Iterator[None]:
    """While inside: when `on`, a byte now and then: alive, but never finishing."""
    stop = threading.Event()

    def dribble() -> None:
        while not stop.wait(0.2):
            try:
                sock.sendall(byte)
            except OSError:
                return

    dribbler = threading.Thread(target=dribble)
    if on:
        dribbler.start()
    try:
        yield
    finally:
        stop.set()
        if on:
            dribbler.join()


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled-body", "trickling-body"])
def test_a_body_not_received_in_time_is_408_stores_nothing_and_others_are_served(
    server: Server, trickle: bool
) -> None:
    # Whole lines of a unit, each of which would be stored if the partial body were taken.
    partial = _unit(1)
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as slow:
        slow.sendall(_headers(server, len(partial) + 50_000) + partial)
        with _dribbling(slow, b" ", trickle):
            other = httpx.post(
                f"{server.url}/v1/events",
                content=_unit(2),
                headers={"content-type": "application/x-ndjson"},
                timeout=PATIENCE,
            )
            status, headers, body = _answer(slow)

    assert 408 == status
    assert "close" == headers.get("connection")
    assert "nothing of it was stored" in json.loads(body)["error"]
    assert 200 == other.status_code
    assert {"kill-thread-2"} == _stored_threads(server.db_url)
    assert 200 == httpx.get(f"{server.url}/healthz").status_code


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled-head", "trickling-head"])
def test_a_request_head_not_received_in_time_is_408_and_the_connection_closed(
    server: Server, trickle: bool
) -> None:
    host = server.url.removeprefix("http://")
    with socket.create_connection(("127.0.0.1", int(host.rsplit(":", 1)[1]))) as slow:
        slow.sendall(f"POST /v1/events HTTP/1.1\r\nHost: {host}\r\nX-Slow: ".encode())
        with _dribbling(slow, b"a", trickle):  # never the end of the head
            other = httpx.get(f"{server.url}/v1/waits", timeout=PATIENCE)
            status, headers, body = _answer(slow)

    assert 408 == status
    assert "close" == headers.get("connection")
    assert "did not arrive within 2s" in json.loads(body)["error"]
    assert 200 == other.status_code
