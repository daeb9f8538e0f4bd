"""A token's `kinds`: the interpreter reads the lines of the kinds a sender may send and
rejects every other as `kind_not_allowed`, in every body format, the rest of the unit read as
usual; without `kinds` it reads every line as before."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from sidewatch.config import INGEST_KINDS
from sidewatch.core.facts import HeartbeatFact, ServiceBeatFact, ServiceBindFact, SignalFact
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.evidence import EVIDENCE_NAMES
from sidewatch.ingest.reader import frame

BASE = 1_785_081_600_000
PROTECT = RefProtector(b"test-key", ("role:",))
SECRET = "s3cr3t-do-not-echo"
REF = {"threadId": "t1", "interruptId": "i1"}


def evidence(name: str, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": f"sidewatch.{name}", "timestamp": BASE + 5, "value": value}


# One unit holding every kind of line, each with the kind it is (AG-UI lines of every path
# the interpreter reads them by: skipped in bulk, counted in its loop, parsed, RunAgentInput).
UNIT: list[tuple[dict[str, Any], str]] = [
    ({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": BASE}, "agui"),
    ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": SECRET}, "agui"),
    ({"type": "STEP_STARTED", "stepName": "plan"}, "agui"),
    ({"type": "STATE_DELTA", "delta": []}, "agui"),
    ({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "deploy"}, "agui"),
    ({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"to":"prod"}'}, "agui"),
    ({"type": "TOOL_CALL_END", "toolCallId": "c1"}, "agui"),
    ({"type": "CUSTOM", "name": f"acme.{SECRET}", "value": {}}, "agui"),
    (
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "r1",
            "timestamp": BASE + 1,
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "tool_call", "toolCallId": "c1"}],
            },
        },
        "agui",
    ),
    (
        {
            "threadId": "t1",
            "runId": "r2",
            "messages": [],
            "timestamp": BASE + 2,
            "resume": [{"interruptId": "i1", "status": "resolved", "payload": True}],
        },
        "agui",
    ),
    (
        {"type": "CUSTOM", "name": "on_interrupt", "value": '{"reason": "tool_approval"}'},
        "agui",
    ),
    (evidence("route", **REF, delivered=False, channel="chat"), "route"),
    (evidence("decision", **REF, decision="accept"), "decision"),
    (evidence("heartbeat", threadId="t1", resumeHandle="ckpt"), "heartbeat"),
    (evidence("receipt", **REF), "receipt"),
    (evidence("action", **REF, actionDigest="sha256:ab"), "action"),
]


def ndjson(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def type_last(lines: list[dict[str, Any]]) -> bytes:
    """NDJSON whose `type` is not the first key: no line takes the dispatch on its head."""
    moved = [{k: v for k, v in line.items() if k != "type"} | line for line in lines]
    return b"".join(orjson.dumps(line) + b"\n" for line in moved)


def sse(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(line) + b"\n\n" for line in lines)


# (encode the lines, media type, encoding, line number of the n-th line)
FORMATS = [
    pytest.param(ndjson, "application/x-ndjson", "identity", lambda n: n, id="ndjson"),
    pytest.param(type_last, "application/x-ndjson", "identity", lambda n: n, id="type-last"),
    pytest.param(orjson.dumps, "application/json", "identity", lambda n: n, id="json-array"),
    pytest.param(sse, "text/event-stream", "identity", lambda n: 2 * n - 1, id="sse"),
    pytest.param(
        lambda lines: gzip.compress(ndjson(lines)), None, "gzip", lambda n: n, id="gzip-ndjson"
    ),
    pytest.param(
        lambda lines: gzip.compress(sse(lines)),
        "text/event-stream",
        "gzip",
        lambda n: 2 * n - 1,
        id="gzip-sse",
    ),
]

Encode = Callable[[list[dict[str, Any]]], bytes]


def read(body: bytes, media: str | None, encoding: str, kinds: frozenset[str] | None) -> Any:
    interpreter = Interpreter(BASE + 60_000, 0, PROTECT, allowed=kinds)
    return interpreter.read(frame(body, media, encoding))


def kind_of(fact: Any) -> str:
    """The kind of line a fact can only have come from."""
    if isinstance(fact, SignalFact):
        return fact.kind.value
    if isinstance(fact, HeartbeatFact | ServiceBeatFact | ServiceBindFact):
        return "heartbeat"
    return "agui"


def refused(result: UnitResult) -> list[tuple[int, str]]:
    return [(r.line, r.reason) for r in result.rejects]


@pytest.mark.parametrize(("encode", "media", "encoding", "line_no"), FORMATS)
def test_without_kinds_every_line_of_the_unit_is_read(
    encode: Encode, media: str | None, encoding: str, line_no: Callable[[int], int]
) -> None:
    result = read(encode([line for line, _ in UNIT]), media, encoding, None)

    assert [] == refused(result)
    assert set(INGEST_KINDS) == {kind_of(f) for f in result.facts}
    assert len(UNIT) == result.accepted + result.skipped


@pytest.mark.parametrize("kind", INGEST_KINDS)
@pytest.mark.parametrize(("encode", "media", "encoding", "line_no"), FORMATS)
def test_a_line_of_a_kind_the_token_may_not_send_is_refused_and_the_rest_is_read(
    encode: Encode, media: str | None, encoding: str, line_no: Callable[[int], int], kind: str
) -> None:
    body = encode([line for line, _ in UNIT])

    result = read(body, media, encoding, frozenset({kind}))
    expected = [(line_no(n), "kind_not_allowed") for n, (_, k) in enumerate(UNIT, 1) if k != kind]

    assert expected == refused(result)
    assert {kind} == {kind_of(f) for f in result.facts}
    assert sum(k == kind for _, k in UNIT) == result.accepted + result.skipped


def test_a_token_of_several_kinds_sends_each_of_them() -> None:
    kinds = frozenset({"agui", "route", "heartbeat"})  # the tap's

    result = read(ndjson([line for line, _ in UNIT]), None, "identity", kinds)

    assert {(n, "kind_not_allowed") for n in (13, 15, 16)} == set(refused(result))
    assert kinds == {kind_of(f) for f in result.facts}


def test_a_refusal_names_the_kind_and_the_token_s_kinds_but_never_the_line_s_content() -> None:
    lines = [line for line, _ in UNIT]

    result = read(ndjson(lines), None, "identity", frozenset({"route", "heartbeat"}))
    errors = {r.line: r.error for r in result.rejects}

    assert (
        "sidewatch.decision: a line of kind decision, which this token may not send "
        "(its kinds: heartbeat, route)"
    ) == errors[13]
    assert (
        "RUN_STARTED: a line of kind agui, which this token may not send "
        "(its kinds: heartbeat, route)"
    ) == errors[1]
    assert errors[8].startswith("CUSTOM: a line of kind agui")
    assert errors[10].startswith("RunAgentInput: a line of kind agui")
    assert not any(SECRET in r.error for r in result.rejects)


def test_a_refused_line_s_type_is_named_only_when_it_is_a_known_one() -> None:
    # dispatched by its head as RUN_STARTED, parsed with the type the last key gives
    line = b'{"type":"RUN_STARTED","threadId":"t1","runId":"r1","type":"' + SECRET.encode() + b'"}'

    result = read(line, None, "identity", frozenset({"route"}))

    assert [(1, "kind_not_allowed")] == refused(result)
    assert result.rejects[0].error.startswith("AG-UI: a line of kind agui")


def test_a_line_whose_kind_cannot_be_told_keeps_its_own_reason() -> None:
    body = b"\n".join(
        [
            b"{not json",
            b"[1]",
            orjson.dumps(evidence("unheard_of", **REF)),
            orjson.dumps({"type": "NO_SUCH_EVENT"}),
            orjson.dumps(evidence("route", **REF, delivered=True)),
        ]
    )

    result = read(body, None, "identity", frozenset({"route"}))

    assert [
        (1, "not_json"),
        (2, "not_object"),
        (3, "unknown_evidence"),
        (4, "unknown_type"),
    ] == refused(result)
    assert 1 == result.accepted


def test_the_kinds_are_agui_and_the_names_of_the_evidence_events() -> None:
    assert EVIDENCE_NAMES == {f"sidewatch.{k}" for k in INGEST_KINDS if k != "agui"}
