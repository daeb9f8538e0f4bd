"""Hostile input never crashes ingest: random and mutated AG-UI lines, wrong types, deep
nesting, huge numbers, invalid UTF-8 and broken framing give line-level rejects (or, for a body
that cannot be read at all, an InputError), never an exception of another kind. Odd times and
ids with control characters in every field give clean rejects, never reach a fact, and never
make SQLite or PostgreSQL refuse a unit."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidewatch.app.ingest import Ingest
from sidewatch.config import Config
from sidewatch.errors import InputError
from sidewatch.exporters.prometheus import REJECT_REASONS
from sidewatch.ingest.agui import Interpreter, UnitResult
from sidewatch.ingest.bounds import EARLIEST_MS, LATEST_MS, REQUEST_ID_MAX, id_problem, time_ok
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.reader import frame, gunzip
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from tests.ingest.test_bounds import ID_FIELDS, START, TIMED_LINES, interrupted

SEED = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "seed-audit.ndjson"
LINES = [json.loads(line) for line in SEED.read_text().splitlines()]
PRODUCERS = Path(__file__).resolve().parent / "producers" / "fixtures"
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


RECEIVED = 1_785_081_600_000  # the unit's arrival: the time of lines without a timestamp


def read(body: bytes, media: str | None = None) -> UnitResult | None:
    """The unit's result, checked: clean rejects, and facts fit to store."""
    try:
        result = Interpreter(RECEIVED, 0, lambda ref: ref).read(frame(body, media))
    except InputError:
        return None  # the whole body is unreadable: a 400, and nothing stored
    lines = body.count(b"\n") + 1
    for r in result.rejects:
        assert 1 <= r.line <= max(lines, len(result.rejects) + 1000)
        assert r.error and "\n" not in r.error
        assert r.reason in REJECT_REASONS
    for fact in result.facts:
        for f in dataclasses.fields(fact):
            v = getattr(fact, f.name)
            if f.name in ("at", "expires_at") and v is not None:
                assert time_ok(v), (fact, f.name)
            elif isinstance(v, str):
                assert id_problem(v, REQUEST_ID_MAX) is None, (fact, f.name)
    return result


# Times a producer might get wrong: seconds, µs or ns for ms, negative, huge, fractional, as a
# string, and ISO date-times anywhere in years 1..9999 with the widest offsets.
odd_times = (
    st.integers(min_value=-(10**20), max_value=10**20)
    | st.sampled_from([-(10**14), 10**17, 1_785_081_600, 1_785_081_600_000_000, 0, -1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0", "", "1785081600000"])
    | st.builds(
        "{:04}-{:02}-{:02}T{:02}:00:00{}{:02}:{:02}".format,
        st.integers(1, 9999),
        st.integers(1, 12),
        st.integers(1, 28),
        st.integers(0, 23),
        st.sampled_from("+-"),
        st.integers(0, 23),
        st.integers(0, 59),
    )
)
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)]
# Ids with control characters anywhere (no lone surrogate: a line holding one is not JSON),
# and ids past every length limit.
control_ids = st.text(
    st.sampled_from(CONTROL) | st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12
).map(lambda t: t if any(c in CONTROL for c in t) else t + "\x00")
hostile_ids = control_ids | st.integers(201, 1200).map(lambda n: "x" * n)
# Every field whose value ingest stores, wherever a line holds it.
STORED = frozenset(
    {
        "threadId",
        "runId",
        "interruptId",
        "toolCallId",
        "toolCallName",
        "requestId",
        "approverRef",
        "actionDigest",
        "id",
        "reason",
    }
)
TIMES = frozenset({"timestamp", "expiresAt"})


def paths(value: Any, at: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The paths in `value` of every stored field or time."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in items:
        if key in STORED or key in TIMES:
            yield (*at, key)
        if isinstance(v, dict | list):
            yield from paths(v, (*at, key))


@st.composite
def with_hostile_value(draw: st.DrawFn) -> dict[str, Any]:
    """A real line with one stored field or time (or a new `timestamp`) made hostile."""
    line = copy.deepcopy(draw(st.sampled_from(LINES)))
    path = draw(st.sampled_from([("timestamp",), *paths(line)]))
    where = line
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = draw(odd_times if path[-1] in TIMES else hostile_ids | odd_times)
    return line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(with_hostile_value(), min_size=1, max_size=12))
def test_odd_times_and_control_characters_are_clean_rejects_and_never_reach_a_fact(
    lines: list[dict[str, Any]],
) -> None:
    read("\n".join(json.dumps(line) for line in lines).encode())
    read(json.dumps(lines).encode(), "application/json")


@settings(max_examples=100, deadline=None)
@given(control_ids, st.integers(1, 300))
def test_a_hostile_id_in_any_stored_field_is_an_invalid_id_reject(bad: str, over: int) -> None:
    for field, (line, limit) in ID_FIELDS.items():
        for value in (bad, "x" * (limit + over)):
            result = read(json.dumps(START).encode() + b"\n" + json.dumps(line(value)).encode())

            assert result is not None
            assert [(2, "invalid_id")] == [(r.line, r.reason) for r in result.rejects], field


def expected_reject(ts: Any) -> str | None:
    """The reason a `timestamp` must be rejected for (the oracle of the next test)."""
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return "invalid_field"
    if not EARLIEST_MS <= ts < LATEST_MS:
        return "time_out_of_range"
    return None if isinstance(ts, int) else "invalid_field"


def expected_expiry_reject(text: str) -> str | None:
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        return None  # unparsable: the spec's finding, not a reject
    ms = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp() * 1000
    return None if EARLIEST_MS <= ms < LATEST_MS else "time_out_of_range"


@settings(max_examples=300, deadline=None)
@given(odd_times)
def test_an_odd_time_on_any_timed_line_is_rejected_exactly_when_it_is_out_of_rule(
    ts: Any,
) -> None:
    for event, line in TIMED_LINES.items():
        result = read(json.dumps(START).encode() + b"\n" + json.dumps(line(ts)).encode())

        assert result is not None
        want = expected_reject(ts)
        assert ([(2, want)] if want else []) == [(r.line, r.reason) for r in result.rejects], event
    if isinstance(ts, str):
        result = read(json.dumps(START).encode() + b"\n" + json.dumps(interrupted(ts)).encode())

        assert result is not None
        want = expected_expiry_reject(ts)
        assert ([(2, want)] if want else []) == [(r.line, r.reason) for r in result.rejects]


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


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(with_hostile_value(), min_size=1, max_size=12))
def test_hostile_values_never_make_the_store_refuse_a_unit(
    db_url: str, lines: list[dict[str, Any]]
) -> None:
    """What ingest accepts, SQLite and PostgreSQL store: no value reaches the database to be
    refused there (a NUL, an id past its column), which would lose the unit's good lines."""
    body = "\n".join(json.dumps(line) for line in lines).encode()
    engine = open_store(db_url)
    try:
        summary = Ingest(Store(engine), RefProtector(b"k", ("role:",)), Config()).body(
            "fuzz", body, RECEIVED
        )
    finally:
        engine.dispose()

    assert summary.accepted + summary.skipped + len(summary.rejects) <= len(lines)
