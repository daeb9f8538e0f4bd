"""Privacy: what the tap sends, captured on the wire, holds no content of the agent's traffic.

A real ag-ui-langgraph endpoint and a scripted one stream sentinels in user messages, tool
results, state, RAW events, text, interrupt messages and error messages; the app also answers
a login and a feedback form. The capture must hold none of the sentinels, nothing of the other
endpoints, and be read by a real sidewatch without a rejected line."""

from __future__ import annotations

import json
import uuid

import httpx
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from sidewatch_tap import Tap, TapMiddleware
from tests.daemon.test_e2e import Server
from tests.tap.test_robust import _Sink
from tests.tap.test_tap import (  # noqa: F401  (sidewatch: the fixture)
    _Serve,
    _wait,
    approval_graph,
    interrupt_id_of,
    sidewatch,
)

S = "SENTINEL-7f3a"  # each field below carries S plus where it was put


def _graph():  # type: ignore[no-untyped-def]
    return approval_graph(f"{S}-interrupt-message")


def _scripted(thread: str) -> list[dict]:
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "s1"},
        {"type": "RAW", "event": {"secret": f"{S}-raw"}},
        {"type": "STATE_SNAPSHOT", "snapshot": {"secret": f"{S}-state"}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/x", "value": f"{S}-delta"}]},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "m", "role": "user", "content": S}]},
        {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "x", "content": {S: 1}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{S}-text"},
        {"type": "TOOL_CALL_START", "toolCallId": "c0", "toolCallName": "lookup"},
        {"type": "TOOL_CALL_END", "toolCallId": "c0"},
        {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c0", "content": f"{S}-res"},
        {"type": "CUSTOM", "name": "app.note", "value": f"{S}-custom"},
        {"type": "RUN_ERROR", "message": f"{S}-error"},
    ]


def test_no_sentinel_leaves_the_agent_process(sidewatch: Server) -> None:  # noqa: F811
    thread = f"priv-{uuid.uuid4().hex[:8]}"
    app = FastAPI()
    add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="demo", graph=_graph()), "/agent")

    @app.post("/scripted")
    async def scripted() -> StreamingResponse:
        async def stream():  # type: ignore[no-untyped-def]
            for e in _scripted(thread):
                yield f"data: {json.dumps(e)}\r\n\r\n"  # sse-starlette's separator

        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.post("/login")
    async def login() -> dict:
        return {"access_token": f"{S}-token", "token_type": "bearer"}

    @app.post("/api/feedback")
    async def feedback() -> dict:
        return {"ok": True, "echo": f"{S}-feedback"}

    sink = _Sink()
    tap = Tap(sink.url, flush_seconds=0.1)
    app.add_middleware(TapMiddleware, tap=tap)
    run_input = {
        "threadId": thread,
        "runId": "run-1",
        "state": {"secret": f"{S}-input-state"},
        "messages": [
            {"id": "u1", "role": "user", "content": f"{S}-user"},
            {"id": "t1", "role": "tool", "toolCallId": "x", "content": f"{S}-tool-result"},
            {"id": "t2", "role": "tool", "toolCallId": "cfm", "content": '{"confirmed": true}'},
        ],
        "tools": [],
        "context": [{"description": "d", "value": f"{S}-context"}],
        "forwardedProps": {"other": f"{S}-props"},
    }
    resume = {
        **run_input,
        "runId": "run-2",
        "forwardedProps": {"command": {"resume": {"approved": True, "note": f"{S} free text"}}},
    }
    try:
        with _Serve(app) as agent:
            responses = [
                httpx.post(f"{agent}/agent", json=run_input, timeout=30),
                httpx.post(f"{agent}/agent", json=resume, timeout=30),
                httpx.post(f"{agent}/scripted", json=run_input, timeout=30),
                httpx.post(f"{agent}/login", data={"user": "u", "password": f"{S}-pw"}),
                httpx.post(f"{agent}/api/feedback", json={"text": f"{S}-feedback-in"}),
            ]
            tap.close()
    finally:
        sink.close()
    sent = b"\n".join(sink.lines)
    ingested = httpx.post(
        f"{sidewatch.url}/v1/events",
        content=sent + b"\n",
        headers={"Content-Type": "application/x-ndjson"},
    ).json()
    interrupt_id = interrupt_id_of(responses[0].text)

    assert [200] * 5 == [r.status_code for r in responses]
    assert all(S in r.text for r in responses[:3])  # the agent did stream the sentinels
    assert S.encode() not in sent
    assert b"access_token" not in sent
    assert ([], 0) == (ingested["rejected"], tap.dropped)
    assert (
        "accept" == _wait(sidewatch, f"{thread}/{interrupt_id}", "RESUMED")["evidence"]["decision"]
    )
    inputs = [e for e in map(json.loads, sink.lines) if "type" not in e]
    assert [
        {"id": "t2", "role": "tool", "toolCallId": "cfm", "content": '{"confirmed": true}'}
    ] == (inputs[0]["messages"])  # an ADK answer is what identifies it, and no more
    kinds = {json.loads(line).get("type", "input") for line in sink.lines}
    assert {"RAW", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "TEXT_MESSAGE_CONTENT"}.isdisjoint(kinds)
    assert {"input", "RUN_STARTED", "CUSTOM", "TOOL_CALL_RESULT", "RUN_ERROR"} <= kinds
