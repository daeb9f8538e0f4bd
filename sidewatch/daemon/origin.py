"""Which requests may reach the API at all. A browser's request from another site (a foreign
`Origin`, or `Sec-Fetch-Site` saying so) is refused, so no web page a user visits can write
evidence or read verdicts; and with no token configured, so is a `Host` that is not this
server's, which closes the read API to DNS rebinding. Tools (curl, Prometheus, producers)
send no `Origin` and pass."""

from __future__ import annotations

from urllib.parse import urlsplit

import orjson
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from sidewatch.config import Config, split_listen

DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

FOREIGN_ORIGIN = (
    "request from a web page of another origin refused: sidewatch takes requests from tools, "
    "not from browsers on other sites; list the page's origin in server.allowedOrigins to allow it"
)
FOREIGN_HOST = (
    "request for a Host that is not this server's refused (DNS rebinding): with no token "
    "configured, only the listen address and localhost, 127.0.0.1 and [::1] on its port are "
    "served; list other names in server.allowedHosts"
)


class SameOrigin:
    """ASGI middleware: answers 403 to a request from another site or, without tokens, for a
    foreign Host; passes everything else through unchanged."""

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        host, self.port = split_listen(config.listen)
        self.own = frozenset({host.lower(), *LOOPBACK_NAMES})  # on the listen port only
        self.named = frozenset(config.allowed_hosts)  # on any port (a proxy's may differ)
        self.origins = frozenset(config.allowed_origins)
        self.check_host = not config.tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                body = orjson.dumps({"error": refusal})
                await Response(body, 403, media_type="application/json")(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused (its values are never echoed), or None."""
        headers = {
            k: v for k, v in scope["headers"] if k in (b"origin", b"sec-fetch-site", b"host")
        }
        origin = headers.get(b"origin")
        if origin is not None:
            if not self.origin_allowed(origin.decode("latin-1").strip().lower()):
                return FOREIGN_ORIGIN
        # A browser sends no Origin on a plain GET, but it does say where the request came from.
        elif headers.get(b"sec-fetch-site", b"").lower() in (b"cross-site", b"same-site"):
            return FOREIGN_ORIGIN
        host = headers.get(b"host")
        # A request without Host (HTTP/1.0) comes from no browser, so from no rebinding page.
        if self.check_host and host is not None:
            scheme = scope.get("scheme", "http")
            if not self.host_allowed(host.decode("latin-1").strip().lower(), scheme):
                return FOREIGN_HOST
        return None

    def origin_allowed(self, origin: str) -> bool:
        if origin in self.origins:
            return True
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in DEFAULT_PORTS or parts.path or not parts.netloc:
            return False  # "null" (a sandboxed frame, a file) and the like
        return self.host_allowed(parts.netloc, parts.scheme)

    def host_allowed(self, netloc: str, scheme: str) -> bool:
        """`netloc` (`host[:port]`, an IPv6 host in brackets) names this server."""
        try:
            parts = urlsplit(f"//{netloc}")
            name, port = parts.hostname, parts.port
        except ValueError:  # a port that is not a number, an unclosed bracket
            return False
        if name is None or parts.username is not None or parts.path or parts.query:
            return False
        if name in self.named:
            return True
        if port is None:  # a default port goes unsaid
            port = DEFAULT_PORTS.get(scheme)
        return name in self.own and port == self.port
