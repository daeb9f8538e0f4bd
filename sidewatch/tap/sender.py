"""The tap's queue and sender thread: bounded in lines and bytes, retried with backoff.

`record` never blocks and never raises: a full queue drops the new line and counts it. The
sender posts gzip NDJSON batches; a connection error or a `429`/`502`/`503`/`504` keeps the
batch and retries it with exponential backoff and full jitter, so a daemon restart loses
nothing the queue could hold. Other refusals drop the batch (counted). `close` (also run at
interpreter exit) sends what is queued within its timeout. The daemon's URL is reached without
the environment's proxies unless `use_proxy=True`: a proxy would see the bearer token.
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

from sidewatch.tap.reduce import reduce_event, reduce_input

log = logging.getLogger("sidewatch.tap")

RETRIED = frozenset({408, 429, 502, 503, 504})


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
        self._lines: deque[bytes] = deque()
        self._bytes = 0
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
            return len(self._lines), self._bytes

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
        self.record_line(line)

    def record_line(self, line: bytes) -> None:
        """Queue one NDJSON line; drop it (counted) when the queue is full in lines or bytes."""
        with self._cond:
            if (
                self._closing
                or len(self._lines) >= self.queue_lines
                or self._bytes + len(line) > self.queue_bytes
            ):
                self.dropped += 1
                return
            self._lines.append(line)
            self._bytes += len(line)
            if len(self._lines) >= self.batch_lines:
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
            while not self._closing and len(self._lines) < self.batch_lines:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if not self._lines:
                return None if self._closing else []
            batch: list[bytes] = []
            size = 0
            while self._lines and len(batch) < self.batch_lines:
                if batch and size + len(self._lines[0]) > self.batch_bytes:
                    break
                line = self._lines.popleft()
                batch.append(line)
                size += len(line)
            self._bytes -= size
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
                    self.sent += len(batch)
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
                    self.dropped += len(batch)
                    log.warning("sidewatch tap: %d lines dropped: %s", len(batch), why)
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
