"""The limits every route is held to, against the real daemon process and real sockets, from a
client without a token: a 64 MiB `POST /ui/login` is refused without the daemon growing, a
trickled one is cut at server.requestTimeout, and connections trickling bodies past
server.maxConnections do not keep `/healthz` or ingest out."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.daemon.test_e2e import Server, _start, _stop, _unit
from tests.daemon.test_slow_clients import _answer

MiB = 1024 * 1024
READ, INGEST = "read-secret-0123456789", "ingest-secret-0123456789"
TOKENS = (
    f", tokens: [{{name: reader, token: {READ}, scopes: [read]}}, "
    f"{{name: agent, token: {INGEST}, scopes: [ingest]}}]"
)


def _memory(server: Server, key: str = "VmRSS") -> int:
    """The daemon process' resident memory (VmRSS), or its peak (VmHWM), in bytes."""
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key}")


def _peak_reset(server: Server) -> None:
    """VmHWM starts afresh at the current RSS (Linux' clear_refs 5): a body read whole and
    freed at once leaves RSS where it was, but not the peak."""
    Path(f"/proc/{server.proc.pid}/clear_refs").write_text("5")


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _login_head(server: Server, framing: str) -> bytes:
    return (
        f"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1:{_port(server)}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n"
    ).encode()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = _start(tmp_path, f"sqlite:///{tmp_path}/s.db", server=f", requestTimeout: 2s{TOKENS}")
    yield s
    _stop(s)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_64_mib_login_without_a_token_is_413_and_the_daemon_does_not_grow(
    server: Server, declared: bool
) -> None:
    size = 64 * MiB
    framing = f"Content-Length: {size}" if declared else "Transfer-Encoding: chunked"
    piece = b"token=" + b"x" * (MiB - 6)
    if not declared:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    before = _memory(server)
    _peak_reset(server)
    sent = 0

    with socket.create_connection(("127.0.0.1", _port(server))) as sock:

        def send() -> None:  # all of it, unless the daemon closes first
            nonlocal sent
            try:
                sock.sendall(_login_head(server, framing))
                for _ in range(64):
                    sock.sendall(piece)
                    sent += len(piece)
                if not declared:
                    sock.sendall(b"0\r\n\r\n")
            except OSError:
                return

        sender = threading.Thread(target=send)
        sender.start()
        status, headers, body = _answer(sock)  # read as it comes, beside the sending
        sender.join()
    time.sleep(0.5)  # the daemon done with whatever it took in
    grown = _memory(server, "VmHWM") - before

    assert 413 == status
    assert "close" == headers.get("connection")
    assert "over the limit of 65536" in orjson.loads(body)["error"]
    assert grown < 20 * MiB, f"the daemon grew {grown / MiB:.0f} MiB ({sent / MiB:.0f} MiB sent)"
    assert _memory(server) - before < 20 * MiB
    assert 200 == httpx.get(f"{server.url}/healthz").status_code


def test_a_trickled_login_is_408_at_the_request_timeout(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", _port(server))) as sock:
        sock.sendall(_login_head(server, "Content-Length: 1000") + b"token=")
        stop = threading.Event()

        def trickle() -> None:  # a byte now and then: alive, never finishing
            while not stop.wait(0.2):
                try:
                    sock.sendall(b"x")
                except OSError:
                    return

        trickler = threading.Thread(target=trickle)
        trickler.start()
        start = time.monotonic()
        status, headers, body = _answer(sock)
        took = time.monotonic() - start
        stop.set()
        trickler.join()

    assert 408 == status
    assert "close" == headers.get("connection")
    assert "did not arrive within 2s (server.requestTimeout" in orjson.loads(body)["error"]
    assert 2 <= took < 10


def test_connections_trickling_bodies_past_the_cap_do_not_keep_healthz_or_ingest_out(
    tmp_path: Path,
) -> None:
    """200 connections trickling login bodies, each reopened as soon as it is closed, against
    a cap of 50 and a deadline longer than the test: what they hold yields to a new request."""
    server = _start(
        tmp_path,
        f"sqlite:///{tmp_path}/s.db",
        server=f", maxConnections: 50, requestTimeout: 60s{TOKENS}",
    )
    head = _login_head(server, "Content-Length: 100000")
    stop = threading.Event()
    opened = 0

    def attack() -> None:
        nonlocal opened
        held: list[socket.socket | None] = [None] * 200
        while not stop.is_set():
            for i in range(len(held)):
                try:
                    if held[i] is None:
                        held[i] = socket.create_connection(("127.0.0.1", _port(server)))
                        opened += 1
                        held[i].sendall(head)  # type: ignore[union-attr]
                    held[i].sendall(b"x")  # type: ignore[union-attr]
                except OSError:
                    if held[i] is not None:
                        held[i].close()  # type: ignore[union-attr]
                    held[i] = None
            stop.wait(0.1)
        for sock in held:
            if sock is not None:
                sock.close()

    attacker = threading.Thread(target=attack)
    attacker.start()
    try:
        time.sleep(3)  # the cap is reached, and held
        health, ingest = [], []
        for n in range(5):
            health.append(httpx.get(f"{server.url}/healthz", timeout=10).status_code)
            ingest.append(
                httpx.post(
                    f"{server.url}/v1/events",
                    content=_unit(n),
                    headers={
                        "content-type": "application/x-ndjson",
                        "authorization": f"Bearer {INGEST}",
                    },
                    timeout=10,
                ).status_code
            )
            time.sleep(0.2)
    finally:
        stop.set()
        attacker.join()
        _stop(server)

    assert opened > 200  # the attacker's connections were closed, and opened again
    assert [200] * 5 == health
    assert [200] * 5 == ingest
