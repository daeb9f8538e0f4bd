"""`store.retention`, threads pruned whole: the statements. A thread goes with every fact of it
once every wait of it is closed, the last of them closed before the cutoff, and no evidence of
it waits for the auditor. Threads are found from their closing transitions, read once in id
order (a saved position), so a pass reads what is new, not the store's history; one that keeps
a wait beside closed ones older than the cutoff is queued for a look inside it (store.history).
What paces the pass, and what decides inside a thread, is app.prune."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import Engine

from sidewatch.core.model import CLOSED_STATES
from sidewatch.store.history import RUN_TABLES, WAIT_ROWS, queue
from sidewatch.store.pruning import Buckets, add, drop_findings, drop_waits, lock
from sidewatch.store.sql import driver_sql
from sidewatch.store.totals import uncount

CURSOR = "retention.after"  # meta: the last transition the scan of closing ones looked at
_CLOSED = frozenset(s.value for s in CLOSED_STATES)
_SET_CURSOR = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
# A thread's facts, by thread (each table has an index on thread_id).
_THREAD_TABLES = ("interrupt", *RUN_TABLES, "service_binding", "wait_state")


@dataclass(frozen=True, slots=True)
class Closing:
    """What a look at the closing transitions found: the threads of those recorded before
    the cutoff, the last transition looked at, and how many were read."""

    threads: list[str]
    last: int
    read: int


def cursor(engine: Engine) -> int:
    """The last transition the scan of closing transitions looked at (0: none yet)."""
    with engine.connect() as c:
        value = c.exec_driver_sql(
            driver_sql(c, "SELECT value FROM meta WHERE key = ?"), (CURSOR,)
        ).scalar()
    return int(value or 0)


def closing(engine: Engine, cutoff: int, now: int, after: int, batch: int) -> Closing:
    """The threads of the closing transitions recorded before the cutoff, among up to a
    batch of transitions after `after` (by id: each is read once, by one pass), and the last
    id looked at. Ids follow recording: the scan stops at the first recorded at or after the
    cutoff, and goes on from there once it is older. A row is a recording's last transition
    (its earlier ones in `earlier`, 0020): a wait a recording closed and left open again is
    not prunable, and one it left closed is found by that row. A row recorded after `now` (by
    a clock that was ahead then) goes by when the wait closed by its evidence (`at`): else it
    would hold back every later one until the clock reached it."""
    closed = ", ".join(f"'{s}'" for s in sorted(_CLOSED))
    sql = (
        "SELECT id, thread_id, recorded_at, at FROM transition "
        f"WHERE id > ? AND to_state IN ({closed}) ORDER BY id LIMIT {int(batch)}"
    )
    with engine.connect() as c:
        rows = list(c.exec_driver_sql(driver_sql(c, sql), (after,)))
    found: dict[str, None] = {}
    for row_id, thread, recorded, at in rows:
        if (at if recorded > now else recorded) >= cutoff:
            break
        found[str(thread)] = None
        after = int(row_id)
    return Closing(list(found), after, len(rows))


def prune_whole(
    engine: Engine,
    candidates: list[str],
    cutoff: int,
    cursor: int | None,
    buckets: Buckets,
    within: bool,
) -> tuple[int, int]:
    """Prune the candidates still prunable whole, in one transaction: checked again under
    the lock that ingest's dirty marks take (evidence that came meanwhile keeps its thread).
    A thread with a dirty mark, or (`within`: a look inside is wanted) with a wait that stays
    beside closed ones older than the cutoff, is queued for another look (store.history);
    `cursor`: the scan's position, saved with it. (threads pruned, waits pruned)"""
    with engine.begin() as c:
        lock(c)
        if cursor is not None:
            c.exec_driver_sql(driver_sql(c, _SET_CURSOR), (CURSOR, str(cursor)))
        if not candidates:
            return 0, 0
        marks = ", ".join("?" for _ in candidates)
        ids = tuple(candidates)
        rows = list(
            c.exec_driver_sql(driver_sql(c, f"{WAIT_ROWS} WHERE thread_id IN ({marks})"), ids)
        )
        dirty = {
            str(r[0])
            for r in c.exec_driver_sql(
                driver_sql(c, f"SELECT thread_id FROM dirty_thread WHERE thread_id IN ({marks})"),
                ids,
            )
        }
        staying = {str(r[0]) for r in rows if not r[3] or r[4] >= cutoff}
        old = {str(r[0]) for r in rows if r[3] and r[4] < cutoff}
        queue(c, (dirty | (staying & old if within else set())) & set(candidates))
        held = dirty | staying
        gone = [t for t in candidates if t not in held]
        waits = [r for r in rows if str(r[0]) not in held]
        if not gone:
            return 0, 0
        counts: Counter[tuple[str, str]] = Counter()
        drop_waits(c, gone, waits, counts, buckets)
        tm = ", ".join("?" for _ in gone)
        drop_findings(c, f"thread_id IN ({tm})", tuple(gone), counts)
        counts.update(uncount(c, f"thread_id IN ({tm})", tuple(gone)))  # any left
        for table in (*_THREAD_TABLES, "signal", "thread_checkpoint", "settled_wait"):
            c.exec_driver_sql(
                driver_sql(c, f"DELETE FROM {table} WHERE thread_id IN ({tm})"),
                tuple(gone),
            )
        add(c, counts)
    return len(gone), len(waits)
