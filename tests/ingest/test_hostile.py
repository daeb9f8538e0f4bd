"""Hostile lines end to end, on SQLite and PostgreSQL: the poison pills of issue 12 are
rejected at ingest with reasons of their own and an audit after them still works; ids at their
length limits fit the store; and no reject message, printed, stored or answered over HTTP,
quotes a fragment of its line."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner
from sqlalchemy import select

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest
from sidewatch.cli.main import cli
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.daemon.serve import Daemon
from sidewatch.ingest.agui import Interpreter
from sidewatch.ingest.bounds import DIGEST_MAX, ID_MAX, REQUEST_ID_MAX
from sidewatch.ingest.digest import RefProtector
from sidewatch.ingest.reader import frame
from sidewatch.store.db import open_store
from sidewatch.store.models import LegacyResumeRow, RejectRow
from sidewatch.store.repo import Store

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

T = 1_785_081_600_000  # 2026-07-26T16:00:00Z
AT = "2026-07-26T16:30:00Z"
PROTECT = RefProtector(b"test-key", ("role:",))


def ndjson(*lines: dict[str, Any] | bytes) -> bytes:
    return b"\n".join(line if isinstance(line, bytes) else orjson.dumps(line) for line in lines)


def wait(thread: str, at: int = T, expires: str | None = None) -> list[dict[str, Any]]:
    """One announced wait of `thread` (interrupt `i1` of run `r1`)."""
    interrupt: dict[str, Any] = {"id": "i1", "reason": "tool_call"}
    if expires is not None:
        interrupt["expiresAt"] = expires
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1", "timestamp": at},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "timestamp": at + 1000,
            "outcome": {"type": "interrupt", "interrupts": [interrupt]},
        },
    ]


def rejects_of(db: str) -> list[tuple[int, str, str]]:
    engine = open_store(db)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(RejectRow.c.line, RejectRow.c.reason, RejectRow.c.error))
            return sorted((int(line), str(reason), str(error)) for line, reason, error in rows)
    finally:
        engine.dispose()


# -- the poison pills of issue 12 --------------------------------------------------------------


def test_the_issues_poison_lines_are_rejected_and_an_audit_after_them_works(
    db_url: str, tmp_path: Path
) -> None:
    poison = [
        *wait("t-good"),  # lines 1-2: a good wait, stored
        {"type": "RUN_STARTED", "threadId": "t-a", "runId": "r1", "timestamp": -1e14},
        {
            "type": "RUN_STARTED",
            "threadId": "t-b",
            "runId": "r1",
            "timestamp": -100_000_000_000_000,
        },
        wait("t-c", expires="0001-01-01T00:00:00+14:00")[1],
        {"type": "RUN_STARTED", "threadId": "t-d", "runId": "r1", "timestamp": 1e17},
        {"type": "RUN_STARTED", "threadId": "t-e", "runId": "r1", "timestamp": 10**17},
        wait("n\u0000")[0],
        wait("n\u0000")[1],
    ]
    unit = tmp_path / "poison.ndjson"
    unit.write_bytes(ndjson(*poison))
    runner = CliRunner()

    ingested = runner.invoke(cli, ["ingest", "--db", db_url, str(unit)])
    audited = runner.invoke(cli, ["audit", "--db", db_url, "--at", AT, "--format", "json"])

    assert 1 == ingested.exit_code, ingested.output
    assert f"{unit}: 2 accepted, 0 skipped, 7 rejected" == ingested.output.splitlines()[0]
    reasons = [(line, reason) for line, reason, _ in rejects_of(db_url)]
    assert [
        (3, "time_out_of_range"),
        (4, "time_out_of_range"),
        (5, "time_out_of_range"),
        (6, "time_out_of_range"),
        (7, "time_out_of_range"),
        (8, "invalid_id"),
        (9, "invalid_id"),
    ] == reasons
    assert 0 == audited.exit_code, audited.output
    assert ["t-good"] == [w["threadId"] for w in json.loads(audited.output)["waits"]]


# -- limits that fit the store -----------------------------------------------------------------


def test_ids_at_their_length_limits_are_stored_and_audited(db_url: str) -> None:
    """The limits are within the store's columns: PostgreSQL refuses a longer value whole."""
    thread, run, interrupt = "t" * ID_MAX, "r" * ID_MAX, "i" * ID_MAX
    lines = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": T},
        {"type": "TOOL_CALL_START", "toolCallId": "c" * ID_MAX, "toolCallName": "n" * ID_MAX},
        {"type": "TOOL_CALL_END", "toolCallId": "c" * ID_MAX},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "timestamp": T + 1000,
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": interrupt,
                        "reason": "x" * ID_MAX,
                        "toolCallId": "c" * ID_MAX,
                        "metadata": {
                            "requestId": "q" * REQUEST_ID_MAX,
                            "actionDigest": "d" * DIGEST_MAX,
                        },
                    }
                ],
            },
        },
        # a legacy interrupt without an id gets `{runId}#1`, longer than the run id
        {"type": "CUSTOM", "name": "on_interrupt", "value": "{}", "threadId": thread, "runId": run},
        {
            "type": "CUSTOM",
            "name": "sidewatch.route",
            "value": {
                "requestId": "q" * REQUEST_ID_MAX,
                "delivered": True,
                "approverRef": "role:" + "a" * (ID_MAX - len("role:")),
            },
        },
    ]
    engine = open_store(db_url)
    try:
        summary = Ingest(Store(engine), PROTECT, Config()).body("test", ndjson(*lines), T)
        audited = audit(Store(engine), (DEFAULT_POLICY,), T + 60_000)
    finally:
        engine.dispose()

    assert (6, []) == (summary.accepted, list(summary.rejects))
    assert {"q" * REQUEST_ID_MAX, f"{thread}/{run}#1"} == {a.verdict.request_id for a in audited}


def test_a_legacy_resume_map_too_big_to_store_is_read_as_one_answer(db_url: str) -> None:
    resume = {f"field-{n:04}": True for n in range(600)}  # a payload, not a map of interrupts
    line = {
        "threadId": "t1",
        "runId": "r2",
        "messages": [],
        "timestamp": T,
        "forwardedProps": {"command": {"resume": resume}},
    }
    engine = open_store(db_url)
    try:
        summary = Ingest(Store(engine), PROTECT, Config()).body("test", ndjson(line), T)
        with engine.connect() as conn:
            rows = conn.execute(select(LegacyResumeRow.c.code, LegacyResumeRow.c.entries)).all()
    finally:
        engine.dispose()

    assert (1, []) == (summary.accepted, list(summary.rejects))
    assert [("accept", "[]")] == [(str(c), str(e)) for c, e in rows]


# -- reject messages hold no fragment of their line ------------------------------------------

S = "Zq7Sentinel"  # placed at the start of every value a reject could quote


def _in_run(**fields: Any) -> dict[str, Any]:
    return {"threadId": "t1", "runId": "r1", **fields}


SENTINEL_LINES: list[dict[str, Any] | bytes] = [
    {"type": S},
    {"type": f"{S}_START", "threadId": S},
    {"type": "CUSTOM", "name": f"sidewatch.{S}", "value": {"threadId": S}},
    {"type": "CUSTOM", "name": "sidewatch.route", "value": S},
    {"type": "CUSTOM", "name": "sidewatch.route", "value": {"requestId": S, "delivered": S}},
    {"type": "CUSTOM", "name": "sidewatch.decision", "value": {"requestId": S, "decision": S}},
    {
        "type": "CUSTOM",
        "name": "sidewatch.route",
        "value": {"requestId": S + "\x00", "delivered": True},
    },
    {"type": "CUSTOM", "name": "sidewatch.route", "value": {"threadId": S, "delivered": True}},
    {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": {"threadId": S, "resumeHandle": 5}},
    {"type": "CUSTOM", "name": "sidewatch.action", "value": {"requestId": S * 40}},
    {"type": "RUN_STARTED", "threadId": S + "\x00", "runId": S},
    {"type": "RUN_STARTED", "threadId": S, "runId": S * 40},
    {"type": "RUN_STARTED", "threadId": S, "runId": S, "timestamp": S},
    {"type": "RUN_STARTED", "threadId": S, "runId": S, "timestamp": -1e14},
    {"type": "RUN_FINISHED", **_in_run(), "outcome": {"type": S}},
    {
        "type": "RUN_FINISHED",
        **_in_run(),
        "outcome": {"type": "interrupt", "interrupts": [{"id": S}]},
    },
    {
        "type": "RUN_FINISHED",
        **_in_run(),
        "outcome": {
            "type": "interrupt",
            "interrupts": [{"id": S, "reason": S, "expiresAt": "0001-01-01T00:00:00+14:00"}],
        },
    },
    {"type": "TOOL_CALL_RESULT", "messageId": S, "toolCallId": S, "content": S, "runId": S},
    {"type": "TOOL_CALL_START", "toolCallId": S, "toolCallName": S, "threadId": S},
    {"type": "RUN_ERROR", "message": S},
    {"type": "CUSTOM", "name": "on_interrupt", "value": json.dumps({"message": S}), "runId": S},
    {**_in_run(), "messages": [{"role": S, "id": S, "content": S}]},
    {**_in_run(), "messages": [{"role": "user", "id": S, "content": [{"type": S, "text": S}]}]},
    {**_in_run(), "messages": [{"role": "user", "id": S, "content": 5}]},
    {**_in_run(), "messages": [], "resume": [{"interruptId": S, "status": S}]},
    {**_in_run(), "messages": [], "tools": [{"name": S, "description": 5, "parameters": {S: S}}]},
    {**_in_run(), "messages": [], "state": {S: S}, "context": [{S: S}]},
    {**_in_run(), "messages": [], "resume": [{"interruptId": S + "\n", "status": "resolved"}]},
    {"threadId": S, "runId": S, "messages": S},
    f'{{"type":"RUN_STARTED","threadId":{S}}}'.encode(),
    f'"{S}"'.encode(),
    f'["{S}"]'.encode(),
]


def test_every_sentinel_line_is_a_reject() -> None:
    """So the check below is a check: each line is rejected, and its message was made."""
    result = Interpreter(T, 0, lambda ref: ref).read(frame(ndjson(*SENTINEL_LINES)))

    assert list(range(1, len(SENTINEL_LINES) + 1)) == sorted(r.line for r in result.rejects)
    assert [] == [r.error for r in result.rejects if S.lower() in r.error.lower()]


def test_no_reject_message_quotes_its_line_in_the_cli_the_store_or_http(
    db_url: str, tmp_path: Path
) -> None:
    unit = tmp_path / "hostile.ndjson"
    unit.write_bytes(ndjson(*SENTINEL_LINES))

    printed = CliRunner().invoke(cli, ["ingest", "--db", db_url, str(unit)])
    stored = rejects_of(db_url)
    daemon = Daemon(dataclasses.replace(Config(), db_url=db_url, allowed_hosts=("testserver",)))
    try:
        answered = TestClient(daemon.app).post(
            "/v1/events",
            content=ndjson(*SENTINEL_LINES),
            headers={"content-type": "application/x-ndjson"},
        )
    finally:
        daemon.engine.dispose()

    assert 1 == printed.exit_code
    assert len(SENTINEL_LINES) == len(stored) == len(answered.json()["rejected"])
    assert S.lower() not in printed.output.lower()
    assert [] == [e for _, _, e in stored if S.lower() in e.lower()]
    assert S.lower() not in answered.text.lower()
