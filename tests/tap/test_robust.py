"""The tap's robustness, piece by piece: framing, bounds, errors that never reach the agent,
proxies, tokens and the flush at shutdown."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import json
import logging
import threading
import tracemalloc
import urllib.request
from collections.abc import Iterator

import pytest

from sidewatch_tap import Tap, TapMiddleware
from sidewatch_tap.sse import Framer

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


class _Sink:
    """A local HTTP server that keeps every line the tap posts (and answers `status`)."""

    def __init__(self, status: int = 200) -> None:
        self.lines: list[bytes] = []
        self.bodies: list[list[bytes]] = []  # the lines of each batch taken
        self.status = status
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if sink.status == 200:
                    sink.bodies.append(gzip.decompress(body).splitlines())
                    sink.lines += sink.bodies[-1]
                self.send_response(sink.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink() -> Iterator[_Sink]:
    s = _Sink()
    yield s
    s.close()


def _call(app: TapMiddleware, body: bytes, path: str = "/agent") -> list[dict]:
    """One POST through the middleware; the messages the client got."""
    got: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        got.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    return got


def _sse_app(chunks: list[bytes], kind: bytes = b"text/event-stream"):  # type: ignore[no-untyped-def]
    seen: list[bytes] = []

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        message = await receive()
        seen.append(message["body"])
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]}
        )
        for c in chunks:
            await send({"type": "http.response.body", "body": c, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    app.seen = seen  # type: ignore[attr-defined]
    return app


def test_crlf_and_lone_cr_frames_are_events_even_cut_between_chunks() -> None:
    framer = Framer()
    stream = b'data: {"a":1}\r\n\r\ndata: {"b":\r\ndata: 2}\r\r: comment\n\ndata: {"c":3}\r\n\r\n'
    got = []
    for i in range(len(stream)):  # one byte at a time: every line end is cut somewhere
        got += framer.feed(stream[i : i + 1])
    got += framer.close()

    assert [b'{"a":1}', b'{"b":\n2}', b'{"c":3}'] == [data for _, data in got]
    assert 0 == framer.held


def test_crlf_sse_from_the_app_reaches_the_tap(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=0.05)
    frames = [b"data: " + json.dumps({**RUN, "runId": r}).encode() + b"\r\n\r\n" for r in "ab"]
    app = TapMiddleware(_sse_app(frames), tap=tap)

    _call(app, b"{}")
    tap.close()

    assert [{**RUN, "runId": "a"}, {**RUN, "runId": "b"}] == sink.events()


def test_a_frameless_20_mib_response_is_held_within_the_bound_in_linear_work() -> None:
    framer = Framer(limit=1 << 20)
    chunk = b"x" * (64 << 10)
    tracemalloc.start()
    for _ in range(320):  # 20 MiB, no line end
        framer.feed(chunk)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    after = framer.feed(b"\n\n" + b'data: {"ok":1}\n\n')

    assert framer.held <= 1 << 20
    assert peak < 3 << 20  # the old `buffer += chunk` held (and re-copied) all 20 MiB
    assert framer.copied <= 2 << 20  # bytes joined: at most one copy of what the bound holds
    assert ([b'{"ok":1}'], 1) == ([d for _, d in after], framer.oversized)


def test_a_frameless_20_mib_response_through_the_middleware_is_not_held(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=0.05)
    chunk = b"data: " + b"x" * (64 << 10)
    app = TapMiddleware(_sse_app([chunk] * 320), tap=tap)  # one object: no allocation
    tracemalloc.start()
    got = _call(app, b"{}")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tap.close()

    assert 322 == len(got)  # the client got every chunk
    assert peak < 4 << 20  # the old tap held all 20 MiB (and re-copied it per chunk)


def test_an_oversized_ndjson_line_is_dropped_and_the_next_line_read() -> None:
    framer = Framer(sse=False, limit=100)
    got = framer.feed(b"y" * 150) + framer.feed(b"y" * 150 + b'\n{"n":1}\n') + framer.close()

    assert ([b'{"n":1}'], 1) == ([d for _, d in got], framer.oversized)


def test_a_deeply_nested_body_never_raises_and_the_app_still_answers(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=0.05)
    inner = _sse_app([b"data: " + b"[" * 100_000 + b"\n\n"])
    app = TapMiddleware(inner, tap=tap)

    got = _call(app, b"[" * 100_000)
    tap.close()

    assert [b"[" * 100_000] == inner.seen  # the app got the body unchanged
    assert 200 == got[0]["status"]


def test_a_large_request_body_is_passed_on_whole_and_not_held(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=0.05)
    parts = [b"x" * 800, b"y" * 800, b"z" * 800]
    received: list[bytes] = []

    async def agent(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        more = True
        while more:
            m = await receive()
            received.append(m["body"])
            more = m["more_body"]
        start = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    app = TapMiddleware(agent, tap=tap, max_input_bytes=1000)
    pending = list(parts)

    async def receive() -> dict:
        return {"type": "http.request", "body": pending.pop(0), "more_body": bool(pending)}

    async def send(message: dict) -> None:
        pass

    scope = {"type": "http", "method": "POST", "path": "/a", "headers": []}
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    tap.close()

    assert b"".join(parts) == b"".join(received)
    assert (1, []) == (app.unmirrored, sink.lines)


def test_the_queue_is_bounded_in_bytes_as_well_as_lines() -> None:
    tap = Tap("http://127.0.0.1:9/v1/events", queue_bytes=4 << 20, flush_seconds=60)
    big = {**RUN, "runId": "r" * (1 << 20)}  # 1 MB ids are sent (ids are what is read)
    for _ in range(300):
        tap.record(big, None, None)

    (lines, size), dropped = tap.queued, tap.dropped
    tap.close(timeout=0)

    assert size <= 4 << 20
    assert lines <= 4
    assert 296 <= dropped  # the rest are queued, or in the batch the sender is retrying


def test_held_tool_calls_count_against_the_queue_s_bound_in_bytes() -> None:
    """256 calls cut off mid-arguments (never ended), each held whole: they held 64 MiB past
    a 2 MiB queue. What is held and queued stays within the bound; the rest is dropped,
    counted, a call whole or not at all."""
    tap = Tap("http://127.0.0.1:9/v1/events", queue_bytes=2 << 20, flush_seconds=60)
    args = "x" * (256 << 10)  # under a batch's size: the call stays held
    tracemalloc.start()
    try:
        for n in range(256):
            part = {"threadId": f"t{n}", "runId": "r", "toolCallId": f"c{n}"}
            tap.record({"type": "TOOL_CALL_START", "toolCallName": "f", **part}, None, None)
            tap.record({"type": "TOOL_CALL_ARGS", "delta": args, **part}, None, None)
            tap.record({"type": "TOOL_CALL_ARGS", "delta": "}", **part}, None, None)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    dropped = tap.dropped
    tap.close(timeout=0)

    assert held < 3 << 20, f"{held / (1 << 20):.0f} MiB held"
    assert 0 == dropped % 3  # a call's lines went together: none of a dropped call was kept
    assert 3 * 256 - 3 * 8 <= dropped < 3 * 256  # at most 2 MiB's worth (8 calls) kept


def test_a_503_and_a_refused_connection_are_retried_until_sidewatch_takes_the_lines() -> None:
    sink = _Sink(status=503)
    tap = Tap(sink.url, flush_seconds=0.05, retry_base_seconds=0.05, retry_max_seconds=0.2)
    try:
        tap.record(RUN, None, None)
        while tap.retries < 3:
            threading.Event().wait(0.05)
        sink.status = 200
        assert tap.flush(timeout=10)
    finally:
        tap.close()
        sink.close()

    assert ([RUN], 1, 0) == (sink.events(), tap.sent, tap.dropped)


def _part(kind: str, **fields: str) -> dict:
    return {"type": kind, "threadId": "t", "runId": "r", "toolCallId": "c1", **fields}


CALL = [
    _part("TOOL_CALL_START", toolCallName="adk_request_confirmation"),
    _part("TOOL_CALL_ARGS", delta='{"originalFunctionCall": '),
    _part("TOOL_CALL_ARGS", delta='{"id": "f1", "name": "delete_file", "args": {}}}'),
    _part("TOOL_CALL_END"),
]
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


def test_a_tool_call_is_never_cut_across_two_batches(sink: _Sink) -> None:
    # Batches of one line, taken as soon as there is one: the call's four lines still go in
    # one (ingest reads a call within one unit; an ADK confirmation cut in two is no wait).
    tap = Tap(sink.url, flush_seconds=0.01, batch_lines=1)
    tap.record(RUN, None, None)
    assert tap.flush()
    held = []
    for part in CALL:
        tap.record(part, None, None)
        held.append(tap.queued[0])
    tap.record(FINISHED, None, None)
    tap.close()

    assert [0, 0, 0] == held[:3]  # the call's first three lines were held, not queued
    assert [json.loads(line)["type"] for line in sink.lines] == [
        "RUN_STARTED",
        *(p["type"] for p in CALL),
        "RUN_FINISHED",
    ]
    assert [p["type"] for p in CALL] == [
        json.loads(line)["type"] for body in sink.bodies for line in body if b"c1" in line
    ]
    assert 1 == sum(any(b"c1" in line for line in body) for body in sink.bodies)
    assert (6, 0) == (tap.sent, tap.dropped)


def test_a_call_that_never_ended_goes_before_its_run_s_end_or_at_close(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=3600, batch_lines=1000)
    tap.record(CALL[0], None, None)
    tap.record(CALL[1], None, None)
    tap.record(FINISHED, None, None)  # the stream was cut before the call's end
    tap.record({**CALL[0], "threadId": "other"}, None, None)  # still open at close

    tap.close()

    assert [
        ("t", "TOOL_CALL_START"),
        ("t", "TOOL_CALL_ARGS"),
        ("t", "RUN_FINISHED"),
        ("other", "TOOL_CALL_START"),
    ] == [(e["threadId"], e["type"]) for e in sink.events()]
    assert (4, 0) == (tap.sent, tap.dropped)


def test_close_flushes_what_is_queued(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=3600, batch_lines=1000)
    for n in range(10):
        tap.record({**RUN, "runId": f"r{n}"}, None, None)

    tap.close()

    assert 10 == len(sink.lines)


def test_lifespan_shutdown_flushes_the_tap(sink: _Sink) -> None:
    tap = Tap(sink.url, flush_seconds=3600, batch_lines=1000)
    tap.record(RUN, None, None)

    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        await receive()

    async def receive() -> dict:
        return {"type": "lifespan.shutdown"}

    async def send(message: dict) -> None:
        pass

    asyncio.run(TapMiddleware(app, tap=tap)({"type": "lifespan"}, receive, send))  # type: ignore[arg-type]

    assert 1 == len(sink.lines)


def test_the_environment_proxy_is_not_used_for_the_daemon(
    sink: _Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(urllib.request, "_opener", None)  # urlopen's cached opener read no env
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens: a proxy fails
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("NO_PROXY", "")
    tap = Tap(sink.url, token="secret", flush_seconds=0.05)
    tap.record(RUN, None, None)
    tap.close()

    assert (1, 0) == (len(sink.lines), tap.dropped)


@pytest.mark.parametrize(
    ("url", "warned"),
    [
        ("http://sidewatch.internal:9477/v1/events", True),
        ("http://10.0.0.5:9477/v1/events", True),
        ("http://127.0.0.1:9477/v1/events", False),
        ("http://localhost:9477/v1/events", False),
        ("http://[::1]:9477/v1/events", False),
        ("https://sidewatch.internal/v1/events", False),
    ],
)
def test_a_token_over_plain_http_off_the_host_is_warned(
    url: str, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "sidewatch_tap"):
        Tap(url, token="t", flush_seconds=60).close(timeout=0)

    assert warned == any("in clear" in r.getMessage() for r in caplog.records)
