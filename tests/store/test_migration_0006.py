"""Migration 0006 on SQLite and PostgreSQL: a store written by the schema before it (0005,
run-only keys, tool calls without a thread) is re-keyed with every row kept."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import IntegrityError

from sidewatch.app.audit import audit
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.repo import Store

AT = 1_785_083_400_000
MIN = 60_000
QUIET = replace(
    DEFAULT_POLICY, name="quiet", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)
A, B = "thread/a@x y", "thread-b"

# Rows as the 0005 schema holds them: thread A asked in run-1 for the gated call `call 1`,
# was approved in run-2, which started and finished; thread B's run-7 proposed a call
# nothing gated yet; one tool call's run is in no other table.
ROWS: dict[str, list[dict[str, Any]]] = {
    "interrupt": [
        {
            "thread_id": A,
            "run_id": "run-1",
            "interrupt_id": "int/1",
            "at": AT,
            "seq": 10,
            "reason": "tool_call",
            "tool_call_id": "call 1",
            "handle": None,
            "tool_result_receipt": False,
        }
    ],
    "tool_call": [
        {
            "tool_call_id": "call 1",
            "run_id": "run-1",
            "name": "deploy",
            "digest": "sha256:d1",
            "at": AT - 1000,
            "seq": 9,
        },
        {
            "tool_call_id": "call 2",
            "run_id": "run-7",
            "name": "export",
            "digest": "sha256:d2",
            "at": AT,
            "seq": 30,
        },
        {
            "tool_call_id": "call 3",
            "run_id": "run-lost",
            "name": "purge",
            "digest": "sha256:d3",
            "at": AT,
            "seq": 31,
        },
    ],
    "run_fact": [
        {"run_id": "run-1", "thread_id": A, "mark": "started", "at": AT - 2000, "seq": 8},
        {"run_id": "run-1", "thread_id": A, "mark": "interrupted", "at": AT, "seq": 10},
        {"run_id": "run-2", "thread_id": A, "mark": "input", "at": AT + MIN, "seq": 20},
        {"run_id": "run-2", "thread_id": A, "mark": "started", "at": AT + MIN, "seq": 21},
        {"run_id": "run-2", "thread_id": A, "mark": "finished", "at": AT + MIN, "seq": 22},
        {"run_id": "run-7", "thread_id": B, "mark": "started", "at": AT, "seq": 29},
    ],
    "answer": [
        {
            "thread_id": A,
            "run_id": "run-2",
            "interrupt_id": "int/1",
            "code": "accept",
            "digest": None,
            "at": AT + MIN,
            "seq": 20,
            "via": "resume",
        },
    ],
    "legacy_resume": [
        {
            "thread_id": B,
            "run_id": "run-7",
            "code": "accept",
            "digest": None,
            "entries": "[]",
            "at": AT,
            "seq": 29,
        },
    ],
    "tool_result": [
        {"thread_id": A, "run_id": "run-2", "tool_call_id": "call 1", "at": AT + MIN, "seq": 23},
    ],
}


def _insert(conn: Connection, table: str, row: dict[str, Any]) -> None:
    cols = ", ".join(row)
    marks = ", ".join(f":{c}" for c in row)
    conn.execute(text(f"INSERT INTO {table} ({cols}) VALUES ({marks})"), row)


def _store_at_0005(url: str) -> Engine:
    engine = create_engine(url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0005")
        for table, rows in ROWS.items():
            for row in rows:
                _insert(conn, table, row)
    return engine


def _rows(engine: Engine, table: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        got = conn.execute(text(f"SELECT * FROM {table} ORDER BY id")).mappings()
        return [{k: v for k, v in r.items() if k != "id"} for r in got]


@pytest.fixture
def migrated(blank_db_url: str) -> Engine:
    _store_at_0005(blank_db_url).dispose()
    return open_store(blank_db_url)  # upgrades to the newest revision


def test_every_row_survives_the_re_keying(migrated: Engine) -> None:
    got = {t: _rows(migrated, t) for t in ROWS}
    migrated.dispose()

    for table, rows in ROWS.items():
        want = rows
        if table == "tool_call":  # each with the thread of its gating interrupt, else run
            want = [{**r, "thread_id": t} for r, t in zip(rows, (A, B, ""), strict=True)]
        assert want == [{k: r[k] for k in want[0]} for r in got[table]]


def test_the_migrated_facts_give_the_verdict_they_gave(migrated: Engine) -> None:
    (wait,) = audit(Store(migrated), (QUIET,), AT + 10 * MIN)
    migrated.dispose()

    assert (A, "RESUMED", "deploy") == (
        wait.evidence.thread_id,
        wait.verdict.state.value,
        wait.evidence.action,
    )


@pytest.mark.parametrize(
    ("table", "row"),
    [
        ("run_fact", ROWS["run_fact"][0]),
        ("answer", ROWS["answer"][0]),
        ("legacy_resume", ROWS["legacy_resume"][0]),
        ("tool_result", ROWS["tool_result"][0]),
        ("tool_call", {**ROWS["tool_call"][0], "thread_id": A}),
    ],
)
def test_the_new_keys_hold_the_thread(migrated: Engine, table: str, row: dict[str, Any]) -> None:
    """The same run-scoped key in another thread is a new row; in the same thread, refused."""
    other = {**row, "thread_id": "another thread"}
    with migrated.begin() as conn:
        _insert(conn, table, other)
    refused = False
    try:
        with migrated.begin() as conn:
            _insert(conn, table, row)
    except IntegrityError:
        refused = True
    count = len(_rows(migrated, table))
    migrated.dispose()

    assert refused
    assert len(ROWS[table]) + 1 == count
