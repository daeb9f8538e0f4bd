"""The HTTP API (Starlette): `POST /v1/events`, the read API, `/metrics`, `/healthz`,
`/readyz`. Blocking store work runs in worker threads; a `200` on ingest is sent only after
the unit's transaction committed."""

from __future__ import annotations

import asyncio
import gzip
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, IngestSummary, media_and_encoding
from sidewatch.app.read import BadCursor, Read
from sidewatch.config import Config, Token
from sidewatch.core.model import CLOSED_STATES, OPEN_STATES, State
from sidewatch.daemon.limits import BodyLimits
from sidewatch.daemon.openapi import OPENAPI
from sidewatch.daemon.origin import SameOrigin
from sidewatch.daemon.selfwatch import CountAnswers, SelfCounters
from sidewatch.daemon.ui import ROUTES as UI_ROUTES
from sidewatch.daemon.writes import StoreWrites, cause
from sidewatch.errors import InputError, StoreError, StoreRefused, TooLarge
from sidewatch.report.verdicts import iso
from sidewatch.store.db import probe_write, revision
from sidewatch.store.repo import Store

log = logging.getLogger("sidewatch.http")


@dataclass
class AppState:
    """What the HTTP API serves from: the config in force, and the use cases it calls."""

    config: Config
    store: Store
    auditor: Auditor
    ingest: Ingest
    read: Read
    registry: CollectorRegistry
    started: float = field(default_factory=time.time)
    # Whether this replica holds the audit lease (a lone daemon does, once it claimed it).
    lease_held: Callable[[], bool] = lambda: True
    selfwatch: SelfCounters = field(default_factory=SelfCounters)  # answers, report runs
    # What else keeps this replica from being ready (a JetStream consumer cut off, say).
    problems: Callable[[], list[str]] = list
    # The latest write's outcome (ingest, lease, tick, /readyz's probe): daemon.writes.
    writes: StoreWrites = field(default_factory=StoreWrites)
    # Called (on the event loop) after an ingest stored lines: the daemon audits them soon.
    ingested: Callable[[], None] = lambda: None
    # The copy-ready `audit` line the wait pages show: this daemon's own store and config.
    audit_command: str = "sidewatch audit --open"


def now_ms() -> int:
    """The wall clock, read by the shell and passed in: the application layer reads none."""
    return int(time.time() * 1000)


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        orjson.dumps(body), status_code=status, headers=headers, media_type="application/json"
    )


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    return _json({"error": message}, status, headers)


Handler = Callable[[Request], Awaitable[Response]]


def _authorized(scope: str) -> Callable[[Handler], Handler]:
    """Bearer tokens with scopes, compared in constant time; with no token configured the
    server listens on loopback only, and every request is allowed."""

    def wrap(fn: Handler) -> Handler:
        async def handler(request: Request) -> Response:
            app: AppState = request.app.state.sidewatch
            tokens: tuple[Token, ...] = app.config.tokens
            if tokens:
                header = request.headers.get("authorization", "")
                scheme, _, given = header.partition(" ")
                if scheme.lower() != "bearer" or not given:
                    return Response(
                        b'{"error":"missing bearer token"}',
                        401,
                        {"WWW-Authenticate": 'Bearer realm="sidewatch"'},
                        media_type="application/json",
                    )
                match = None
                for token in tokens:  # every token is compared: no early exit on a match
                    if hmac.compare_digest(token.secret.encode(), given.encode()):
                        match = token
                if match is None:
                    return Response(
                        b'{"error":"unknown bearer token"}',
                        401,
                        {"WWW-Authenticate": 'Bearer realm="sidewatch", error="invalid_token"'},
                        media_type="application/json",
                    )
                if scope not in match.scopes:
                    return _error(403, f"token {match.name!r} lacks the {scope!r} scope")
                request.state.token = match  # what the handler may do beyond: its `kinds`
            return await fn(request)

        return handler

    return wrap


@_authorized("ingest")
async def post_events(request: Request) -> Response:
    app: AppState = request.app.state.sidewatch
    headers = request.headers
    decoded = media_and_encoding(headers.get("content-type"), headers.get("content-encoding"))
    if isinstance(decoded, str):
        return _error(415, decoded)
    media, encoding = decoded
    body = await request.body()  # whole, within the limits (daemon/limits.py: every route)
    source = f"http:{request.client.host if request.client else '?'}"
    token: Token | None = getattr(request.state, "token", None)  # None: no token configured
    allowed = None if token is None else token.kinds
    try:
        summary = await _finished(
            run_in_threadpool(_take, app.ingest, source, body, media, encoding, allowed)
        )
    except TooLarge as e:
        return _error(413, str(e))
    except StoreRefused as e:
        # A property of the body, not an outage: a 503 would have it retried for ever.
        log.warning("ingest from %s refused by the store (%s); nothing stored", source, e.reason)
        return _error(
            400,
            f"the store refused this unit's data ({e.reason}); nothing of this body was "
            "stored, do not retry it unchanged",
        )
    except InputError as e:
        return _error(400, str(e))
    except StoreError as e:
        app.writes.refused(time.monotonic(), e.reason)
        log.warning("ingest refused, store unavailable: %s", e.reason)
        # The store's own reason (a full disk, a lock, a refused connection) is said, not
        # hidden; never its statement or a value.
        return _error(
            503, f"store unavailable ({e.reason}); nothing of this body was stored, retry later"
        )
    app.writes.committed(time.monotonic())
    if summary.accepted:
        app.ingested()
    return _json(
        {
            "accepted": summary.accepted,
            "skipped": summary.skipped,
            "rejected": [{"line": r.line, "error": r.error} for r in summary.rejects],
        }
    )


def _take(
    ingest: Ingest,
    source: str,
    body: bytes,
    media: str | None,
    encoding: str,
    allowed: frozenset[str] | None = None,
) -> IngestSummary:
    """A body read and committed as one unit (blocking: run in a worker thread); a line of a
    kind not in `allowed` (the token's `kinds`) is rejected."""
    return ingest.body(source, body, now_ms(), media_type=media, encoding=encoding, allowed=allowed)


async def _finished(work: Awaitable[IngestSummary]) -> IngestSummary:
    """The outcome of ingest work in a worker thread, even when this request is cancelled
    (the server's shutdown bound): the thread runs on and may commit, so the answer is what it
    did, never a 500 for a body that was stored."""
    job = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        return await job


@_authorized("read")
async def get_waits(request: Request) -> Response:
    app: AppState = request.app.state.sidewatch
    q = request.query_params
    state = q.get("state")
    if state is not None and state not in State.__members__:
        return _error(400, f"state must be one of {', '.join(State.__members__)}")
    only_open = q.get("open")
    if only_open not in (None, "true", "false"):
        return _error(400, "open must be true or false")
    try:
        limit = int(q.get("limit", "100"))
        if not 1 <= limit <= 10_000:
            raise ValueError
    except ValueError:
        return _error(400, "limit must be a whole number from 1 to 10000")
    states = (
        {state}
        if state
        else {
            s.value
            for s in (
                OPEN_STATES
                if only_open == "true"
                else CLOSED_STATES
                if only_open == "false"
                else State
            )
        }
    )
    try:
        body = await run_in_threadpool(
            app.read.waits, states, limit, now_ms(), q.get("cursor") or None
        )
    except BadCursor as e:
        return _error(400, str(e))
    except StoreError:
        return _error(503, "store unavailable")
    return _json(body)


@_authorized("read")
async def get_wait(request: Request) -> Response:
    app: AppState = request.app.state.sidewatch
    request_id = request.path_params["request_id"]
    try:
        body = await run_in_threadpool(app.read.wait, request_id, now_ms())
    except StoreError:
        return _error(503, "store unavailable")
    except StoreRefused:  # a requestId the store cannot even hold (a NUL) names no wait
        body = None
    if body is None:
        hint = (
            ""
            if "/" in request_id
            else ": a requestId is threadId/interruptId, as GET /v1/waits lists them"
        )
        try:
            before = await run_in_threadpool(app.read.pruned_before)
        except StoreError:
            before = None
        if before is not None:  # it may have been, and was pruned (store.retention)
            days = app.config.store_retention_ms / 86_400_000
            hint += (
                f"; it may have been pruned: store.retention is {days:g}d, and waits closed "
                f"before {iso(before)} are pruned with their facts"
            )
        return _error(404, f"no wait with requestId {request_id!r}{hint}")
    return _json(body)


async def metrics(request: Request) -> Response:
    app: AppState = request.app.state.sidewatch
    if app.config.metrics_protected:
        return await _protected_metrics(request)
    return _metrics(app, request)


@_authorized("read")
async def _protected_metrics(request: Request) -> Response:
    return _metrics(request.app.state.sidewatch, request)


def _metrics(app: AppState, request: Request) -> Response:
    # The exposition format the scraper asks for (Prometheus negotiates it by Accept).
    # Compressed for a client that asks (Prometheus does), as prometheus_client's own server.
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    body, headers = encoder(app.registry), {"Content-Type": content_type, "Vary": "Accept-Encoding"}
    if gzip_accepted(request.headers.get("accept-encoding", "")):
        body, headers["Content-Encoding"] = gzip.compress(body, compresslevel=6), "gzip"
    return Response(body, headers=headers)


async def openapi(request: Request) -> Response:
    return _json(OPENAPI)


async def healthz(request: Request) -> Response:
    return _json({"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when the store answers at the newest schema and takes writes (whatever the
    audit lease says: a replica that cannot write is no standby either), nothing else keeps
    the replica back, and the auditor, where this replica audits, is making progress."""
    app: AppState = request.app.state.sidewatch
    problems = []
    probe = app.writes.probe_due(time.monotonic())
    try:  # bounded: a store that does not answer is not ready, now
        schema = await asyncio.wait_for(
            run_in_threadpool(_ping, app.store, app.writes, probe), READY_WAIT_S
        )
    except TimeoutError:
        problems.append(f"store did not answer within {READY_WAIT_S:g}s")
    except StoreError as e:  # its reason is the store's own, told safely (store.db.failure)
        problems.append(f"store unreachable: {cause(e.reason)} ({e.reason})")
    except Exception as e:  # any failure to reach the store makes the daemon not ready
        problems.append(f"store unreachable: {type(e).__name__}")
    else:
        if schema is not None:
            problems.append(schema)
        elif (refused := app.writes.problem()) is not None:
            problems.append(refused)
    problems.extend(app.problems())
    window = 3 * app.config.audit_interval_ms / 1000
    last = app.auditor.last_success or app.started
    auditing = app.lease_held()
    # A tick works under a time budget and ends each interval having committed its slice,
    # however long a re-audit is: one that has not ended for three intervals is stuck.
    if auditing and time.time() - last > window:  # a standby replica ingests and serves reads
        problems.append(
            f"auditor has made no progress in {window:.0f}s "
            f"(no tick completed its slice; {app.auditor.backlog} threads left by the last)"
        )
    if problems:
        return _json({"status": "not ready", "problems": problems, "auditLease": auditing}, 503)
    return _json({"status": "ready", "auditLease": auditing})


READY_WAIT_S = 2.0


def _ping(store: Store, writes: StoreWrites, probe: bool) -> str | None:
    """None when the store answers with its schema at the newest migration (and, with
    `probe`, takes a small write, told to `writes`); else what is wrong (a database
    recreated empty answers, but every write would fail)."""
    current, head = revision(store.engine)
    if current != head:
        return f"store schema at revision {current or '(none)'}, not {head}"
    if probe:
        try:
            probe_write(store.engine, now_ms())
        except (StoreError, StoreRefused) as e:
            writes.refused(time.monotonic(), e.reason)
        else:
            writes.committed(time.monotonic())
    return None


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such route, wrong method) as JSON too, like every answer."""
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail), exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """An unforeseen error as JSON too (logged with its traceback, told as its class only)."""
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return _error(500, f"internal error ({type(exc).__name__})")


def create_app(state: AppState, lifespan: Any = None) -> Starlette:
    routes = [
        Route("/v1/events", post_events, methods=["POST"]),
        Route("/v1/waits", get_waits, methods=["GET"]),
        Route("/v1/waits/{request_id:path}", get_wait, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        *UI_ROUTES,  # the wait pages and runbooks (daemon/ui.py)
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
        middleware=[
            Middleware(CountAnswers, counters=state.selfwatch, routes=routes),  # refusals too
            Middleware(BodyLimits, config=lambda: state.config, routes=routes),
            Middleware(SameOrigin, config=state.config),
        ],
    )
    app.state.sidewatch = state
    return app
