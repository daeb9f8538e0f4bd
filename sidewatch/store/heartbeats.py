"""Heartbeats compacted into spans: a beat that changes nothing (the same thread, run and
handle, within the compaction gap of a span) extends that span in place instead of adding a
row; a new handle, or a longer gap, starts another span.

The gap is never more than the smallest `heartbeatFreshness` of the policies (config
`heartbeat_gap_ms`), so a span says the requester was fresh throughout it, and every verdict
the beats gave (state, since, transitions) the span gives (core.health reads it so). Beats come
in any order and again: a beat inside a span of its kind changes nothing (a re-delivery is not
stored twice); one that fills a gap joins the spans on both sides. A span of one handle is
never extended across a beat of the other handle (any run of the thread), so each change of
handle stays where it was; one that arrives after the beats around it were compacted cuts
their span (`_split`): the one reading that is not exact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from sidewatch.core.facts import HeartbeatFact
from sidewatch.store.sql import chunks, driver_sql

COLUMNS = ("thread_id", "run_id", "handle", "at", "seq", "last_at", "last_seq", "beats")
_SELECT = f"SELECT id, {', '.join(COLUMNS)} FROM heartbeat"  # noqa: S608 (our own names)
_INSERT = f"INSERT INTO heartbeat ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 8)})"  # noqa: S608
_UPDATE = "UPDATE heartbeat SET at = ?, seq = ?, last_at = ?, last_seq = ?, beats = ? WHERE id = ?"
_DELETE = "DELETE FROM heartbeat WHERE id = ?"
_PG_UPDATE = (
    "UPDATE heartbeat AS h SET at = v.at, seq = v.seq, last_at = v.last_at, "
    "last_seq = v.last_seq, beats = v.beats FROM unnest(%s::bigint[], %s::bigint[], "
    "%s::bigint[], %s::bigint[], %s::int[], %s::int[]) AS v(at, seq, last_at, last_seq, beats, id) "
    "WHERE h.id = v.id"
)
# One writer of a thread's spans at a time (PostgreSQL; SQLite has one writer anyway), taken in
# one order so that two units locking the same threads never wait on each other in a cycle.
_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '/sidewatch/heartbeat'), h) "
    "FROM (SELECT DISTINCT hashtext(t) AS h FROM unnest(%s::text[]) AS t) AS k ORDER BY h"
)
# Each lock is a slot of the server's lock table, max_locks_per_transaction (64 by default)
# times max_connections for every session: a unit with the beats of 50,000 threads filled it
# ("out of shared memory", for the other sessions too). A unit of more than LOCKED_THREADS
# threads takes one lock for every thread instead, exclusive, which the others hold shared;
# every unit takes it first, before its threads' locks.
LOCKED_THREADS = 256
_EVERY = "hashtext(current_schema() || '/sidewatch/heartbeats'), 0"
_LOCK_EVERY = f"SELECT pg_advisory_xact_lock({_EVERY})"
_SHARE_EVERY = f"SELECT pg_advisory_xact_lock_shared({_EVERY})"


@dataclass(slots=True)
class Span:
    """A span as the merge holds it; `id` None until inserted."""

    id: int | None
    thread_id: str
    run_id: str | None
    handle: bool | None
    at: int
    seq: int
    last_at: int
    last_seq: int
    beats: int
    changed: bool = False
    gone: bool = False

    def row(self) -> tuple[object, ...]:
        return (
            self.thread_id,
            self.run_id,
            self.handle,
            self.at,
            self.seq,
            self.last_at,
            self.last_seq,
            self.beats,
        )


def merge(spans: list[Span], beat: HeartbeatFact, gap_ms: int) -> bool:
    """Add one beat to a thread's spans (in place); False when it changes nothing (inside a
    span of its run and handle already: a re-delivery, or a late beat the span covers)."""
    if beat.handle is not None:
        _split(spans, beat)
    same = [s for s in spans if not s.gone and s.run_id == beat.run_id and s.handle == beat.handle]
    if any(s.at <= beat.at <= s.last_at for s in same):
        return False
    near = [
        s
        for s in same
        if s.at - gap_ms <= beat.at <= s.last_at + gap_ms and not _crosses(spans, s, beat)
    ]
    if not near:
        spans.append(
            Span(
                None,
                beat.thread_id,
                beat.run_id,
                beat.handle,
                beat.at,
                beat.seq,
                beat.at,
                beat.seq,
                1,
                changed=True,
            )
        )
        return True
    keep, *rest = sorted(near, key=lambda s: (s.id is None, s.id or 0, s.at))
    keep.beats += 1
    for s in rest:  # the beat fills the gap between two spans: one span now
        keep.beats += s.beats
        s.gone = True
        _widen(keep, s.at, s.seq, s.last_at, s.last_seq)
    _widen(keep, beat.at, beat.seq, beat.at, beat.seq)
    keep.changed = True
    return True


def _split(spans: list[Span], beat: HeartbeatFact) -> None:
    """A late beat of one handle inside a span of the other (of any run) that is already
    compacted: the span is cut at it, its handle back at once after it. The beats between are
    gone, so when within the gap the handle came back is not known (docs/internals/
    interpretations/heartbeat-compaction.md)."""
    for s in [s for s in spans if not s.gone and s.handle is not None]:
        if s.handle != beat.handle and s.at < beat.at < s.last_at:
            before = max(1, s.beats * (beat.at - s.at) // (s.last_at - s.at))
            after = Span(
                None,
                s.thread_id,
                s.run_id,
                s.handle,
                beat.at,
                beat.seq + 1,  # after the late beat at the same instant
                s.last_at,
                s.last_seq,
                max(1, s.beats - before),
                changed=True,
            )
            s.last_at, s.last_seq, s.beats, s.changed = beat.at, s.seq, before, True
            spans.append(after)


def _widen(s: Span, at: int, seq: int, last_at: int, last_seq: int) -> None:
    if at < s.at:
        s.at, s.seq = at, seq
    if last_at > s.last_at:
        s.last_at, s.last_seq = last_at, last_seq


def _crosses(spans: list[Span], s: Span, beat: HeartbeatFact) -> bool:
    """Joining `beat` to `s` would pass over a beat of the other handle (of any run)."""
    if beat.handle is None:
        return False  # beats without a handle say nothing of it: only freshness
    lo, hi = (s.last_at, beat.at) if beat.at > s.last_at else (beat.at, s.at)
    return any(
        not x.gone
        and x.handle is not None
        and x.handle != beat.handle
        and x.at <= hi
        and x.last_at >= lo
        for x in spans
    )


def write_heartbeats(conn: Connection, beats: Sequence[HeartbeatFact], gap_ms: int) -> int:
    """Store a unit's beats into the spans; returns how many of them changed a span."""
    if not beats:
        return 0
    threads = sorted({b.thread_id for b in beats})
    if conn.dialect.name == "postgresql" and len(threads) > LOCKED_THREADS:
        conn.exec_driver_sql(_LOCK_EVERY)
    elif conn.dialect.name == "postgresql":
        conn.exec_driver_sql(_SHARE_EVERY)
        conn.exec_driver_sql(_LOCK, (threads,))
    lo = min(b.at for b in beats) - gap_ms
    hi = max(b.at for b in beats) + gap_ms
    spans = _spans(conn, threads, lo, hi)
    changed = 0
    for b in sorted(beats, key=lambda b: (b.at, b.seq)):
        changed += merge(spans[b.thread_id], b, gap_ms)
    every = [s for its in spans.values() for s in its]
    gone = [(s.id,) for s in every if s.gone and s.id is not None]
    updated = [
        (s.at, s.seq, s.last_at, s.last_seq, s.beats, s.id)
        for s in every
        if s.changed and not s.gone and s.id is not None
    ]
    new = [s.row() for s in every if s.id is None and not s.gone]
    for sql, rows in ((_DELETE, gone), (_UPDATE, updated), (_INSERT, new)):
        if rows and sql is _UPDATE and conn.dialect.name == "postgresql":
            # One statement of integer arrays, not a statement a span: one round trip.
            conn.exec_driver_sql(_PG_UPDATE, tuple(map(list, zip(*rows, strict=True))))
        elif rows:
            conn.exec_driver_sql(driver_sql(conn, sql), rows)
    return changed


def _spans(conn: Connection, threads: list[str], lo: int, hi: int) -> dict[str, list[Span]]:
    """The threads' spans that end at `lo` or later and begin at `hi` or earlier."""
    out: dict[str, list[Span]] = defaultdict(list)
    if conn.dialect.name == "postgresql":  # one array parameter, one statement
        sql = f"{_SELECT} WHERE thread_id = ANY(%s) AND last_at >= %s AND at <= %s"
        for r in conn.exec_driver_sql(sql, (threads, lo, hi)):
            out[r[1]].append(_span(r))
        return out
    for part in chunks(threads):
        marks = ", ".join("?" for _ in part)
        sql = f"{_SELECT} WHERE thread_id IN ({marks}) AND last_at >= ? AND at <= ?"
        for r in conn.exec_driver_sql(driver_sql(conn, sql), (*part, lo, hi)):
            out[r[1]].append(_span(r))
    return out


def _span(r: Sequence[object]) -> Span:
    handle = None if r[3] is None else bool(r[3])  # SQLite answers 0/1
    at, seq, last_at, last_seq, beats = (int(v) for v in r[4:9])  # type: ignore[call-overload]
    return Span(int(r[0]), str(r[1]), r[2], handle, at, seq, last_at, last_seq, beats)  # type: ignore[call-overload,arg-type]


def compact(rows: Iterable[HeartbeatFact], gap_ms: int) -> list[Span]:
    """Spans of the given beats (any order): what the store keeps of them."""
    spans: dict[str, list[Span]] = defaultdict(list)
    for b in sorted(rows, key=lambda b: (b.at, b.seq)):
        merge(spans[b.thread_id], b, gap_ms)
    return [s for its in spans.values() for s in its if not s.gone]
