"""`store.retention` inside a thread that still has an open (or a young closed) wait: the
statements. Threads wait for that look in a queue (`prune_retry`); a look reads the thread's
wait records and facts, and `prune_within` deletes what the application planned
(app.prune: which closed waits and runs can go), then lets it prove on the store's own rows,
in the same transaction, that no verdict that stays changes before the deletion commits.

A run goes whole (its run facts, tool calls and results, answers, legacy resumes, heartbeats,
findings). Its interrupts stay, marked `pruned`: the engine then knows that the id was used
and closed (a reused id's next wait is `{thread}/{id}@{run}`, a legacy resume map keyed by it
is a map, an answer naming it is not a lone answer)."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from sqlalchemy import Connection, Engine

from sidewatch.core.facts import ThreadFacts
from sidewatch.store.load import load_threads
from sidewatch.store.pruning import IDS, Buckets, add, drop_findings, drop_waits, lock
from sidewatch.store.sql import chunks, driver_sql

# The tables whose rows a run owns (by thread and run id).
RUN_TABLES = (
    "tool_call",
    "run_fact",
    "answer",
    "legacy_resume",
    "tool_result",
    "heartbeat",
    "subagent",
    "run_trace",
)  # and finding, counted by the caller
_QUEUE = "INSERT INTO prune_retry (thread_id) VALUES (?) ON CONFLICT (thread_id) DO NOTHING"
_DEQUEUE = "DELETE FROM prune_retry WHERE thread_id = ?"
# A thread's wait records, as a prune counts them (pruning.drop_waits).
WAIT_ROWS = (
    "SELECT thread_id, request_id, policy, closed, since, requested_at, decided_at, receipt_at "
    "FROM wait_state"
)


def queue(c: Connection, threads: Collection[str]) -> None:
    """Queue `threads` for another look, in the caller's transaction."""
    if threads:
        c.exec_driver_sql(driver_sql(c, _QUEUE), [(t,) for t in sorted(threads)])


def queued(engine: Engine, after: str, batch: int) -> list[str]:
    """Up to `batch` of the threads queued for another look (skipped for a dirty mark, or
    holding a wait that stays), after `after`, without a dirty mark now."""
    sql = (
        "SELECT q.thread_id FROM prune_retry q WHERE q.thread_id > ? AND NOT EXISTS ("
        "SELECT 1 FROM dirty_thread d WHERE d.thread_id = q.thread_id) "
        f"ORDER BY q.thread_id LIMIT {int(batch)}"
    )
    with engine.connect() as c:
        return [str(r[0]) for r in c.exec_driver_sql(driver_sql(c, sql), (after,))]


def dequeue(engine: Engine, thread: str) -> None:
    with engine.begin() as c:
        c.exec_driver_sql(driver_sql(c, _DEQUEUE), (thread,))


def look(engine: Engine, thread: str, facts: bool) -> tuple[list[Any], ThreadFacts | None]:
    """The auditor's records of the thread's waits (requestId, closed, since) and, with
    `facts`, the thread's facts (None: none stored), read together."""
    with engine.connect() as c:
        rows = list(
            c.exec_driver_sql(
                driver_sql(
                    c, "SELECT request_id, closed, since FROM wait_state WHERE thread_id = ?"
                ),
                (thread,),
            )
        )
        loaded = load_threads(c, [thread]) if facts else []
    return rows, loaded[0] if len(loaded) == 1 else None


def prune_within(
    engine: Engine,
    thread: str,
    waits: Collection[str],
    runs: Collection[str],
    cutoff: int,
    buckets: Buckets,
    unchanged: Callable[[ThreadFacts | None], bool],
) -> int:
    """Delete the thread's `waits` (requestIds still recorded closed before the cutoff) and
    the `runs` only they used, then ask `unchanged` about the thread's facts as they are left
    (None: none): it commits only if each wait is still recorded so and `unchanged` says yes;
    else the thread keeps it all. Returns the waits pruned. The thread leaves the queue unless
    a dirty mark (evidence that came meanwhile) keeps it there."""
    with engine.connect() as c, c.begin() as tx:
        lock(c)
        if c.exec_driver_sql(
            driver_sql(c, "SELECT 1 FROM dirty_thread WHERE thread_id = ?"), (thread,)
        ).first():
            return 0  # evidence came meanwhile: looked at again once classified
        marks = ", ".join("?" for _ in waits)
        rows = list(
            c.exec_driver_sql(
                driver_sql(
                    c,
                    f"{WAIT_ROWS} WHERE thread_id = ? "
                    f"AND request_id IN ({marks}) AND closed = ? AND since < ?",
                ),
                (thread, *sorted(waits), True, cutoff),
            )
        )
        counts: Counter[tuple[str, str]] = Counter()
        drop_waits(c, [thread], rows, counts, buckets)
        for part in chunks(sorted(runs), IDS):
            rm = ", ".join("?" for _ in part)
            drop_findings(c, f"thread_id = ? AND run_id IN ({rm})", (thread, *part), counts)
        delete(c, thread, waits, runs)
        if len(rows) != len(waits) or not unchanged(_left(c, thread)):
            tx.rollback()
            dequeue(engine, thread)
            return 0
        c.exec_driver_sql(driver_sql(c, _DEQUEUE), (thread,))
        # Its prefix lost facts that no dirty mark tells (app.evaluate): taken again.
        for table in ("thread_checkpoint", "settled_wait"):  # a checkpoint and its bodies
            c.exec_driver_sql(
                driver_sql(c, f"DELETE FROM {table} WHERE thread_id = ?"),
                (thread,),
            )
        add(c, counts)
    return len(rows)


def _left(c: Connection, thread: str) -> ThreadFacts | None:
    after = load_threads(c, [thread])
    return after[0] if len(after) == 1 else None


def delete(c: Connection, thread: str, waits: Collection[str], runs: Collection[str]) -> None:
    """In the caller's transaction: the runs' rows, their interrupts marked pruned, the
    waits' signals by requestId."""
    for part in chunks(sorted(runs), IDS):
        marks = ", ".join("?" for _ in part)
        where = f"thread_id = ? AND run_id IN ({marks})"
        for table in RUN_TABLES:
            c.exec_driver_sql(driver_sql(c, f"DELETE FROM {table} WHERE {where}"), (thread, *part))
        c.exec_driver_sql(
            driver_sql(c, f"UPDATE interrupt SET pruned = ? WHERE {where}"), (True, thread, *part)
        )
    for part in chunks(sorted(waits), IDS):
        marks = ", ".join("?" for _ in part)
        c.exec_driver_sql(
            driver_sql(
                c,
                f"DELETE FROM signal WHERE request_id IN ({marks}) "
                "AND (thread_id IS NULL OR thread_id = ?)",
            ),
            (*part, thread),
        )
