"""The evaluation of threads at a time: a long thread from its checkpoint where it still holds
(core.checkpoint), else whole; and what a new checkpoint keeps of the waits it settles
(core.settled). Every read of a batch goes through one read session of the store (one
snapshot); the store only reads and writes, the decisions are core's, called from here.

A resumed evaluation reads the suffix (store.suffix) and asks the prefix only about the
suffix's own ids; a GET of a wait settled before the cut, once the suffix shows that the
checkpoint still holds (`want`), reads back what was kept of it (store.checkpoint.settled_of)
with the beats that reach it now and classifies it, without reading the history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter

from sqlalchemy import Connection

from sidewatch.core.checkpoint import (
    LONG,
    Checkpoint,
    Seen,
    choose,
    holds,
    refs,
    seeded,
    uses,
)
from sidewatch.core.engine import Evaluated, PolicyFor, ThreadVerdicts, evaluate
from sidewatch.core.facts import ThreadFacts
from sidewatch.core.health import classify
from sidewatch.core.settled import kept, restored
from sidewatch.store.checkpoint import checkpoints, pack, settled_of
from sidewatch.store.load import load_threads
from sidewatch.store.repo import Store
from sidewatch.store.services import expand_runs
from sidewatch.store.suffix import interrupts_from, run_beats, seen, suffix

log = logging.getLogger("sidewatch.auditor")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One thread evaluated: whole, or its suffix only (`resumed`: the waits after the cut;
    the waits before it are settled and recorded). `checkpoint`: a new one to keep (None:
    none; after a whole evaluation an old one is dropped, after a resumed one it stays)."""

    thread_id: str
    result: ThreadVerdicts | None  # None: the evaluation raised (`error`)
    resumed: bool
    checkpoint: Checkpoint | None
    had: bool  # the thread had a checkpoint when read
    error: Exception | None = None
    # The waits asked for (`want`) that are settled before the cut: their kept evidence with
    # the beats that reach them now, and its verdict at the evaluation time.
    settled: Mapping[str, Evaluated] = field(default_factory=dict)


def evaluations(
    store: Store,
    thread_ids: Collection[str],
    policy_for: PolicyFor,
    now: int,
    keep: bool = True,
    want: Mapping[str, Collection[str]] | None = None,
) -> list[Outcome]:
    """These threads evaluated at `now` (`evaluate_threads`), read in one read session of
    the store: one snapshot for the whole batch."""
    with store.reading() as conn:
        return list(evaluate_threads(conn, thread_ids, policy_for, now, keep, want))


def evaluate_threads(
    conn: Connection,
    thread_ids: Collection[str],
    policy_for: PolicyFor,
    now: int,
    keep: bool = True,
    want: Mapping[str, Collection[str]] | None = None,
) -> Iterator[Outcome]:
    """Evaluate these threads at `now`: from their checkpoint where it holds, else whole.
    With `keep`, a long thread's checkpoint to keep is chosen (Outcome.checkpoint). With
    `want` (requestIds by thread), a thread whose suffix lacks one of its waits named there
    is evaluated whole."""

    def run(facts: ThreadFacts) -> ThreadVerdicts:
        return evaluate(facts, policy_for, now)

    held = checkpoints(conn, thread_ids)
    whole: list[str] = [t for t in thread_ids if t not in held]
    for thread, cp in held.items():
        part = _suffix(conn, cp)
        known = seen(conn, cp, uses(part), refs(part))
        try:
            result = run(seeded(part, known, cp.cut))
        except Exception:  # evaluated whole below, where a failure is reported
            whole.append(thread)
            continue
        if not holds(cp, part, result, known):
            whole.append(thread)
            continue
        rids = {w.evidence.request_id for w in result.waits}
        asked = set(want.get(thread, ())) - rids if want is not None else set()
        # A wait asked for before the cut: what was kept of it, while the checkpoint holds (a
        # fact that changes it ends the checkpoint), with the beats that reach it now; else
        # the thread whole.
        served = _served(conn, part, asked, policy_for, now) if asked else {}
        if served is None:
            whole.append(thread)
            continue
        new = _choose(part, result, now, run, cp, known) if keep else None
        yield Outcome(thread, result, True, new, True, settled=served)  # None: the old one stays
    for facts in load_threads(conn, whole) if whole else ():
        had = facts.thread_id in held
        try:
            result = run(facts)
        except Exception as e:  # one thread never fails the others
            yield Outcome(facts.thread_id, None, False, None, had, e)
            continue
        long = keep and _size(facts) > LONG
        new = _choose(facts, result, now, run) if long else None
        yield Outcome(facts.thread_id, result, False, new, had)


def _suffix(conn: Connection, cp: Checkpoint) -> ThreadFacts:
    """The thread's suffix as load_threads gives it (core.checkpoint.split): its facts from
    the cut on, the signals naming a requestId one of its interrupts may have, the
    thread-wide heartbeats, and the beats of the services bound to the thread or to one of
    the suffix's runs (store.services.expand: the first and latest of each instance),
    whatever their time."""
    interrupts = interrupts_from(conn, cp.thread_id, cp.cut)
    shell = ThreadFacts(thread_id=cp.thread_id, interrupts=tuple(interrupts))
    facts = suffix(conn, cp, interrupts, refs(shell))
    bound = expand_runs(conn, cp.thread_id, uses(facts).runs)
    return replace(facts, heartbeats=facts.heartbeats + tuple(bound)) if bound else facts


def _served(
    conn: Connection,
    part: ThreadFacts,
    asked: Collection[str],
    policy_for: PolicyFor,
    now: int,
) -> dict[str, Evaluated] | None:
    """The waits asked for that are settled before the cut, from what was kept of them and
    the beats that reach them now (core.settled): the thread-wide ones of the suffix, and
    those of their own runs, read by (thread, run). None: one is not stored (or cannot be
    classified): the thread is evaluated whole."""
    thread = part.thread_id
    stored = settled_of(conn, thread, asked, now)
    if len(stored) < len(asked):
        return None
    runs = sorted({r for k in stored.values() for r in k.runs})
    beats = [h for h in part.heartbeats if h.run_id is None]
    beats += run_beats(conn, thread, runs)
    beats += expand_runs(conn, thread, runs, whole=False)  # the thread's: in the suffix
    out: dict[str, Evaluated] = {}
    try:
        for rid, k in stored.items():
            ev = restored(k, beats)
            out[rid] = Evaluated(ev, classify(ev, policy_for(ev.action, ev.reason), now))
    except Exception:  # evaluated whole, where a failure is reported
        return None
    return out


def _size(facts: ThreadFacts) -> int:
    """How many facts the thread holds, of every kind: one attrgetter call and a map, not a
    generator of getattr calls (asked of every thread of a full audit: 3 % of its CPU)."""
    return sum(map(len, _KINDS(facts)))


_KINDS = attrgetter(*(f.name for f in fields(ThreadFacts) if f.name != "thread_id"))


def _choose(
    facts: ThreadFacts,
    result: ThreadVerdicts,
    now: int,
    run: Callable[[ThreadFacts], ThreadVerdicts],
    base: Checkpoint | None = None,
    held: Seen | None = None,
) -> Checkpoint | None:
    try:
        return choose(facts, result, now, run, base, held)
    except Exception:  # only a speed-up: without one, the thread is evaluated whole
        return None


def settled_rows(out: Outcome, cut: int, now: int) -> list[tuple[str, str, int, bytes]]:
    """What is kept (core.settled, packed) of the waits before `cut`, evaluated at `now`:
    the GET of one and the list read them back with the beats that reach them then, while
    the checkpoint holds."""
    rows: list[tuple[str, str, int, bytes]] = []
    taken: set[str] = set()
    for w in out.result.waits if out.result is not None else ():
        ev = w.evidence
        # Two waits of a thread may have one requestId (a producer's): its GET shows the
        # first announced, as a whole evaluation does; the later one is not stored.
        first = ev.request_id not in taken
        taken.add(ev.request_id)
        if not first or not settles(w, cut):
            continue
        try:
            packed = pack(kept(w))
        except Exception:  # only a speed-up: its GET evaluates the thread whole
            log.exception("wait %s could not be stored settled", ev.request_id)
            continue
        rows.append((ev.thread_id, ev.request_id, now, packed))
    return rows


def settles(w: Evaluated, cut: int) -> bool:
    """Whether `w` is kept as settled before `cut` (`settled_rows`): announced before it, and
    closed (its verdict rests on no heartbeat then: core.settled)."""
    v = w.verdict
    return w.evidence.requested_at < cut and v is not None and v.closed
