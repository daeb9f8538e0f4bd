"""`sidewatch_tap`: mirror an AG-UI endpoint's traffic to sidewatch, from inside the agent.

One line in a FastAPI (or any ASGI) AG-UI app:

    app.add_middleware(TapMiddleware, url="http://127.0.0.1:9477/v1/events")

or, around an async iterator of AG-UI events: `async for e in tap_events(events, tap, input)`.

The tap mirrors only AG-UI responses (`text/event-stream` or NDJSON, or the configured
`paths`), and of those only what sidewatch reads (`sidewatch_tap.reduce`): run and tool-call
events without content, interrupts, evidence, and each run's ids and answers. It adds
`threadId` and `runId` to every event and sends NDJSON batches from a bounded queue on a
background thread (`sidewatch_tap.sender`), retrying while sidewatch is away. It never raises
into, blocks or fails the agent's request. Standard library only, in its own distribution
(`sidewatch-tap`).

It also reports delivery (`delivery=True`, the default): once the bytes carrying an interrupt
were handed to the server (its `send` returned) with the client still there, a
`sidewatch.route` delivered on the AG-UI stream to `approver_ref` (default: whoever is in the
thread, for chat-style approval); when the client had left (`http.disconnect`) or the send
raised, a failed one. A deployment that routes approvals elsewhere passes `delivery=False` and
reports its own routes (`sidewatch_tap.evidence`).

It carries each run's W3C trace context (`sidewatch_tap.tracing`): the active OpenTelemetry
span's where the app is instrumented (the instrumentation installed around the tap), else the
request's `traceparent` header, so sidewatch writes the wait's span into the agent's trace.

And it reports liveness (`heartbeat=True`, the default; `sidewatch_tap.live`): one
`sidewatch.heartbeat` for the service instance every `heartbeat_seconds` while the process runs,
(from the app's startup, or the first wait it raised), and a binding of each wait it raised to
the instance, with whether the interrupted run survives
the process (`durable`: found from the LangGraph checkpointer or ADK session service the app
serves, or declared; a declaration wins). `service` names the service (default: the
`SIDEWATCH_SERVICE` environment variable, else "agent"): replicas share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from sidewatch_tap.evidence import Evidence, evidence_line
from sidewatch_tap.live import HEARTBEAT_SECONDS, Liveness, durable_of
from sidewatch_tap.reduce import skipped_by_head
from sidewatch_tap.sender import Tap
from sidewatch_tap.sse import Framer
from sidewatch_tap.tracing import TraceContext, active_span_context, request_context

__all__ = ["Evidence", "Liveness", "Tap", "TapMiddleware", "durable_of", "tap_events"]

log = logging.getLogger("sidewatch_tap")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

NDJSON_TYPES = frozenset({"application/x-ndjson", "application/jsonl", "application/ndjson"})
MAX_INPUT_BYTES = 4 << 20  # a RunAgentInput past this is passed on without being mirrored
MAX_EVENT_BYTES = 1 << 20  # the bytes held per response: an event past this is not mirrored
THREAD_APPROVER = "role:thread-participant"  # chat-style approval: whoever is in the thread
CHANNEL = "ag-ui"  # the route the tap sees: the AG-UI response stream itself
ADK_CONFIRMATION = "adk_request_confirmation"  # ag-ui-adk's wait: this tool call, by its id


class TapMiddleware:
    """ASGI middleware: mirrors the AG-UI endpoints of an app (POSTs answered with SSE or
    NDJSON, and POSTs to `paths`) to sidewatch."""

    def __init__(
        self,
        app: ASGIApp,
        url: str | None = None,
        token: str | None = None,
        path: str | None = None,
        paths: Iterable[str] = (),
        tap: Tap | None = None,
        max_input_bytes: int = MAX_INPUT_BYTES,
        max_event_bytes: int = MAX_EVENT_BYTES,
        delivery: bool = True,
        approver_ref: str = THREAD_APPROVER,
        heartbeat: bool = True,
        service: str | None = None,
        durable: bool | None = None,
        agent: Any = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        frontend_tools: Iterable[str] = (),
    ) -> None:
        if tap is None and url is None:
            raise ValueError("TapMiddleware needs the sidewatch url (or a Tap)")
        self.app = app
        self.paths = frozenset((*paths, *((path,) if path else ())))
        self.max_input_bytes = max_input_bytes
        self.max_event_bytes = max_event_bytes
        # `frontend_tools`: the daemon's `waits.frontendTools`, whose answers are sent too
        self.tap = tap or Tap(str(url), token, frontend_tools=tuple(frontend_tools))
        self.unmirrored = 0  # requests too large, or not JSON, whose input was not mirrored
        self.delivery = delivery
        self.approver_ref = approver_ref
        self.disconnects = 0  # POSTs whose client left before their response ended
        if durable is None and agent is not None:
            durable = durable_of(agent)
        self.liveness = (
            Liveness(self.tap, service, durable, heartbeat_seconds) if heartbeat else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.liveness is not None:
            self.liveness.discover(scope.get("app") or self.app)
        if scope.get("type") == "lifespan":
            await self.app(scope, self._on_shutdown(receive), send)
            return
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, held, complete = await self._read_body(receive)
        replayed = False
        client = _Client(receive, self._left)
        for message in held:  # the client left while sending its request
            client.seen(message)

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": not complete}
            if held:
                return held.pop()
            return await client.receive()

        mirror: _StreamMirror | None = None
        # The run's trace context: the active span now (the instrumentation's server span
        # around the tap), else the request's headers (sidewatch_tap.tracing).
        context = request_context(scope)

        async def tee(message: Message) -> None:
            nonlocal mirror
            shown: list[tuple[str, str, str | None]] = []  # interrupts first carried by it
            try:
                if message.get("type") == "http.response.start":
                    mirror = self._mirror(scope, message, body if complete else None, context)
                    if mirror is not None and self.delivery:
                        client.watch()
                elif mirror is not None and message.get("type") == "http.response.body":
                    shown = mirror.feed(message.get("body", b""))
            except Exception:  # the tap never fails the agent
                log.exception("sidewatch tap: could not mirror a response")
                mirror = None
            try:
                await send(message)
            except BaseException:
                self._delivered(shown, False)
                raise
            self._delivered(shown, not client.gone)
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                client.stop()  # the response is whole: a disconnect from now on is no loss

        try:
            await self.app(scope, replay, tee)
        finally:
            client.stop()
            if mirror is not None:
                self._delivered(mirror.close(), not client.gone)  # the last, unterminated event

    def _left(self) -> None:
        self.disconnects += 1

    async def _read_body(self, receive: Receive) -> tuple[bytes, list[Message], bool]:
        """The request body's first `max_input_bytes`, a message that ended it early (a
        disconnect), and whether the body is whole (the rest streams through)."""
        chunks: list[bytes] = []
        held: list[Message] = []  # a message that ended the body early (a disconnect)
        size, more, complete = 0, True, True
        while more:  # only the first `max_input_bytes` are held: the rest streams through
            message = await receive()
            if message["type"] != "http.request":
                held.append(message)
                complete = False
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if more and size > self.max_input_bytes:
                complete = False
                break
        return b"".join(chunks), held, complete

    def _delivered(self, interrupts: list[tuple[str, str, str | None]], delivered: bool) -> None:
        """Report the route of each interrupt (delivered on the stream, or not), and bind its
        wait to this instance."""
        if self.liveness is not None and interrupts:
            for thread, run in dict.fromkeys((t, r) for t, _, r in interrupts):
                self.liveness.bind(thread, run)
            self.liveness.start()
        if not self.delivery:
            return
        for thread, interrupt_id, _ in interrupts:
            value: dict[str, Any] = {
                "threadId": thread,
                "interruptId": interrupt_id,
                "delivered": delivered,
                "approverRef": self.approver_ref,
                "channel": CHANNEL,
            }
            if not delivered:
                value["error"] = "client_disconnected"
            self.tap.record_line(evidence_line("route", value))

    def _mirror(
        self, scope: Scope, start: Message, body: bytes | None, context: TraceContext
    ) -> _StreamMirror | None:
        """A mirror for an AG-UI response, None for any other. The run's trace `context` goes
        on its input, or, when the input was not mirrored, on its `RUN_STARTED`."""
        status = start.get("status", 200)
        kind = b""
        for name, value in start.get("headers") or ():
            if name.lower() == b"content-type":
                kind = value.split(b";")[0].strip().lower()
        sse = kind == b"text/event-stream"
        agui = sse or kind.decode("latin-1") in NDJSON_TYPES or scope.get("path") in self.paths
        if not agui or not 200 <= status < 300:
            return None
        ids: tuple[str | None, str | None] = (None, None)
        if body is None:
            self.unmirrored += 1
        else:
            ids = self._record_input(body, context)
        mirror = _StreamMirror(self.tap, ids, Framer(sse=sse, limit=self.max_event_bytes))
        mirror.context = {} if ids[0] is not None else context
        return mirror

    def _record_input(
        self, body: bytes, context: TraceContext | None = None
    ) -> tuple[str | None, str | None]:
        try:
            value = json.loads(body)
        except Exception:  # not JSON, or nested past the recursion limit: not an AG-UI input
            self.unmirrored += 1
            return None, None
        if not isinstance(value, dict):
            return None, None
        thread, run = value.get("threadId"), value.get("runId")
        if isinstance(thread, str) and isinstance(run, str) and "messages" in value:
            self.tap.record({**value, **context} if context else value, None, None)
            return thread, run
        return None, None

    def _on_shutdown(self, receive: Receive) -> Receive:
        """The app's lifespan `receive`, flushing the tap (off the loop) at shutdown."""

        async def wrapped() -> Message:
            message = await receive()
            if message.get("type") == "lifespan.startup" and self.liveness is not None:
                self.liveness.start()  # a restarted process keeps its service's durable waits
            if message.get("type") == "lifespan.shutdown":
                if self.liveness is not None:
                    self.liveness.stop()
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.tap.close)
            return message

        return wrapped


class _Client:
    """The server's `receive` after the replayed body, watched for the client leaving.

    While a mirrored response streams, one read of the server's `receive` is kept pending
    (unless the app has one pending itself), so a disconnect is seen even by an app that does
    not listen for it (Starlette on ASGI 2.4 servers). The app's next `receive` takes that
    read's message: there is only ever one reader, as ASGI requires."""

    def __init__(self, receive: Receive, left: Callable[[], None]) -> None:
        self._receive = receive
        self._left = left
        self._pending: asyncio.Future[Message] | None = None
        self._reading = False  # the app awaits the server's receive itself
        self._stopped = False  # the response ended: a later disconnect is no loss
        self.gone = False

    async def receive(self) -> Message:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            return await asyncio.shield(pending)  # the app's cancellation leaves it pending
        self._reading = True
        try:
            message = await self._receive()
        finally:
            self._reading = False
        self.seen(message)
        return message

    def watch(self) -> None:
        if self._pending is None and not self._reading and not self._stopped:
            self._pending = asyncio.ensure_future(self._receive())
            self._pending.add_done_callback(self._done)

    def stop(self) -> None:
        self._stopped = True
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None  # the app's next receive reads the server's itself

    def _done(self, future: asyncio.Future[Message]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.seen(future.result())

    def seen(self, message: Message) -> None:
        if message.get("type") == "http.disconnect" and not self._stopped and not self.gone:
            self.gone = True
            self._left()


class _StreamMirror:
    """Cuts a streamed response into events for the tap; never parses one it would not send.
    Returns the interrupts each chunk announces for the first time: (threadId, interruptId, runId)
    from a `RUN_FINISHED` outcome, a legacy `on_interrupt` that carries its id (one without is
    left alone: its id is only derived by ingest, from the run's end), or the end of an ADK
    confirmation call (its id is the wait's)."""

    def __init__(self, tap: Tap, ids: tuple[str | None, str | None], framer: Framer) -> None:
        self.tap = tap
        self.thread, self.run = ids
        self.framer = framer
        self.interrupts: set[tuple[str, str]] = set()
        self.confirmations: set[str] = set()  # ADK confirmation calls started, by id
        self.context: TraceContext = {}  # the run's trace context, for its RUN_STARTED

    def feed(self, chunk: bytes) -> list[tuple[str, str, str | None]]:
        return self._events(self.framer.feed(chunk))

    def close(self) -> list[tuple[str, str, str | None]]:
        try:
            return self._events(self.framer.close())
        except Exception:
            return []

    def _events(self, items: list[tuple[int, bytes]]) -> list[tuple[str, str, str | None]]:
        shown: list[tuple[str, str, str | None]] = []
        for _, data in items:
            if skipped_by_head(data):
                continue
            try:
                event = json.loads(data)
            except Exception:  # noqa: S112  (not JSON, or nested past the recursion limit)
                continue
            if isinstance(event, dict):
                if event.get("type") == "RUN_STARTED":
                    self.thread = event.get("threadId", self.thread)
                    self.run = event.get("runId", self.run)
                    if self.context and "traceparent" not in event:
                        event = {**event, **self.context}
                self.tap.record(event, self.thread, self.run)
                shown.extend(self._interrupts(event))
        return shown

    def _interrupts(self, event: dict[str, Any]) -> list[tuple[str, str, str | None]]:
        thread, kind = event.get("threadId", self.thread), event.get("type")
        call = event.get("toolCallId")
        ids: list[Any] = []
        if kind == "RUN_FINISHED" and isinstance(event.get("outcome"), dict):
            listed = event["outcome"].get("interrupts")
            if isinstance(listed, list):
                ids = [i.get("id") for i in listed if isinstance(i, dict)]
        elif kind == "CUSTOM" and event.get("name") == "on_interrupt":
            raw = event.get("rawEvent")
            ids = [raw.get("id")] if isinstance(raw, dict) else []
        elif not isinstance(call, str):
            pass
        elif kind == "TOOL_CALL_START" and event.get("toolCallName") == ADK_CONFIRMATION:
            self.confirmations.add(call)
        elif kind == "TOOL_CALL_END" and call in self.confirmations:
            ids = [call]
        shown: list[tuple[str, str, str | None]] = []
        run = event.get("runId", self.run)
        run = run if isinstance(run, str) else None
        if not isinstance(thread, str):
            return shown
        for interrupt_id in ids:
            key = (thread, interrupt_id)
            if isinstance(interrupt_id, str) and interrupt_id and key not in self.interrupts:
                self.interrupts.add((thread, interrupt_id))
                shown.append((thread, interrupt_id, run))
        return shown


async def tap_events(
    events: AsyncIterator[Any], tap: Tap, run_input: Any = None
) -> AsyncIterator[Any]:
    """Yield `events` unchanged, mirroring each (pydantic models or dicts) to the tap. The
    input goes with the trace context of the OpenTelemetry span active at the call, if any."""
    thread = run = None
    if run_input is not None:
        with contextlib.suppress(Exception):
            data = _plain(run_input)
            thread, run = data.get("threadId"), data.get("runId")
            tap.record({**data, **active_span_context()}, None, None)
    async for event in events:
        with contextlib.suppress(Exception):
            tap.record(_plain(event), thread, run)
        yield event


def _plain(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        result = dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(result, dict):
            return result
    return {}
