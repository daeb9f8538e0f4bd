"""The SQL the store's modules share: our own fixed statements in the driver's parameter
style, the one INSERT builder, the bulk insert, and the index hint of key lookups."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Connection

T = TypeVar("T")
CHUNK = 500  # ids per IN (...) list: under every driver's limit of parameters a statement


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`, in order: the IN (...) lists of a batch read or
    delete, one statement a slice."""
    for k in range(0, len(items), size):
        yield items[k : k + size]


# A version, not a time: the auditor clears a mark only if nothing bumped it meanwhile.
MARK_DIRTY = (
    "INSERT INTO dirty_thread (thread_id, mark) VALUES (?, 1) "
    "ON CONFLICT (thread_id) DO UPDATE SET mark = dirty_thread.mark + 1"
)
# Ingest's mark, with the earliest time of the thread's new facts (`early`, kept the least
# until the mark is cleared): a checkpoint's late-fact detection (store.checkpoint).
MARK_DIRTY_SINCE = (
    "INSERT INTO dirty_thread (thread_id, mark, early) VALUES (?, 1, ?) "
    "ON CONFLICT (thread_id) DO UPDATE SET mark = dirty_thread.mark + 1, early = CASE "
    "WHEN dirty_thread.early IS NULL OR excluded.early < dirty_thread.early "
    "THEN excluded.early ELSE dirty_thread.early END"
)


# Adds to the store-wide totals (models.RunningTotal).
_ADD_TOTAL = (
    "INSERT INTO running_total (counter, key, shard, value) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (counter, key, shard) DO UPDATE SET value = running_total.value + excluded.value"
)
TOTAL_SHARDS = 16  # rows per total: concurrent writers of one total mostly take different ones


def add_totals(conn: Connection, counts: Mapping[tuple[str, str], int], shard: int = 0) -> None:
    """Add `counts` ((counter, key) -> n, e.g. ("findings", rule)) to the store's totals, in
    the transaction of `conn` that wrote the rows they count: so the totals are exact across
    writers, replicas and restarts. Call it last before the commit: each total's row stays
    locked until then (PostgreSQL), and every writer takes the rows in one (sorted) order
    after its other writes, so two writers never wait on each other in a cycle."""
    rows = [(c, k, shard % TOTAL_SHARDS, n) for (c, k), n in sorted(counts.items()) if n]
    if rows:
        conn.exec_driver_sql(driver_sql(conn, _ADD_TOTAL), rows)


def running_totals(conn: Connection, *counters: str) -> dict[tuple[str, str], int]:
    """The store's totals of `counters`, by (counter, key): a fixed set of rows (counters,
    their keys, shards), however many rows they counted."""
    marks = ", ".join("?" for _ in counters)
    query = driver_sql(
        conn,
        "SELECT counter, key, sum(value) FROM running_total "  # noqa: S608 - our own names
        f"WHERE counter IN ({marks}) GROUP BY counter, key",
    )
    return {(str(c), str(k)): int(n) for c, k, n in conn.exec_driver_sql(query, counters)}


def finding_key(rule: str, thread: str | None, run: str | None, interrupt: str | None) -> str:
    """A finding's natural key: the same finding noticed again (at ingest, or by the auditor
    from the verdict) is one row."""
    return hashlib.sha256(f"{rule}\0{thread}\0{run}\0{interrupt}".encode()).hexdigest()[:32]


def driver_sql(conn: Connection, text: str) -> str:
    """Our own fixed statements, in the driver's parameter style."""
    return text if conn.dialect.paramstyle == "qmark" else text.replace("?", "%s")


def insert_sql(conn: Connection, table: str, cols: Sequence[str], tail: str = "") -> str:
    """INSERT INTO `table` (`cols`) VALUES (…) `tail` (e.g. ON CONFLICT), in the driver's
    parameter style; built once per statement. Table and column names are our own, never
    input."""
    return _insert_sql(conn.dialect.paramstyle, table, tuple(cols), tail)


@cache
def _insert_sql(paramstyle: str, table: str, cols: tuple[str, ...], tail: str) -> str:
    marks = ", ".join("?" if paramstyle == "qmark" else "%s" for _ in cols)
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks}) {tail}".rstrip()  # noqa: S608


def bulk_insert(
    conn: Connection,
    table: str,
    cols: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    tail: str = "",
) -> None:
    """Insert `rows` (then `tail`, e.g. ON CONFLICT) with the driver's executemany (psycopg
    pipelines it; column arrays through unnest measured 2.5 times slower: text arrays are
    escaped in Python). Table and column names are our own, never input."""
    if not rows:
        return
    conn.exec_driver_sql(insert_sql(conn, table, cols, tail), list(rows))


def key_lookups(conn: Connection) -> None:
    """This transaction looks rows up by indexed keys (a batch of threads, a due range): on
    PostgreSQL, use the indexes even before the planner has statistics. Without them
    (autovacuum off, or a table that grew within the last minute, as during a first full
    audit) it takes an IN list of 500 ids to match every row and scans the whole table for
    every batch: a full audit of 200,000 waits measured twice as slow, and worse with size."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
