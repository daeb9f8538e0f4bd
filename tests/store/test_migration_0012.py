"""Migration 0012 on SQLite and PostgreSQL: a store written at 0011 keeps every row and its
verdicts, its interrupts were raised by no known subagent, and it then stores subagents; the
downgrade gives the 0011 schema back with the interrupts kept."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from alembic import command
from sqlalchemy import Connection, Engine, create_engine, inspect, text

from sidewatch.app.audit import audit
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.model import Subagent, SubagentState
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.repo import Store

AT = 1_785_083_400_000
MIN = 60_000
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)
# A wait as the 0011 schema holds it: thread t-old asked in run-1, accepted and resumed in run-2.
ROWS: dict[str, list[dict[str, Any]]] = {
    "interrupt": [
        {
            "thread_id": "t-old",
            "run_id": "run-1",
            "interrupt_id": "int-1",
            "at": AT,
            "seq": 10,
            "reason": "tool_call",
            "tool_call_id": "call-1",
            "handle": True,
            "tool_result_receipt": False,
        }
    ],
    "run_fact": [
        {"run_id": "run-1", "thread_id": "t-old", "mark": "interrupted", "at": AT, "seq": 10},
        {"run_id": "run-2", "thread_id": "t-old", "mark": "input", "at": AT + MIN, "seq": 20},
        {"run_id": "run-2", "thread_id": "t-old", "mark": "started", "at": AT + MIN, "seq": 21},
    ],
    "answer": [
        {
            "thread_id": "t-old",
            "run_id": "run-2",
            "interrupt_id": "int-1",
            "code": "accept",
            "digest": None,
            "at": AT + MIN,
            "seq": 20,
            "via": "resume",
        }
    ],
}


def _insert(conn: Connection, table: str, row: dict[str, Any]) -> None:
    cols = ", ".join(row)
    marks = ", ".join(f":{c}" for c in row)
    conn.execute(text(f"INSERT INTO {table} ({cols}) VALUES ({marks})"), row)


def _migrate(engine: Engine, revision: str, up: bool = True) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.upgrade if up else command.downgrade)(cfg, revision)


def _store_at_0011(url: str) -> None:
    engine = create_engine(url)
    _migrate(engine, "0011")
    with engine.begin() as conn:
        for table, rows in ROWS.items():
            for row in rows:
                _insert(conn, table, row)
    engine.dispose()


def _rows(engine: Engine, table: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        got = conn.execute(text(f"SELECT * FROM {table} ORDER BY id")).mappings()
        return [{k: v for k, v in r.items() if k != "id"} for r in got]


def test_a_0011_store_keeps_every_row_and_its_verdict(blank_db_url: str) -> None:
    _store_at_0011(blank_db_url)
    engine = open_store(blank_db_url)  # upgrades to the newest revision

    got = {t: _rows(engine, t) for t in ROWS}
    (wait,) = audit(Store(engine), (QUIET,), AT + 10 * MIN)
    engine.dispose()

    for table, rows in ROWS.items():
        assert rows == [{k: r[k] for k in rows[0]} for r in got[table]]
    assert [None] == [r["subagent_run_id"] for r in got["interrupt"]]
    assert ("RESUMED", None) == (wait.verdict.state.value, wait.verdict.facts.subagent)


def test_a_migrated_store_stores_subagents(blank_db_url: str) -> None:
    _store_at_0011(blank_db_url)
    engine = open_store(blank_db_url)
    store = Store(engine)
    lines = [
        {"type": "RUN_STARTED", "threadId": "t-new", "runId": "r1", "timestamp": AT},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1", "name": "ops", "timestamp": AT},
        {
            "type": "RUN_FINISHED",
            "threadId": "t-new",
            "runId": "r1",
            "timestamp": AT + 1000,
            "outcome": {
                "type": "interrupt",
                "interrupts": [{"id": "i1", "reason": "tool_call", "subagentRunId": "sub-1"}],
            },
        },
    ]
    body = b"\n".join(orjson.dumps(line) for line in lines)
    Ingest(store, ref_protector(engine, Config()), Config()).body("after", body, AT + 2000)

    subagents = {
        w.evidence.thread_id: w.verdict.facts.subagent
        for w in audit(store, (QUIET,), AT + 10 * MIN)
    }
    engine.dispose()

    assert {
        "t-old": None,
        "t-new": Subagent("sub-1", "ops", SubagentState.RUNNING, AT),
    } == subagents


def test_the_downgrade_gives_0011_back_with_the_interrupts_kept(blank_db_url: str) -> None:
    _store_at_0011(blank_db_url)
    open_store(blank_db_url).dispose()
    engine = create_engine(blank_db_url)

    _migrate(engine, "0011", up=False)

    columns = {c["name"] for c in inspect(engine).get_columns("interrupt")}
    tables = set(inspect(engine).get_table_names())
    kept = _rows(engine, "interrupt")
    engine.dispose()
    open_store(blank_db_url).dispose()  # and up again

    assert ("subagent_run_id" not in columns, "subagent" not in tables) == (True, True)
    assert ROWS["interrupt"] == [{k: r[k] for k in ROWS["interrupt"][0]} for r in kept]
