"""The tap reports delivery: a real ag-ui-langgraph app behind `TapMiddleware`, a real daemon
with a short `routeGrace`, and the route verdict each client outcome leads to."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui_adk import add_adk_fastapi_endpoint
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI

from sidewatch_tap import Tap, TapMiddleware
from tests.daemon.test_e2e import Server, _start, _stop
from tests.producers.capture_adk import ONE_CALL, make_agent
from tests.tap.test_tap import (
    _Serve,
    _sse_app,
    _wait,
    agent_input,
    approval_graph,
    interrupt_id_of,
)

# Route is the evidence under test: the handle and heartbeats (item 3) are marked ignored, so a
# delivered approval is plainly WAITING, and one that was not is UNROUTABLE.
POLICY = """
policies:
  - name: default
    routeGrace: 1s
    evidence: {handle: ignored, heartbeat: ignored}
"""


@pytest.fixture(scope="module")
def sidewatch(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Server]:
    server = _start(tmp_path_factory.mktemp("delivery"), module_db_url, extra=POLICY)
    yield server
    _stop(server)


def _agent(gate: threading.Event | None = None) -> FastAPI:
    """ag-ui-langgraph over a graph that asks for approval (once `gate` is open)."""
    app = FastAPI()
    agent = LangGraphAgent(name="demo", graph=approval_graph(gate=gate))
    add_langgraph_fastapi_endpoint(app, agent, "/agent")
    return app


def _routes(wait: dict) -> list[dict]:
    return [item for item in wait["timeline"] if item["kind"] == "route"]


def test_a_delivered_approval_is_routed_to_the_thread_and_stays_waiting(sidewatch: Server) -> None:
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.1)
    thread = f"dlv-{uuid.uuid4().hex[:8]}"

    with _Serve(TapMiddleware(_agent(), tap=tap)) as agent:
        answer = httpx.post(f"{agent}/agent", json=agent_input(thread), timeout=30)
        tap.close()
    request_id = f"{thread}/{interrupt_id_of(answer.text)}"
    _wait(sidewatch, request_id)
    time.sleep(2.5)  # past routeGrace (1s) and an auditor tick
    wait = _wait(sidewatch, request_id)

    assert ("WAITING", False, []) == (wait["state"], wait["uncertain"], wait["missing"])
    assert "delivered" == wait["evidence"]["route"]
    assert [True] == [r["delivered"] for r in _routes(wait)]
    assert "role:thread-participant" == wait["evidence"]["approverRef"]  # a role: stored as is


class _Asgi24:
    """The app under a server on ASGI spec 2.4: Starlette then streams without listening for
    a disconnect, so only the tap's own watch on `receive` sees the client leave."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope = {**scope, "asgi": {**scope.get("asgi", {}), "spec_version": "2.4"}}
        await self.app(scope, receive, send)


def test_a_client_gone_before_the_interrupt_is_written_makes_it_unroutable(
    sidewatch: Server,
) -> None:
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.1)
    thread = f"dlv-{uuid.uuid4().hex[:8]}"
    gate = threading.Event()
    tapped = TapMiddleware(_agent(gate), tap=tap)

    with _Serve(_Asgi24(tapped)) as agent:
        port = int(agent.rsplit(":", 1)[1])
        body = json.dumps(agent_input(thread)).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(
                b"POST /agent HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n"
                b"Accept: text/event-stream\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            seen = b""
            while b"RUN_STARTED" not in seen:  # the stream began; then the client goes
                chunk = client.recv(65536)
                assert chunk, seen
                seen += chunk
        deadline = time.monotonic() + 10
        while tapped.disconnects == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        gate.set()  # the graph interrupts only now, with nobody to write it to
        deadline = time.monotonic() + 20
        while not tap.queued[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # the run streams on to its end
        tap.close()

    waits = httpx.get(f"{sidewatch.url}/v1/waits", params={"limit": 10_000}).json()["waits"]
    request_id = next(w["requestId"] for w in waits if w["threadId"] == thread)
    wait = _wait(sidewatch, request_id, "UNROUTABLE")

    assert 1 == tapped.disconnects
    assert (False, "failed") == (wait["uncertain"], wait["evidence"]["route"])
    assert [False] == [r["delivered"] for r in _routes(wait)]


def test_with_delivery_off_the_tap_sends_no_route(sidewatch: Server) -> None:
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.1)
    thread = f"dlv-{uuid.uuid4().hex[:8]}"

    with _Serve(TapMiddleware(_agent(), tap=tap, delivery=False)) as agent:
        answer = httpx.post(f"{agent}/agent", json=agent_input(thread), timeout=30)
        tap.close()
    wait = _wait(sidewatch, f"{thread}/{interrupt_id_of(answer.text)}")

    assert ([], "none") == (_routes(wait), wait["evidence"]["route"])
    assert "route" in wait["missing"]


class _Lines:
    """A stand-in for the Tap: keeps what would be sent."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def record(self, event: dict, thread_id: str | None, run_id: str | None) -> None:
        self.events.append(event)

    def record_line(self, line: bytes) -> None:
        self.events.append(json.loads(line))


def test_a_write_that_fails_reports_its_interrupts_undelivered() -> None:
    """A server on ASGI 2.4 raises `OSError` from `send` once the client is gone."""
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r1",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i1"}, {"id": "i2"}]},
        },
    ]
    lines = _Lines()
    app = TapMiddleware(_Asgi24(_sse_app(events)), tap=lines)  # type: ignore[arg-type]
    body = json.dumps({"threadId": "t", "runId": "r1", "messages": []}).encode()
    written: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        if b"RUN_FINISHED" in message.get("body", b""):
            raise OSError("connection reset")
        written.append(message)

    scope = {"type": "http", "method": "POST", "path": "/agent", "headers": [], "asgi": {}}
    with pytest.raises(Exception):  # noqa: B017  (the app's own error for a lost client)
        asyncio.run(app(scope, receive, send))

    routes = [e["value"] for e in lines.events if e.get("name") == "sidewatch.route"]
    assert [("i1", False), ("i2", False)] == [(r["interruptId"], r["delivered"]) for r in routes]
    assert {"client_disconnected"} == {r["error"] for r in routes}
    assert any(b"RUN_STARTED" in m.get("body", b"") for m in written)


def _adk_confirmation(tap: Tap) -> str:
    """ag-ui-adk's agent asks to confirm its one call, behind the tap (closed after the
    answer): the requestId of that confirmation's wait."""
    app = FastAPI()
    add_adk_fastapi_endpoint(app, make_agent(ONE_CALL), "/agent")
    thread = f"dlv-{uuid.uuid4().hex[:8]}"
    run = agent_input(thread, messages=[{"id": "u1", "role": "user", "content": "Delete it."}])
    with _Serve(TapMiddleware(app, tap=tap)) as agent:
        answer = httpx.post(f"{agent}/agent", json=run, timeout=60)
        tap.close()
    call = next(
        json.loads(line[5:])["toolCallId"]
        for line in answer.text.splitlines()
        if line.startswith("data:") and '"adk_request_confirmation"' in line
    )
    return f"{thread}/{call}"


@pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")  # ADK's in-memory services
@pytest.mark.filterwarnings("ignore:Non-resumable HITL:DeprecationWarning")  # its default mode
def test_an_adk_confirmation_behind_the_tap_gets_the_same_delivery_evidence(
    sidewatch: Server,
) -> None:
    rid = _adk_confirmation(Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.1))
    _wait(sidewatch, rid)
    time.sleep(2.5)  # past routeGrace (1s) and an auditor tick
    wait = _wait(sidewatch, rid)

    assert ("WAITING", False) == (wait["state"], wait["uncertain"]), wait
    assert ("delivered", [True]) == (
        wait["evidence"]["route"],
        [r["delivered"] for r in _routes(wait)],
    )


@pytest.mark.filterwarnings("ignore:\\[EXPERIMENTAL\\]:UserWarning")  # ADK's in-memory services
@pytest.mark.filterwarnings("ignore:Non-resumable HITL:DeprecationWarning")  # its default mode
@pytest.mark.parametrize("lines", [1, 3])
def test_an_adk_confirmation_is_a_wait_wherever_the_tap_cuts_its_batches(
    sidewatch: Server, lines: int
) -> None:
    # Batches of `lines` lines cut the stream inside the confirmation call (the flush timer
    # can cut it anywhere): the tap keeps a call's lines in one batch, so ingest reads it.
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.01, batch_lines=lines)
    wait = _wait(sidewatch, _adk_confirmation(tap))

    assert ("delete_file", 0) == (wait["action"], tap.dropped)


def test_a_client_gone_while_sending_its_request_gets_no_delivered_route() -> None:
    finished = {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r1",
        "outcome": {"type": "interrupt", "interrupts": [{"id": "i1"}]},
    }

    async def app(scope: Any, receive: Any, send: Any) -> None:  # streams regardless
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = f"data: {json.dumps(finished)}\n\n".encode()
        await send({"type": "http.response.body", "body": body, "more_body": False})

    partial = {"type": "http.request", "body": b'{"threadId"', "more_body": True}
    messages = iter([partial, {"type": "http.disconnect"}])

    async def receive() -> dict:
        return next(messages)

    async def send(message: dict) -> None:
        pass  # a server drops writes to a client that left

    lines = _Lines()
    tapped = TapMiddleware(app, tap=lines)  # type: ignore[arg-type]
    scope = {"type": "http", "method": "POST", "path": "/agent", "headers": []}
    asyncio.run(tapped(scope, receive, send))

    routes = [e["value"] for e in lines.events if e.get("name") == "sidewatch.route"]
    assert [("i1", False)] == [(r["interruptId"], r["delivered"]) for r in routes]
    assert 1 == tapped.disconnects
