"""Nothing of the content reaches the store: arguments, messages, interrupt messages, resume
payloads, error texts and personal approver references never appear in the database file (or,
on PostgreSQL, in any row of the store's schema)."""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from sidewatch.app.audit import Auditor, audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.report import render, report
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY
from sidewatch.daemon.serve import Daemon
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2 (see test_http)
    from starlette.testclient import TestClient

SECRETS = {
    "args": "SECRET-ARG-7f3a9c",
    "arg_key": "SECRETKEY_b81d",
    "text": "SECRET-TEXT-DELTA-22e1",
    "message": "SECRET-USER-MESSAGE-0c4d",
    "interrupt": "SECRET-INTERRUPT-MSG-9911",
    "payload": "SECRET-RESUME-PAYLOAD-5e5e",
    "tool_result": "SECRET-TOOL-RESULT-aa01",
    "run_error": "SECRET-RUN-ERROR-4242",
    "route_error": "SECRET-ROUTE-ERROR-7777",
    "email": "jane.doe.secret@example.com",
    "handle": "SECRET-HANDLE-ckpt-3131",
    "state": "SECRET-STATE-6060",
}
T0 = 1_785_081_600_000


def _lines() -> list[dict]:
    s = SECRETS
    return [
        {
            "threadId": "t1",
            "runId": "r1",
            "messages": [{"id": "m0", "role": "user", "content": s["message"]}],
        },
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1", "timestamp": T0},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": s["text"]},
        {"type": "STATE_SNAPSHOT", "snapshot": {"k": s["state"]}},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "send_money"},
        {
            "type": "TOOL_CALL_ARGS",
            "toolCallId": "c1",
            "delta": json.dumps({s["arg_key"]: s["args"]}),
        },
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t1",
            "runId": "r1",
            "timestamp": T0 + 1000,
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "i1",
                        "reason": "tool_call",
                        "toolCallId": "c1",
                        "message": s["interrupt"],
                        "metadata": {"resumeHandle": s["handle"]},
                    }
                ],
            },
        },
        {
            "type": "CUSTOM",
            "name": "sidewatch.route",
            "timestamp": T0 + 2000,
            "value": {
                "threadId": "t1",
                "interruptId": "i1",
                "delivered": True,
                "approverRef": s["email"],
            },
        },
        {
            "type": "CUSTOM",
            "name": "sidewatch.route",
            "timestamp": T0 + 2500,
            "value": {
                "threadId": "t1",
                "interruptId": "i1",
                "delivered": False,
                "error": s["route_error"],
            },
        },
        {
            "threadId": "t1",
            "runId": "r2",
            "messages": [{"id": "m2", "role": "user", "content": s["message"]}],
            "resume": [
                {
                    "interruptId": "i1",
                    "status": "resolved",
                    "payload": {"approved": True, "note": s["payload"]},
                }
            ],
        },
        {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2", "timestamp": T0 + 60_000},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "m3",
            "toolCallId": "c1",
            "content": s["tool_result"],
        },
        {"type": "RUN_ERROR", "message": s["run_error"]},
    ]


def _stored(engine: Engine, tmp_path: Path) -> bytes:
    """Everything the store holds: SQLite's files (with the WAL and free pages) byte for byte;
    on PostgreSQL, every row of every table of the store's schema, as text."""
    if engine.dialect.name == "sqlite":
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    with engine.connect() as conn:
        tables = inspect(conn).get_table_names()
        assert "interrupt" in tables
        return "\n".join(
            str(row)
            for table in tables
            for row in conn.exec_driver_sql(f'SELECT t::text FROM "{table}" t')
        ).encode()


def test_no_content_reaches_the_database_file(tmp_path: Path, db_url: str) -> None:
    engine = open_store(db_url)
    store = Store(engine)
    body = "\n".join(json.dumps(line) for line in _lines()).encode()

    summary = Ingest(store, ref_protector(engine, Config()), Config()).body("privacy", body, T0)
    verdicts = audit(store, (DEFAULT_POLICY,), T0 + 120_000)
    Auditor(store, Config().policies).tick(T0 + 120_000)  # the auditor's records too
    stored = _stored(engine, tmp_path)
    engine.dispose()

    assert () == summary.rejects
    assert 1 == len(verdicts)
    assert b"t1" in stored
    leaked = [name for name, secret in SECRETS.items() if secret.encode() in stored]
    assert [] == leaked
    ref = verdicts[0].verdict.facts.approver_ref
    assert ref is not None and ref.startswith("hmac-sha256:")


def test_role_references_are_kept_as_they_are(db_url: str) -> None:
    engine = open_store(db_url)
    protect = ref_protector(engine, Config())

    kept = (protect("role:release-owner"), protect("jane@example.com").startswith("hmac-sha256:"))
    engine.dispose()

    assert ("role:release-owner", True) == kept


def test_no_content_reaches_logs_metrics_reports_alerts_or_the_read_api(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    daemon = Daemon(replace(Config(), db_url=db_url, allowed_hosts=("testserver",)))
    client = TestClient(daemon.app)
    body = "\n".join(json.dumps(line) for line in _lines()).encode()
    bad = b'{"type":"RUN_STARTED","threadId":"SECRET-IN-A-BAD-LINE-4141"'

    posted = client.post("/v1/events", content=body + b"\n" + bad)
    daemon.auditor.tick(T0 + 120_000)
    exposed = [
        posted.text,
        client.get("/metrics").text,
        client.get("/v1/waits").text,
        client.get("/v1/waits/t1/i1").text,
        caplog.text,
    ]
    rep = report(daemon.store, daemon.config.policies, T0 + 120_000, 86_400_000)
    exposed += [render(rep, fmt).decode() for fmt in ("md", "html", "json")]
    problems = daemon.auditor.state.problems(
        ("STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION")
    )
    exposed += [json.dumps(problems)]  # what an Alertmanager push would carry
    daemon.engine.dispose()

    text = "\n".join(exposed)
    leaked = [name for name, secret in SECRETS.items() if secret in text]
    assert [] == leaked
    assert "SECRET-IN-A-BAD-LINE-4141" not in text
    assert 200 == posted.status_code
