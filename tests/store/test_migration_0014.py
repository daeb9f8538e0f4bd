"""Migration 0014 on SQLite and PostgreSQL: a store written by the schema before it (0013, a
row per heartbeat) keeps the verdicts of every beat once its heartbeats are compacted into
spans (the gap of the config that runs the upgrade), whatever order its rows were written in;
and the downgrade gives one-beat spans back, refusing once a span holds more than one beat."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, text

from sidewatch.core.facts import HeartbeatFact, InterruptFact
from sidewatch.store.db import _alembic_config, open_store, upgrade
from sidewatch.store.repo import Store
from tests.store.test_heartbeat_compaction import GAP, MIN, SEC, T0, _policy, verdicts

A, B = "thread/a@x y", "thread-b"
# Thread A: beats every 30 s for an hour with the handle, lost at 40 min for one beat, and a
# run's own beats; a 15-minute silence, then more. Thread B: no wait, beats 11 min apart.
BEATS = (
    [(A, None, True, T0 + k * 30 * SEC) for k in range(120) if k != 80]
    + [(A, None, False, T0 + 40 * MIN)]
    + [(A, "r1", None, T0 + k * 45 * SEC) for k in range(40)]
    + [(A, None, True, T0 + 75 * MIN + k * 30 * SEC) for k in range(20)]
    + [(B, None, None, T0 + k * 11 * MIN) for k in range(6)]
)
WAIT = InterruptFact(thread_id=A, run_id="r1", interrupt_id="i", at=T0 + 5 * MIN, seq=7)


def _to(engine: Engine, revision: str, down: bool = False, gap: int = 0) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        cfg.attributes["heartbeat_gap_ms"] = gap
        (command.downgrade if down else command.upgrade)(cfg, revision)


def _old_store(url: str) -> Engine:
    """A store at 0013 holding BEATS as rows (written newest first, one of them twice over:
    an untimed beat of the same ms) and thread A's wait."""
    engine = create_engine(url)
    _to(engine, "0013")
    rows = [
        {"key": f"k{n}", "thread_id": t, "run_id": r, "handle": h, "at": at, "seq": 1000 + n}
        for n, (t, r, h, at) in enumerate(reversed([*BEATS, BEATS[3]]))
    ]
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO heartbeat (key, thread_id, run_id, handle, at, seq) "
                "VALUES (:key, :thread_id, :run_id, :handle, :at, :seq)"
            ),
            rows,
        )
        c.execute(
            text(
                "INSERT INTO interrupt (thread_id, run_id, interrupt_id, at, seq, "
                "tool_result_receipt) VALUES (:t, 'r1', 'i', :at, 7, false)"
            ),
            {"t": A, "at": WAIT.at},
        )
    return engine


def _beats(engine: Engine) -> list[HeartbeatFact]:
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT thread_id, run_id, handle, at, seq FROM heartbeat WHERE thread_id = :a"),
            {"a": A},
        ).all()
    return [
        HeartbeatFact(
            thread_id=t, run_id=r, handle=None if h is None else bool(h), at=int(at), seq=int(s)
        )
        for t, r, h, at, s in rows
    ]


def test_the_upgrade_compacts_heartbeats_and_every_verdict_stays(blank_db_url: str) -> None:
    engine = _old_store(blank_db_url)
    before = _beats(engine)
    engine.dispose()

    migrated = open_store(blank_db_url, heartbeat_gap_ms=GAP)
    (thread,) = Store(migrated).threads([A])
    with migrated.connect() as c:
        rows = dict(c.execute(text("SELECT thread_id, count(*) FROM heartbeat GROUP BY 1")).all())
        beats = c.execute(text("SELECT sum(beats) FROM heartbeat")).scalar()
    migrated.dispose()

    # A: the handle's span before the lost beat, the lost beat, the span after it (to the
    # silence), the run's span, the span after the silence. B: 11 minutes apart, one each.
    assert {A: 5, B: 6} == rows
    assert len(BEATS) == beats  # the untimed beat of the same ms is the one beat
    policy = _policy(10 * MIN)
    for t in range(WAIT.at, T0 + 100 * MIN, 20 * SEC):
        want = verdicts([WAIT], before, policy, t)[0]
        got = verdicts(thread.interrupts, thread.heartbeats, policy, t)[0]
        assert (want.state, want.since, want.transitions) == (
            got.state,
            got.since,
            got.transitions,
        ), t
    end = T0 + 100 * MIN
    assert verdicts([WAIT], before, policy, end) == verdicts(
        thread.interrupts, thread.heartbeats, policy, end
    )


def test_the_upgrade_without_a_gap_keeps_a_row_per_beat_time(blank_db_url: str) -> None:
    engine = _old_store(blank_db_url)
    engine.dispose()

    upgrade(migrated := create_engine(blank_db_url))
    with migrated.connect() as c:
        n = c.execute(text("SELECT count(*) FROM heartbeat")).scalar()
    migrated.dispose()

    assert len(BEATS) == n


def test_the_downgrade_refuses_spans_and_gives_single_beats_back(blank_db_url: str) -> None:
    engine = _old_store(blank_db_url)
    _to(engine, "head")  # no gap: single beats

    _to(engine, "0013", down=True)
    with engine.connect() as c:
        n = c.execute(text("SELECT count(*) FROM heartbeat")).scalar()
    _to(engine, "head", gap=GAP)

    with pytest.raises(RuntimeError, match="would lose the beats"):
        _to(engine, "0013", down=True)
    engine.dispose()
    assert len(BEATS) == n
