"""Pruning the store to `store.retention`, in small batches of short transactions, keeping the
counts of what was pruned so that counters never go back. This module decides and paces; the
statements are the store's (store.retention, store.history, store.aged).

A thread is pruned whole once every wait of it is closed, the last of them before the cutoff
by the evidence (when it closed, not when sidewatch learned of it: a backfill of old traffic
goes at the next pass), and no evidence of it waits for the auditor. A thread that keeps a
wait loses only its closed waits older than the cutoff that can go without changing the
evidence or verdict of a wait that stays (`plan`, proved by `unchanged` on the store's own
rows before the deletion commits). Units and their rejects, and evidence naming no wait, go
by their own age.

With `ahead_ms` (the daemon's), a pass prunes as of its clock only up to `ahead_ms` after the
newest evidence (producers' times, not this host's): a clock jumped ahead prunes at most that
much early, and a store that hears nothing keeps its last retention until evidence comes."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine

from sidewatch.core.engine import Evaluated, PolicyFor, ThreadVerdicts, evaluate
from sidewatch.core.facts import ThreadFacts
from sidewatch.core.model import CLOSED_STATES
from sidewatch.store import history, retention
from sidewatch.store.aged import EVIDENCE_TABLES, Aged
from sidewatch.store.db import classified
from sidewatch.store.pruning import CURSOR, keep_pruned_before, pruned_before, vacuum
from sidewatch.store.stats import newest_evidence

BATCH = 100  # threads, units or evidence rows per transaction
DAY_MS = 86_400_000
log = logging.getLogger("sidewatch.retention")


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one pass pruned; `done`: nothing older than the cutoff was left."""

    threads: int = 0
    waits: int = 0
    units: int = 0
    unknown: int = 0
    vacuumed_pages: int = 0
    done: bool = True


@dataclass(frozen=True, slots=True)
class Plan:
    """What goes from one thread: the waits (by requestId) and the runs (by run id)."""

    thread: str
    waits: frozenset[str]
    runs: frozenset[str]
    before: ThreadVerdicts  # the thread's verdicts with everything kept


def ahead_of(retention_ms: int) -> int:
    """How far past the newest evidence the daemon prunes as of: a tenth of the retention,
    at most a day (what a clock jumped ahead can prune early; evidence keeps it near now)."""
    return min(DAY_MS, retention_ms // 10)


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
        self.retention_ms = retention_ms
        self.buckets = dict(buckets or {})
        self.batch = batch
        self.pause = 1.0  # pause after a batch, as a share of the batch's own time
        self._aged = Aged(engine, batch)
        self._examined = 0

    @property
    def examined(self) -> int:
        """The transitions, closed waits come due, queued threads and heartbeats the last
        pass read."""
        return self._examined + self._aged.examined

    def prune(
        self, now_ms: int, budget_s: float = 1.0, clock: Callable[[], float] = time.perf_counter
    ) -> Pruned:
        """Prune batch by batch until nothing older than `now_ms - retention` is left or
        `budget_s` is spent (the next pass goes on); `now_ms` held back to `as_of` (the newest
        evidence). Raises StoreError on an outage."""
        deadline = clock() + budget_s
        units = unknown = 0
        self._examined = self._aged.examined = 0
        with classified("store unavailable, nothing was pruned", "the store refused a prune"):
            now_ms = self.as_of(now_ms)
            cutoff = now_ms - self.retention_ms
            threads, waits, done = self._prune_threads(cutoff, now_ms, deadline, clock)
            while done:
                if clock() > deadline:
                    done = False
                    break
                with self._paced():
                    n = self._aged.units(cutoff, now_ms)
                units += n
                if n < self.batch:
                    break
            for table in EVIDENCE_TABLES if done else ():
                while True:
                    if clock() > deadline:
                        done = False
                        break
                    with self._paced():
                        n, more = self._aged.evidence(table, cutoff)
                    unknown += n
                    if not more:
                        break
            if threads or waits or units or unknown:
                keep_pruned_before(self.engine, cutoff)
            pages = vacuum(self.engine, deadline, clock)
        return Pruned(threads, waits, units, unknown, pages, done)

    def as_of(self, now_ms: int) -> int:
        """The time a pass prunes as of: `now_ms`, but never more than `ahead_ms` after the
        newest evidence stored (none: `now_ms`). A clock jumped ahead would otherwise prune
        for good what is younger than the retention; the first pass it holds back says so."""
        if self.ahead_ms is None:
            return now_ms
        newest = newest_evidence(self.engine)
        if newest is None or now_ms <= newest + self.ahead_ms:
            self._held = False
            return now_ms
        if not self._held:
            log.warning(
                "the clock is %s ahead of the newest evidence (%s): pruning holds back to what "
                "is older than the retention then, until evidence comes (a clock jumped ahead, "
                "or a store that heard nothing for that long)",
                _span(now_ms - newest),
                _iso(newest),
            )
        self._held = True
        return newest + self.ahead_ms

    def _prune_threads(
        self, cutoff: int, now: int, deadline: float, clock: Callable[[], float]
    ) -> tuple[int, int, bool]:
        """The closing transitions recorded since the last pass, the waits whose closing time
        the cutoff passed since, then the queued threads: (threads pruned whole, waits pruned,
        whether it finished in time)."""
        threads = waits = 0
        after = retention.position(self.engine, CURSOR, 0)
        while True:
            if clock() > deadline:
                return threads, waits, False
            found = retention.recorded(self.engine, cutoff, after, self.batch)
            self._examined += found.read
            if found.last == after:
                break
            with self._paced():
                t, w = self._whole(found.threads, cutoff, (CURSOR, found.last))
            threads, waits = threads + t, waits + w
            # As saved: a prune that deleted the newest transitions moved it back (SQLite
            # gives their ids again: store.pruning).
            after = retention.position(self.engine, CURSOR, 0)
        # Never after the cutoff: a pass of a clock that was ahead walked further than this
        # one's cutoff, and what the walk by recording left for later is after it.
        begin = retention.position(self.engine, retention.DUE, self._due_from())
        if begin > cutoff:
            self._whole([], cutoff, (retention.DUE, begin := cutoff))
        while begin < cutoff:
            if clock() > deadline:
                return threads, waits, False
            found = retention.due(self.engine, begin, cutoff, self.batch)
            self._examined += found.read
            with self._paced():
                t, w = self._whole(found.threads, cutoff, (retention.DUE, found.last))
            threads, waits, begin = threads + t, waits + w, found.last
        tried = ""
        while queued := history.queued(self.engine, tried, self.batch):
            self._examined += len(queued)
            for thread in queued:
                if clock() > deadline:
                    return threads, waits, False
                with self._paced():
                    t, w = self._retry(thread, cutoff, now)
                threads, waits, tried = threads + t, waits + w, thread
        return threads, waits, True

    def _due_from(self) -> int:
        """Where the walk by closing time begins in a store that has none saved: a store
        pruned before it existed, at the cutoff it last pruned to (what closed before was
        found by its recording then); a new one, at the earliest."""
        before = pruned_before(self.engine)
        return retention.EARLIEST if before is None else before

    def _whole(
        self, threads: list[str], cutoff: int, saved: tuple[str, int] | None
    ) -> tuple[int, int]:
        """Prune `threads` whole where they still can be (store.retention), saving a walk's
        position with it; with the auditor's policies, one that keeps a wait is queued for a
        look inside it."""
        within = self.policy_for is not None
        return retention.prune_whole(self.engine, threads, cutoff, saved, self.buckets, within)

    def _retry(self, thread: str, cutoff: int, now: int) -> tuple[int, int]:
        """Another look at a queued thread: pruned whole if it can be now; else its closed
        waits older than the cutoff that can go without changing the verdict of any wait that
        stays (`plan`), checked on the store's own rows before the commit (`unchanged`). It
        leaves the queue unless a dirty mark keeps it there."""
        policy_for = self.policy_for
        rows, facts = history.look(self.engine, thread, facts=policy_for is not None)
        old = {str(r[0]) for r in rows if r[1] and r[2] < cutoff}
        if rows and len(old) == len(rows):
            history.dequeue(self.engine, thread)  # and queued again if it is held after all
            return self._whole([thread], cutoff, None)
        p = None
        if facts is not None and old and policy_for is not None:
            p = plan(facts, old, cutoff, policy_for, now)
        if p is None or policy_for is None:
            history.dequeue(self.engine, thread)
            return 0, 0
        pruned = history.prune_within(
            self.engine,
            thread,
            p.waits,
            p.runs,
            cutoff,
            self.buckets,
            lambda left: unchanged(left, p, policy_for, now),
        )
        return 0, pruned

    @contextlib.contextmanager
    def _paced(self) -> Iterator[None]:
        """After each batch, as long a pause (50 ms at most): the store's other writers (ingest,
        the tick) get the write lock between batches, not only after the whole pass."""
        started = time.perf_counter()
        yield
        time.sleep(min(0.05, time.perf_counter() - started) * self.pause)


def plan(
    facts: ThreadFacts, old: set[str], cutoff: int, policy_for: PolicyFor, now: int
) -> Plan | None:
    """The closed waits among `old` (requestIds the auditor recorded closed before the
    cutoff) that can go with the runs only they used; None: nothing can. A run goes when all
    of it is older than the cutoff and than every remaining wait's request, and it announced
    only waits that go."""
    before = evaluate(facts, policy_for, now)
    if any(w.verdict is None for w in before.waits):
        return None  # a wait the engine cannot classify: nothing to compare against
    going: list[Evaluated] = []
    staying: list[Evaluated] = []
    for w in before.waits:
        closed = w.verdict is not None and w.verdict.state in CLOSED_STATES
        (going if closed and w.evidence.request_id in old else staying).append(w)
    if not going or not staying:
        return None  # nothing old, or the whole thread goes (store.retention)
    last: dict[str, int] = {}  # each run's latest fact (its findings are its waits')
    for group in (
        facts.runs,
        facts.tool_calls,
        facts.answers,
        facts.legacy_resumes,
        facts.tool_results,
        facts.interrupts,
        facts.heartbeats,
    ):
        for f in group:
            run = f.run_id
            if run is not None:
                last[run] = max(last.get(run, f.at), f.at)
    gone = going
    while True:  # a wait goes only with every run that announced it; one that stays holds
        left = {id(w) for w in gone}
        kept = staying + [w for w in going if id(w) not in left]  # the runs since its request
        horizon = min(cutoff, *(w.evidence.requested_at for w in kept))
        announcing = {r for w in kept for r in w.runs}
        runs = {r for r, at in last.items() if at < horizon and r not in announcing}
        still = [w for w in gone if w.runs <= runs]
        if len(still) == len(gone):
            break
        gone = still
    if not gone:
        return None
    return Plan(
        facts.thread_id, frozenset(w.evidence.request_id for w in gone), frozenset(runs), before
    )


def unchanged(left: ThreadFacts | None, p: Plan, policy_for: PolicyFor, now: int) -> bool:
    """After the plan's deletions, on the thread's facts as they are left (None: none):
    every wait that stays has the same evidence and verdict as before, and the thread
    noticed nothing it had not noticed before."""
    if left is None:
        return False
    now_ = evaluate(left, policy_for, now)
    kept = [w for w in p.before.waits if w.evidence.request_id not in p.waits]
    return _same(kept, now_.waits) and set(now_.findings) <= set(p.before.findings)


def _same(a: Sequence[Evaluated], b: Sequence[Evaluated]) -> bool:
    return len(a) == len(b) and all(
        x.evidence == y.evidence and x.verdict == y.verdict and x.runs == y.runs
        for x, y in zip(a, b, strict=True)
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _span(ms: int) -> str:
    """A duration as the log says it: 2h05m, 7m30s."""
    s = ms // 1000
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
