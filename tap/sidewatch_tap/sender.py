"""The tap's queue and sender thread: bounded in lines and bytes, retried with backoff.

`record` never blocks and never raises: a full queue drops the new line and counts it. A tool
call's lines (`TOOL_CALL_START` to `TOOL_CALL_END`) are queued together when it ends, and never
cut across two batches: ingest reads a call within one unit, and an ADK confirmation cut in two
was no wait at all. The lines held meanwhile count against the queue's bounds. The sender
posts gzip NDJSON batches; a connection error or a `429`/`502`/`503`/`504` keeps the batch
and retries it with exponential backoff and full jitter, so a daemon restart loses nothing
the queue could hold. Other refusals drop the batch (counted). `close` (also run at
interpreter exit) sends what is queued within its timeout. The daemon's URL is reached
without the environment's proxies unless `use_proxy=True`: a proxy would see the bearer
token.
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import ipaddress
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Sequence
from typing import Any

from sidewatch_tap.reduce import reduce_event, reduce_input

log = logging.getLogger("sidewatch_tap")

RETRIED = frozenset({408, 429, 502, 503, 504})
_CALL_PARTS = frozenset({"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"})
_RUN_ENDS = frozenset({"RUN_FINISHED", "RUN_ERROR"})
MAX_HELD = 256  # tool calls held open at once; past it the oldest is queued as it stands


def _loopback(host: str | None) -> bool:
    if host is None or host == "localhost":
        return host is not None
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Tap:
    """The queue and the sender thread. Thread-safe; `record_line` never blocks."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        batch_lines: int = 500,
        flush_seconds: float = 1.0,
        queue_lines: int = 10_000,
        queue_bytes: int = 16 << 20,
        batch_bytes: int = 1 << 20,
        timeout_seconds: float = 5.0,
        retry_base_seconds: float = 0.5,
        retry_max_seconds: float = 30.0,
        use_proxy: bool = False,
        frontend_tools: Sequence[str] = (),
    ) -> None:
        self.url = url
        # the daemon's `waits.frontendTools`: the tool messages answering those calls are sent
        self.frontend_tools = tuple(frontend_tools)
        self.token = token
        self.batch_lines = batch_lines
        self.batch_bytes = batch_bytes
        self.flush_seconds = flush_seconds
        self.queue_lines = queue_lines
        self.queue_bytes = queue_bytes
        self.timeout_seconds = timeout_seconds
        self.retry_base_seconds = retry_base_seconds
        self.retry_max_seconds = retry_max_seconds
        self.sent = 0  # lines sidewatch acknowledged
        self.dropped = 0  # lines lost: queue full, refused, or unsent at close
        self.retries = 0  # failed attempts that were retried
        handlers = [] if use_proxy else [urllib.request.ProxyHandler({})]
        self._opener = urllib.request.build_opener(*handlers)
        parts = urllib.parse.urlsplit(url)
        if token and parts.scheme == "http" and not _loopback(parts.hostname):
            log.warning(
                "sidewatch tap: the token is sent in clear over http:// to %s; use https://",
                parts.hostname,
            )
        # Queued entries: a line, or a tool call's lines joined by newlines (never split).
        self._lines: deque[bytes] = deque()
        self._count = 0  # lines queued
        self._bytes = 0
        # The lines of tool calls started and not ended yet, by (threadId, toolCallId).
        self._held: dict[tuple[Any, str], list[bytes]] = {}
        self._held_bytes: dict[tuple[Any, str], int] = {}
        self._held_lines = self._held_size = 0  # all held calls': within the queue's bounds
        self._cut: dict[tuple[Any, str], None] = {}  # calls dropped, not ended yet (the newest)
        self._cond = threading.Condition()
        self._closing = False
        self._deadline: float | None = None  # when closing: give up retrying at this time
        self._idle = True
        self._thread = threading.Thread(target=self._run, name="sidewatch-tap", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def queued(self) -> tuple[int, int]:
        """(lines, bytes) waiting to be sent."""
        with self._cond:
            return self._count, self._bytes

    def record(self, event: dict[str, Any], thread_id: str | None, run_id: str | None) -> None:
        """Queue what sidewatch reads of one event (or RunAgentInput), with its run's ids."""
        try:
            if "type" in event:
                reduced = reduce_event(event, self.frontend_tools)
                if reduced is not None and thread_id is not None and run_id is not None:
                    reduced.setdefault("threadId", thread_id)
                    reduced.setdefault("runId", run_id)
            else:
                reduced = reduce_input(event, self.frontend_tools)
            if reduced is None:
                return
            line = json.dumps(reduced, separators=(",", ":"), default=str).encode()
        except Exception:  # not JSON-able, or nested past recursion: never the agent's problem
            with self._cond:
                self.dropped += 1
            return
        with self._cond:
            self._route(reduced, line)

    def record_line(self, line: bytes) -> None:
        """Queue one NDJSON line; drop it (counted) when the queue is full in lines or bytes."""
        with self._cond:
            self._enqueue([line])

    def _route(self, reduced: dict[str, Any], line: bytes) -> None:
        """Queue `line`, or hold it with its tool call's until the call ends (or its run does,
        or the tap closes). Called holding the lock."""
        kind, call, thread = reduced.get("type"), reduced.get("toolCallId"), reduced.get("threadId")
        if kind in _CALL_PARTS and isinstance(call, str):
            key = (thread, call)
            if kind == "TOOL_CALL_START":
                self._release(key)  # the same id started again before it ended
                self._cut.pop(key, None)
                if len(self._held) >= MAX_HELD:
                    self._release(next(iter(self._held)))
                if not self._fits(1, len(line)):
                    self._drop_call(key, 1)
                    return
                self._hold(key, line)
                return
            if key in self._cut:  # the rest of a call dropped: none of it goes
                self.dropped += 1
                if kind == "TOOL_CALL_END":
                    del self._cut[key]
                return
            held = self._held.get(key)
            if held is not None:
                if not self._fits(1, len(line) + 1):  # the call goes whole or not at all
                    self._drop_call(key, len(self._unhold(key)) + 1)
                    return
                self._hold(key, line)
                if kind == "TOOL_CALL_END" or self._held_bytes[key] > self.batch_bytes:
                    self._release(key)  # (a call larger than a batch goes as it stands)
                return
        elif kind in _RUN_ENDS:  # a call its run never ended goes before the run's end
            for key in [k for k in self._held if k[0] == thread]:
                self._release(key)
        self._enqueue([line])

    def _drop_call(self, key: tuple[Any, str], lines: int) -> None:
        """A call with no room in the queue is dropped (counted), and so are its later lines."""
        self.dropped += lines
        self._cut[key] = None
        if len(self._cut) > MAX_HELD:
            del self._cut[next(iter(self._cut))]

    def _hold(self, key: tuple[Any, str], line: bytes) -> None:
        held = self._held.setdefault(key, [])
        size = len(line) + 1 if held else len(line)  # queued joined by newlines
        held.append(line)
        self._held_bytes[key] = self._held_bytes.get(key, 0) + size
        self._held_lines += 1
        self._held_size += size

    def _unhold(self, key: tuple[Any, str]) -> list[bytes]:
        """The lines held of a call, no longer held (none when it is not)."""
        lines = self._held.pop(key, None) or []
        self._held_lines -= len(lines)
        self._held_size -= self._held_bytes.pop(key, 0)
        return lines

    def _release(self, key: tuple[Any, str]) -> None:
        lines = self._unhold(key)
        if lines:
            self._enqueue(lines)

    def _fits(self, lines: int, size: int) -> bool:
        """Whether `lines` more lines of `size` bytes fit the queue's bounds beside what is
        queued and what is held (a held call takes its room when held, not when queued)."""
        return (
            not self._closing
            and self._count + self._held_lines + lines <= self.queue_lines
            and self._bytes + self._held_size + size <= self.queue_bytes
        )

    def _enqueue(self, lines: list[bytes]) -> None:
        """Queue `lines` as one entry, or drop them (counted) when the queue is full."""
        entry = b"\n".join(lines)
        if not self._fits(len(lines), len(entry)):
            self.dropped += len(lines)
            return
        self._lines.append(entry)
        self._count += len(lines)
        self._bytes += len(entry)
        if self._count >= self.batch_lines:
            self._cond.notify()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait (up to `timeout`) until everything queued was sent or dropped."""
        end = time.monotonic() + timeout
        with self._cond:
            self._cond.notify()
            while self._lines or not self._idle:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (within `timeout`) and stop the sender; later lines are dropped."""
        with self._cond:
            if self._closing:
                return
            for key in list(self._held):  # calls not ended yet go as they stand
                self._release(key)
            self._closing = True
            self._deadline = time.monotonic() + timeout
            self._cond.notify()
        self._thread.join(timeout + 1)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    # -- the sender thread ----------------------------------------------------------------

    def _take(self) -> list[bytes] | None:
        """The next batch, waiting up to `flush_seconds` for it to fill; None: stop."""
        with self._cond:
            self._idle = True
            self._cond.notify_all()
            end = time.monotonic() + self.flush_seconds
            while not self._closing and self._count < self.batch_lines:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if not self._lines:
                return None if self._closing else []
            batch: list[bytes] = []
            size = lines = 0
            while self._lines and lines < self.batch_lines:
                if batch and size + len(self._lines[0]) > self.batch_bytes:
                    break
                entry = self._lines.popleft()
                batch.append(entry)
                size += len(entry)
                lines += _lines_in(entry)
            self._bytes -= size
            self._count -= lines
            self._idle = False
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if batch:
                self._deliver(batch)

    def _deliver(self, batch: list[bytes]) -> None:
        attempt = 0
        while True:
            outcome = self._post(batch)
            if outcome is None:
                with self._cond:
                    self.sent += sum(map(_lines_in, batch))
                return
            retry, why = outcome
            delay = random.uniform(  # noqa: S311  (jitter, not a secret)
                0, min(self.retry_max_seconds, self.retry_base_seconds * 2**attempt)
            )
            with self._cond:
                out_of_time = self._deadline is not None and (
                    time.monotonic() + delay > self._deadline
                )
                if not retry or out_of_time:
                    lost = sum(map(_lines_in, batch))
                    self.dropped += lost
                    log.warning("sidewatch tap: %d lines dropped: %s", lost, why)
                    return
                self.retries += 1
                self._cond.wait(delay)  # a close() wakes this, to retry within its deadline
            attempt += 1

    def _post(self, batch: list[bytes]) -> tuple[bool, str] | None:
        """None when sidewatch took the batch; else (retry?, why)."""
        body = gzip.compress(b"\n".join(batch) + b"\n", compresslevel=5)
        headers = {"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")  # noqa: S310
        try:
            with self._opener.open(request, timeout=self.timeout_seconds) as answer:
                answer.read()
        except urllib.error.HTTPError as e:
            return e.code in RETRIED, f"HTTP {e.code}"
        except Exception as e:  # unreachable, reset, timed out: retried
            return True, str(e) or type(e).__name__
        return None


def _lines_in(entry: bytes) -> int:
    """The lines of a queued entry (a line holds no raw newline: JSON escapes them)."""
    return entry.count(b"\n") + 1
