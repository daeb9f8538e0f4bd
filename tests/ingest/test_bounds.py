"""Times and ids that would poison the store or a formatter are rejected at ingest, line by
line: times outside 2000..2200 (`time_out_of_range`), ids holding control characters or
longer than the store's columns (`invalid_id`). A line is rejected whole: no fact of it stays.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sidewatch.core.vocab import RejectReason
from sidewatch.exporters.prometheus import REJECT_REASONS
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.bounds import DIGEST_MAX, EARLIEST_MS, ID_MAX, LATEST_MS, REQUEST_ID_MAX
from sidewatch.ingest.reader import frame

T = 1_785_081_600_000  # 2026-07-26T16:00:00Z
START = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": T}


def read(*lines: dict[str, Any]) -> UnitResult:
    body = "\n".join(json.dumps(line) for line in lines).encode()
    return Interpreter(T, 0, lambda ref: ref).read(frame(body))


def facts_of_line(result: UnitResult, line: int) -> list[Any]:
    return [f for f in result.facts if getattr(f, "seq", None) == line]


# -- times ----------------------------------------------------------------------------------


def evidence(**extra: Any) -> dict[str, Any]:
    value = {"threadId": "t1", "interruptId": "i1", "delivered": True}
    return {"type": "CUSTOM", "name": "sidewatch.route", "value": value, **extra}


TIMED_LINES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "RUN_STARTED": lambda ts: {**START, "timestamp": ts},
    "RUN_FINISHED": lambda ts: {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "timestamp": ts,
    },
    "RunAgentInput": lambda ts: {"threadId": "t1", "runId": "r2", "messages": [], "timestamp": ts},
    "TOOL_CALL_START": lambda ts: {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "deploy",
        "timestamp": ts,
    },
    "evidence": lambda ts: evidence(timestamp=ts),
    "heartbeat": lambda ts: {
        "type": "CUSTOM",
        "name": "sidewatch.heartbeat",
        "value": {"threadId": "t1"},
        "timestamp": ts,
    },
}
OUT_OF_RANGE = {
    "the issue's -1e14": -1e14,
    "an integer -1e14": -100_000_000_000_000,
    "the issue's 1e17": 1e17,
    "seconds, not ms": 1_785_081_600,
    "microseconds": 1_785_081_600_000_000,
    "nanoseconds": 1_785_081_600_000_000_000,
    "zero": 0,
    "just before 2000": EARLIEST_MS - 1,
    "2200 itself": LATEST_MS,
}


@pytest.mark.parametrize("ts", OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
@pytest.mark.parametrize("event", TIMED_LINES.keys())
def test_a_timestamp_out_of_range_rejects_its_line_with_a_reason_of_its_own(
    event: str, ts: float
) -> None:
    result = read(START, TIMED_LINES[event](ts))

    assert [(2, "time_out_of_range")] == [(r.line, r.reason) for r in result.rejects]
    assert "2000-01-01 and 2200-01-01" in result.rejects[0].error
    assert [] == facts_of_line(result, 2)


@pytest.mark.parametrize("ts", [EARLIEST_MS, T, LATEST_MS - 1], ids=["2000", "2026", "2199"])
@pytest.mark.parametrize("event", TIMED_LINES.keys())
def test_a_timestamp_in_range_is_accepted(event: str, ts: int) -> None:
    result = read(START, TIMED_LINES[event](ts))

    assert [] == result.rejects
    assert all(f.at in (T, ts) for f in result.facts)


def test_a_fractional_timestamp_in_range_is_still_an_invalid_field() -> None:
    result = read(START, {**START, "timestamp": T + 0.5})

    assert ["invalid_field"] == [r.reason for r in result.rejects]


def interrupted(expires: str, second: bool = False) -> dict[str, Any]:
    interrupts = [{"id": "i1", "reason": "tool_call", "expiresAt": expires}]
    if second:  # a good interrupt before the bad one: the line is still rejected whole
        interrupts.insert(0, {"id": "i0", "reason": "tool_call"})
    return {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "timestamp": T,
        "outcome": {"type": "interrupt", "interrupts": interrupts},
    }


def on_interrupt(expires: str) -> dict[str, Any]:
    value = json.dumps({"message": "ok?", "expiresAt": expires})
    return {"type": "CUSTOM", "name": "on_interrupt", "value": value, "rawEvent": {"id": "i1"}}


EXPIRY_OUT_OF_RANGE = {
    "the issue's year 1 at +14:00": "0001-01-01T00:00:00+14:00",
    "year 9999 at -14:00": "9999-12-31T23:59:59-14:00",
    "the epoch": "1970-01-01T00:00:00Z",
    "2200": "2200-01-01T00:00:00Z",
}


@pytest.mark.parametrize("expires", EXPIRY_OUT_OF_RANGE.values(), ids=EXPIRY_OUT_OF_RANGE.keys())
@pytest.mark.parametrize(
    "line",
    [interrupted, lambda e: interrupted(e, second=True), on_interrupt],
    ids=["outcome", "second interrupt of an outcome", "legacy on_interrupt"],
)
def test_an_expiry_out_of_range_rejects_its_line(
    line: Callable[[str], dict[str, Any]], expires: str
) -> None:
    finished = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1", "timestamp": T}

    result = read(START, line(expires), finished)

    assert [(2, "time_out_of_range")] == [(r.line, r.reason) for r in result.rejects]
    assert "expiresAt" in result.rejects[0].error
    assert [] == facts_of_line(result, 2)


def test_an_expiry_that_does_not_parse_is_still_a_finding_not_a_reject() -> None:
    result = read(START, interrupted("next tuesday"))

    assert [] == result.rejects
    assert ["expires_at_unparsable"] == [
        getattr(f, "rule", None) for f in result.facts if hasattr(f, "rule")
    ]


def test_an_expiry_in_range_is_kept() -> None:
    result = read(START, interrupted("2026-07-26T17:30:00+01:00"))

    assert [] == result.rejects
    assert [T + 30 * 60_000] == [f.expires_at for f in result.facts if hasattr(f, "expires_at")]


# -- ids --------------------------------------------------------------------------------------


def _outcome(**interrupt: Any) -> dict[str, Any]:
    return {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "outcome": {"type": "interrupt", "interrupts": [{"id": "i1", "reason": "r", **interrupt}]},
    }


def _input(**extra: Any) -> dict[str, Any]:
    return {"threadId": "t1", "runId": "r2", "messages": [], **extra}


def _signal(name: str, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": f"sidewatch.{name}", "value": value}


def _legacy(value: dict[str, Any], raw_id: str = "i1") -> dict[str, Any]:
    return {
        "type": "CUSTOM",
        "name": "on_interrupt",
        "value": json.dumps(value),
        "rawEvent": {"id": raw_id},
    }


REF = {"threadId": "t1", "interruptId": "i1"}
# Every stored id, name, reason, reference and digest, as (line of it, its length limit).
ID_FIELDS: dict[str, tuple[Callable[[str], dict[str, Any]], int]] = {
    "RUN_STARTED threadId": (
        lambda v: {"type": "RUN_STARTED", "threadId": v, "runId": "r9"},
        ID_MAX,
    ),
    "RUN_STARTED runId": (lambda v: {"type": "RUN_STARTED", "threadId": "t1", "runId": v}, ID_MAX),
    "RUN_FINISHED threadId": (
        lambda v: {"type": "RUN_FINISHED", "threadId": v, "runId": "r1"},
        ID_MAX,
    ),
    "RUN_FINISHED runId": (
        lambda v: {"type": "RUN_FINISHED", "threadId": "t1", "runId": v},
        ID_MAX,
    ),
    "RUN_ERROR inline runId": (
        lambda v: {"type": "RUN_ERROR", "message": "m", "threadId": "t1", "runId": v},
        ID_MAX,
    ),
    "interrupt id": (lambda v: _outcome(id=v), ID_MAX),
    "interrupt reason": (lambda v: _outcome(reason=v), ID_MAX),
    "interrupt toolCallId": (lambda v: _outcome(toolCallId=v), ID_MAX),
    "interrupt metadata.requestId": (lambda v: _outcome(metadata={"requestId": v}), REQUEST_ID_MAX),
    "interrupt metadata.actionDigest": (
        lambda v: _outcome(metadata={"actionDigest": v}),
        DIGEST_MAX,
    ),
    "TOOL_CALL_START toolCallId": (
        lambda v: {"type": "TOOL_CALL_START", "toolCallId": v, "toolCallName": "n"},
        ID_MAX,
    ),
    "TOOL_CALL_START toolCallName": (
        lambda v: {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": v},
        ID_MAX,
    ),
    "TOOL_CALL_CHUNK toolCallId": (
        lambda v: {"type": "TOOL_CALL_CHUNK", "toolCallId": v, "toolCallName": "n", "delta": "{}"},
        ID_MAX,
    ),
    "TOOL_CALL_CHUNK toolCallName": (
        lambda v: {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": v, "delta": "{}"},
        ID_MAX,
    ),
    "TOOL_CALL_RESULT toolCallId": (
        lambda v: {"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": v, "content": "x"},
        ID_MAX,
    ),
    "RunAgentInput threadId": (lambda v: _input(threadId=v), ID_MAX),
    "RunAgentInput runId": (lambda v: _input(runId=v), ID_MAX),
    "RunAgentInput resume interruptId": (
        lambda v: _input(resume=[{"interruptId": v, "status": "resolved", "payload": True}]),
        ID_MAX,
    ),
    "RunAgentInput resume digest": (
        lambda v: _input(
            resume=[
                {
                    "interruptId": "i1",
                    "status": "resolved",
                    "payload": {"approved": True, "approvedActionFingerprint": v},
                }
            ]
        ),
        DIGEST_MAX,
    ),
    "RunAgentInput ADK tool message toolCallId": (
        lambda v: _input(
            messages=[
                {"role": "tool", "id": "m1", "toolCallId": v, "content": '{"confirmed": true}'}
            ]
        ),
        ID_MAX,
    ),
    "RunAgentInput legacy resume digest": (
        lambda v: _input(
            forwardedProps={
                "command": {"resume": {"approved": True, "approvedActionFingerprint": v}}
            }
        ),
        DIGEST_MAX,
    ),
    "on_interrupt rawEvent.id": (lambda v: _legacy({"message": "m"}, raw_id=v), ID_MAX),
    "on_interrupt reason": (lambda v: _legacy({"reason": v}), ID_MAX),
    "on_interrupt toolCallId": (lambda v: _legacy({"toolCallId": v}), ID_MAX),
    "on_interrupt action name": (
        lambda v: _legacy({"action_requests": [{"name": v, "args": {}}]}),
        ID_MAX,
    ),
    "route requestId": (lambda v: _signal("route", requestId=v, delivered=True), REQUEST_ID_MAX),
    "route threadId": (
        lambda v: _signal("route", threadId=v, interruptId="i1", delivered=True),
        ID_MAX,
    ),
    "route interruptId": (
        lambda v: _signal("route", threadId="t1", interruptId=v, delivered=True),
        ID_MAX,
    ),
    "route approverRef": (
        lambda v: _signal("route", **REF, delivered=True, approverRef=v),
        ID_MAX,
    ),
    "decision actionDigest": (
        lambda v: _signal("decision", **REF, decision="accept", actionDigest=v),
        DIGEST_MAX,
    ),
    "action actionDigest": (lambda v: _signal("action", **REF, actionDigest=v), DIGEST_MAX),
    "receipt requestId": (lambda v: _signal("receipt", requestId=v), REQUEST_ID_MAX),
    "heartbeat threadId": (lambda v: _signal("heartbeat", threadId=v), ID_MAX),
    "heartbeat runId": (lambda v: _signal("heartbeat", threadId="t1", runId=v), ID_MAX),
    "heartbeat service": (
        lambda v: _signal("heartbeat", service=v, instance="i", durable=True),
        ID_MAX,
    ),
    "heartbeat instance": (
        lambda v: _signal("heartbeat", service="s", instance=v, durable=False),
        ID_MAX,
    ),
    "heartbeat binding threadId": (
        lambda v: _signal("heartbeat", threadId=v, service="s", instance="i", durable=True),
        ID_MAX,
    ),
    "heartbeat binding runId": (
        lambda v: _signal(
            "heartbeat", threadId="t1", runId=v, service="s", instance="i", durable=True
        ),
        ID_MAX,
    ),
}
BAD_CHARACTERS = {
    "NUL": "n\x00",
    "newline": "a\nb",
    "escape": "\x1b[31mred",
    "DEL": "x\x7f",
    "C1": "x\x85",
    "line separator": "a\u2028b",
}


@pytest.mark.parametrize("field", ID_FIELDS.keys())
def test_a_good_id_in_every_field_is_accepted(field: str) -> None:
    line, limit = ID_FIELDS[field]

    result = read(START, line("ok-id/é@1"), line("x" * limit))

    assert [] == result.rejects


@pytest.mark.parametrize("bad", BAD_CHARACTERS.values(), ids=BAD_CHARACTERS.keys())
@pytest.mark.parametrize("field", ID_FIELDS.keys())
def test_an_id_holding_a_control_character_rejects_its_line(field: str, bad: str) -> None:
    result = read(START, ID_FIELDS[field][0](bad))

    assert [(2, "invalid_id")] == [(r.line, r.reason) for r in result.rejects]
    assert "control characters" in result.rejects[0].error
    assert [] == facts_of_line(result, 2)


@pytest.mark.parametrize("field", ID_FIELDS.keys())
def test_an_id_over_its_length_limit_rejects_its_line(field: str) -> None:
    line, limit = ID_FIELDS[field]

    result = read(START, line("x" * (limit + 1)))

    assert [(2, "invalid_id")] == [(r.line, r.reason) for r in result.rejects]
    assert f"at most {limit} characters" in result.rejects[0].error
    assert [] == facts_of_line(result, 2)


def test_an_adk_confirmation_naming_a_bad_original_call_is_not_read_as_one() -> None:
    args = json.dumps({"originalFunctionCall": {"id": "c\x00", "name": "deploy", "args": {}}})
    lines = [
        START,
        {"type": "TOOL_CALL_START", "toolCallId": "k1", "toolCallName": "adk_request_confirmation"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "k1", "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": "k1"},
    ]

    result = read(*lines)

    ids = [getattr(f, "tool_call_id", None) for f in result.facts]
    assert "c\x00" not in ids


# -- the reasons, as bounded labels -----------------------------------------------------------


def reasons_in_ingest_code() -> set[str]:
    """The first argument (a string, or a `RejectReason` member) of every
    `LineError`/`EvidenceError` and the reason of every `Reject` built in sidewatch/ingest
    (and its `producers/`)."""
    found: set[str] = set()
    for path in (Path(__file__).resolve().parents[2] / "sidewatch" / "ingest").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            at = {"LineError": 0, "EvidenceError": 0, "Reject": 1}.get(node.func.id)
            if at is not None and len(node.args) > at:
                arg = node.args[at]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
                elif (
                    isinstance(arg, ast.Attribute)
                    and isinstance(arg.value, ast.Name)
                    and arg.value.id == "RejectReason"
                ):
                    found.add(RejectReason[arg.attr].value)
    return found


def test_every_reject_reason_is_a_metric_label_and_listed_in_the_metrics_reference() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md").read_text()
    row = next(line for line in readme.splitlines() if "`sidewatch_rejected_lines_total`" in line)

    reasons = reasons_in_ingest_code()

    assert {"time_out_of_range", "invalid_id", "not_json", "too_long"} <= reasons
    assert reasons == set(REJECT_REASONS)
    assert reasons == set(re.findall(r"`([a-z_]+)`", row.split("`reason`")[1]))
