"""`store.retention`, threads pruned whole: the statements. A thread goes with every fact of it
once every wait of it is closed, the last of them closed before the cutoff, and no evidence of
it waits for the auditor, the cutoff measured against the closing evidence's time (`since`),
not when sidewatch learned of it. Threads are found by two walks, each from a saved position
so that a pass reads what is new or newly due, not the store's history: the closing
transitions recorded since the last pass (by id: a backfill closed long ago goes at once), and
the waits whose closing time the cutoff has passed since (by that time, an index range). One
that keeps a wait beside closed ones older than the cutoff is queued for a look inside it
(store.history). What paces the pass, and what decides inside a thread, is app.prune."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import Engine

from sidewatch.core.model import CLOSED_STATES
from sidewatch.store.history import RUN_TABLES, WAIT_ROWS, queue
from sidewatch.store.pruning import Buckets, add, drop_findings, drop_waits, lock
from sidewatch.store.sql import driver_sql, key_lookups
from sidewatch.store.totals import uncount

DUE = "retention.due"  # meta: the walk by closing time has looked at every wait closed before
_CLOSED = frozenset(s.value for s in CLOSED_STATES)
_SET = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
# A thread's facts, by thread (each table has an index on thread_id).
_THREAD_TABLES = ("interrupt", *RUN_TABLES, "service_binding", "wait_state")
# Closed waits by their closing time: per closed state, a range of ix_wait_state_open_since.
_DUE_WAITS = (
    "SELECT thread_id, since FROM wait_state WHERE closed = ? AND state = ? "
    "AND since >= ? AND since < ?"
)
EARLIEST = -(2**63)  # before any time: where the walk by closing time begins in a new store


@dataclass(frozen=True, slots=True)
class Found:
    """What a look found: the threads of waits closed before the cutoff, the position to
    go on from (`last`), and how many rows it read."""

    threads: list[str]
    last: int
    read: int


def position(engine: Engine, key: str, default: int) -> int:
    """A walk's saved position (`default`: none saved yet)."""
    with engine.connect() as c:
        value = c.exec_driver_sql(
            driver_sql(c, "SELECT value FROM meta WHERE key = ?"), (key,)
        ).scalar()
    return default if value is None else int(value)


def recorded(engine: Engine, cutoff: int, after: int, batch: int) -> Found:
    """Among up to a batch of the closing transitions recorded after `after` (by id: each is
    read once, by one pass), the threads of those that closed before the cutoff by their
    evidence (`at`), whenever they were recorded; the last id read. One closing inside the
    retention is left to the walk by closing time (`due`), which reaches it once it is old.
    A row is a recording's last transition (its earlier ones in `earlier`, 0020): a wait a
    recording closed and left open again is not prunable, and one it left closed is found
    by that row."""
    closed = ", ".join(f"'{s}'" for s in sorted(_CLOSED))
    sql = (
        "SELECT id, thread_id, at FROM transition "
        f"WHERE id > ? AND to_state IN ({closed}) ORDER BY id LIMIT {int(batch)}"
    )
    with engine.connect() as c:
        rows = list(c.exec_driver_sql(driver_sql(c, sql), (after,)))
    found = {str(thread): None for _, thread, at in rows if at < cutoff}
    return Found(list(found), int(rows[-1][0]) if rows else after, len(rows))


def due(engine: Engine, begin: int, cutoff: int, batch: int) -> Found:
    """The threads of the waits recorded closed at or after `begin` and before the cutoff
    (their `since`, the closing evidence's time), about a batch of them in order of that
    time, by the index (ix_wait_state_open_since, a range per closed state): what came due
    since the last pass, not the closed waits the store keeps. `last`: the walk has looked
    at every wait closed before it. Waits closed at one same time are read together."""
    with engine.connect() as c:
        key_lookups(c)

        def read(sql: str, *args: int) -> list[tuple[int, str]]:
            out: list[tuple[int, str]] = []
            for state in sorted(_CLOSED):
                q = driver_sql(c, sql)
                out += [(int(r[1]), str(r[0])) for r in c.exec_driver_sql(q, (True, state, *args))]
            return sorted(out)

        rows = read(f"{_DUE_WAITS} ORDER BY since LIMIT {int(batch)}", begin, cutoff)
        last = cutoff
        if len(rows) >= batch:  # the rest after the batch's latest time: the next batch's
            last = rows[batch - 1][0]
            rows = [r for r in rows if r[0] < last]
            if not rows:  # a batch of waits closed at one time: all of that time at once
                rows = read(_DUE_WAITS, last, last + 1)
                last += 1
    found = {thread: None for _, thread in rows}
    return Found(list(found), last, len(rows))


def prune_whole(
    engine: Engine,
    candidates: list[str],
    cutoff: int,
    saved: tuple[str, int] | None,
    buckets: Buckets,
    within: bool,
) -> tuple[int, int]:
    """Prune the candidates still prunable whole, in one transaction: checked again under
    the lock that ingest's dirty marks take (evidence that came meanwhile keeps its thread).
    A thread with a dirty mark, or (`within`: a look inside is wanted) with a wait that stays
    beside closed ones older than the cutoff, is queued for another look (store.history);
    `saved`: a walk's position (its meta key and value), saved with it. (threads pruned,
    waits pruned)"""
    with engine.begin() as c:
        lock(c)
        if saved is not None:
            c.exec_driver_sql(driver_sql(c, _SET), (saved[0], str(saved[1])))
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
