"""The auditor's records on SQLite and PostgreSQL: a wait's record is its thread's (two threads
whose waits have the same requestId keep one each), and the transitions one verdict recorded
store its evidence once, each still read back with it."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import text

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.transitions import StoredTransition, compact, expand
from tests.store.test_identity import QUIET

NOW = 1_785_083_400_000
MIN = 60_000


def _asked(thread: str, interrupt: str) -> list[dict[str, Any]]:
    outcome = {"type": "interrupt", "interrupts": [{"id": interrupt, "reason": "tool_call"}]}
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "run-1", "timestamp": NOW},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "run-1",
            "outcome": outcome,
            "timestamp": NOW,
        },
    ]


def test_two_threads_whose_default_request_ids_coincide_keep_a_record_each(db_url: str) -> None:
    """`team/ops` asking `approve` and `team` asking `ops/approve` both have the default
    requestId `team/ops/approve`: two waits, two records, and a restarted daemon counts two."""
    engine = open_store(db_url)
    lines = [*_asked("team/ops", "approve"), *_asked("team", "ops/approve")]
    body = b"\n".join(orjson.dumps(line) for line in lines)
    store = Store(engine)
    summary = Ingest(store, ref_protector(engine, Config()), Config()).body("test", body, NOW)
    assert () == summary.rejects
    auditor = Auditor(store, (QUIET,))

    auditor.tick(NOW + MIN)
    auditor.tick(NOW + 2 * MIN)  # each wait is compared with its own record
    records = auditor.state.records(["team/ops", "team"])
    restarted = Auditor(store, (QUIET,)).open_waits
    transitions = [t.thread_id for t in auditor.state.transitions_of("team/ops/approve")]
    engine.dispose()

    assert {("team/ops", "team/ops/approve"), ("team", "team/ops/approve")} == set(records)
    assert {("WAITING", "quiet"): 2} == dict(restarted) == dict(auditor.open_waits)
    assert ["team/ops", "team"] == sorted(transitions, reverse=True)


def _move(frm: str | None, to: str, recorded: int, evidence: str) -> StoredTransition:
    return StoredTransition("r", "t", frm, to, recorded - 1, recorded, "p", '{"x":1}', evidence)


def test_the_transitions_of_one_verdict_store_its_evidence_once(db_url: str) -> None:
    """Three transitions of one verdict, then one of the next: two rows (a row a recording,
    not a row a transition), two stored copies of the evidence, and each transition read back,
    in order, with the evidence it was recorded with."""
    first = [
        _move(None, "WAITING", NOW, '{"e":1}'),
        _move("WAITING", "ORPHANED", NOW, '{"e":1}'),
        _move("ORPHANED", "WAITING", NOW, '{"e":1}'),
    ]
    later = [_move("WAITING", "STALE", NOW + MIN, '{"e":2}')]
    engine = open_store(db_url)
    state = AuditState(engine)
    state.save([], first, [], [])
    state.save([], later, [], [])

    got = state.transitions_of("r")
    with engine.connect() as conn:
        copies = conn.execute(
            text("SELECT count(*), count(evidence), count(thresholds) FROM transition")
        ).one()
    engine.dispose()

    assert [*first, *later] == got
    assert (2, 2, 2) == tuple(copies)


def test_only_what_the_next_transition_shares_is_left_out() -> None:
    """A different evidence within one recording, or another wait between, keeps its row;
    the transitions that share the next one's are in its row's `earlier`."""
    moves = [
        _move(None, "WAITING", NOW, '{"e":1}'),
        _move("WAITING", "ORPHANED", NOW, '{"e":2}'),
        _move("ORPHANED", "WAITING", NOW, '{"e":2}'),
        StoredTransition("r2", "t", None, "WAITING", NOW, NOW, "p", '{"x":1}', '{"e":2}'),
        _move("WAITING", "STALE", NOW, '{"e":2}'),
    ]
    rows = compact(moves)

    assert ['{"e":1}', '{"e":2}', '{"e":2}', '{"e":2}'] == [r[-2] for r in rows]
    assert [None, f'[["WAITING","ORPHANED",{NOW - 1}]]', None, None] == [r[-1] for r in rows]
    assert moves == expand(rows)


def test_records_of_waits_are_read_by_their_thread_and_request_id_in_any_number(
    db_url: str,
) -> None:
    """More keys than one statement takes, requestIds two threads share, and keys of waits
    never recorded: each recorded wait asked is read, and only those."""
    engine = open_store(db_url)
    state = AuditState(engine)
    states = [
        StoredState(f"r-{k}", t, "quiet", "WAITING", False, NOW, None, NOW, None, None, NOW)
        for k in range(300)
        for t in ("a", "b/c@d")
    ]
    state.save(states, [], [], [])
    asked = [("a", f"r-{k}") for k in range(0, 300, 2)] + [("b/c@d", "r-7"), ("x", "r-1")]

    got = state.records_of([*asked, ("a", "r-0")])  # a key twice: read once
    engine.dispose()

    assert set(asked) - {("x", "r-1")} == set(got)
    assert all(got[k].thread_id == k[0] and got[k].request_id == k[1] for k in got)
