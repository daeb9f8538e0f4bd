"""`AuditState.select`, the recorded waits GET /v1/waits starts from: on SQLite and
PostgreSQL the same waits, in the same order, as one `state IN (…) ORDER BY since` over the
table, and on SQLite a cost that does not grow with the closed waits the store keeps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
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


# -- AuditState.listed and counted: the lists' pages and counts (app.read) ------------------


def tied(k: int, state: str) -> StoredState:
    """A record whose `since` it shares with others (ties ordered by requestId, then thread,
    by code point: "B" before "a"), `uncertain` every third, two policies."""
    side = "aB"[k % 2]
    return StoredState(
        request_id=f"r-{k // 4}{side}", thread_id=f"t-{k % 3}{side}",
        policy=("default", "deploy")[k % 2], state=state,
        closed=State(state) in CLOSED_STATES, since=T0 + (k // 8), due_at=None,
        requested_at=T0, decided_at=None, receipt_at=None, evaluated_at=T0,
        uncertain=k % 3 == 0,
    )  # fmt: skip


def ordered(rows: list[StoredState]) -> list[tuple[int, str, str]]:
    return sorted((r.since, r.request_id, r.thread_id) for r in rows)


@pytest.mark.parametrize(
    ("states", "policy", "uncertain"),
    [
        (STATES, None, None),
        (["WAITING"], None, None),
        (["RESUMED", "WAITING", "CANCELLED"], "deploy", None),
        (["STALE", "ORPHANED"], None, True),
    ],
)
def test_pages_walk_every_matching_record_once_in_code_point_order_both_ways(
    db_url: str, states: list[str], policy: str | None, uncertain: bool | None
) -> None:
    state = AuditState(open_store(db_url))
    rows = [tied(k, STATES[k % len(STATES)]) for k in range(1200)]
    state.save(rows, [], [], [])
    match = [
        r
        for r in rows
        if r.state in states and policy in (None, r.policy) and uncertain in (None, r.uncertain)
    ]
    expected = ordered(match)

    walked: list[tuple[int, str, str]] = []
    after = None
    while page := state.listed(states, 37, after=after, policy=policy, uncertain=uncertain):
        walked += [(r.since, r.request_id, r.thread_id) for r in page]
        after = walked[-1]
    back: list[tuple[int, str, str]] = []
    before = after
    while page := state.listed(
        states, 37, after=before, backward=True, policy=policy, uncertain=uncertain
    ):
        back += [(r.since, r.request_id, r.thread_id) for r in page]
        before = back[-1]
    counts = state.counted(states, policy=policy, uncertain=uncertain)
    middle = expected[len(expected) // 2]
    below = state.counted(states, policy=policy, uncertain=uncertain, before=middle)
    state.engine.dispose()

    assert expected == walked
    assert expected[-2::-1] == back  # all before the last, nearest first
    assert Counter(r.state for r in match) == Counter({s: n for s, n in counts.items() if n})
    assert len(expected) // 2 == sum(below.values())


def test_a_page_reads_no_more_as_closed_waits_pile_up(tmp_path: Path) -> None:
    """A page after a cursor is a range of ix_wait_state_open_since: the SQLite VM steps of
    one do not grow with the waits before it, or with the closed waits the store keeps."""
    state = AuditState(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    event.listen(state.engine, "checkout", lambda dbapi, *_: dbapi.set_progress_handler(count, 1))

    def cost() -> int:
        first = state.listed(STATES, 100)
        deep = state.listed(STATES, 100, after=(T0 + 50_000, "", ""))
        steps[0] = 0
        assert 100 == len(state.listed(STATES, 100, after=(T0 + 50_000, "", "")))
        assert 100 == len(first) == len(deep)
        return steps[0]

    fill(state, 0, 2400)  # each state has more than a page after the cursor
    young = cost()
    fill(state, 2400, 20_000)
    old = cost()
    state.engine.dispose()

    assert 0 < old <= young * 1.2 + 50, (young, old)


def _scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if plan.get("Relation Name") == "wait_state":
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child)


def test_on_postgresql_a_page_reads_the_page_along_the_index_before_any_statistics(
    pg_url: str,
) -> None:
    """A table grown within the last minute has no statistics: the planner took a state's
    12,000 waits for a few, read them all and sorted them for a page of 100 (177 ms for a page
    of 100,000 waits in bench/lists.py). The page reads its rows along the index, in its
    order (the text columns COLLATE "C" on PostgreSQL)."""
    state = AuditState(open_store(pg_url))
    state.save([record(k, "RESUMED") for k in range(12_000)], [], [], [])
    asked: list[tuple[str, Any]] = []

    def ask(conn: Any, cursor: Any, sql: str, params: Any, *_: Any) -> None:
        asked.append((sql, params))

    event.listen(state.engine, "before_cursor_execute", ask)
    assert 100 == len(state.listed(["RESUMED"], 100))
    event.remove(state.engine, "before_cursor_execute", ask)
    with state.engine.begin() as c:
        cur = c.connection.driver_connection.cursor()  # type: ignore[union-attr]
        for sql, params in asked:  # the SET LOCALs first, as the page ran them
            prefix = "" if sql.startswith("SET") else "EXPLAIN (ANALYZE, FORMAT JSON) "
            cur.execute(prefix + sql, params)
        plan = cur.fetchone()[0][0]["Plan"]
    state.engine.dispose()

    scans = list(_scans(plan))
    assert ["Index Scan"] == [s["Node Type"] for s in scans], scans
    assert scans[0]["Actual Rows"] <= 100
