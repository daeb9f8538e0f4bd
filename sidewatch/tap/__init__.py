"""`sidewatch.tap`: mirror an AG-UI endpoint's traffic to sidewatch, from inside the agent.

One line in a FastAPI (or any ASGI) AG-UI app:

    app.add_middleware(TapMiddleware, url="http://127.0.0.1:9477/v1/events")

or, around an async iterator of AG-UI events: `async for e in tap_events(events, tap, input)`.

The tap copies each run's `RunAgentInput` and the events the endpoint streams, adds `threadId`
and `runId` to every event, and sends them in NDJSON batches from a bounded queue on a
background thread. It never slows or fails the agent: when the queue is full or sidewatch is
away, lines are dropped and counted (`Tap.dropped`). Model output (text and reasoning deltas),
which sidewatch does not need, is not sent. Standard library only.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import queue
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger("sidewatch.tap")

SKIPPED_PREFIXES = ("TEXT_MESSAGE_", "REASONING_", "THINKING_")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Tap:
    """The queue and the sender thread. Thread-safe; `record` never blocks."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        batch_lines: int = 500,
        flush_seconds: float = 1.0,
        queue_lines: int = 10_000,
        timeout_seconds: float = 5.0,
    ) -> None:
        self.url = url
        self.token = token
        self.batch_lines = batch_lines
        self.flush_seconds = flush_seconds
        self.timeout_seconds = timeout_seconds
        self.sent = 0  # lines sidewatch acknowledged
        self.dropped = 0  # lines lost: queue full, or sidewatch unreachable
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=queue_lines)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sidewatch-tap", daemon=True)
        self._thread.start()

    def record(self, event: dict[str, Any], thread_id: str | None, run_id: str | None) -> None:
        """Queue one event (or a RunAgentInput) with its run's ids; drop it if full."""
        kind = event.get("type")
        if isinstance(kind, str) and kind.startswith(SKIPPED_PREFIXES):
            return
        if thread_id is not None and run_id is not None and "type" in event:
            event = {
                **event,
                "threadId": event.get("threadId", thread_id),
                "runId": event.get("runId", run_id),
            }
        try:
            line = json.dumps(event, separators=(",", ":"), default=str).encode()
            self._queue.put_nowait(line)
        except queue.Full:
            self._count_dropped(1)
        except (TypeError, ValueError):
            self._count_dropped(1)  # not JSON-able: never the agent's problem

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (within `timeout`) and stop the sender."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def _count_dropped(self, n: int) -> None:
        with self._lock:
            self.dropped += n

    def _run(self) -> None:
        batch: list[bytes] = []
        deadline = time.monotonic() + self.flush_seconds
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                item = b""
            if item is None:
                self._send(batch)
                return
            if item:
                batch.append(item)
            if len(batch) >= self.batch_lines or (batch and time.monotonic() >= deadline):
                self._send(batch)
                batch = []
            if time.monotonic() >= deadline:
                deadline = time.monotonic() + self.flush_seconds

    def _send(self, batch: list[bytes]) -> None:
        if not batch:
            return
        body = gzip.compress(b"\n".join(batch) + b"\n")
        headers = {"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as answer:  # noqa: S310
                answer.read()
            with self._lock:
                self.sent += len(batch)
        except Exception as e:  # sidewatch away or refusing: the agent goes on regardless
            log.warning("sidewatch tap: %d lines dropped: %s", len(batch), e)
            self._count_dropped(len(batch))


class TapMiddleware:
    """ASGI middleware: mirrors every POST to `path` (an AG-UI endpoint: RunAgentInput in,
    events out as SSE or NDJSON) to sidewatch."""

    def __init__(
        self,
        app: ASGIApp,
        url: str | None = None,
        token: str | None = None,
        path: str | None = None,
        tap: Tap | None = None,
    ) -> None:
        if tap is None and url is None:
            raise ValueError("TapMiddleware needs the sidewatch url (or a Tap)")
        self.app = app
        self.path = path
        self.tap = tap or Tap(str(url), token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or (self.path is not None and scope.get("path") != self.path)
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        ids = self._record_input(body)
        mirror = _StreamMirror(self.tap, ids)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def tee(message: Message) -> None:
            if message.get("type") == "http.response.body":
                mirror.feed(message.get("body", b""))
            await send(message)

        await self.app(scope, replay, tee)
        mirror.feed(b"\n\n")  # a last frame without its blank line

    def _record_input(self, body: bytes) -> tuple[str | None, str | None]:
        try:
            value = json.loads(body)
        except ValueError:
            return None, None
        if not isinstance(value, dict):
            return None, None
        thread, run = value.get("threadId"), value.get("runId")
        if isinstance(thread, str) and isinstance(run, str) and "messages" in value:
            self.tap.record(value, None, None)
            return thread, run
        return None, None


class _StreamMirror:
    """Cuts a streamed response (SSE `data:` frames or NDJSON) into events for the tap."""

    def __init__(self, tap: Tap, ids: tuple[str | None, str | None]) -> None:
        self.tap = tap
        self.thread, self.run = ids
        self.buffer = b""

    def feed(self, chunk: bytes) -> None:
        try:
            self.buffer += chunk
            while True:
                cut = self.buffer.find(b"\n\n")
                if cut < 0:
                    break
                frame, self.buffer = self.buffer[:cut], self.buffer[cut + 2 :]
                self._frame(frame)
        except Exception:  # the tap never fails the agent
            log.exception("sidewatch tap: could not read a frame")

    def _frame(self, frame: bytes) -> None:
        data = [line[5:].strip() for line in frame.split(b"\n") if line.startswith(b"data:")]
        lines = [b"\n".join(data)] if data else frame.split(b"\n")
        for raw in lines:
            text = raw.strip()
            if not text:
                continue
            try:
                event = json.loads(text)
            except ValueError:
                continue
            if isinstance(event, dict):
                if event.get("type") == "RUN_STARTED":
                    self.thread = event.get("threadId", self.thread)
                    self.run = event.get("runId", self.run)
                self.tap.record(event, self.thread, self.run)


async def tap_events(
    events: AsyncIterator[Any], tap: Tap, run_input: Any = None
) -> AsyncIterator[Any]:
    """Yield `events` unchanged, mirroring each (pydantic models or dicts) to the tap."""
    thread = run = None
    if run_input is not None:
        data = _plain(run_input)
        thread, run = data.get("threadId"), data.get("runId")
        tap.record(data, None, None)
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
