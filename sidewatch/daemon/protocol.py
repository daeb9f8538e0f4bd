"""uvicorn's HTTP/1.1 protocol with a deadline on each request's head and a cap on the
connections held open. It subclasses uvicorn's private `H11Protocol`: what it relies on is
listed here, pyproject.toml bounds uvicorn to the releases tested, and
tests/daemon/test_protocol.py fails by name when the installed uvicorn lacks any of it."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from uvicorn.protocols.http.h11_impl import H11Protocol

# What HeadDeadline takes from H11Protocol beyond asyncio.Protocol: the methods it overrides
# and calls, and the attributes it reads (`conn` is h11's Connection, `cycle` the request's
# RequestResponseCycle).
OVERRIDES = ("connection_made", "connection_lost", "on_response_complete")
ATTRIBUTES = ("loop", "conn", "cycle", "transport")
CYCLE_ATTRIBUTES = ("response_complete", "more_body")
CONN_ATTRIBUTES = ("trailing_data",)


def head_deadline(seconds: float, max_connections: int | None = None) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with a deadline on each request's head. uvicorn times out
    only idle connections between requests, and any byte resets that; a client that opens a
    connection and withholds or trickles its headers (slowloris) would hold it forever. Past
    the deadline it gets a 408 (when part of a head came) and the connection is closed. The
    body has its own deadline in the application (server.requestTimeout too).

    With `max_connections`, no more connections are held open: the next one closes the
    oldest that is not being answered (an idle keep-alive, a head or a body still coming),
    so idle or trickling sockets cannot use up the open files and keep /healthz and ingest
    out. When all are being answered, the new one gets a 503."""

    # Open connections, oldest first (a dict keeps insertion order).
    held: dict[H11Protocol, None] = {}

    class HeadDeadline(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm(None)
            held[self] = None
            if max_connections is not None and len(held) > max_connections:
                victim = next(c for c in held if _yields(c))
                held.pop(victim)
                if victim is self:
                    self._refuse(b"503 Service Unavailable", "too many connections; retry later")
                else:
                    victim.transport.close()

        def on_response_complete(self) -> None:
            answered = self.cycle
            super().on_response_complete()
            self._arm(answered)

        def connection_lost(self, exc: Exception | None) -> None:
            held.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self, answered: Any) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._late, answered)

        def _late(self, answered: Any) -> None:
            # A new request cycle means its head did arrive: the body deadline takes over.
            if self.cycle is not answered or self.transport.is_closing():
                return
            if self.conn.trailing_data[0]:  # part of a head came, and then not the rest
                self._refuse(
                    b"408 Request Timeout",
                    f"the request head did not arrive within {seconds:g}s (server.requestTimeout)",
                )
            self.transport.close()

        def _refuse(self, status: bytes, message: str) -> None:
            """Answers `status` outside any request cycle, and closes the connection."""
            body = orjson.dumps({"error": message})
            self.transport.write(
                b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (status, len(body), body)
            )
            self.transport.close()

    return HeadDeadline


def _yields(connection: H11Protocol) -> bool:
    """Not being answered: idle between requests, or its head or body still coming (the
    application takes a request only once its body is whole: daemon/limits.py)."""
    cycle = connection.cycle
    return cycle is None or cycle.response_complete or cycle.more_body
