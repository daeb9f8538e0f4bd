"""The tap with `frontend_tools` (the daemon's `waits.frontendTools`) sends the answers of
frontend-tool waits: the history's calls of those tools by id and name, and their tool
messages reduced to what decides them; the daemon reads the same verdicts from that."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from sidewatch_tap.reduce import reduce_event, reduce_input
from tests.ingest.producers.test_frontend import FRONTEND, MAF_FRONTEND, frontend_waits

PRODUCERS = Path(__file__).resolve().parents[1] / "ingest" / "producers" / "fixtures"
CONFIRM = ("confirm_*",)


def _tapped(body: bytes, frontend_tools: tuple[str, ...] = CONFIRM) -> bytes:
    sent = []
    for line in body.splitlines():
        obj = orjson.loads(line)
        if "type" in obj:
            out = reduce_event(obj, frontend_tools)
        else:
            out = reduce_input(obj, frontend_tools)
        if out is not None:
            sent.append(orjson.dumps(out))
    return b"\n".join(sent)


CASES = {
    name: FRONTEND.get(name) or MAF_FRONTEND[name]
    for name in (
        "strands-frontend-tool-approve",
        "strands-frontend-tool-decline",
        "pydantic-ai-frontend-tool",
        "pydantic-ai-frontend-tool-decline",
        "maf-answered-by-tool-message",
    )
}


@pytest.mark.parametrize(("name", "expected"), CASES.items(), ids=list(CASES))
def test_what_the_tap_sends_gets_the_verdicts_of_the_whole_stream(
    db_url: str, name: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    sent = _tapped((PRODUCERS / f"{name}.ndjson").read_bytes())

    got = [
        (
            w.verdict.state.value,
            w.verdict.facts.decision and w.verdict.facts.decision.value,
            w.verdict.uncertain,
        )
        for w in frontend_waits(db_url, sent)
    ]
    assert expected == got


def test_a_frontend_answer_is_sent_as_its_decision_and_no_more() -> None:
    history = [
        {"id": "u1", "role": "user", "content": "secret-user"},
        {
            "id": "a1",
            "role": "assistant",
            "content": "secret-assistant",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "confirm_purge", "arguments": '{"x": "secret-arg"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"x": "secret-arg"}'},
                },
            ],
        },
        {
            "id": "t1",
            "role": "tool",
            "toolCallId": "c1",
            "content": '{"approved": false, "note": "secret-note"}',
        },
        {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "secret-result"},
    ]
    inp = {"threadId": "t", "runId": "r2", "messages": history}

    sent = reduce_input(inp, CONFIRM)
    plain = reduce_input(inp)

    assert sent is not None and plain is not None
    assert [
        {
            "id": "frontend-calls",
            "role": "assistant",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "confirm_purge", "arguments": ""},
                }
            ],
        },
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": '{"approved": false}'},
    ] == sent["messages"]
    assert [] == plain["messages"]
    assert b"secret" not in orjson.dumps(sent)
