"""The body limit and request deadline every route is held to (server.maxBodyBytes,
server.requestTimeout): a request's body is read here, before any route or check sees it, and
refused when it is too large or does not arrive in time, whoever sent it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

import orjson
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sidewatch.config import Config

log = logging.getLogger("sidewatch.http")

# Refused before the whole body was read: the client may still be sending, so the connection
# is closed once answered rather than kept to swallow the rest.
CLOSE = {"Connection": "close"}


def _refusal(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": message}), status, CLOSE, "application/json")


def _too_large(method: str, limit: int, length: int | None) -> Response:
    if not limit:
        return _refusal(413, f"a {method} request takes no body")
    if length is not None:
        return _refusal(413, f"body of {length} bytes is over the limit of {limit}")
    return _refusal(413, f"body is over the limit of {limit} bytes")


def _has_body(scope: Scope) -> bool:
    length = declared_length(scope["headers"])
    chunked = any(name == b"transfer-encoding" for name, _ in scope["headers"])
    return chunked or bool(length)


def _closing(send: Send) -> Send:
    """`send`, with the answer closing the connection (the body it left unread with it)."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), (b"connection", b"close")]
            message = {**message, "headers": headers}
        await send(message)

    return closing


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length a request declares, or None (chunked, or none given)."""
    for name, value in headers:
        if name == b"content-length" and value.isdigit():
            return int(value)
    return None


# Methods whose requests carry no body: any body they come with is refused, not read.
BODILESS = frozenset({"GET", "HEAD"})


async def read_body(
    scope: Scope, receive: Receive, limit: int, timeout_ms: int
) -> bytes | Response | None:
    """The whole body, or the answer that refuses it: over `limit` bytes by its declared
    length (413, before a byte of it is read) or as it streams in (413, cut at the limit), or
    not all there within `timeout_ms` (408: a stalled or trickling client holds no request for
    longer). A GET or HEAD may have no body at all. None when the client went away meanwhile
    (there is no one to answer)."""
    method = scope["method"]
    limit = 0 if method in BODILESS else limit
    length = declared_length(scope["headers"])
    if length is not None and length > limit:
        return _too_large(method, limit, length)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_ms / 1000):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    return _too_large(method, limit, None)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        log.warning("request body not received in time (%d bytes in %d ms)", size, timeout_ms)
        return _refusal(
            408,
            f"the body did not arrive within {timeout_ms / 1000:g}s "
            f"(server.requestTimeout; {size} bytes received); nothing of it was stored",
        )


class BodyLimits:
    """ASGI middleware: reads each HTTP request's body under the limit and the deadline of
    the config in force (both may change on reload), answers 413 or 408 itself, and hands the
    application a body already whole. No route, present or added later, reads more or waits
    longer; a GET or HEAD route reads no body at all. A request no route takes (404, 405) is
    answered without its body being read, and its connection closed."""

    def __init__(
        self, app: ASGIApp, config: Callable[[], Config], routes: Sequence[BaseRoute]
    ) -> None:
        self.app = app
        self.config = config
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not any(route.matches(scope)[0] is Match.FULL for route in self.routes):
            await self.app(scope, receive, _closing(send) if _has_body(scope) else send)
            return
        config = self.config()
        body = await read_body(scope, receive, config.max_body_bytes, config.request_timeout_ms)
        if body is None:
            return
        if isinstance(body, Response):
            await body(scope, receive, send)
            return
        whole: Message | None = {"type": "http.request", "body": body, "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is None:  # the body was given: what follows is the client's disconnect
                return await receive()
            message, whole = whole, None
            return message

        await self.app(scope, replay, send)
