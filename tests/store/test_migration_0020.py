"""Migration 0020 on SQLite and PostgreSQL: a store of the 0019 schema, its transitions a row
each (the shared thresholds and evidence on a recording's last), becomes a row a recording
without losing a transition: each wait's transitions read back in order with the thresholds
and evidence they showed, the problem list and the restarted counters unchanged; and the
downgrade gives every 0019 row back, each wait's in order."""

from __future__ import annotations

from collections import Counter
from typing import Any

from alembic import command
from sqlalchemy import Engine, create_engine, text

from sidewatch.store.auditstate import AuditState
from sidewatch.store.db import _alembic_config, open_store
from sidewatch.store.transitions import StoredTransition

AT = 1_785_083_400_000
MIN = 60_000
A, B = "thread/a@x y", "thread-b"
RA, RB = f"{A}/approve", "request b"
T1 = '{"resumeGraceSeconds":300}'
E1, E2, E3 = '{"route":null}', '{"route":"delivered"}', '{"decision":"accept"}'


def _move(
    request: str, frm: str | None, to: str, at: int, rec: int, ev: str | None
) -> dict[str, Any]:
    return {
        "request_id": request,
        "thread_id": A if request == RA else B,
        "from_state": frm,
        "to_state": to,
        "at": at,
        "recorded_at": rec,
        "policy": "default",
        "thresholds": None if ev is None else T1,
        "evidence": ev,
    }


# As 0019 stored them, in id order: A's first verdict made three transitions (the last holds
# their evidence) with B's first one between them; B's second verdict made two with different
# evidence (a row each); A's second made one; and a NULL row of B whose recording has no later
# row (shows no evidence, "{}", before and after).
MOVES = [
    _move(RA, None, "WAITING", AT, AT + MIN, None),
    _move(RB, None, "WAITING", AT, AT + MIN, E1),
    _move(RA, "WAITING", "ORPHANED", AT + 1, AT + MIN, None),
    _move(RA, "ORPHANED", "WAITING", AT + 2, AT + MIN, E1),
    _move(RB, "WAITING", "STALE", AT + 3, AT + 2 * MIN, E1),
    _move(RB, "STALE", "WAITING", AT + 4, AT + 2 * MIN, E2),
    _move(RA, "WAITING", "RESUMED", AT + MIN, AT + 2 * MIN, E3),
    _move(RB, "WAITING", "STALE", AT + 5, AT + 3 * MIN, None),
]
STATES = [
    (A, RA, "RESUMED", True, AT + MIN),
    (B, RB, "STALE", False, AT + 5),
]


def _shown(m: dict[str, Any]) -> StoredTransition:
    """The transition as 0019 showed it: a NULL row with the next copy of its recording."""
    if m["evidence"] is None:
        later = [
            n
            for n in MOVES[MOVES.index(m) + 1 :]
            if n["request_id"] == m["request_id"]
            and n["recorded_at"] == m["recorded_at"]
            and n["evidence"] is not None
        ]
        m = {**m, "thresholds": later[0]["thresholds"] if later else "{}"}
        m["evidence"] = later[0]["evidence"] if later else "{}"
    return StoredTransition(**m)


def _to(engine: Engine, revision: str, down: bool = False) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


def _store_at_0019(url: str) -> Engine:
    engine = create_engine(url)
    _to(engine, "0019")
    with engine.begin() as conn:
        for thread, request, state, closed, since in STATES:
            conn.execute(
                text(
                    "INSERT INTO wait_state (thread_id, request_id, policy, state, closed, "
                    "since, due_at, requested_at, evaluated_at, unreported) VALUES "
                    "(:t, :r, 'default', :s, :c, :since, NULL, :at, :at, '')"
                ),
                {"t": thread, "r": request, "s": state, "c": closed, "since": since, "at": AT},
            )
        for row in MOVES:
            cols = ", ".join(row)
            marks = ", ".join(f":{c}" for c in row)
            conn.execute(text(f"INSERT INTO transition ({cols}) VALUES ({marks})"), row)
    return engine


def _pairs(engine: Engine) -> Counter[tuple[str, str]]:
    return AuditState(engine).totals().transitions


def _rows(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        got = conn.execute(text("SELECT * FROM transition ORDER BY request_id, id")).mappings()
        return [{k: v for k, v in r.items() if k != "id"} for r in got]


def test_0020_packs_each_recording_into_one_row_without_losing_a_transition(
    blank_db_url: str,
) -> None:
    engine = _store_at_0019(blank_db_url)
    engine.dispose()
    store = open_store(blank_db_url)  # upgraded to the head
    state = AuditState(store)

    got = {r: state.transitions_of(r) for r in (RA, RB)}
    problems = state.problems(("STALE",))
    pairs = _pairs(store)
    with store.connect() as conn:
        rows = conn.execute(text("SELECT count(*) FROM transition")).scalar_one()
    _to(store, "0019", down=True)
    back = _rows(store)
    store.dispose()

    assert {r: [_shown(m) for m in MOVES if m["request_id"] == r] for r in (RA, RB)} == got
    # A: its first recording's three, then one; B: one, two, the lone NULL row.
    assert 2 + 4 == rows
    assert [(RB, "STALE", "default", AT + 5, "{}", "{}", "")] == problems
    want = Counter((m["from_state"] or "none", m["to_state"]) for m in MOVES)
    assert want == pairs
    assert sorted(MOVES, key=lambda m: m["request_id"]) == back


def test_0020_keeps_the_problem_evidence_of_a_wait_whose_last_recording_made_several(
    blank_db_url: str,
) -> None:
    """The problem list shows a wait's latest recorded evidence: that of the row its last
    recording became."""
    engine = _store_at_0019(blank_db_url)
    with engine.begin() as conn:
        for row in (
            _move(RB, "WAITING", "ORPHANED", AT + 6, AT + 4 * MIN, None),
            _move(RB, "ORPHANED", "STALE", AT + 7, AT + 4 * MIN, E2),
        ):
            cols, marks = ", ".join(row), ", ".join(f":{c}" for c in row)
            conn.execute(text(f"INSERT INTO transition ({cols}) VALUES ({marks})"), row)
    engine.dispose()
    store = open_store(blank_db_url)

    problems = AuditState(store).problems(("STALE",))
    store.dispose()

    assert [(RB, "STALE", "default", AT + 5, E2, T1, "")] == problems
