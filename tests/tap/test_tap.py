"""sidewatch_tap in front of real AG-UI endpoints, mirroring to a real `sidewatch serve`."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from sqlalchemy import create_engine, text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from sidewatch_tap import Tap, TapMiddleware, tap_events
from tests.daemon import test_e2e
from tests.daemon.test_e2e import Server, _start, _stop
from tests.ports import free_port as _free_port


@pytest.fixture(scope="module")
def sidewatch(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Server]:
    """One daemon per store for the module: each test's thread ids are its own."""
    server = _start(tmp_path_factory.mktemp("sidewatch"), module_db_url)
    yield server
    _stop(server)


class _Serve:
    """An ASGI app on uvicorn in a thread of the test process."""

    def __init__(self, app: object) -> None:
        self.port = _free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _wait(server: Server, request_id: str, state: str | None = None) -> dict:
    """The wait as sidewatch sees it, once it is there (and in `state`, when given)."""
    deadline = time.monotonic() + 15
    body: dict = {}
    while time.monotonic() < deadline:
        # Up to the deadline: on a loaded machine one answer can take longer than httpx's 5 s.
        r = httpx.get(f"{server.url}/v1/waits/{request_id}", timeout=15)
        if r.status_code == 200:
            body = r.json()
            if state is None or body["state"] == state:
                return body
        time.sleep(0.2)
    raise AssertionError(f"{request_id} never reached {state}: {body.get('state')}")


def deploy_wait(
    thread: str, *between: dict[str, Any], args: str = '{"env": "prod"}'
) -> list[dict[str, Any]]:
    """A stream announcing one wait: interrupt i1 of run r1 for the tool call c1 `deploy`
    (arguments `args`), with `between` after the run's start."""
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1"},
        *between,
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "deploy"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c1"}],
            },
        },
    ]


def agent_input(thread: str, run: str = "run-1", **fields: Any) -> dict[str, Any]:
    """A RunAgentInput for the agent endpoint: no messages, tools or state unless given."""
    return {
        "threadId": thread,
        "runId": run,
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **fields,
    }


def interrupt_id_of(stream: str) -> str:
    """The id of the interrupt ag-ui-langgraph announced in an SSE answer."""
    return next(
        json.loads(line[5:])["rawEvent"]["id"]
        for line in stream.splitlines()
        if line.startswith("data:") and '"on_interrupt"' in line
    )


def approval_graph(  # type: ignore[no-untyped-def]
    message: str = "Deploy checkout?", gate: threading.Event | None = None
):
    """A LangGraph graph whose one node asks for approval (once `gate` is open)."""

    def approve(state: MessagesState) -> dict:
        if gate is not None:
            gate.wait(20)
        interrupt({"reason": "tool_approval", "message": message})
        return {}

    g = StateGraph(MessagesState)
    g.add_node("approve", approve)
    g.add_edge(START, "approve")
    g.add_edge("approve", END)
    return g.compile(checkpointer=InMemorySaver())


def test_a_langgraph_endpoint_behind_the_tap_reaches_resumed(sidewatch: Server) -> None:
    app = FastAPI()
    add_langgraph_fastapi_endpoint(
        app, LangGraphAgent(name="demo", graph=approval_graph()), "/agent"
    )
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.2)
    app.add_middleware(TapMiddleware, tap=tap)  # the one line (with url=... in the README)
    thread = f"tap-{uuid.uuid4().hex[:8]}"

    with _Serve(app) as agent:
        first = httpx.post(
            f"{agent}/agent",
            json=agent_input(thread),
            headers={"accept": "text/event-stream"},
            timeout=30,
        )
        interrupt_id = interrupt_id_of(first.text)
        second = httpx.post(
            f"{agent}/agent",
            json=agent_input(
                thread, "run-2", forwardedProps={"command": {"resume": {"approved": True}}}
            ),
            headers={"accept": "text/event-stream"},
            timeout=30,
        )
        tap.close()

    wait = _wait(sidewatch, f"{thread}/{interrupt_id}", "RESUMED")
    assert (200, 200) == (first.status_code, second.status_code)
    assert ("accept", 0) == (wait["evidence"]["decision"], tap.dropped)


def _sse_app(events: list[dict], pause: float = 0.0) -> Starlette:
    async def endpoint(request: Request) -> StreamingResponse:
        await request.json()

        async def stream():  # type: ignore[no-untyped-def]
            for e in events:
                yield f"data: {json.dumps(e)}\n\n"
                await asyncio.sleep(pause)

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agent", endpoint, methods=["POST"])])


def test_events_without_ids_get_their_run_and_the_agent_answers_unchanged(
    sidewatch: Server,
) -> None:
    thread = f"tap-{uuid.uuid4().hex[:8]}"
    events = deploy_wait(
        thread,
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "secret words"},
        args="{}",
    )
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.2)
    app = TapMiddleware(_sse_app(events), tap=tap, heartbeat=False)  # lines that can be counted

    with _Serve(app) as agent:
        answer = httpx.post(
            f"{agent}/agent", json={"threadId": thread, "runId": "r1", "messages": []}
        )
        tap.close()

    wait = _wait(sidewatch, f"{thread}/i1")
    sent = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    assert events == sent
    # input + 5 events + the interrupt's route
    assert ("deploy", 7, 0) == (wait["action"], tap.sent, tap.dropped)


def test_a_full_queue_drops_and_counts_instead_of_waiting() -> None:
    tap = Tap("http://127.0.0.1:9/v1/events", queue_lines=2, flush_seconds=30)

    start = time.perf_counter()
    for n in range(50):
        tap.record({"type": "RUN_STARTED", "threadId": "t", "runId": f"r{n}"}, None, None)
    elapsed = time.perf_counter() - start
    tap.close(timeout=10)

    assert 50 == tap.dropped + tap.sent
    assert tap.dropped >= 48
    assert elapsed < 5  # generous: the point is that record() never waited for the network


def test_the_async_iterator_wrapper_yields_every_event_unchanged(sidewatch: Server) -> None:
    thread = f"tap-{uuid.uuid4().hex[:8]}"
    run_input = {"threadId": thread, "runId": "r1", "messages": []}
    events = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1"},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "x"}]},
        },
    ]
    tap = Tap(f"{sidewatch.url}/v1/events", flush_seconds=0.1)

    async def source():  # type: ignore[no-untyped-def]
        for e in events:
            yield e

    async def collect() -> list[dict]:
        return [e async for e in tap_events(source(), tap, run_input)]

    got = asyncio.run(collect())
    tap.close()

    assert events == got
    assert "r1" == _wait(sidewatch, f"{thread}/i1")["runId"]


OUTAGE_S = 30


def test_a_daemon_down_for_30_s_while_the_agent_streams_loses_no_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon is stopped, the agent streams across 30 s of outage (ten tool calls, then the
    interrupt), and the daemon is started again on the same port and store: every line the tap
    took arrives, retried. The one long test (one store: the retry is the tap's, not the
    store's)."""
    port = _free_port()
    monkeypatch.setattr(test_e2e, "_free_port", lambda: port)
    db = f"sqlite:///{tmp_path / 'outage.db'}"
    daemon = _start(tmp_path, db)
    thread = f"tap-{uuid.uuid4().hex[:8]}"
    calls = [f"c{n}" for n in range(10)]
    events: list[dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": thread, "runId": "r1"}]
    for call in calls:
        events += [
            {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "deploy"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": call},
        ]
    events.append(
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": calls[-1]}],
            },
        }
    )
    tap = Tap(
        f"{daemon.url}/v1/events",
        flush_seconds=0.1,
        retry_base_seconds=0.2,
        retry_max_seconds=2.0,
    )
    # heartbeats are tests/tap/test_liveness's: here, a stream of lines that can be counted
    app = TapMiddleware(
        _sse_app(events, pause=OUTAGE_S * 0.8 / len(events)), tap=tap, heartbeat=False
    )
    try:
        _stop(daemon)
        down = time.monotonic()
        with _Serve(app) as agent:
            answer = httpx.post(
                f"{agent}/agent",
                json={"threadId": thread, "runId": "r1", "messages": []},
                timeout=OUTAGE_S * 2,
            )
        streamed = time.monotonic() - down
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down)))
        retried = tap.retries
        daemon = _start(tmp_path, db)
        assert tap.flush(timeout=30)
    finally:
        tap.close()
        _stop(daemon)
    daemon = _start(tmp_path, db)  # read back by a fresh process: it was stored
    try:
        wait = _wait(daemon, f"{thread}/i1")
    finally:
        _stop(daemon)
    engine = create_engine(db)
    with engine.connect() as conn:
        stored = {  # the calls, and the one the interrupt gates (kept on the interrupt's row)
            str(r[0])
            for r in conn.execute(
                text(
                    "SELECT tool_call_id FROM tool_call WHERE thread_id = :t "
                    "UNION SELECT tool_call_id FROM interrupt WHERE thread_id = :t"
                ),
                {"t": thread},
            )
        }
    engine.dispose()

    assert 200 == answer.status_code
    assert streamed >= OUTAGE_S * 0.7  # the agent streamed while the daemon was down
    assert retried >= 10
    # input + every event + the interrupt's route; every tool call made meanwhile is stored
    assert (len(events) + 2, 0, set(calls)) == (tap.sent, tap.dropped, stored)
    assert "deploy" == wait["action"]
