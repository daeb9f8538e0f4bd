"""The interpreter's hand-read shortcuts agree with the ag-ui models they stand in for: the
event type names, and an interrupt outcome read without pydantic. A plain stream is read
without importing the ag-ui models or pydantic at all (most of ingest's start-up)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ag_ui.core import EventType
from hypothesis import given, settings
from hypothesis import strategies as st

from sidewatch.ingest.agui import EVENT_TYPES, Interpreter
from sidewatch.ingest.outcome import Interrupt, modelled_interrupts, plain_interrupts
from sidewatch.ingest.reader import Framed

ROOT = Path(__file__).resolve().parents[2]


def test_the_named_event_types_are_ag_ui_s() -> None:
    assert tuple(t.value for t in EventType) == EVENT_TYPES


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.lists(st.text(max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)
keys = st.sampled_from(
    [
        "id",
        "reason",
        "message",
        "toolCallId",
        "tool_call_id",
        "subagentRunId",
        "expiresAt",
        "expires_at",
        "responseSchema",
        "metadata",
        "other",
    ]
)
interrupt = st.dictionaries(keys, values, max_size=6) | st.fixed_dictionaries(
    {"id": st.text(max_size=3), "reason": st.text(max_size=3)},
    optional={
        "toolCallId": st.text(max_size=3) | st.none(),
        "expiresAt": st.text(max_size=3) | st.none(),
        "metadata": st.dictionaries(st.text(max_size=3), values, max_size=2) | st.none(),
        "responseSchema": st.dictionaries(st.text(max_size=3), values, max_size=2),
        "message": st.text(max_size=3),
    },
)
outcome = st.fixed_dictionaries(
    {"type": st.just("interrupt"), "interrupts": st.lists(interrupt, max_size=3)},
    optional={"extra": values},
)


@settings(max_examples=600, deadline=None)
@given(outcome)
def test_an_outcome_read_by_hand_is_the_one_pydantic_reads(value: dict[str, Any]) -> None:
    plain = plain_interrupts(value)
    if plain is None:
        return  # left to pydantic, which reads it (or words its reject) as before
    assert modelled_interrupts(value) == plain


def test_a_plain_outcome_is_read_by_hand() -> None:
    value = {
        "type": "interrupt",
        "interrupts": [
            {
                "id": "i-1",
                "reason": "tool_call",
                "toolCallId": "c-1",
                "message": "Deploy?",
                "expiresAt": "2026-07-27T16:00:00Z",
                "metadata": {"resumeHandle": "ckpt:t"},
                "subagentRunId": "sub-1",
            }
        ],
    }

    assert [
        Interrupt(
            "i-1",
            "tool_call",
            "c-1",
            "2026-07-27T16:00:00Z",
            {"resumeHandle": "ckpt:t"},
            None,
            "sub-1",
        )
    ] == plain_interrupts(value)
    assert modelled_interrupts(value) == plain_interrupts(value)


def test_a_snake_case_spelling_is_left_to_pydantic() -> None:
    value = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "r", "tool_call_id": "c"}]}

    assert plain_interrupts(value) is None
    facts = (
        Interpreter(0, 0, lambda r: r)
        .read_chunks(
            [
                [
                    json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}).encode(),
                    json.dumps(
                        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": value}
                    ).encode(),
                ]
            ]
        )
        .facts
    )
    assert ["c"] == [f.tool_call_id for f in facts if hasattr(f, "tool_call_id")]


# A stream of runs that stop at a gated tool call, as bench/ingest.py streams them.
PLAIN_STREAM = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 1_785_081_600_000},
    {"type": "STEP_STARTED", "stepName": "s"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
    {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "deploy"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
    {"type": "TOOL_CALL_END", "toolCallId": "c"},
    {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "r",
        "timestamp": 1_785_081_601_000,
        "outcome": {
            "type": "interrupt",
            "interrupts": [
                {"id": "i", "reason": "tool_call", "toolCallId": "c", "metadata": {"a": 1}}
            ],
        },
    },
    {
        "type": "CUSTOM",
        "name": "sidewatch.heartbeat",
        "timestamp": 1_785_081_602_000,
        "value": {"threadId": "t", "resumeHandle": "ckpt:t"},
    },
]

PROBE = """
import sys
from sidewatch.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="sidewatch")
except SystemExit as e:
    print("exit", e.code, file=sys.stderr)
print("loaded:", *sorted({n.split(".")[0] for n in sys.modules} & {"ag_ui", "pydantic"}))
"""


def test_ingest_of_a_plain_stream_imports_neither_ag_ui_nor_pydantic(tmp_path: Path) -> None:
    stream = tmp_path / "plain.ndjson"
    stream.write_text("".join(json.dumps(e) + "\n" for e in PLAIN_STREAM))
    db = f"sqlite:///{tmp_path / 'store.db'}"

    done = subprocess.run(
        [sys.executable, "-c", PROBE, "ingest", "--db", db, str(stream)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )

    assert "exit 0" in done.stderr, done.stderr
    out = done.stdout.strip().splitlines()
    assert f"{stream}: 6 accepted, 2 skipped, 0 rejected" == out[0]
    assert "loaded:" == out[-1]


STEP_LINES = [
    b'{"type":"STEP_STARTED","stepName":"plan"}',
    b'{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/step","value":1}]}',
    b'{"type":"STATE_SNAPSHOT","snapshot":{}}',
    b'{"type":"STEP_FINISHED","stepName":"plan"}',
]


def test_graph_steps_and_state_are_counted_without_the_general_path(monkeypatch: Any) -> None:
    fed: list[int] = []
    general = Interpreter.feed

    def feed(self: Interpreter, line_no: int, raw: Any) -> None:
        fed.append(line_no)
        general(self, line_no, raw)

    monkeypatch.setattr(Interpreter, "feed", feed)
    # A cut STEP_STARTED line is counted unparsed, as `feed` counts it.
    lines = [*STEP_LINES, b'{"type":"STEP_STARTED"', b'{"type":"STEP_BOGUS"}', b'{"type":"RUN_']

    res = Interpreter(0, 0, lambda r: r).read_chunks([lines])

    # Only the lines a reject is worded for (an unknown type, broken JSON) take `feed`.
    assert [6, 7] == fed
    assert {"step": 3, "state": 2} == dict(res.kinds)
    assert (0, 5) == (res.accepted, res.skipped)
    assert ["unknown_type", "not_json"] == [r.reason for r in res.rejects]


def test_a_step_line_over_the_limit_is_still_rejected() -> None:
    res = Interpreter(0, 0, lambda r: r, max_line_bytes=50).read(Framed(lines=STEP_LINES))

    assert [(2, "too_long")] == [(r.line, r.reason) for r in res.rejects]
    assert {"step": 2, "state": 1} == dict(res.kinds)


def test_a_content_or_argument_line_over_the_limit_is_rejected_like_any_other() -> None:
    text = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"' + b"x" * 80 + b'"}'
    args = b'{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"' + b"y" * 80 + b'"}'
    short = b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"ok"}'

    res = Interpreter(0, 0, lambda r: r, max_line_bytes=100).read(Framed(lines=[short, text, args]))

    assert [(2, "too_long"), (3, "too_long")] == [(r.line, r.reason) for r in res.rejects]
    assert {"content": 1} == dict(res.kinds)
