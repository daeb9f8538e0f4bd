"""Audit: every stored wait classified at a given time. The one-off audit (`sidewatch audit`)
classifies them all; the scheduled auditor's tick re-classifies only the waits of threads with
new evidence or whose next time-driven change is due, records every transition with its
effective time, evidence and thresholds, publishes a snapshot for the exporters, and pushes
the problem waits to Alertmanager."""

from __future__ import annotations

import bisect
import gc
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from sidewatch.app.evaluate import Outcome, evaluations, settled_rows
from sidewatch.app.prune import Pruned, Retention, ahead_of
from sidewatch.app.transitions import CLOCK_MARGIN_MS, stored_state, transitions
from sidewatch.core.checkpoint import Checkpoint
from sidewatch.core.engine import evaluate
from sidewatch.core.facts import FindingFact, ThreadFacts
from sidewatch.core.model import (
    CLOSED_STATES,
    NEXT_MOVE,
    OWNER,
    Missing,
    State,
    Verdict,
    WaitEvidence,
    uncertain_move,
)
from sidewatch.core.policy import Policy, select
from sidewatch.errors import StoreError, StoreRefused
from sidewatch.exporters.alertmanager import SEVERITY, AlertmanagerPush, ProblemWait
from sidewatch.exporters.snapshot import (
    AUDIT_BUCKETS,
    DECISION_BUCKETS,
    RESUME_BUCKETS,
    HistogramAcc,
    IngestCounters,
    Snapshot,
)
from sidewatch.report.verdicts import iso
from sidewatch.store.auditstate import AuditState, StoredState
from sidewatch.store.lease import AuditLease
from sidewatch.store.repo import Store
from sidewatch.store.transitions import StoredTransition

log = logging.getLogger("sidewatch.auditor")
BATCH = 1000  # threads per read-classify-save round: bounds memory at any scale
# A budgeted tick's smallest batch (and its first, while a thread's cost is not known yet):
# below it, a batch's own statements cost more than its threads.
MIN_BATCH = 100
TIDY_AFTER = 10_000  # dirty marks cleared in one tick, after which their table is vacuumed


@dataclass(frozen=True, slots=True)
class TickReport:
    threads: int
    waits: int
    transitions: int
    errors: int
    seconds: float
    backlog: int = 0  # threads due or dirty that a budgeted tick left for the next one


class Auditor:
    """Owns the counters a snapshot is built from; continues them from the store."""

    def __init__(
        self,
        store: Store,
        policies: tuple[Policy, ...],
        on_closed: Callable[[Sequence[tuple[WaitEvidence, Verdict]]], int] | None = None,
        lease: AuditLease | None = None,
        retention_ms: int | None = None,
    ) -> None:
        self.store = store
        # None: keep everything (tests, one-off audits); the daemon prunes to store.retention.
        self.retention = (
            None
            if retention_ms is None
            else Retention(
                store.engine,
                retention_ms,
                {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS},
                # The auditor's: a reload's new policies are the ones proved against.
                policy_for=self.policy_for,
                # Never as of a clock far ahead of the newest evidence (a jump forward).
                ahead_ms=ahead_of(retention_ms),
            )
        )
        # Called once a tick with the waits it closed (e.g. their OpenTelemetry spans); it
        # returns how many it failed.
        self.on_closed = on_closed
        self.lease = lease  # when replicas share the store: every save is fenced by it
        self.state = AuditState(store.engine)
        self.policies = policies
        marked = self.state.policies_changed(_fingerprint(policies))
        if marked:
            log.info("policies changed: the open waits of %d threads will be re-audited", marked)
        self.duration = HistogramAcc(AUDIT_BUCKETS)
        self.errors = 0
        self.skipped = 0
        self.ticks = 0
        self.last_success: float | None = None
        self.backlog = 0  # threads the last tick left for the next (its budget ran out)
        self._cost: float | None = None  # seconds per thread of the last batch
        self._ring_after = ""  # the last dirty thread a tick took: the next goes on after it
        self.ingest = IngestCounters()
        self.reload()

    def reload(self) -> None:
        """Continue the store-wide counters from the store: at start, and when this replica
        takes the audit lease over (another replica audited meanwhile)."""
        totals = self.state.totals()
        self.open_waits: Counter[tuple[str, str]] = totals.open_waits
        self.unreported: Counter[tuple[str, str, str]] = totals.unreported
        self.closed: Counter[tuple[str, str]] = totals.closed
        self.transitions: Counter[tuple[str, str]] = totals.transitions
        self.decision = {p.name: HistogramAcc(DECISION_BUCKETS) for p in self.policies}
        self.resume = {p.name: HistogramAcc(RESUME_BUCKETS) for p in self.policies}
        for policy, seconds in totals.decision_latencies:
            self._acc(self.decision, policy, DECISION_BUCKETS).observe(seconds)
        for policy, seconds in totals.resume_latencies:
            self._acc(self.resume, policy, RESUME_BUCKETS).observe(seconds)
        # What pruned wait records had observed (store.retention): their bucket counts.
        for (name, key), n in totals.pruned_latencies.items():
            accs, buckets = (
                (self.decision, DECISION_BUCKETS)
                if name.startswith("decision")
                else (self.resume, RESUME_BUCKETS)
            )
            if name.endswith("_ms"):
                self._acc(accs, key, buckets).total += n / 1000
            else:
                policy, _, index = key.rpartition("\x1f")
                self._acc(accs, policy, buckets).counts[int(index)] += n
        self.ingest.catch_up(totals.ingested, totals.rejected)
        # The latest time a tick evaluated at (store-wide: kept in the store, once a margin on).
        self.evaluated_until = self._kept_until = self.state.evaluated_until()
        self.snapshot = self._snapshot()

    def use_policies(self, policies: tuple[Policy, ...]) -> int:
        """Audit with `policies` from the next tick on (a reloaded config): the threads with
        an open wait are marked for re-audit when they differ from the stored verdicts'.
        Returns how many were marked."""
        marked = self.state.policies_changed(_fingerprint(policies))
        self.policies = policies
        return marked

    def policy_for(self, action: str | None, reason: str | None) -> Policy:
        return select(self.policies, action, reason)

    @staticmethod
    def _acc(
        accs: dict[str, HistogramAcc], policy: str, buckets: tuple[float, ...]
    ) -> HistogramAcc:
        if policy not in accs:
            accs[policy] = HistogramAcc(buckets)
        return accs[policy]

    def tick(self, now_ms: int, budget_s: float | None = None) -> TickReport:
        """One audit pass at `now_ms`; raises StoreError when the store is unavailable. The
        caller says when it succeeded (`succeeded`): the scheduler, by its clock.

        With `budget_s`, the pass stops starting batches once that long has gone (at least
        one batch runs, so every tick makes progress); each batch commits by itself, and what
        is left stays dirty or due for the next tick, which takes it up (`backlog`). Work is
        taken oldest first: due threads by due time, then the dirty ones in thread order from
        where the last tick stopped, round the ring, so none waits more than one lap."""
        start = time.perf_counter()
        self._clock_back(now_ms)  # before the marks are read: it marks what it corrects
        marks = dict(self.state.dirty())
        due = self.state.due(now_ms)
        threads = self._ordered(marks, due)
        waits = transitions = errors = 0
        size = self._batch_size(budget_s)
        done = 0
        while done < len(threads):
            batch = threads[done : done + size]
            began = time.perf_counter()
            with _collector_paused():
                w, t, e = self._batch(batch, marks, now_ms)
            waits, transitions, errors = waits + w, transitions + t, errors + e
            done += len(batch)
            self._cost = (time.perf_counter() - began) / len(batch)
            if budget_s is not None:
                left = budget_s - (time.perf_counter() - start)
                if left <= 0:
                    break
                size = self._batch_size(left)
        self.backlog = len(threads) - done
        if done > len(due):  # the ring's cursor: the last dirty thread taken
            self._ring_after = threads[done - 1]
        if sum(1 for t in threads[:done] if t in marks) >= TIDY_AFTER:
            self.state.tidy_dirty()
        self._evaluated(now_ms)
        # Lines other replicas ingested: the counters are store-wide, and never go back.
        self.ingest.catch_up(*self.state.ingest_totals())
        seconds = time.perf_counter() - start
        self.duration.observe(seconds)
        self.errors += errors
        self.ticks += 1
        self.snapshot = self._snapshot()
        return TickReport(done, waits, transitions, errors, seconds, self.backlog)

    def _ordered(self, marks: dict[str, int], due: list[str]) -> list[str]:
        """The tick's work in the order it is taken: the due threads as `due` lists them
        (the longest overdue first), then the other dirty threads in thread order, starting
        after the last one a tick took (the ring's cursor) and wrapping round."""
        taken = set(due)
        ring = sorted(t for t in marks if t not in taken)
        cut = bisect.bisect_right(ring, self._ring_after)
        return [*due, *ring[cut:], *ring[:cut]]

    def _batch_size(self, budget_s: float | None) -> int:
        """Threads in the next batch: BATCH, or what fits `budget_s` at the last batch's cost
        per thread (from MIN_BATCH to BATCH)."""
        if budget_s is None or self._cost is None:
            return BATCH if budget_s is None else MIN_BATCH
        return max(MIN_BATCH, min(BATCH, int(budget_s / self._cost)))

    def _clock_back(self, now: int) -> None:
        """When a tick evaluated more than CLOCK_MARGIN_MS ahead of `now` (the clock went back
        since): mark the threads of the verdicts evaluated after `now + CLOCK_MARGIN_MS` dirty,
        so that this tick evaluates them again, and keep `now` as the latest time."""
        until = self.evaluated_until
        if until is None or until <= now + CLOCK_MARGIN_MS:
            return
        marked = self.state.mark_evaluated_after(now + CLOCK_MARGIN_MS, now)
        self.evaluated_until = self._kept_until = now
        log.warning(
            "the clock went back: a tick evaluated at %s, %d s ahead of now; the %d threads "
            "evaluated ahead of now are evaluated again",
            _iso(until),
            (until - now) // 1000,
            marked,
        )

    def _evaluated(self, now: int) -> None:
        """A tick evaluated at `now`: the latest time, kept in the store once it is a margin
        past what was kept (a replica taking over, or a restart, knows it within a minute)."""
        if self.evaluated_until is not None and now <= self.evaluated_until:
            return
        self.evaluated_until = now
        if self._kept_until is None or now > self._kept_until + CLOCK_MARGIN_MS:
            try:
                self.state.keep_evaluated_until(now)
            except (StoreError, StoreRefused) as e:  # the verdicts are saved; kept next tick
                log.warning("could not keep the time evaluated at: %s", e)
                return
            self._kept_until = now

    def succeeded(self, at: float) -> None:
        """The last tick completed at `at` (epoch seconds): exported, and what /readyz and
        the stalled-auditor alert compare with the clock."""
        self.last_success = at
        self.snapshot = replace(self.snapshot, audit_last_success=at)

    def _batch(self, threads: list[str], marks: dict[str, int], now: int) -> tuple[int, int, int]:
        # A long thread from its checkpoint where it holds (app.evaluate).
        outcomes = evaluations(self.store, threads, self.policy_for, now)
        # The recorded verdicts of the waits evaluated only: those of a long thread's settled
        # waits before its cut are neither read nor touched.
        stored = self.state.records_of(_evaluated(outcomes))
        groups: list[_Group] = []
        errors = 0
        keep: set[str] = set()  # threads to look at again next tick, whatever is due
        for out in outcomes:
            assembled = out.result
            if assembled is None:
                log.error(
                    "thread %s could not be assembled; skipped", out.thread_id, exc_info=out.error
                )
                errors += 1
                keep.add(out.thread_id)
                continue
            g = _Group(out.thread_id, findings=list(assembled.findings), outcome=out)
            for w in assembled.waits:
                ev = w.evidence
                if ev.requested_at > now:  # a producer's clock ahead of ours
                    keep.add(ev.thread_id)
                elif w.verdict is None:
                    log.error(
                        "wait %s could not be classified; skipped", ev.request_id, exc_info=w.error
                    )
                    errors += 1
                    keep.add(ev.thread_id)
                elif not self._wait(
                    g, ev, w.verdict, stored.get((ev.thread_id, ev.request_id)), now
                ):
                    errors += 1
                    keep.add(ev.thread_id)  # its state is not saved: it is looked at again
            groups.append(g)
        grouped = {g.thread for g in groups}
        for g in groups:
            if g.thread in marks and g.thread not in keep:
                g.cleared.append((g.thread, marks[g.thread]))
            _checkpoint(g, g.thread in keep, now)
        rest = _Group("")  # the marks of threads that hold no facts: nothing to evaluate
        rest.cleared = [(t, marks[t]) for t in threads if t in marks and t not in grouped]
        saved, refused = self._save([*groups, rest])
        # The counters move only with what was committed: verdicts not saved are evaluated
        # again at the next tick, and counted then.
        self._apply(saved)
        errors += refused
        if self.on_closed is not None:  # only once saved: a fenced-out save closes nothing
            closing = [c for g in saved for c in g.closing]
            try:
                errors += self.on_closed(closing) if closing else 0  # the waits it failed
            except Exception:  # an exporter never stops the audit
                log.exception("closing hook failed for %d waits", len(closing))
                errors += len(closing)
        return sum(len(g.states) for g in saved), sum(len(g.records) for g in saved), errors

    def _wait(
        self, g: _Group, ev: WaitEvidence, verdict: Verdict, old: StoredState | None, now: int
    ) -> bool:
        """Record one wait's verdict into its thread's group; False (logged) when that failed."""
        try:
            state = stored_state(ev, verdict, now)
            recorded = transitions(ev, verdict, old, now)
        except Exception:  # e.g. a value no serializer takes: the others are saved
            log.exception("wait %s could not be recorded; retried", ev.request_id)
            return False
        g.olds.append(old)
        g.states.append(state)
        g.records += recorded
        if recorded and verdict.closed:
            g.closing.append((ev, verdict))
        g.findings += [
            FindingFact(
                rule=rule,
                at=now,
                seq=0,
                thread_id=ev.thread_id,
                run_id=ev.run_id,
                interrupt_id=ev.interrupt_id,
            )
            for rule in verdict.findings
        ]
        return True

    def _save(self, groups: list[_Group]) -> tuple[list[_Group], int]:
        """Save the groups in one transaction. Should the store refuse a value in it (a data or
        integrity error, not an outage), save them thread by thread, so that only the threads
        whose verdicts it refuses are held back: logged, counted and retried next tick. An
        outage (StoreError) or a lost lease is raised, and nothing of the batch is saved."""
        fence = self.lease.fence if self.lease else None
        try:
            self.state.save(*_joined(groups), fence, **_checkpoints(groups))
            return groups, 0
        except StoreRefused as e:
            log.warning("the store refused a verdict of a batch (%s): saving by thread", e.reason)
        saved: list[_Group] = []
        for g in groups:
            try:
                self.state.save(*_joined([g]), fence, **_checkpoints([g]))
            except StoreRefused as e:
                log.error(
                    "the store refused the verdicts of thread %s (%s); retried", g.thread, e.reason
                )
                continue
            saved.append(g)
        return saved, len(groups) - len(saved)

    def _apply(self, saved: list[_Group]) -> None:
        """Move the counters by what the committed groups recorded: each wait's verdict
        beside the one it replaced, and each transition (nothing of a failed save)."""
        open_waits, unreported = self.open_waits, self.unreported
        for g in saved:
            for old, new in zip(g.olds, g.states, strict=True):
                if old is not None and not old.closed:
                    open_waits[(old.state, old.policy)] -= 1
                    if old.unreported:
                        unreported[(old.state, old.policy, old.unreported)] -= 1
                if not new.closed:
                    open_waits[(new.state, new.policy)] += 1
                    if new.unreported:
                        unreported[(new.state, new.policy, new.unreported)] += 1
                decided, receipt = new.decided_at, new.receipt_at
                if decided is not None and (old is None or old.decided_at is None):
                    self._acc(self.decision, new.policy, DECISION_BUCKETS).observe(
                        (decided - new.requested_at) / 1000
                    )
                resumed = receipt is not None and (old is None or old.receipt_at is None)
                if resumed and receipt is not None and decided is not None:
                    self._acc(self.resume, new.policy, RESUME_BUCKETS).observe(
                        max(0, receipt - decided) / 1000
                    )
            for t in g.records:
                self.transitions[(t.from_state or "none", t.to_state)] += 1
                if t.to_state in CLOSED_STATES:
                    self.closed[(t.to_state, t.policy)] += 1

    def prune(self, now_ms: int, budget_s: float) -> Pruned | None:
        """Prune to the retention for at most `budget_s` (store.retention), between ticks;
        raises StoreError when the store is unavailable."""
        if self.retention is None:
            return None
        return self.retention.prune(now_ms, budget_s)

    def skipped_tick(self) -> None:
        """A tick could not run (the store was unavailable): counted, and visible at once."""
        self.skipped += 1
        self.snapshot = replace(self.snapshot, audit_skipped=self.skipped)

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            policies=tuple(p.name for p in self.policies),
            open_waits={k: v for k, v in self.open_waits.items() if v},
            unreported={k: v for k, v in self.unreported.items() if v},
            oldest_start={s: at / 1000 for s, at in self.state.oldest_since().items()},
            closed_total=dict(self.closed),
            transitions_total=dict(self.transitions),
            decision_latency={p: h.freeze() for p, h in self.decision.items()},
            resume_latency={p: h.freeze() for p, h in self.resume.items()},
            findings=self.state.finding_counts(),
            audit_duration=self.duration.freeze(),
            audit_last_success=self.last_success,
            audit_errors=self.errors,
            audit_skipped=self.skipped,
            audit_backlog=self.backlog,
            ticks=self.ticks,
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector paused for one batch, then resumed (if it ran). A batch frees
    its records by reference counting (they hold no cycles), but allocating them triggers the
    collector's passes over every live object: 15% of a full audit's CPU (measured with
    gc.callbacks at 20,000 waits). Cycles made meanwhile are collected after the batch."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(slots=True)
class _Group:
    """One thread's share of a batch: what is saved, counted and closed together. The
    counters move by its states beside `olds` (the verdicts they replace, None for a new
    wait) and its transitions, only once they are committed (Auditor._apply)."""

    thread: str
    olds: list[StoredState | None] = field(default_factory=list)
    states: list[StoredState] = field(default_factory=list)
    records: list[StoredTransition] = field(default_factory=list)
    findings: list[FindingFact] = field(default_factory=list)
    cleared: list[tuple[str, int]] = field(default_factory=list)
    closing: list[tuple[WaitEvidence, Verdict]] = field(default_factory=list)
    outcome: Outcome | None = None
    checkpoint: list[Checkpoint] = field(default_factory=list)  # to keep: saved with it
    dropped: list[str] = field(default_factory=list)
    settled: list[tuple[str, str, int, bytes]] = field(default_factory=list)  # kept waits
    renewed: list[str] = field(default_factory=list)  # its old kept waits deleted first


def _evaluated(outcomes: Iterable[Outcome]) -> Iterator[tuple[str, str]]:
    """(thread, requestId) of every wait the outcomes evaluated."""
    for out in outcomes:
        for w in out.result.waits if out.result is not None else ():
            yield w.evidence.thread_id, w.evidence.request_id


def _checkpoint(g: _Group, failed: bool, now: int) -> None:
    """The thread's checkpoint to save with its verdicts: a new one only when every verdict
    of the thread is saved with it, with the bodies of the waits it settles; the old one
    dropped (its bodies too) when it no longer held."""
    out = g.outcome
    if out is None:
        return
    if out.checkpoint is not None and not failed:
        g.checkpoint.append(out.checkpoint)
        g.settled += settled_rows(out, out.checkpoint.cut, now)
        if not out.resumed:  # evaluated whole: every body before the cut is written again
            g.renewed.append(g.thread)
    elif out.had and not out.resumed:
        g.dropped.append(g.thread)


def _joined(
    groups: list[_Group],
) -> tuple[list[StoredState], list[StoredTransition], list[FindingFact], list[tuple[str, int]]]:
    return (
        [x for g in groups for x in g.states],
        [x for g in groups for x in g.records],
        [x for g in groups for x in g.findings],
        [x for g in groups for x in g.cleared],
    )


def _checkpoints(groups: list[_Group]) -> dict[str, Any]:
    return {
        "checkpoints": [x for g in groups for x in g.checkpoint],
        "dropped": [x for g in groups for x in g.dropped],
        "settled": [x for g in groups for x in g.settled],
        "renewed": [x for g in groups for x in g.renewed],
    }


def push_problems(auditor: Auditor, push: AlertmanagerPush, now: int) -> int:
    """One alert per problem wait, to Alertmanager (see exporters.alertmanager)."""
    rows = auditor.state.problems(tuple(SEVERITY))
    return push.push(
        [
            ProblemWait(
                rid,
                state,
                OWNER[State(state)] or "",
                policy,
                since,
                uncertain_move(_missing(unreported)) if unreported else NEXT_MOVE[State(state)],
                evidence,
                thresholds,
                unreported,
            )
            for rid, state, policy, since, evidence, thresholds, unreported in rows
        ],
        now,
    )


def _iso(ms: int) -> str:
    return iso(ms) or str(ms)


def _missing(stored: str) -> tuple[Missing, ...]:
    return tuple(Missing(m) for m in stored.split(","))


def _fingerprint(policies: tuple[Policy, ...]) -> str:
    return hashlib.sha256(repr(policies).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Audited:
    evidence: WaitEvidence
    verdict: Verdict


def audit(store: Store, policies: tuple[Policy, ...], at: int) -> list[Audited]:
    """Every known wait's verdict at `at`, ordered by when the wait was requested."""
    return classified(store.threads(), policies, at)


def classified(
    threads: Iterable[ThreadFacts], policies: tuple[Policy, ...], at: int
) -> list[Audited]:
    """The verdict at `at` of every wait of `threads` requested by then, ordered by when the
    wait was requested."""
    chosen: dict[tuple[str | None, str | None], Policy] = {}

    def policy_for(action: str | None, reason: str | None) -> Policy:
        key = (action, reason)
        if key not in chosen:  # one lookup per (action, reason), not one per wait
            chosen[key] = select(policies, action, reason)
        return chosen[key]

    out: list[Audited] = []
    for thread in threads:
        if all(i.at > at for i in thread.interrupts):
            continue  # every wait of it is requested after `at`: none is audited then
        try:
            evaluated = evaluate(thread, policy_for, at)
        except Exception as e:  # as in the auditor: one thread never fails the audit
            # The class only, no traceback: this also runs in the CLI, on a terminal.
            log.error("thread %s left out: %s", thread.thread_id, type(e).__name__)
            continue
        for w in evaluated.waits:
            if w.evidence.requested_at > at:
                continue
            if w.verdict is None:  # as in the auditor: one wait never fails the audit
                log.error("wait %s left out: %s", w.evidence.request_id, type(w.error).__name__)
                continue
            out.append(Audited(w.evidence, w.verdict))
    out.sort(key=lambda a: (a.evidence.requested_at, a.evidence.requested_seq))
    return out
