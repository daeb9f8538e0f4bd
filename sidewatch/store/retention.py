"""`store.retention`: pruning what is older than it, in small batches of short transactions,
keeping the counts of what was pruned (`pruned_total`) so that counters never go back.

A thread is pruned whole, once every wait of it is closed, the last of them closed before the
cutoff, and no evidence of it waits for the auditor: an open wait, and so its verdict, never
loses a fact. Units and their rejects, and evidence naming no wait, go by their own age."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

import contextlib
import os
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from sidewatch.store.auditstate import driver_sql
from sidewatch.store.db import classified

BATCH = 100  # threads, units or evidence rows per transaction
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
_ADD = (
    "INSERT INTO pruned_total (counter, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (counter, key) DO UPDATE SET value = pruned_total.value + excluded.value"
)
# A thread's facts, by thread (each table has an index on thread_id).
_THREAD_TABLES = (
    "interrupt",
    "tool_call",
    "run_fact",
    "answer",
    "legacy_resume",
    "tool_result",
    "heartbeat",
    "service_binding",
    "wait_state",
)
# Evidence that may name a thread no interrupt announced (a wait not seen yet).
_EVIDENCE_TABLES = (
    "heartbeat",
    "signal",
    "answer",
    "tool_result",
    "tool_call",
    "run_fact",
    "legacy_resume",
    "service_binding",
    "finding",
)
_NO_WAIT = "NOT EXISTS (SELECT 1 FROM interrupt i WHERE i.thread_id = t.thread_id)"
_SIGNAL_NO_WAIT = (
    f"(t.thread_id IS NULL OR {_NO_WAIT}) AND (t.request_id IS NULL OR ("
    "NOT EXISTS (SELECT 1 FROM wait_state w WHERE w.request_id = t.request_id) AND "
    "NOT EXISTS (SELECT 1 FROM interrupt i WHERE i.request_id = t.request_id)))"
)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one pass pruned; `done`: nothing older than the cutoff was left."""

    threads: int = 0
    waits: int = 0
    units: int = 0
    unknown: int = 0
    vacuumed_pages: int = 0
    done: bool = True


def sep(*labels: str | None) -> str:
    """Labels as one key of pruned_total."""
    return SEP.join(label or "" for label in labels)


class Retention:
    """Prunes the store of `engine` to `retention_ms`. `buckets`: the boundaries (seconds) of
    the latency histograms continued from wait records ("decision", "resume"), whose pruned
    observations are kept as bucket counts."""

    def __init__(
        self,
        engine: Engine,
        retention_ms: int,
        buckets: Mapping[str, tuple[float, ...]] | None = None,
        batch: int = BATCH,
    ) -> None:
        self.engine = engine
        self.retention_ms = retention_ms
        self.buckets = dict(buckets or {})
        self.batch = batch
        self.pause = 1.0  # pause after a batch, as a share of the batch's own time
        # Per evidence table, the last id looked at: rows kept because a wait names them are
        # not read again at every pass (from 0 again after a restart).
        self._after: dict[str, int] = {}

    def prune(
        self, now_ms: int, budget_s: float = 1.0, clock: Callable[[], float] = time.perf_counter
    ) -> Pruned:
        """Prune batch by batch until nothing older than `now_ms - retention` is left or
        `budget_s` is spent (the next pass goes on). Raises StoreError on an outage."""
        cutoff = now_ms - self.retention_ms
        deadline = clock() + budget_s
        threads = waits = units = unknown = 0
        done = True
        with classified("store unavailable, nothing was pruned", "the store refused a prune"):
            after = -(2**62)
            while True:
                if clock() > deadline:
                    done = False
                    break
                found, after = self._candidates(cutoff, after)
                if not found:
                    break
                with self._paced():
                    t, w = self._threads(found, cutoff)
                threads, waits = threads + t, waits + w
            while done:
                if clock() > deadline:
                    done = False
                    break
                with self._paced():
                    n = self._units(cutoff)
                units += n
                if n < self.batch:
                    break
            for table in _EVIDENCE_TABLES if done else ():
                while True:
                    if clock() > deadline:
                        done = False
                        break
                    with self._paced():
                        n, last, more = self._unknown(table, cutoff, self._after.get(table, 0))
                    unknown += n
                    self._after[table] = last
                    if not more:
                        break
            if threads or units or unknown:
                self._pruned_before(cutoff)
            pages = self._vacuum(deadline, clock)
        return Pruned(threads, waits, units, unknown, pages, done)

    def _pruned_before(self, cutoff: int) -> None:
        """Remember the cutoff pruned to (reports say a window before it was pruned)."""
        with self.engine.begin() as c:
            self._lock(c)
            old = c.exec_driver_sql(
                driver_sql(c, "SELECT value FROM pruned_total WHERE counter = ? AND key = ''"),
                (PRUNED_BEFORE,),
            ).scalar()
            if old is None or int(old) < cutoff:
                c.exec_driver_sql(driver_sql(c, _ADD), (PRUNED_BEFORE, "", cutoff - int(old or 0)))

    @contextlib.contextmanager
    def _paced(self) -> Iterator[None]:
        """After each batch, as long a pause (50 ms at most): the store's other writers (ingest,
        the tick) get the write lock between batches, not only after the whole pass."""
        started = time.perf_counter()
        yield
        time.sleep(min(0.05, time.perf_counter() - started) * self.pause)

    # -- closed threads ------------------------------------------------------------------

    def _candidates(self, cutoff: int, after: int) -> tuple[list[str], int]:
        """Up to a batch of threads whose every wait is closed, the last before the cutoff,
        found from the closed waits in the order they closed (after `after`, a `since`)."""
        sql = (
            "SELECT w.thread_id, w.since FROM wait_state w "
            "WHERE w.closed = ? AND w.since < ? AND w.since > ? AND NOT EXISTS ("
            "SELECT 1 FROM wait_state o WHERE o.thread_id = w.thread_id "
            "AND (o.closed = ? OR o.since >= ?)) "
            f"ORDER BY w.since LIMIT {int(self.batch)}"
        )
        with self.engine.connect() as c:
            rows = list(c.exec_driver_sql(driver_sql(c, sql), (True, cutoff, after, False, cutoff)))
        found = list(dict.fromkeys(str(r[0]) for r in rows))
        return found, (int(rows[-1][1]) if rows else after)

    def _threads(self, candidates: list[str], cutoff: int) -> tuple[int, int]:
        """Prune the candidates still prunable, in one transaction: checked again under the
        lock that ingest's dirty marks take (evidence that came meanwhile keeps its thread)."""
        with self.engine.begin() as c:
            self._lock(c)
            marks = ", ".join("?" for _ in candidates)
            ids = tuple(candidates)
            rows = list(
                c.exec_driver_sql(
                    driver_sql(
                        c,
                        "SELECT thread_id, request_id, policy, closed, since, requested_at, "
                        f"decided_at, receipt_at FROM wait_state WHERE thread_id IN ({marks})",
                    ),
                    ids,
                )
            )
            dirty = {
                str(r[0])
                for r in c.exec_driver_sql(
                    driver_sql(
                        c, f"SELECT thread_id FROM dirty_thread WHERE thread_id IN ({marks})"
                    ),
                    ids,
                )
            }
            held = dirty | {str(r[0]) for r in rows if not r[3] or r[4] >= cutoff}
            gone = [t for t in candidates if t not in held]
            waits = [r for r in rows if str(r[0]) not in held]
            if not gone:
                return 0, 0
            counts: Counter[tuple[str, str]] = Counter()
            self._histograms(waits, counts)
            tm = ", ".join("?" for _ in gone)
            requests = sorted({str(r[1]) for r in waits})
            for part in _chunks(requests):
                rm = ", ".join("?" for _ in part)
                where = f"request_id IN ({rm}) AND thread_id IN ({tm})"
                for frm, to, policy, n in c.exec_driver_sql(
                    driver_sql(
                        c,
                        "SELECT from_state, to_state, policy, count(*) FROM transition "
                        f"WHERE {where} GROUP BY from_state, to_state, policy",
                    ),
                    (*part, *gone),
                ):
                    counts[(TRANSITIONS, sep(frm, to, policy))] += int(n)
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM transition WHERE {where}"),
                    (*part, *gone),
                )
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM signal WHERE request_id IN ({rm})"),
                    tuple(part),
                )
            self._findings(c, f"thread_id IN ({tm})", tuple(gone), counts)
            for table in (*_THREAD_TABLES, "signal"):
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM {table} WHERE thread_id IN ({tm})"),
                    tuple(gone),
                )
            _add(c, counts)
        return len(gone), len(waits)

    def _histograms(self, waits: Sequence[Any], counts: Counter[tuple[str, str]]) -> None:
        """The latency observations the pruned wait records gave (store.auditstate.totals),
        as bucket counts and sums (ms)."""
        for _, _, policy, _, _, requested, decided, receipt in waits:
            if decided is None:
                continue
            self._observe("decision", str(policy), decided - requested, counts)
            if receipt is not None:
                self._observe("resume", str(policy), receipt - decided, counts)

    def _observe(self, name: str, policy: str, ms: int, counts: Counter[tuple[str, str]]) -> None:
        buckets = self.buckets.get(name)
        if buckets is None:
            return
        counts[(name, sep(policy, str(bisect_left(buckets, ms / 1000))))] += 1
        counts[(f"{name}_ms", policy)] += int(ms)

    def _findings(
        self, c: Connection, where: str, params: tuple[Any, ...], counts: Counter[tuple[str, str]]
    ) -> None:
        for rule, n in c.exec_driver_sql(
            driver_sql(c, f"SELECT rule, count(*) FROM finding WHERE {where} GROUP BY rule"),
            params,
        ):
            counts[(FINDINGS, str(rule))] += int(n)
        c.exec_driver_sql(driver_sql(c, f"DELETE FROM finding WHERE {where}"), params)

    def _lock(self, c: Connection) -> None:
        """Take the store's write lock first. SQLite: a write, so the transaction reads the
        newest data and no ingest commits until it ends (ingest waits its busy timeout,
        milliseconds here). PostgreSQL: ingest's dirty marks wait until it commits."""
        if c.dialect.name == "postgresql":
            c.exec_driver_sql("LOCK TABLE dirty_thread IN SHARE ROW EXCLUSIVE MODE")
        else:
            c.exec_driver_sql(driver_sql(c, _ADD), ("batches", "", 1))

    # -- units -------------------------------------------------------------------------------

    def _units(self, cutoff: int) -> int:
        """Prune up to a batch of the oldest units received before the cutoff, with their
        line counts and rejects (counted in pruned_total)."""
        ids = self._leading(
            f"SELECT id, received_at FROM unit ORDER BY id LIMIT {int(self.batch)}", (), cutoff
        )
        if not ids:
            return 0
        with self.engine.begin() as c:
            self._lock(c)
            marks = ", ".join("?" for _ in ids)
            counts: Counter[tuple[str, str]] = Counter()
            for table, counter, sql in (
                ("line_count", LINES, "kind, sum(lines)"),
                ("reject", REJECTS, "reason, count(*)"),
            ):
                label = sql.partition(",")[0]
                for key, n in c.exec_driver_sql(
                    driver_sql(
                        c,
                        f"SELECT {sql} FROM {table} WHERE unit_id IN ({marks}) GROUP BY {label}",
                    ),
                    ids,
                ):
                    counts[(counter, str(key))] += int(n)
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM {table} WHERE unit_id IN ({marks})"),
                    ids,
                )
            c.exec_driver_sql(driver_sql(c, f"DELETE FROM unit WHERE id IN ({marks})"), ids)
            _add(c, counts)
        return len(ids)

    # -- evidence naming no wait -----------------------------------------------------------

    def _unknown(self, table: str, cutoff: int, after: int) -> tuple[int, int, bool]:
        """Prune up to a batch of `table`'s rows older than the cutoff (by id, after `after`)
        that name no wait seen: (pruned, the last id looked at, whether more may follow)."""
        no_wait = _SIGNAL_NO_WAIT if table == "signal" else _NO_WAIT
        if table == "finding":
            no_wait = f"(t.thread_id IS NULL OR {_NO_WAIT})"
        sql = f"SELECT id, at FROM {table} WHERE id > ? ORDER BY id LIMIT {int(self.batch)}"
        params: tuple[Any, ...] = (after,)
        if table == "heartbeat":
            # A span grows in place (store.heartbeats): its id is not its age. Its last beat
            # dates it, and the walk starts over once it reached the end.
            sql = (
                "SELECT id, last_at FROM heartbeat WHERE id > ? AND last_at < ? "
                f"ORDER BY id LIMIT {int(self.batch)}"
            )
            params = (after, cutoff)
        ids = self._leading(sql, params, cutoff)
        if not ids:
            return 0, 0 if table == "heartbeat" else after, False
        with self.engine.begin() as c:
            self._lock(c)
            marks = ", ".join("?" for _ in ids)
            where = f"t.id IN ({marks}) AND {no_wait}"
            counts: Counter[tuple[str, str]] = Counter()
            if table == "finding":
                for rule, n in c.exec_driver_sql(
                    driver_sql(
                        c,
                        f"SELECT t.rule, count(*) FROM finding t WHERE {where} GROUP BY t.rule",
                    ),
                    ids,
                ):
                    counts[(FINDINGS, str(rule))] += int(n)
            n = c.exec_driver_sql(
                driver_sql(
                    c,
                    f"DELETE FROM {table} WHERE id IN (SELECT t.id FROM {table} t WHERE {where})",
                ),
                ids,
            ).rowcount
            if n:
                counts[(UNKNOWN, table)] += n
            _add(c, counts)
        # A batch cut short by a row newer than the cutoff: the rest waits for a later pass.
        more = len(ids) == self.batch
        return int(n), ids[-1] if more or table != "heartbeat" else 0, more

    def _leading(self, sql: str, params: tuple[Any, ...], cutoff: int) -> tuple[int, ...]:
        """The ids `sql` reads (id, time), in id order, up to the first dated at or after the
        cutoff: outside any write lock, and never a scan past the batch (ids follow arrival,
        so a row older than a newer one before it waits until that one is old too)."""
        with self.engine.connect() as c:
            rows = list(c.exec_driver_sql(driver_sql(c, sql), params))
        ids: list[int] = []
        for row_id, at in rows:
            if at >= cutoff:
                break
            ids.append(int(row_id))
        return tuple(ids)

    # -- space -------------------------------------------------------------------------------

    def _vacuum(self, deadline: float, clock: Callable[[], float]) -> int:
        """SQLite with incremental auto-vacuum: give free pages back to the file system, a
        few hundred at a time (each a short write)."""
        if self.engine.dialect.name != "sqlite":
            return 0
        pages = 0
        raw = self.engine.raw_connection()
        try:
            cur = raw.cursor()
            if cur.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
                return 0
            while clock() <= deadline:
                free = int(cur.execute("PRAGMA freelist_count").fetchone()[0])
                if not free:
                    break
                step = min(free, 512)
                # A script: the pragma frees one page a step, and only a script steps it to
                # the end (then commits).
                raw.driver_connection.executescript(f"PRAGMA incremental_vacuum({step})")  # type: ignore[union-attr]
                pages += step
        finally:
            raw.close()
        return pages


def _add(c: Connection, counts: Counter[tuple[str, str]]) -> None:
    rows = [(counter, key, n) for (counter, key), n in counts.items() if n]
    if rows:
        c.exec_driver_sql(driver_sql(c, _ADD), rows)


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[k : k + 400] for k in range(0, len(ids), 400)]


# -- growth, for `sidewatch db stats` --------------------------------------------------------

# The column that dates a table's rows (ms since the epoch); tables not named have none.
_DATED = {
    "unit": "received_at",
    "interrupt": "at",
    "tool_call": "at",
    "run_fact": "at",
    "answer": "at",
    "legacy_resume": "at",
    "tool_result": "at",
    "signal": "at",
    "heartbeat": "at",
    "service_heartbeat": "first_at",
    "service_heartbeat_change": "at",
    "service_binding": "at",
    "finding": "at",
    "wait_state": "requested_at",
    "transition": "at",
}


@dataclass(frozen=True, slots=True)
class TableStats:
    name: str
    rows: int
    oldest: int | None  # ms since the epoch; None: no row, or no column dates its rows


@dataclass(frozen=True, slots=True)
class StoreStats:
    tables: tuple[TableStats, ...]
    size_bytes: int  # SQLite: the file and its WAL; PostgreSQL: the schema's tables and indexes
    free_bytes: int | None  # SQLite: pages free inside the file; None on PostgreSQL
    auto_vacuum: str | None  # SQLite: none, full or incremental
    pruned: dict[str, int]  # lines, rejects, transitions, findings, unknown_evidence pruned


def store_stats(engine: Engine, tables: Sequence[str]) -> StoreStats:
    """Rows and the oldest row of each of `tables`, and the store's size on disk."""
    out = []
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        for name in tables:
            rows = int(c.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar() or 0)
            column = _DATED.get(name)
            oldest = (
                c.exec_driver_sql(f"SELECT min({column}) FROM {name}").scalar() if column else None
            )
            out.append(TableStats(name, rows, None if oldest is None else int(oldest)))
        pruned: Counter[str] = Counter()
        for counter, n in c.exec_driver_sql("SELECT counter, value FROM pruned_total"):
            pruned[str(counter)] += int(n)
        free: int | None = None
        mode: str | None = None
        if c.dialect.name == "sqlite":
            page = int(c.exec_driver_sql("PRAGMA page_size").scalar() or 0)
            size = page * int(c.exec_driver_sql("PRAGMA page_count").scalar() or 0)
            free = page * int(c.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
            av = int(c.exec_driver_sql("PRAGMA auto_vacuum").scalar() or 0)
            mode = ("none", "full", "incremental")[av]
            database = engine.url.database or ""
            for path in (f"{database}-wal",):
                with contextlib.suppress(OSError):
                    size += os.path.getsize(path)
        else:
            size = int(
                c.exec_driver_sql(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                ).scalar()
                or 0
            )
    shown = (LINES, REJECTS, TRANSITIONS, FINDINGS, UNKNOWN)
    return StoreStats(tuple(out), size, free, mode, {k: pruned[k] for k in shown if pruned[k]})


@dataclass(frozen=True, slots=True)
class RetentionState:
    """For reports: the cutoff pruned to (None: nothing pruned yet), the pruned rows' counts
    (lines, rejects, transitions, findings) and evidence for unknown waits by table, pruned
    and kept (naming no wait seen yet)."""

    pruned_before: int | None
    pruned: dict[str, int]
    unknown_pruned: dict[str, int]
    unknown_kept: dict[str, int]


def retention_state(engine: Engine) -> RetentionState:
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        pruned: Counter[str] = Counter()
        unknown: dict[str, int] = {}
        before: int | None = None
        for counter, key, n in c.exec_driver_sql("SELECT counter, key, value FROM pruned_total"):
            if counter == PRUNED_BEFORE:
                before = int(n)
            elif counter == UNKNOWN:
                unknown[str(key)] = int(n)
            elif counter in (LINES, REJECTS, TRANSITIONS, FINDINGS):
                pruned[str(counter)] += int(n)
        kept = {}
        for table in _EVIDENCE_TABLES:
            if table == "finding":
                continue  # a finding of a thread is the thread's, not evidence of a wait
            no_wait = _SIGNAL_NO_WAIT if table == "signal" else _NO_WAIT
            n = int(
                c.exec_driver_sql(f"SELECT count(*) FROM {table} t WHERE {no_wait}").scalar() or 0
            )
            if n:
                kept[table] = n
    return RetentionState(before, dict(pruned), unknown, kept)
