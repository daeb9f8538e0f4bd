"""The interrupt and its resume meet in one trace (issue 32), live: a real LangGraph agent
(ag-ui-langgraph, a scripted fake model) instrumented with the OpenTelemetry SDK, the tap
inside its ASGI instrumentation, a real daemon exporting the wait's span over OTLP/gRPC, and
the agent exporting its own spans over OTLP/HTTP, both to real receivers decoding the
official messages. The agent's server span of the asking request and the wait's span share a
trace id (the wait is its child), and the wait links the resuming request's server span."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.daemon.test_e2e import Server, _start, _stop
from tests.exporters.otlp_receiver import Received, Receiver, grpc_receiver, http_receiver
from tests.tap.test_tap import _free_port, _wait, agent_input, interrupt_id_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def agent_spans() -> Iterator[tuple[Receiver, str]]:
    with http_receiver() as got:
        yield got


@pytest.fixture
def sidewatch_spans() -> Iterator[tuple[Receiver, str]]:
    with grpc_receiver() as got:
        yield got


@pytest.fixture
def sidewatch(
    tmp_path: Path,
    db_url: str,
    sidewatch_spans: tuple[Receiver, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Server]:
    """`sidewatch serve` with traces on, as a user turns them on: the standard variables."""
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sidewatch_spans[1])
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    server = _start(tmp_path, db_url)
    yield server
    _stop(server)


@pytest.fixture
def agent(sidewatch: Server, agent_spans: tuple[Receiver, str], tmp_path: Path) -> Iterator[str]:
    """`tests.tap.traced_agent` as a process of its own, exporting to `agent_spans`."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tap"))),
        "OTEL_EXPORTER_OTLP_ENDPOINT": agent_spans[1],
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    log = tmp_path / "agent.log"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.tap.traced_agent",
                str(port),
                f"{sidewatch.url}/v1/events",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/agent/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the agent did not start:\n{log.read_text()}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _server_spans(spans: list[Received]) -> list[Received]:
    """The agent's server spans of its AG-UI requests, in the order they began."""
    return sorted(
        (
            s
            for s in spans
            if s.kind == "SPAN_KIND_SERVER"
            and s.service == "demo-agent"
            and s.name.startswith("POST")  # not the health checks
        ),
        key=lambda s: s.start_ns,
    )


def test_the_wait_joins_the_agents_trace_and_links_the_resuming_request(
    agent: str,
    sidewatch: Server,
    agent_spans: tuple[Receiver, str],
    sidewatch_spans: tuple[Receiver, str],
) -> None:
    thread = f"trace-{uuid.uuid4().hex[:8]}"
    sse = {"accept": "text/event-stream"}
    go = [{"id": "u1", "role": "user", "content": "Go."}]

    first = httpx.post(
        f"{agent}/agent", json=agent_input(thread, messages=go), headers=sse, timeout=60
    )
    request_id = f"{thread}/{interrupt_id_of(first.text)}"
    _wait(sidewatch, request_id, "WAITING")
    resume = {"command": {"resume": {"approved": True}}}
    second = httpx.post(
        f"{agent}/agent",
        json=agent_input(thread, "run-2", forwardedProps=resume),
        headers=sse,
        timeout=60,
    )
    wait = _wait(sidewatch, request_id, "RESUMED")
    waits = sidewatch_spans[0].wait_for(
        lambda spans: any(
            s.attributes.get("sidewatch.approval.request_id") == request_id for s in spans
        ),
        timeout=30,
    )
    asking, resuming = _server_spans(agent_spans[0].wait_for(lambda s: len(_server_spans(s)) >= 2))

    (span,) = [s for s in waits if s.attributes["sidewatch.approval.request_id"] == request_id]
    assert (200, 200, "accept") == (
        first.status_code,
        second.status_code,
        wait["evidence"]["decision"],
    )
    assert ("grpc", "sidewatch", "SPAN_KIND_INTERNAL") == (span.protocol, span.service, span.kind)
    # one trace: the wait is a child of the agent's server span of the asking request
    assert (asking.trace_id, asking.span_id) == (span.trace_id, span.parent_span_id)
    # and it links the server span of the request that resumed it
    assert [(resuming.trace_id, resuming.span_id, "answered")] == [
        (t, s, a["sidewatch.approval.link"]) for t, s, a in span.links
    ]
    assert asking.trace_id != resuming.trace_id  # two requests, two traces: the wait joins them
