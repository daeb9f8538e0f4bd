"""What every statement of a prune shares: the store's write lock taken first, the counts of
what it deletes (`pruned_total`, so that counters never go back), the wait records and findings
deleted with their counts, the cutoff pruned to, and the free pages given back (SQLite)."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine

from sidewatch.store.db import classified
from sidewatch.store.sql import add_totals, chunks, driver_sql
from sidewatch.store.totals import WAITS, uncount
from sidewatch.store.transitions import count_moves

IDS = 400  # ids per IN (...) list of a prune's statements, beside the thread's own
SEP = "\x1f"  # between the labels of a key (PostgreSQL text holds no NUL)
# Counters of pruned_total. Their keys: the labels, joined by SEP.
LINES, REJECTS, TRANSITIONS, FINDINGS, UNKNOWN = (
    "lines",
    "rejects",
    "transitions",
    "findings",
    "unknown_evidence",
)
PRUNED_BEFORE = "pruned_before"  # the latest cutoff pruned to (ms), one row
CURSOR = "retention.after"  # meta: the last transition the walk by recording looked at
# SQLite gives a new row the largest id plus one: once a prune deleted the newest
# transitions (a backfill's, pruned at once), the next ones would take ids the walk by
# recording has passed. The walk goes back to the largest id left, under the write lock.
_CURSOR_BACK = (
    "UPDATE meta SET value = (SELECT CAST(coalesce(max(id), 0) AS TEXT) FROM transition) "
    "WHERE key = ? AND CAST(value AS INTEGER) > (SELECT coalesce(max(id), 0) FROM transition)"
)
ADD = (
    "INSERT INTO pruned_total (counter, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (counter, key) DO UPDATE SET value = pruned_total.value + excluded.value"
)
# The latency histograms continued from wait records ("decision", "resume"): their buckets'
# boundaries (seconds), by name.
Buckets = Mapping[str, tuple[float, ...]]


def sep(*labels: str | None) -> str:
    """Labels as one key of pruned_total."""
    return SEP.join(label or "" for label in labels)


def lock(c: Connection) -> None:
    """Take the store's write lock first. SQLite: a write, so the transaction reads the
    newest data and no ingest commits until it ends (ingest waits its busy timeout,
    milliseconds here). PostgreSQL: ingest's dirty marks wait until it commits."""
    if c.dialect.name == "postgresql":
        c.exec_driver_sql("LOCK TABLE dirty_thread IN SHARE ROW EXCLUSIVE MODE")
    else:
        c.exec_driver_sql(driver_sql(c, ADD), ("batches", "", 1))


def add(c: Connection, counts: Counter[tuple[str, str]]) -> None:
    """Add `counts` to the pruned totals; those of WAITS (the recorded verdicts deleted) to
    the running totals, last (see add_totals)."""
    rows = [(counter, key, n) for (counter, key), n in counts.items() if n and counter != WAITS]
    if rows:
        c.exec_driver_sql(driver_sql(c, ADD), rows)
    add_totals(c, {k: n for k, n in counts.items() if k[0] == WAITS})


def drop_waits(
    c: Connection,
    threads: Sequence[str],
    waits: Sequence[Any],
    counts: Counter[tuple[str, str]],
    buckets: Buckets,
) -> None:
    """Delete these wait records (rows of wait_state) with their transitions and the
    signals naming them by requestId, counted in `counts`; the walk by recording kept
    behind every id SQLite may give again."""
    _histograms(waits, counts, buckets)
    tm = ", ".join("?" for _ in threads)
    requests = sorted({str(r[1]) for r in waits})
    for part in chunks(requests, IDS):
        rm = ", ".join("?" for _ in part)
        where = f"request_id IN ({rm}) AND thread_id IN ({tm})"
        for (frm, to, policy), n in count_moves(c, where, (*part, *threads)).items():
            counts[(TRANSITIONS, sep(frm, to, policy))] += n
        counts.update(uncount(c, where, (*part, *threads)))  # the lists' totals
        for table in ("transition", "wait_state", "settled_wait"):
            c.exec_driver_sql(
                driver_sql(c, f"DELETE FROM {table} WHERE {where}"), (*part, *threads)
            )
        c.exec_driver_sql(
            driver_sql(c, f"DELETE FROM signal WHERE request_id IN ({rm})"), tuple(part)
        )
    if c.dialect.name == "sqlite":  # PostgreSQL's sequence never gives an id again
        c.exec_driver_sql(driver_sql(c, _CURSOR_BACK), (CURSOR,))


def _histograms(waits: Sequence[Any], counts: Counter[tuple[str, str]], buckets: Buckets) -> None:
    """The latency observations the pruned wait records gave (store.totals), as bucket
    counts and sums (ms)."""
    for _, _, policy, _, _, requested, decided, receipt in waits:
        if decided is None:
            continue
        _observe("decision", str(policy), decided - requested, counts, buckets)
        if receipt is not None:
            _observe("resume", str(policy), receipt - decided, counts, buckets)


def _observe(
    name: str, policy: str, ms: int, counts: Counter[tuple[str, str]], buckets: Buckets
) -> None:
    bounds = buckets.get(name)
    if bounds is None:
        return
    counts[(name, sep(policy, str(bisect_left(bounds, ms / 1000))))] += 1
    counts[(f"{name}_ms", policy)] += int(ms)


def drop_findings(
    c: Connection, where: str, params: tuple[Any, ...], counts: Counter[tuple[str, str]]
) -> None:
    """Delete the findings matching `where` (our own SQL), counted by rule in `counts`."""
    for rule, n in c.exec_driver_sql(
        driver_sql(c, f"SELECT rule, count(*) FROM finding WHERE {where} GROUP BY rule"),
        params,
    ):
        counts[(FINDINGS, str(rule))] += int(n)
    c.exec_driver_sql(driver_sql(c, f"DELETE FROM finding WHERE {where}"), params)


def keep_pruned_before(engine: Engine, cutoff: int) -> None:
    """Remember the cutoff pruned to (reports say a window before it was pruned)."""
    with engine.begin() as c:
        lock(c)
        old = _pruned_before(c)
        if old is None or old < cutoff:
            c.exec_driver_sql(driver_sql(c, ADD), (PRUNED_BEFORE, "", cutoff - (old or 0)))


def pruned_before(engine: Engine) -> int | None:
    """The latest cutoff pruned to (ms), None when nothing was pruned yet."""
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        return _pruned_before(c)


def _pruned_before(c: Connection) -> int | None:
    value = c.exec_driver_sql(
        driver_sql(c, "SELECT value FROM pruned_total WHERE counter = ? AND key = ''"),
        (PRUNED_BEFORE,),
    ).scalar()
    return None if value is None else int(value)


def vacuum(engine: Engine, deadline: float, clock: Callable[[], float]) -> int:
    """SQLite with incremental auto-vacuum: give free pages back to the file system, a few
    hundred at a time (each a short write), until `clock()` passes `deadline`."""
    if engine.dialect.name != "sqlite":
        return 0
    pages = 0
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        if cur.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
            return 0
        while clock() <= deadline:
            free = int(cur.execute("PRAGMA freelist_count").fetchone()[0])
            if not free:
                break
            step = min(free, 512)
            # A script: the pragma frees one page a step, and only a script steps it to the
            # end (then commits).
            raw.driver_connection.executescript(f"PRAGMA incremental_vacuum({step})")  # type: ignore[union-attr]
            pages += step
    finally:
        raw.close()
    return pages
