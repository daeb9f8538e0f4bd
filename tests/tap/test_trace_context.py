"""The tap carries each run's W3C trace context (issue 32): from the active OpenTelemetry span
where the app is instrumented around the tap, else from the request's headers; on the input,
or on `RUN_STARTED` when the input was not mirrored; and works without opentelemetry-api."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from starlette.applications import Starlette

from sidewatch_tap import Tap, TapMiddleware
from sidewatch_tap.reduce import reduce_event
from tests.tap.test_robust import _Sink
from tests.tap.test_tap import _Serve, _sse_app, agent_input

ROOT = Path(__file__).resolve().parents[2]
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
EVENTS = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]


@pytest.fixture
def sink() -> Iterator[_Sink]:
    s = _Sink()
    yield s
    s.close()


def _post(app: Starlette, headers: dict[str, str], sink: _Sink, tap: Tap, **input: object) -> None:
    with _Serve(app) as url:
        answer = httpx.post(f"{url}/agent", json=agent_input("t1", "r1", **input), headers=headers)
        tap.close()
    assert 200 == answer.status_code


def test_the_request_headers_are_the_context_without_an_instrumentation(sink: _Sink) -> None:
    app = _sse_app(EVENTS)
    tap = Tap(sink.url, flush_seconds=0.1)
    app.add_middleware(TapMiddleware, tap=tap, heartbeat=False, delivery=False)

    # two tracestate headers are one list (W3C), a client's header as its agent received it
    headers = {"traceparent": PARENT}
    with _Serve(app) as url:
        answer = httpx.post(
            f"{url}/agent",
            json=agent_input("t1", "r1"),
            headers=[*headers.items(), ("tracestate", "a=1"), ("tracestate", "b=2")],
        )
        tap.close()

    inputs = [e for e in sink.events() if "type" not in e]
    started = [e for e in sink.events() if e.get("type") == "RUN_STARTED"]
    assert 200 == answer.status_code
    assert [(PARENT, "a=1,b=2")] == [(e["traceparent"], e["tracestate"]) for e in inputs]
    assert [None] == [e.get("traceparent") for e in started]  # on the input, once


def test_the_active_server_span_is_the_context_where_the_app_is_instrumented(
    sink: _Sink,
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    app = _sse_app(EVENTS)
    tap = Tap(sink.url, flush_seconds=0.1)
    app.add_middleware(TapMiddleware, tap=tap, heartbeat=False, delivery=False)
    app.add_middleware(OpenTelemetryMiddleware, tracer_provider=provider)

    _post(app, {"traceparent": PARENT}, sink, tap)

    (server,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    ctx = server.context
    (sent,) = [e for e in sink.events() if "type" not in e]
    # the agent's own span (a child of the caller's), not the caller's header
    assert f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01" == sent["traceparent"]
    assert (PARENT[3:35], PARENT[36:52]) == (
        f"{ctx.trace_id:032x}",
        f"{server.parent.span_id:016x}" if server.parent else "",
    )


def test_a_run_whose_input_was_not_mirrored_carries_its_context_on_run_started(
    sink: _Sink,
) -> None:
    app = _sse_app(EVENTS)
    tap = Tap(sink.url, flush_seconds=0.1)
    app.add_middleware(TapMiddleware, tap=tap, heartbeat=False, delivery=False)

    # a request that is no RunAgentInput (an app's own body): the stream is still mirrored
    with _Serve(app) as url:
        answer = httpx.post(f"{url}/agent", json={"ask": "hi"}, headers={"traceparent": PARENT})
        tap.close()

    assert 200 == answer.status_code
    assert [] == [e for e in sink.events() if "type" not in e]
    assert [PARENT] == [e["traceparent"] for e in sink.events() if e["type"] == "RUN_STARTED"]


def test_run_started_keeps_a_tees_context_and_nothing_past_the_bound() -> None:
    event = {**EVENTS[0], "traceparent": PARENT, "tracestate": "x" * 513, "note": "content"}

    assert {**EVENTS[0], "traceparent": PARENT} == reduce_event(event)


def test_the_tap_reads_the_header_without_opentelemetry_installed() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from sidewatch_tap.tracing import active_span_context, request_context\n"
        f"scope = {{'headers': [(b'traceparent', b'{PARENT}')]}}\n"
        "print(active_span_context(), request_context(scope)['traceparent'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT / "tap",  # the tap's own distribution, as an agent's environment has it
        capture_output=True,
        text=True,
        check=True,
    )

    assert f"{{}} {PARENT}" == out.stdout.strip()
