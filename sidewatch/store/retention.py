"""`store.retention`: pruning what is older than it, in small batches of short transactions,
keeping the counts of what was pruned (`pruned_total`) so that counters never go back.

A thread is pruned whole, once every wait of it is closed, the last of them closed before the
cutoff, and no evidence of it waits for the auditor. A thread that keeps a wait loses only its
closed waits older than the cutoff that can go without changing the evidence or verdict of a
wait that stays (store.history). Threads are found from their closing transitions, read once
in id order (a saved position), so a pass reads what is new, not the store's history. Units
and their rejects, and evidence naming no wait, go by their own age.

With `ahead_ms` (the daemon's), a pass prunes as of its clock only up to `ahead_ms` after the
newest evidence (producers' times, not this host's): a clock jumped ahead prunes at most that
much early, and a store that hears nothing keeps its last retention until evidence comes."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

import contextlib
import heapq
import logging
import os
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine

from sidewatch.core.engine import PolicyFor
from sidewatch.core.model import CLOSED_STATES
from sidewatch.store import history
from sidewatch.store.db import classified
from sidewatch.store.load import load_threads
from sidewatch.store.sql import add_totals, driver_sql, key_lookups
from sidewatch.store.totals import WAITS, uncount
from sidewatch.store.transitions import count_moves

BATCH = 100  # threads, units or evidence rows per transaction
DAY_MS = 86_400_000
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
CURSOR = "retention.after"  # meta: the last transition the scan of closing ones looked at
_CLOSED = frozenset(s.value for s in CLOSED_STATES)
_SET_CURSOR = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_QUEUE = "INSERT INTO prune_retry (thread_id) VALUES (?) ON CONFLICT (thread_id) DO NOTHING"
_DEQUEUE = "DELETE FROM prune_retry WHERE thread_id = ?"
_ADD = (
    "INSERT INTO pruned_total (counter, key, value) VALUES (?, ?, ?) "
    "ON CONFLICT (counter, key) DO UPDATE SET value = pruned_total.value + excluded.value"
)
# A thread's facts, by thread (each table has an index on thread_id).
_THREAD_TABLES = ("interrupt", *history.RUN_TABLES, "service_binding", "wait_state")
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
    "subagent",
)
# The newest evidence, by the producers' clocks: the latest rows of each table by id (ids
# follow arrival), and the spans' and services' latest beats (a span grows in place). Each
# an index range of a few rows, whatever the store's size. Findings are the auditor's (its
# clock), units' received_at this host's: neither is here.
_RECENT = 100
_NEWEST = " UNION ALL ".join(
    [
        *(
            f"SELECT max(at) AS x FROM (SELECT at FROM {t} ORDER BY id DESC LIMIT {_RECENT}) "
            f"AS r{k}"
            for k, t in enumerate(
                (
                    "interrupt",
                    "tool_call",
                    "run_fact",
                    "answer",
                    "legacy_resume",
                    "tool_result",
                    "signal",
                    "subagent",
                    "service_binding",
                    "service_heartbeat_change",
                )
            )
        ),
        f"SELECT max(last_at) AS x FROM (SELECT last_at FROM heartbeat ORDER BY id DESC "
        f"LIMIT {_RECENT}) AS hb",
        "SELECT max(at) AS x FROM heartbeat",
        "SELECT max(last_at) AS x FROM service_heartbeat",
    ]
)
log = logging.getLogger("sidewatch.retention")
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
        policy_for: PolicyFor | None = None,
        ahead_ms: int | None = None,
    ) -> None:
        self.engine = engine
        # How far past the newest evidence a pass may prune as of (`as_of`); None: as of
        # whatever `now` it is given (tests of the pruning itself, with no clock to doubt).
        self.ahead_ms = ahead_ms
        self._held = False  # the last pass was held back by the newest evidence (logged once)
        # The policies the auditor classifies with: closed waits of a thread that keeps a
        # wait go only when the verdicts that stay are proved the same (None: they stay).
        self.policy_for = policy_for
        self.examined = 0  # transitions and queued threads the last pass read
        self.retention_ms = retention_ms
        self.buckets = dict(buckets or {})
        self.batch = batch
        self.pause = 1.0  # pause after a batch, as a share of the batch's own time
        # Per evidence table, the last id looked at: rows kept because a wait names them are
        # not read again at every pass (from 0 again after a restart).
        self._after: dict[str, int] = {}
        self._beats: _BeatWalk | None = None  # heartbeats: by time, not id (`_unknown_beats`)

    def prune(
        self, now_ms: int, budget_s: float = 1.0, clock: Callable[[], float] = time.perf_counter
    ) -> Pruned:
        """Prune batch by batch until nothing older than `now_ms - retention` is left or
        `budget_s` is spent (the next pass goes on); `now_ms` held back to `as_of` (the newest
        evidence). Raises StoreError on an outage."""
        deadline = clock() + budget_s
        units = unknown = 0
        self.examined = 0
        with classified("store unavailable, nothing was pruned", "the store refused a prune"):
            now_ms = self.as_of(now_ms)
            cutoff = now_ms - self.retention_ms
            threads, waits, done = self._prune_threads(cutoff, now_ms, deadline, clock)
            while done:
                if clock() > deadline:
                    done = False
                    break
                with self._paced():
                    n = self._units(cutoff, now_ms)
                units += n
                if n < self.batch:
                    break
            for table in _EVIDENCE_TABLES if done else ():
                while True:
                    if clock() > deadline:
                        done = False
                        break
                    with self._paced():
                        if table == "heartbeat":
                            n, more = self._unknown_beats(cutoff)
                        else:
                            n, last, more = self._unknown(table, cutoff, self._after.get(table, 0))
                            self._after[table] = last
                    unknown += n
                    if not more:
                        break
            if threads or waits or units or unknown:
                self._pruned_before(cutoff)
            pages = self._vacuum(deadline, clock)
        return Pruned(threads, waits, units, unknown, pages, done)

    def as_of(self, now_ms: int) -> int:
        """The time a pass prunes as of: `now_ms`, but never more than `ahead_ms` after the
        newest evidence stored (none: `now_ms`). A clock jumped ahead would otherwise prune
        for good what is younger than the retention; the first pass it holds back says so."""
        if self.ahead_ms is None:
            return now_ms
        with self.engine.connect() as c:
            newest = c.exec_driver_sql(f"SELECT max(x) FROM ({_NEWEST}) AS n").scalar()
        if newest is None or now_ms <= int(newest) + self.ahead_ms:
            self._held = False
            return now_ms
        bound = int(newest) + self.ahead_ms
        if not self._held:
            log.warning(
                "the clock is %s ahead of the newest evidence (%s): pruning holds back to what "
                "is older than the retention then, until evidence comes (a clock jumped ahead, "
                "or a store that heard nothing for that long)",
                _span(now_ms - int(newest)),
                _iso(int(newest)),
            )
        self._held = True
        return bound

    def _prune_threads(
        self, cutoff: int, now: int, deadline: float, clock: Callable[[], float]
    ) -> tuple[int, int, bool]:
        """The closing transitions recorded since the last pass, then the queued threads:
        (threads pruned whole, waits pruned, whether it finished in time)."""
        threads = waits = 0
        after = self._cursor()
        while True:
            if clock() > deadline:
                return threads, waits, False
            found, last = self._closing(cutoff, now, after)
            if last == after:
                break
            with self._paced():
                t, w = self._threads(found, cutoff, last)
            threads, waits, after = threads + t, waits + w, last
        tried = ""
        while queued := self._queued(tried):
            for thread in queued:
                if clock() > deadline:
                    return threads, waits, False
                with self._paced():
                    t, w = self._retry(thread, cutoff, now)
                threads, waits, tried = threads + t, waits + w, thread
        return threads, waits, True

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

    def _cursor(self) -> int:
        """The last transition the scan of closing transitions looked at (0: none yet)."""
        with self.engine.connect() as c:
            value = c.exec_driver_sql(
                driver_sql(c, "SELECT value FROM meta WHERE key = ?"), (CURSOR,)
            ).scalar()
        return int(value or 0)

    def _closing(self, cutoff: int, now: int, after: int) -> tuple[list[str], int]:
        """The threads of the closing transitions recorded before the cutoff, among up to a
        batch of transitions after `after` (by id: each is read once, by one pass), and the
        last id looked at. Ids follow recording: the scan stops at the first recorded at or
        after the cutoff, and goes on from there once it is older. A row is a recording's last
        transition (its earlier ones in `earlier`, 0020): a wait a recording closed and left
        open again is not prunable, and one it left closed is found by that row. A row recorded
        after `now` (by a clock that was ahead then) goes by when the wait closed by its
        evidence (`at`): else it would hold back every later one until the clock reached it."""
        closed = ", ".join(f"'{s}'" for s in sorted(_CLOSED))
        sql = (
            "SELECT id, thread_id, recorded_at, at FROM transition "
            f"WHERE id > ? AND to_state IN ({closed}) ORDER BY id LIMIT {int(self.batch)}"
        )
        with self.engine.connect() as c:
            rows = list(c.exec_driver_sql(driver_sql(c, sql), (after,)))
        self.examined += len(rows)
        found: dict[str, None] = {}
        for row_id, thread, recorded, at in rows:
            if (at if recorded > now else recorded) >= cutoff:
                break
            found[str(thread)] = None
            after = int(row_id)
        return list(found), after

    def _queued(self, after: str) -> list[str]:
        """Up to a batch of the threads queued for another look (skipped for a dirty mark,
        or holding a wait that stays), after `after`, without a dirty mark now."""
        sql = (
            "SELECT q.thread_id FROM prune_retry q WHERE q.thread_id > ? AND NOT EXISTS ("
            "SELECT 1 FROM dirty_thread d WHERE d.thread_id = q.thread_id) "
            f"ORDER BY q.thread_id LIMIT {int(self.batch)}"
        )
        with self.engine.connect() as c:
            rows = [str(r[0]) for r in c.exec_driver_sql(driver_sql(c, sql), (after,))]
        self.examined += len(rows)
        return rows

    def _threads(self, candidates: list[str], cutoff: int, cursor: int | None) -> tuple[int, int]:
        """Prune the candidates still prunable whole, in one transaction: checked again under
        the lock that ingest's dirty marks take (evidence that came meanwhile keeps its
        thread). A thread with a dirty mark, or with a wait that stays beside closed ones
        older than the cutoff, is queued for another look (`_retry`); `cursor`: the scan's
        position, saved with it."""
        with self.engine.begin() as c:
            self._lock(c)
            if cursor is not None:
                c.exec_driver_sql(driver_sql(c, _SET_CURSOR), (CURSOR, str(cursor)))
            if not candidates:
                return 0, 0
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
            staying = {str(r[0]) for r in rows if not r[3] or r[4] >= cutoff}
            old = {str(r[0]) for r in rows if r[3] and r[4] < cutoff}
            queue = dirty | (staying & old if self.policy_for is not None else set())
            if queue:
                c.exec_driver_sql(
                    driver_sql(c, _QUEUE), [(t,) for t in sorted(queue & set(candidates))]
                )
            held = dirty | staying
            gone = [t for t in candidates if t not in held]
            waits = [r for r in rows if str(r[0]) not in held]
            if not gone:
                return 0, 0
            counts: Counter[tuple[str, str]] = Counter()
            self._drop_waits(c, gone, waits, counts)
            tm = ", ".join("?" for _ in gone)
            self._findings(c, f"thread_id IN ({tm})", tuple(gone), counts)
            counts.update(uncount(c, f"thread_id IN ({tm})", tuple(gone)))  # any left
            for table in (*_THREAD_TABLES, "signal", "thread_checkpoint", "settled_wait"):
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM {table} WHERE thread_id IN ({tm})"),
                    tuple(gone),
                )
            _add(c, counts)
        return len(gone), len(waits)

    def _drop_waits(
        self,
        c: Connection,
        threads: Sequence[str],
        waits: Sequence[Any],
        counts: Counter[tuple[str, str]],
    ) -> None:
        """Delete these wait records (rows of wait_state) with their transitions and the
        signals naming them by requestId, counted in `counts`."""
        self._histograms(waits, counts)
        tm = ", ".join("?" for _ in threads)
        requests = sorted({str(r[1]) for r in waits})
        for part in _chunks(requests):
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

    def _retry(self, thread: str, cutoff: int, now: int) -> tuple[int, int]:
        """Another look at a queued thread: pruned whole if it can be now; else its closed
        waits older than the cutoff that can go without changing the verdict of any wait that
        stays (store.history), checked on the store's own rows before the commit. It leaves
        the queue unless a dirty mark keeps it there."""
        with self.engine.connect() as c:
            rows = history.thread_rows(c, thread)
            facts = load_threads(c, [thread]) if self.policy_for is not None else []
        old = {str(r[0]) for r in rows if r[1] and r[2] < cutoff}
        if rows and len(old) == len(rows):
            self._dequeue(thread)  # and queued again if it is held after all
            return self._threads([thread], cutoff, None)
        p = None
        if facts and old and self.policy_for is not None:
            p = history.plan(facts[0], old, cutoff, self.policy_for, now)
        if p is None or self.policy_for is None:
            return self._dequeue(thread)
        with self.engine.connect() as c, c.begin() as tx:
            self._lock(c)
            if c.exec_driver_sql(
                driver_sql(c, "SELECT 1 FROM dirty_thread WHERE thread_id = ?"), (thread,)
            ).first():
                return 0, 0  # evidence came meanwhile: looked at again once classified
            marks = ", ".join("?" for _ in p.waits)
            waits = list(
                c.exec_driver_sql(
                    driver_sql(
                        c,
                        "SELECT thread_id, request_id, policy, closed, since, requested_at, "
                        "decided_at, receipt_at FROM wait_state WHERE thread_id = ? "
                        f"AND request_id IN ({marks}) AND closed = ? AND since < ?",
                    ),
                    (thread, *sorted(p.waits), True, cutoff),
                )
            )
            counts: Counter[tuple[str, str]] = Counter()
            self._drop_waits(c, [thread], waits, counts)
            for part in _chunks(sorted(p.runs)):
                rm = ", ".join("?" for _ in part)
                self._findings(c, f"thread_id = ? AND run_id IN ({rm})", (thread, *part), counts)
            history.delete(c, p)
            # Each still recorded closed before the cutoff, and no verdict that stays changes;
            # else the thread keeps it all.
            if len(waits) != len(p.waits) or not history.unchanged(c, p, self.policy_for, now):
                tx.rollback()
                return self._dequeue(thread)
            c.exec_driver_sql(driver_sql(c, _DEQUEUE), (thread,))
            # Its prefix lost facts that no dirty mark tells (store.checkpoint): taken again.
            for table in ("thread_checkpoint", "settled_wait"):  # a checkpoint and its bodies
                c.exec_driver_sql(
                    driver_sql(c, f"DELETE FROM {table} WHERE thread_id = ?"),
                    (thread,),
                )
            _add(c, counts)
        return 0, len(waits)

    def _dequeue(self, thread: str) -> tuple[int, int]:
        with self.engine.begin() as c:
            c.exec_driver_sql(driver_sql(c, _DEQUEUE), (thread,))
        return 0, 0

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

    def _units(self, cutoff: int, now: int) -> int:
        """Prune up to a batch of the oldest units received before the cutoff, with their
        line counts and rejects (counted in pruned_total). A unit received after `now` (by a
        clock that was ahead then) is passed over, not waited for: it goes once it is old."""
        ids = self._leading(
            "SELECT id, received_at FROM unit WHERE received_at <= ? "
            f"ORDER BY id LIMIT {int(self.batch)}",
            (now,),
            cutoff,
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
        ids = self._leading(sql, (after,), cutoff)
        if not ids:
            return 0, after, False
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
        return int(n), ids[-1], len(ids) == self.batch

    def _unknown_beats(self, cutoff: int) -> tuple[int, bool]:
        """Prune the heartbeats older than the cutoff of threads that announced no wait: of
        up to a batch of spans in order of their first beat (`at`, an index that a span
        growing in place leaves as it is), a batch of those stored since the walk began (by
        id: a late beat may begin before where the walk is), and the spans met still beating
        whose last beat is now old. Rows kept for their wait are read once, not at every pass.
        A late beat of the other handle can cut a span back (store.heartbeats), so every old
        beat of a thread found goes with it. (pruned, whether more may follow)"""
        w = self._beats
        if w is None or cutoff < w.at or cutoff - w.began > RESTART_MS:
            # From the oldest again (as after a restart): a row no rule here finds (one that
            # PostgreSQL committed out of id order) waits at most that long.
            w = self._beats = _BeatWalk(began=cutoff, mark=self._last_id("heartbeat"))
        n = int(self.batch)
        popped: list[tuple[int, int]] = []
        while w.live and w.live[0][0] < cutoff and len(popped) < n:
            popped.append(heapq.heappop(w.live))
        due = [row_id for _, row_id in popped]
        try:
            aged, new, again = self._beat_rows(w, cutoff, due)
        except BaseException:  # not read: looked at again at the next pass
            for x in popped:
                heapq.heappush(w.live, x)
            raise
        self.examined += len(aged) + len(new) + len(again)
        if aged:
            w.at, w.id = int(aged[-1][1]), int(aged[-1][0])
        if new:
            w.mark = int(new[-1][0])
        old: set[str] = set()
        for row_id, at, last_at, thread in [*aged, *new, *again]:
            if last_at < cutoff:
                old.add(str(thread))
            elif (at, row_id) <= (w.at, w.id):  # still beating, behind the walk: again later
                heapq.heappush(w.live, (int(last_at), int(row_id)))
        pruned = 0
        if old:
            with self.engine.begin() as c:
                self._lock(c)
                key_lookups(c)  # by thread, however stale PostgreSQL's statistics
                for part in _chunks(sorted(old)):
                    marks = ", ".join("?" for _ in part)
                    pruned += c.exec_driver_sql(
                        driver_sql(
                            c,
                            f"DELETE FROM heartbeat WHERE thread_id IN ({marks}) AND last_at < ? "
                            "AND NOT EXISTS (SELECT 1 FROM interrupt i "
                            "WHERE i.thread_id = heartbeat.thread_id)",
                        ),
                        (*part, cutoff),
                    ).rowcount
                _add(c, Counter({(UNKNOWN, "heartbeat"): pruned}))
        more = bool(w.live and w.live[0][0] < cutoff)
        return pruned, len(aged) == n or len(new) == n or more

    def _beat_rows(
        self, w: _BeatWalk, cutoff: int, due: list[int]
    ) -> tuple[list[Any], list[Any], list[Any]]:
        """(id, at, last_at, thread) of the walk's next spans by first beat, of those stored
        since, and of the spans `due` (by id)."""
        n, spans = int(self.batch), "SELECT id, at, last_at, thread_id FROM heartbeat"
        with self.engine.connect() as c:
            key_lookups(c)

            def read(where: str, order: str, limit: int, *args: int) -> list[Any]:
                sql = f"{spans} WHERE {where} ORDER BY {order} LIMIT {limit}"
                return list(c.exec_driver_sql(driver_sql(c, sql), args))

            # After (at, id), in two index ranges: SQLite reads every row of that time for
            # `(at, id) > (?, ?)`, and many spans may begin at one time.
            aged = read("at = ? AND id > ?", "id", n, w.at, w.id) if w.at < cutoff else []
            if len(aged) < n:
                aged += read("at > ? AND at < ?", "at, id", n - len(aged), w.at, cutoff)
            new = read("id > ?", "id", n, w.mark)
            again = read(f"id IN ({', '.join('?' for _ in due)})", "id", n, *due) if due else []
        return aged, new, again

    def _last_id(self, table: str) -> int:
        with self.engine.connect() as c:
            return int(c.exec_driver_sql(f"SELECT max(id) FROM {table}").scalar() or 0)

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


RESTART_MS = 86_400_000  # the walk over heartbeats starts from the oldest again once a day


@dataclass(slots=True)
class _BeatWalk:
    """Where the walk over heartbeats is: by first beat, after (`at`, `id`); by arrival,
    after id `mark` (the rows stored since it began); `live`: (last beat, id) of the spans
    it passed still beating, a heap. `began`: the cutoff it began at."""

    began: int
    mark: int
    at: int = -(2**63)  # before any time
    id: int = 0
    live: list[tuple[int, int]] = field(default_factory=list)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _span(ms: int) -> str:
    """A duration as the log says it: 2h05m, 7m30s."""
    s = ms // 1000
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def ahead_of(retention_ms: int) -> int:
    """How far past the newest evidence the daemon prunes as of: a tenth of the retention,
    at most a day (what a clock jumped ahead can prune early; evidence keeps it near now)."""
    return min(DAY_MS, retention_ms // 10)


def _add(c: Connection, counts: Counter[tuple[str, str]]) -> None:
    """Add `counts` to the pruned totals; those of WAITS (the recorded verdicts deleted) to
    the running totals, last (see add_totals)."""
    rows = [(counter, key, n) for (counter, key), n in counts.items() if n and counter != WAITS]
    if rows:
        c.exec_driver_sql(driver_sql(c, _ADD), rows)
    add_totals(c, {k: n for k, n in counts.items() if k[0] == WAITS})


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
    "subagent": "at",
    "wait_state": "requested_at",
    "transition": "at",  # a recording's last transition's (0020): its earlier ones' are not
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


def pruned_before(engine: Engine) -> int | None:
    """The latest cutoff pruned to (ms), None when nothing was pruned yet."""
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        value = c.exec_driver_sql(
            driver_sql(c, "SELECT value FROM pruned_total WHERE counter = ? AND key = ''"),
            (PRUNED_BEFORE,),
        ).scalar()
    return None if value is None else int(value)
