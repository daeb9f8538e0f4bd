"""The auditor on a clock that jumps ahead and comes back, on SQLite and PostgreSQL, with `now`
passed in: pruning never goes by a clock far ahead of the newest evidence, and the verdicts
evaluated ahead are evaluated again once the ticks resume at the true time, in the store, the
snapshot the metrics are built from, and the record of transitions."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from sidewatch.app.audit import Auditor
from sidewatch.config import Config
from sidewatch.store.repo import Store
from tests.app.test_auditor import asked, heartbeat, ingest
from tests.app.test_prune import answered, table_rows

T = 1_785_081_600_000  # 2026-07-26T16:00:00Z: the true time the story begins
SEC, MIN, HOUR = 1000, 60_000, 3_600_000
JUMP = 2 * HOUR
POLICIES = Config().policies
CLOSED = 50


@pytest.fixture
def store(open_stores: Callable[[], Store]) -> Store:
    return open_stores()


def closed_waits(store: Store) -> list[str]:
    """`CLOSED` threads whose wait was asked for at T and accepted and resumed a minute on."""
    threads = [f"t-{n}" for n in range(CLOSED)]
    lines = [x for t in threads for x in [*asked(t, "deploy"), *answered(t, T + MIN, "approve")]]
    ingest(store, lines, T + 2 * MIN)
    return threads


def test_a_clock_two_hours_ahead_prunes_nothing_younger_than_the_retention(
    store: Store,
) -> None:
    auditor = Auditor(store, POLICIES, retention_ms=HOUR)
    threads = closed_waits(store)
    auditor.tick(T + 3 * MIN)

    ahead = auditor.prune(T + 3 * MIN + JUMP, budget_s=60)  # the clock jumped two hours ahead
    auditor.tick(T + 4 * MIN)  # and came back
    back = auditor.prune(T + 4 * MIN, budget_s=60)

    assert ahead is not None and back is not None
    assert (0, 0) == (ahead.threads + ahead.waits, back.threads + back.waits)
    assert sorted(threads) == table_rows(store.engine, "wait_state")


def test_once_evidence_is_as_old_as_the_clock_the_closed_waits_go_at_the_retention(
    store: Store,
) -> None:
    """The control: two hours on by the evidence too (a beat of another thread), the same
    pass prunes them."""
    auditor = Auditor(store, POLICIES, retention_ms=HOUR)
    closed_waits(store)
    auditor.tick(T + 3 * MIN)
    ingest(store, [heartbeat("t-later", T + 3 * MIN + JUMP)], T + 3 * MIN + JUMP)

    pruned = auditor.prune(T + 3 * MIN + JUMP, budget_s=60)

    assert pruned is not None
    assert (CLOSED, CLOSED) == (pruned.threads, pruned.waits)
    assert [] == table_rows(store.engine, "wait_state")


def test_the_first_pass_held_back_says_how_far_ahead_the_clock_is_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    auditor = Auditor(store, POLICIES, retention_ms=HOUR)
    closed_waits(store)
    auditor.tick(T + 3 * MIN)

    for k in range(3):
        auditor.prune(T + 3 * MIN + JUMP + k * SEC, budget_s=60)

    held = [r.getMessage() for r in caplog.records if r.name == "sidewatch.retention"]
    assert 1 == len(held), held
    assert "the clock is 2h01m ahead of the newest evidence (2026-07-26T16:01:02+00:00)" in held[0]


def test_what_was_recorded_while_the_clock_was_ahead_holds_back_nothing_recorded_after_it(
    store: Store,
) -> None:
    """t-a closes by its evidence at T+1m but is first recorded two hours ahead, its unit
    received then; t-b closes and is recorded at the true time after it. An hour and ten
    minutes on by the evidence, both threads and the true time's units go; the unit received
    two hours ahead goes once it is that old."""
    auditor = Auditor(store, POLICIES, retention_ms=HOUR)
    ingest(store, [*asked("t-a", "deploy"), *asked("t-b", "deploy")], T)
    auditor.tick(T + MIN // 2)
    ingest(store, answered("t-a", T + MIN, "approve"), T + 2 * MIN + JUMP)
    auditor.tick(T + 2 * MIN + JUMP)
    ingest(store, answered("t-b", T + 3 * MIN, "approve"), T + 4 * MIN)
    auditor.tick(T + 4 * MIN)
    later = T + HOUR + 10 * MIN
    ingest(store, [heartbeat("t-later", later)], later)

    pruned = auditor.prune(later, budget_s=60)

    assert pruned is not None
    assert (2, [], [later, T + 2 * MIN + JUMP]) == (
        pruned.threads,
        table_rows(store.engine, "wait_state"),
        table_rows(store.engine, "unit", "received_at"),
    )


def orphaned_ahead(store: Store, auditor: Auditor) -> None:
    """A wait asked for at T whose requester beats at T+2m (fresh until T+12m): WAITING at
    T+3m, ORPHANED at a clock two hours ahead."""
    ingest(store, [*asked("t-export", "export_dataset"), heartbeat("t-export", T + 2 * MIN)], T)
    auditor.tick(T + 3 * MIN)
    auditor.tick(T + 3 * MIN + JUMP)


def test_a_wait_orphaned_at_a_clock_ahead_is_waiting_again_once_the_ticks_are_at_the_true_time(
    store: Store,
) -> None:
    auditor = Auditor(store, POLICIES)
    orphaned_ahead(store, auditor)
    ahead = (states(auditor), dict(auditor.snapshot.open_waits))

    auditor.tick(T + 4 * MIN)

    assert ({"t-export/i-export": "ORPHANED"}, {("ORPHANED", "default"): 1}) == ahead
    assert {"t-export/i-export": "WAITING"} == states(auditor)
    assert {("WAITING", "default"): 1} == auditor.snapshot.open_waits
    assert "ORPHANED" not in auditor.snapshot.oldest_start
    assert 1 == auditor.snapshot.transitions_total[("ORPHANED", "WAITING")]


def test_the_way_back_is_recorded_as_a_correction_with_the_time_the_wrong_verdict_was_made(
    store: Store,
) -> None:
    auditor = Auditor(store, POLICIES)
    orphaned_ahead(store, auditor)

    auditor.tick(T + 4 * MIN)

    *_, wrong, back = auditor.state.transitions_of("t-export/i-export")
    assert ("WAITING", "ORPHANED", T + 3 * MIN + JUMP) == (
        wrong.from_state,
        wrong.to_state,
        wrong.recorded_at,
    )
    # Back to WAITING, which by the evidence it has been since it was asked for; recorded now.
    assert ("ORPHANED", "WAITING", T, T + 4 * MIN) == (
        back.from_state,
        back.to_state,
        back.at,
        back.recorded_at,
    )
    assert {
        "reason": "clock_went_back",
        "state": "ORPHANED",
        "evaluatedAt": "2026-07-26T18:03:00Z",
    } == orjson.loads(back.evidence)["correction"]
    assert "correction" not in orjson.loads(wrong.evidence)


def test_a_replica_taking_over_after_the_jump_corrects_the_verdicts_too(store: Store) -> None:
    orphaned_ahead(store, Auditor(store, POLICIES))
    taking_over = Auditor(store, POLICIES)  # the counters and the latest time from the store

    taking_over.tick(T + 4 * MIN)

    assert {"t-export/i-export": "WAITING"} == states(taking_over)
    assert {("WAITING", "default"): 1} == taking_over.snapshot.open_waits


def test_ticks_at_the_true_time_after_the_correction_touch_nothing_more(store: Store) -> None:
    auditor = Auditor(store, POLICIES)
    orphaned_ahead(store, auditor)
    auditor.tick(T + 4 * MIN)

    after = [auditor.tick(T + 4 * MIN + k * SEC).threads for k in range(1, 4)]

    assert [0, 0, 0] == after
    assert T + 4 * MIN + 3 * SEC == auditor.evaluated_until


def test_a_clock_that_only_goes_forward_is_never_taken_for_one_that_went_back(
    store: Store,
) -> None:
    auditor = Auditor(store, POLICIES)
    ingest(store, [*asked("t-export", "export_dataset"), heartbeat("t-export", T + 2 * MIN)], T)
    auditor.tick(T + 3 * MIN)

    later = [auditor.tick(T + 3 * MIN + k * 30 * SEC).threads for k in range(1, 4)]
    orphaned = auditor.tick(T + 13 * MIN)  # the beat is stale: ORPHANED, by the evidence

    assert [0, 0, 0] == later
    assert 1 == orphaned.threads
    assert {"t-export/i-export": "ORPHANED"} == states(auditor)
    moves = auditor.state.transitions_of("t-export/i-export")
    assert all("correction" not in orjson.loads(m.evidence) for m in moves)


def states(auditor: Auditor) -> dict[str, str]:
    return {r: s.state for r, s in auditor.state.states(["t-export"]).items()}
