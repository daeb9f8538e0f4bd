"""`AuditState.select`, the recorded waits GET /v1/waits starts from: on SQLite and
PostgreSQL the same waits, in the same order, as one `state IN (…) ORDER BY since` over the
table, and on SQLite a cost that does not grow with the closed waits the store keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from sidewatch.core.model import CLOSED_STATES, OPEN_STATES, State
from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.db import open_store

STATES = [s.value for s in State]
T0 = 1_785_081_600_000


def record(k: int, state: str) -> StoredState:
    return StoredState(
        request_id=f"t-{k}/i", thread_id=f"t-{k}", policy="default", state=state,
        closed=State(state) in CLOSED_STATES, since=T0 + 7919 * k % 100_003, due_at=None,
        requested_at=T0, decided_at=None, receipt_at=None, evaluated_at=T0,
    )  # fmt: skip


def fill(state: AuditState, start: int, n: int) -> None:
    rows = [record(k, STATES[k % len(STATES)]) for k in range(start, start + n)]
    state.save(rows, [], [], [])


def naive(state: AuditState, states: list[str], limit: int) -> list[tuple[str, str]]:
    marks = ", ".join(f"'{s}'" for s in states)
    sql = (
        f"SELECT request_id, thread_id FROM wait_state WHERE state IN ({marks}) "
        f"ORDER BY since, request_id LIMIT {limit}"
    )
    with state.engine.connect() as c:
        return [(str(a), str(b)) for a, b in c.execute(text(sql))]


@pytest.mark.parametrize(
    "states", [STATES, ["RESUMED"], ["WAITING", "STALE"], ["RESUMED", "WAITING", "CANCELLED"]]
)
def test_the_waits_chosen_are_those_of_one_ordered_query(db_url: str, states: list[str]) -> None:
    state = AuditState(open_store(db_url))
    fill(state, 0, 3000)

    for limit in (1, 7, 100, 10_000):
        assert naive(state, states, limit) == state.select(states, limit)
    state.engine.dispose()


def test_choosing_reads_no_more_as_closed_waits_pile_up(tmp_path: Path) -> None:
    state = AuditState(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    event.listen(state.engine, "checkout", lambda dbapi, *_: dbapi.set_progress_handler(count, 1))

    def cost() -> int:
        steps[0] = 0
        assert 100 == len(state.select(STATES, 100))
        return steps[0]

    fill(state, 0, 1000)
    young = cost()
    fill(state, 1000, 20_000)
    old = cost()
    state.engine.dispose()

    assert 0 < old <= young * 1.2 + 50, (young, old)


def test_the_oldest_open_wait_of_each_state_is_an_index_only_lookup(tmp_path: Path) -> None:
    """Every tick asks it (the oldest-start gauge): on SQLite each state's is one search of
    the covering index ix_wait_state_open_since, never a scan of the waits."""
    state = AuditState(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    fill(state, 0, 500)
    asked: list[tuple[str, Any]] = []

    def ask(conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        asked.append((sql, params))

    event.listen(state.engine, "before_cursor_execute", ask)
    oldest = state.oldest_since()
    event.remove(state.engine, "before_cursor_execute", ask)

    assert oldest
    assert len(OPEN_STATES) == len(asked)
    with state.engine.connect() as c:
        for sql, params in asked:
            plan = [r[3] for r in c.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)]
            assert ["SEARCH wait_state USING COVERING INDEX ix_wait_state_open_since "
                    "(closed=? AND state=?)"] == plan  # fmt: skip
    state.engine.dispose()
