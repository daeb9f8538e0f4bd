"""Heartbeats compacted into spans (store.heartbeats) give the verdicts every beat gave: on
generated histories of beats (gaps on both sides of the compaction gap and of the freshness,
handle changes, two runs), delivered out of order, in units, and again, the verdicts of every
wait at many times `t` are the ones of the uncompacted beats: state, since, phase and
transitions at every `t`, the whole verdict at every `t` no span is in the middle of.

The arrival orders are the ones sources give: each source's beats in order, sources
interleaved, any unit delivered again. A beat of one handle arriving after the other handle's
beats around it were compacted is the one reading that cannot be exact
(docs/internals/interpretations/heartbeat-compaction.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from sidewatch.core.engine import evaluate
from sidewatch.core.facts import HeartbeatFact, InterruptFact, ThreadFacts
from sidewatch.core.model import Thresholds, Verdict
from sidewatch.core.policy import Need, Policy
from sidewatch.store.db import open_store
from sidewatch.store.heartbeats import Span, merge
from sidewatch.store.repo import Store

SEC, MIN = 1_000, 60_000
T0 = 1_785_000_000_000
THREAD = "t/1"
GAP = MIN  # the compaction gap
GAPS = (1, 10 * SEC, 30 * SEC, GAP - 1, GAP, GAP + 1, 90 * SEC, 3 * MIN, 11 * MIN)


def _policy(freshness: int) -> Policy:
    return Policy(
        name="p",
        thresholds=Thresholds(5 * MIN, freshness, 2 * MIN),
        route=Need.IGNORED,
        handle=Need.REQUIRED,
        heartbeat=Need.REQUIRED,
    )


Beat = tuple[str | None, bool | None, int]  # run, handle, at


def _chunks(beats: Sequence[Beat], gap: int) -> list[int]:
    """Each beat's span, as the compaction would draw it from beats in time order."""
    out: list[int] = []
    last: dict[tuple[str | None, bool | None], tuple[int, int]] = {}  # kind -> (at, chunk)
    latest: dict[bool, int] = {}  # handle -> its latest beat
    for n, (run, handle, at) in enumerate(beats):
        prev = last.get((run, handle))
        other = None if handle is None else latest.get(not handle)
        if prev is not None and at - prev[0] <= gap and (other is None or other < prev[0]):
            chunk = prev[1]
        else:
            chunk = n
        last[(run, handle)] = (at, chunk)
        if handle is not None:
            latest[handle] = at
        out.append(chunk)
    return out


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Beat], list[list[Beat]], list[InterruptFact], int]:
    """Beats in time order; their arrival in units (out of order, some again); the waits."""
    n = draw(st.integers(1, 24))
    at, beats = T0, []
    for _ in range(n):
        at += draw(st.sampled_from(GAPS))
        run = draw(st.sampled_from((None, None, "r1", "r2")))
        beats.append((run, draw(st.sampled_from((None, None, True, False))), at))
    chunks = _chunks(beats, GAP)
    # Sources: the beats reporting a handle come in time order (one reporter); each span of
    # beats without one comes from the middle outwards, both ways; the sources interleave.
    streams: list[list[Beat]] = [[b for b in beats if b[1] is not None]]
    for c in sorted({c for b, c in zip(beats, chunks, strict=True) if b[1] is None}):
        its = [b for b, k in zip(beats, chunks, strict=True) if k == c]
        k = draw(st.integers(0, len(its) - 1))
        lo, hi, order = k, k, [its[k]]
        while lo > 0 or hi < len(its) - 1:
            if hi == len(its) - 1 or (lo > 0 and draw(st.booleans())):
                lo -= 1
                order.append(its[lo])
            else:
                hi += 1
                order.append(its[hi])
        streams.append(order)
    arrival: list[Beat] = []
    streams = [s for s in streams if s]
    while streams:
        s = streams[draw(st.integers(0, len(streams) - 1))]
        arrival.append(s.pop(0))
        streams = [s for s in streams if s]
    units: list[list[Beat]] = []
    while arrival:
        size = draw(st.integers(1, 4))
        units.append(arrival[:size])
        arrival = arrival[size:]
    for _ in range(draw(st.integers(0, 3))):  # a unit delivered again, later
        k = draw(st.integers(0, len(units) - 1))
        units.insert(draw(st.integers(k + 1, len(units))), list(units[k]))
    # The waits: of run r1 (and maybe r2), announced at some point of the arrival.
    span = beats[-1][2] - T0
    waits = []
    for n, run in enumerate(("r1", "r2")[: draw(st.integers(1, 2))]):
        requested = T0 + draw(st.integers(0, span + MIN))
        waits.append(
            InterruptFact(
                thread_id=THREAD,
                run_id=run,
                interrupt_id=f"i{n}",
                at=requested,
                seq=0,
                handle=draw(st.sampled_from((None, True))),
            )
        )
    place = [draw(st.integers(0, len(units))) for _ in waits]
    return beats, units, [_seq(w, p) for w, p in zip(waits, place, strict=True)], span


def _seq(w: InterruptFact, unit: int) -> InterruptFact:
    """The wait arrives just before unit `unit` (seq: unit << 8)."""
    return InterruptFact(
        thread_id=w.thread_id,
        run_id=w.run_id,
        interrupt_id=w.interrupt_id,
        at=w.at,
        seq=(unit << 8) | 255 if unit else 0,
        handle=w.handle,
    )


def _fact(run: str | None, handle: bool | None, at: int, seq: int) -> HeartbeatFact:
    return HeartbeatFact(thread_id=THREAD, at=at, seq=seq, run_id=run, handle=handle)


def stored(units: list[list[Beat]]) -> list[HeartbeatFact]:
    """Every beat as a row, as the store kept them before: a re-delivery keeps the first."""
    seen: dict[Beat, HeartbeatFact] = {}
    for u, unit in enumerate(units, start=1):
        for line, beat in enumerate(unit):
            seen.setdefault(beat, _fact(*beat, seq=(u << 8) | line))
    return list(seen.values())


def compacted(units: list[list[Beat]], gap: int) -> list[Span]:
    """The spans the store keeps: each unit merged as `write_heartbeats` merges it."""
    spans: list[Span] = []
    for u, unit in enumerate(units, start=1):
        facts = [_fact(*b, seq=(u << 8) | line) for line, b in enumerate(unit)]
        for f in sorted(facts, key=lambda f: (f.at, f.seq)):
            merge(spans, f, gap)
    return [s for s in spans if not s.gone]


def as_facts(spans: Sequence[Span]) -> list[HeartbeatFact]:
    return [
        HeartbeatFact(
            thread_id=s.thread_id,
            at=s.at,
            seq=s.seq,
            run_id=s.run_id,
            handle=s.handle,
            last_at=s.last_at,
            last_seq=s.last_seq,
            beats=s.beats,
        )
        for s in spans
    ]


def verdicts(
    waits: Sequence[InterruptFact], beats: Sequence[HeartbeatFact], policy: Policy, now: int
) -> list[Verdict]:
    facts = ThreadFacts(thread_id=THREAD, interrupts=tuple(waits), heartbeats=tuple(beats))
    out = [e.verdict for e in evaluate(facts, lambda _a, _r: policy, now).waits]
    assert all(v is not None for v in out)
    return [v for v in out if v is not None]


def times(beats: Sequence[Beat], waits: Sequence[InterruptFact], freshness: int) -> list[int]:
    """Where verdicts change: at and around each beat, its freshness running out, the waits."""
    out = {w.at + d for w in waits for d in (0, 1, freshness + 1)}
    for _, _, at in beats:
        out.update((at - 1, at, at + 1, at + GAP // 2, at + freshness, at + freshness + 1))
    first = min(w.at for w in waits)
    return sorted(t for t in out if t >= first)


def differences(
    beats: list[Beat],
    units: list[list[Beat]],
    waits: list[InterruptFact],
    freshness: int,
    gap: int,
) -> list[tuple[int, str]]:
    """(t, what) wherever the compacted store's verdicts are not the beats' own."""
    policy, spans = _policy(freshness), compacted(units, gap)
    every, kept = stored(units), as_facts(spans)
    found = []
    for t in times(beats, waits, freshness):
        for want, got in zip(
            verdicts(waits, every, policy, t), verdicts(waits, kept, policy, t), strict=True
        ):
            shape = ("state", "since", "phase", "transitions")
            for name in shape:
                if getattr(want, name) != getattr(got, name):
                    found.append((t, name))
            inside = any(s.at <= t < s.last_at for s in spans)
            if not inside and want != got:
                found.append((t, "verdict"))
    return found


@settings(max_examples=400, deadline=None)
@given(histories(), st.sampled_from((GAP, GAP + 30 * SEC, 10 * MIN)))
def test_compacted_heartbeats_give_the_verdicts_of_every_beat(
    history: tuple[list[Beat], list[list[Beat]], list[InterruptFact], int], freshness: int
) -> None:
    beats, units, waits, _ = history

    assert [] == differences(beats, units, waits, freshness, GAP)


def test_a_span_over_a_gap_longer_than_the_freshness_would_change_verdicts() -> None:
    # The differential catches a compaction that bridges more than the freshness: beats 61 s
    # apart with a freshness of 60 s leave the wait ORPHANED between them, a span would not.
    beats: list[Beat] = [(None, True, T0 + k * (GAP + SEC)) for k in range(4)]
    wait = InterruptFact(thread_id=THREAD, run_id="r1", interrupt_id="i", at=T0, seq=0)

    assert [] == differences(beats, [beats], [wait], GAP, GAP)
    assert (T0 + GAP + 1, "state") in differences(beats, [beats], [wait], GAP, GAP + SEC)


def test_a_beat_filling_the_gap_between_two_spans_joins_them_in_any_order() -> None:
    a, b, c = ((None, None, T0 + k * 40 * SEC) for k in range(3))
    forward, outside_in = compacted([[a], [b], [c]], GAP), compacted([[a], [c], [b]], GAP)

    assert [(T0, T0 + 80 * SEC, 3)] == [(s.at, s.last_at, s.beats) for s in forward]
    assert [(T0, T0 + 80 * SEC, 3)] == [(s.at, s.last_at, s.beats) for s in outside_in]


def test_a_change_of_handle_starts_a_span_and_ends_the_one_before() -> None:
    beats: list[Beat] = [
        (None, True, T0),
        (None, True, T0 + 30 * SEC),
        ("r1", False, T0 + 40 * SEC),  # another run's report still ends the span: any run
        (None, True, T0 + 60 * SEC),
        (None, None, T0 + 70 * SEC),
    ]

    spans = compacted([beats], GAP)

    assert [
        (None, True, T0, T0 + 30 * SEC, 2),
        ("r1", False, T0 + 40 * SEC, T0 + 40 * SEC, 1),
        (None, True, T0 + 60 * SEC, T0 + 60 * SEC, 1),
        (None, None, T0 + 70 * SEC, T0 + 70 * SEC, 1),
    ] == [(s.run_id, s.handle, s.at, s.last_at, s.beats) for s in spans]


def test_a_span_of_a_run_that_announces_the_wait_again_counts_from_that_announcement() -> None:
    # Run r2 beats from before it asks for the open wait again (at 20 min), for an hour.
    beats: list[Beat] = [("r2", True, T0 + k * 30 * SEC) for k in range(120)]
    first = InterruptFact(thread_id=THREAD, run_id="r1", interrupt_id="i", at=T0 + SEC, seq=0)
    again = InterruptFact(thread_id=THREAD, run_id="r2", interrupt_id="i", at=T0 + 20 * MIN, seq=0)

    assert [] == differences(beats, [beats], [first, again], 10 * MIN, GAP)


def test_a_late_change_of_handle_cuts_the_span_it_falls_in() -> None:
    # The beats around it were compacted before it came: the handle is lost at its time, and
    # back at once after it (when within the gap it came back is not known any more).
    kept: list[Beat] = [(None, True, T0 + k * 30 * SEC) for k in range(5)]
    late: Beat = (None, False, T0 + 45 * SEC)
    wait = InterruptFact(thread_id=THREAD, run_id="r1", interrupt_id="i", at=T0 + SEC, seq=0)

    spans = compacted([kept, [late]], GAP)
    (v,) = verdicts([wait], as_facts(spans), _policy(10 * MIN), T0 + 2 * MIN)
    (exact,) = verdicts([wait], stored([kept, [late]]), _policy(10 * MIN), T0 + 2 * MIN)

    assert [
        (True, T0, T0 + 45 * SEC),
        (False, T0 + 45 * SEC, T0 + 45 * SEC),
        (True, T0 + 45 * SEC, T0 + 120 * SEC),
    ] == [(s.handle, s.at, s.last_at) for s in sorted(spans, key=lambda s: (s.at, s.seq))]
    assert ["WAITING", "ORPHANED", "WAITING"] == [t.to_state for t in v.transitions]
    assert [T0 + SEC, T0 + 45 * SEC, T0 + 45 * SEC] == [t.at for t in v.transitions]
    assert [T0 + SEC, T0 + 45 * SEC, T0 + 60 * SEC] == [t.at for t in exact.transitions]


# -- the store (SQLite and PostgreSQL) ----------------------------------------------------------


def _ingest(store: Store, units: list[list[Beat]], waits: list[InterruptFact]) -> list[bool]:
    """Each unit as the store receives it; the waits in the first. Which were re-deliveries."""
    out = []
    for u, unit in enumerate(units):
        with store.unit(f"u{u}", T0) as w:
            assert w is not None
            facts = [_fact(*b, seq=w.seq_base | line) for line, b in enumerate(unit)]
            if u == 0:
                facts = [*facts, *(_seq_of(i, w.seq_base | 200 + k) for k, i in enumerate(waits))]
            out.append(w.write(facts, [], {"heartbeat": len(facts)}, len(facts), 0))
    return out


def _seq_of(w: InterruptFact, seq: int) -> InterruptFact:
    return InterruptFact(
        thread_id=w.thread_id, run_id=w.run_id, interrupt_id=w.interrupt_id, at=w.at, seq=seq
    )


def test_the_store_keeps_a_day_of_beats_as_one_row_with_the_verdicts_of_every_beat(
    db_url: str,
) -> None:
    # A day of beats every 30 s in 48 half-hour units, sent twice, the second copy backwards
    # and after the wait; the wait at noon, of a requester that went away at 18:00.
    day = [(None, True, T0 + k * 30 * SEC) for k in range(2 * 60 * 18)]
    units = [day[k : k + 60] for k in range(0, len(day), 60)]
    wait = InterruptFact(
        thread_id=THREAD, run_id="r1", interrupt_id="i", at=T0 + 12 * 3600_000, seq=0
    )
    engine = open_store(db_url)
    store = Store(engine, heartbeat_gap_ms=GAP)

    first = _ingest(store, units, [wait])
    again = _ingest(store, units[::-1], [])
    (thread,) = store.threads([THREAD])
    with engine.connect() as c:
        rows = c.execute(text("SELECT at, last_at, beats FROM heartbeat")).all()
    engine.dispose()

    assert [(T0, day[-1][2], len(day))] == [tuple(r) for r in rows]
    assert (not any(first), all(again)) == (True, True)
    policy = _policy(10 * MIN)
    for t in (wait.at, wait.at + 3600_000, day[-1][2], day[-1][2] + 10 * MIN + 1, T0 + 86_400_000):
        want = verdicts([wait], stored(units), policy, t)
        got = verdicts(thread.interrupts, thread.heartbeats, policy, t)
        assert (want[0].state, want[0].since, want[0].transitions) == (
            got[0].state,
            got[0].since,
            got[0].transitions,
        )
        if t >= day[-1][2]:
            assert want[0] == got[0]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(histories())
def test_the_store_compacts_as_the_merge_does(
    db_url: str, history: tuple[list[Beat], list[list[Beat]], list[InterruptFact], int]
) -> None:
    units = history[1]
    engine = open_store(db_url)
    with engine.begin() as c:
        c.execute(text("DELETE FROM heartbeat"))
    store = Store(engine, heartbeat_gap_ms=GAP)

    _ingest(store, units, [])
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT run_id, handle, at, seq, last_at, last_seq, beats FROM heartbeat")
        ).all()
    engine.dispose()

    want = sorted(
        (s.run_id or "", str(s.handle), s.at, s.last_at, s.beats) for s in compacted(units, GAP)
    )
    got = sorted(
        (r[0] or "", str(None if r[1] is None else bool(r[1])), r[2], r[4], r[6]) for r in rows
    )
    assert want == got


def test_a_unit_with_the_beats_of_many_threads_is_stored_on_postgresql(pg_url: str) -> None:
    # More threads than the server's lock table holds locks (64 a connection by default): a
    # lock a thread filled it, and the unit failed as "out of shared memory".
    n = 30_000
    engine = open_store(pg_url)
    store = Store(engine, heartbeat_gap_ms=GAP)

    with store.unit("many", T0) as w:
        assert w is not None
        beats = [
            HeartbeatFact(thread_id=f"t-{k}", at=T0, seq=w.seq_base + k, handle=True, key=f"b{k}")
            for k in range(n)
        ]
        w.write(beats, [], {"heartbeat": n}, n, 0)
    with engine.connect() as c:
        stored = c.execute(text("SELECT count(DISTINCT thread_id) FROM heartbeat")).scalar()
    engine.dispose()

    assert n == stored
