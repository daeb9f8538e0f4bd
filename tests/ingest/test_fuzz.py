"""Hostile input never crashes ingest: random and mutated AG-UI lines, wrong types, deep
nesting, huge numbers, invalid UTF-8 and broken framing give line-level rejects (or, for a body
that cannot be read at all, an InputError), never an exception of another kind."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidewatch.errors import InputError
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.reader import frame, gunzip

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "seed-audit.ndjson"
LINES = [json.loads(line) for line in SEED.read_text().splitlines()]
PRODUCERS = Path(__file__).resolve().parents[1] / "fixtures" / "producers"
LINES += [
    json.loads(line)
    for line in (PRODUCERS / "adk-approve-default.ndjson").read_text().splitlines()[:40]
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A real line with one field replaced, removed or added."""
    line = dict(draw(st.sampled_from(LINES)))
    key = draw(st.sampled_from([*sorted(line), "threadId", "runId", "value", "outcome"]))
    action = draw(st.sampled_from(["replace", "remove", "nest"]))
    if action == "remove":
        line.pop(key, None)
    elif action == "replace":
        line[key] = draw(json_values)
    else:
        line[key] = {"x": [line.get(key)] * 3}
    return line


def read(body: bytes, media: str | None = None) -> None:
    try:
        result = Interpreter(0, 0, lambda ref: ref).read(frame(body, media))
    except InputError:
        return  # the whole body is unreadable: a 400, and nothing stored
    lines = body.count(b"\n") + 1
    for r in result.rejects:
        assert 1 <= r.line <= max(lines, len(result.rejects) + 1000)
        assert r.error and "\n" not in r.error


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated(), min_size=1, max_size=12))
def test_mutated_agui_lines_never_crash_ingest(lines: list[dict[str, Any]]) -> None:
    read("\n".join(json.dumps(line) for line in lines).encode())


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=8))
def test_any_json_values_never_crash_ingest(values: list[Any]) -> None:
    read("\n".join(json.dumps(v) for v in values).encode())
    read(json.dumps(values).encode(), "application/json")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_crash_ingest(body: bytes) -> None:
    read(body)
    read(body, "text/event-stream")
    read(b"data: " + body + b"\n\n", "text/event-stream")


def test_deep_nesting_huge_numbers_and_invalid_utf8_are_rejects() -> None:
    deep = b'{"type":"CUSTOM","name":"sidewatch.route","value":' + b"[" * 5000 + b"]" * 5000 + b"}"
    huge = b'{"type":"RUN_STARTED","threadId":"t","runId":"r","timestamp":' + b"9" * 400 + b"}"
    bad_utf8 = b'{"type":"RUN_STARTED","threadId":"\xff\xfe","runId":"r"}'
    body = b"\n".join([deep, huge, bad_utf8, b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}'])

    result = Interpreter(0, 0, lambda ref: ref).read(frame(body))

    assert [1, 2, 3] == [r.line for r in result.rejects]
    assert 1 == result.accepted


def test_a_gzip_bomb_is_refused_before_it_inflates() -> None:
    bomb = gzip.compress(b"\n" * 50_000_000)
    try:
        gunzip(bomb, limit=1_000_000)
    except InputError as e:
        assert "limit" in str(e)
    else:
        raise AssertionError("the bomb inflated")
