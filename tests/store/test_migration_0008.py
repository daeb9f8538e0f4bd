"""Migration 0008 on SQLite and PostgreSQL: a store written by the schema before it (0007, one
record per requestId, a copy of the evidence on every transition) keeps every record and every
transition's evidence, its records keyed by thread and its shared copies stored once; and the
downgrade gives the 0007 rows back."""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, Engine, create_engine, text

from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.transitions import StoredTransition

AT = 1_785_083_400_000
MIN = 60_000
A, B = "thread/a@x y", "thread-b"
RA, RB = f"{A}/approve", "request b"
T1 = '{"resumeGraceSeconds":300}'
E1, E2, E3 = '{"route":null}', '{"route":"delivered"}', '{"decision":"accept"}'


def _state(thread: str, request: str, state: str, closed: bool) -> dict[str, Any]:
    return {
        "request_id": request,
        "thread_id": thread,
        "policy": "default",
        "state": state,
        "closed": closed,
        "since": AT + MIN,
        "due_at": None if closed else AT + 10 * MIN,
        "requested_at": AT,
        "decided_at": AT + MIN if closed else None,
        "receipt_at": None,
        "evaluated_at": AT + 2 * MIN,
        "unreported": "" if closed else "route",
    }


def _move(request: str, frm: str | None, to: str, at: int, rec: int, ev: str) -> dict[str, Any]:
    return {
        "request_id": request,
        "from_state": frm,
        "to_state": to,
        "at": at,
        "recorded_at": rec,
        "policy": "default",
        "thresholds": T1,
        "evidence": ev,
    }


# Wait A: three transitions of its first verdict (one evidence), then one of a later verdict;
# wait B: one transition, recorded by the same tick as A's first three.
STATES = [_state(A, RA, "RESUMED", True), _state(B, RB, "WAITING", False)]
MOVES = [
    _move(RA, None, "WAITING", AT, AT + MIN, E1),
    _move(RA, "WAITING", "ORPHANED", AT + 1, AT + MIN, E1),
    _move(RB, None, "WAITING", AT, AT + MIN, E1),
    _move(RA, "ORPHANED", "WAITING", AT + 2, AT + MIN, E1),
    _move(RA, "WAITING", "RESUMED", AT + MIN, AT + 2 * MIN, E3),
    _move(RB, "WAITING", "WAITING", AT + 3, AT + 2 * MIN, E2),
]


def _insert(conn: Connection, table: str, row: dict[str, Any]) -> None:
    cols = ", ".join(row)
    marks = ", ".join(f":{c}" for c in row)
    conn.execute(text(f"INSERT INTO {table} ({cols}) VALUES ({marks})"), row)


def _store_at_0007(url: str) -> Engine:
    engine = create_engine(url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0007")
        for row in STATES:
            _insert(conn, "wait_state", row)
        for row in MOVES:
            _insert(conn, "transition", row)
    return engine


def _rows(engine: Engine, table: str, order: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        got = conn.execute(text(f"SELECT * FROM {table} ORDER BY {order}")).mappings()
        return [{k: v for k, v in r.items() if k != "id"} for r in got]


@pytest.fixture
def migrated(blank_db_url: str) -> Engine:
    _store_at_0007(blank_db_url).dispose()
    return open_store(blank_db_url)  # upgrades to the newest revision


def test_every_record_survives_keyed_by_its_thread(migrated: Engine) -> None:
    records = AuditState(migrated).records([A, B])
    migrated.dispose()

    assert {(s["thread_id"], s["request_id"]): StoredState(**s) for s in STATES} == records


def test_every_transition_keeps_its_evidence_and_gains_its_thread(migrated: Engine) -> None:
    state = AuditState(migrated)
    got = {r: state.transitions_of(r) for r in (RA, RB)}
    with migrated.connect() as conn:
        copies = conn.execute(text("SELECT count(evidence) FROM transition")).scalar_one()
    migrated.dispose()

    thread = {RA: A, RB: B}
    want: dict[str, list[StoredTransition]] = {RA: [], RB: []}
    for m in MOVES:
        want[m["request_id"]].append(
            StoredTransition(**{**m, "thread_id": thread[m["request_id"]]})
        )
    assert want == got
    # A's first three share one copy; its later one, and B's two (the tick between), their own.
    assert 4 == copies


def test_the_downgrade_gives_the_0007_rows_back(migrated: Engine) -> None:
    cfg = _alembic_config()
    with migrated.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0007")
    states = _rows(migrated, "wait_state", "request_id")
    # Each wait's in order: through 0020 (a row a recording) the interleaving of different
    # waits' rows within one tick is not kept, and means nothing.
    moves = _rows(migrated, "transition", "request_id, id")
    migrated.dispose()

    assert sorted(STATES, key=lambda s: s["request_id"]) == states
    assert sorted(MOVES, key=lambda m: m["request_id"]) == moves
