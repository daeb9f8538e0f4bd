"""`store.retention` by age: the statements. Units (with their line counts and rejects) and
evidence naming no wait seen go once older than the cutoff, a batch a call, each counted in
pruned_total. Each table is walked by id from where the last batch stopped, heartbeats by
their first beat, so that rows kept for their wait are not read again at every pass."""

# ruff: noqa: S608 - every statement here is built of our own table and column names; every
# value is a bound parameter.
from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from sidewatch.store.pruning import FINDINGS, IDS, LINES, REJECTS, UNKNOWN, add, lock
from sidewatch.store.sql import chunks, driver_sql, key_lookups

# Evidence that may name a thread no interrupt announced (a wait not seen yet).
EVIDENCE_TABLES = (
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
    "run_trace",
)
# A row of such evidence (`t`): its thread announced no wait; a signal's, nor its requestId.
NO_WAIT = "NOT EXISTS (SELECT 1 FROM interrupt i WHERE i.thread_id = t.thread_id)"
SIGNAL_NO_WAIT = (
    f"(t.thread_id IS NULL OR {NO_WAIT}) AND (t.request_id IS NULL OR ("
    "NOT EXISTS (SELECT 1 FROM wait_state w WHERE w.request_id = t.request_id) AND "
    "NOT EXISTS (SELECT 1 FROM interrupt i WHERE i.request_id = t.request_id)))"
)
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


class Aged:
    """Prunes `engine`'s units and evidence naming no wait, `batch` rows a transaction,
    remembering where each walk is (from the oldest again after a restart); `examined`: the
    heartbeat rows its walk read."""

    def __init__(self, engine: Engine, batch: int) -> None:
        self.engine = engine
        self.batch = batch
        self.examined = 0
        # Per evidence table, the last id looked at: rows kept because a wait names them are
        # not read again at every pass (from 0 again after a restart).
        self._after: dict[str, int] = {}
        self._beats: _BeatWalk | None = None  # heartbeats: by time, not id (`_unknown_beats`)

    def evidence(self, table: str, cutoff: int) -> tuple[int, bool]:
        """Prune a batch of `table`'s evidence naming no wait older than the cutoff:
        (pruned, whether more may follow)."""
        if table == "heartbeat":
            return self._unknown_beats(cutoff)
        n, self._after[table], more = self._unknown(table, cutoff, self._after.get(table, 0))
        return n, more

    def units(self, cutoff: int, now: int) -> int:
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
            lock(c)
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
            add(c, counts)
        return len(ids)

    # -- evidence naming no wait -----------------------------------------------------------

    def _unknown(self, table: str, cutoff: int, after: int) -> tuple[int, int, bool]:
        """Prune up to a batch of `table`'s rows older than the cutoff (by id, after `after`)
        that name no wait seen: (pruned, the last id looked at, whether more may follow)."""
        no_wait = SIGNAL_NO_WAIT if table == "signal" else NO_WAIT
        if table == "finding":
            no_wait = f"(t.thread_id IS NULL OR {NO_WAIT})"
        sql = f"SELECT id, at FROM {table} WHERE id > ? ORDER BY id LIMIT {int(self.batch)}"
        ids = self._leading(sql, (after,), cutoff)
        if not ids:
            return 0, after, False
        with self.engine.begin() as c:
            lock(c)
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
            add(c, counts)
            last = ids[-1]
            if n and c.dialect.name == "sqlite":
                # SQLite gives a new row the largest id plus one: once the newest rows went (a
                # backfill's), the next take ids the walk has passed. It goes back to the
                # largest left, under the write lock (PostgreSQL's sequence never reuses one).
                top = c.exec_driver_sql(f"SELECT max(id) FROM {table}").scalar()
                last = min(last, int(top or 0))
        # A batch cut short by a row newer than the cutoff: the rest waits for a later pass.
        return int(n), last, len(ids) == self.batch

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
                lock(c)
                key_lookups(c)  # by thread, however stale PostgreSQL's statistics
                for part in chunks(sorted(old), IDS):
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
                add(c, Counter({(UNKNOWN, "heartbeat"): pruned}))
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
