"""A long thread read at its checkpoint's cut: the facts of its suffix, and what its prefix
holds of the ids the suffix names (core.checkpoint.split, Seen), as plain queries; which ids
to ask is the app's (app.evaluate, core.checkpoint.uses and refs).

Every question asked of the prefix names the suffix's own ids and is answered from an index
((thread, run), (thread, interrupt id), (thread, tool call), the prefix's time range), so a
resumed evaluation reads what the suffix holds, not the thread's history. A fact timed
before the cut that arrived since shows in the thread's dirty mark (its earliest time); only
then is the prefix counted (a range count, in the database), and a changed count makes the
thread evaluated whole (`_count`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection

from sidewatch.core.checkpoint import Checkpoint, Seen, Uses
from sidewatch.core.facts import HeartbeatFact, InterruptFact, SignalFact, ThreadFacts
from sidewatch.store.load import (
    ANSWER,
    CALL,
    FINDING,
    HEARTBEAT,
    INTERRUPT,
    LEGACY,
    RESULT,
    RUN,
    SIGNAL,
    SUBAGENT,
    Reader,
)
from sidewatch.store.sql import chunks, driver_sql

T = TypeVar("T")
# The tables of a thread's own facts (run-scoped, with `thread_id`, `run_id`, `at`).
_RUN_TABLES = ("interrupt", "tool_call", "run_fact", "answer", "legacy_resume", "tool_result")
_AFTER = "thread_id = ? AND at >= ?"


def _rows(conn: Connection, reader: Reader[T], where: str, args: tuple[Any, ...]) -> list[T]:
    sql = driver_sql(conn, f"SELECT {reader.columns} FROM {reader.table} WHERE {where}")  # noqa: S608
    return list(map(reader.read, conn.exec_driver_sql(sql, args)))


def _in(ids: Collection[str]) -> str:
    return ", ".join("?" for _ in ids)


def interrupts_from(conn: Connection, thread: str, cut: int) -> list[InterruptFact]:
    """The thread's interrupts timed at or after the cut."""
    return _rows(conn, INTERRUPT, _AFTER, (thread, cut))


def suffix(
    conn: Connection,
    cp: Checkpoint,
    interrupts: Sequence[InterruptFact],
    requests: Collection[str],
) -> ThreadFacts:
    """The facts of the thread timed at or after the cut (its `interrupts` as read by
    `interrupts_from`), the signals naming one of `requests` (the requestIds its interrupts
    may have) and the thread-wide heartbeats, as load_threads gives them
    (core.checkpoint.split); the beats of the services bound to it are the caller's
    (services.expand_runs)."""
    t, cut = cp.thread_id, cp.cut
    signals: dict[str, SignalFact] = {}
    for s in _rows(conn, SIGNAL, _AFTER + " AND request_id IS NULL", (t, cut)):
        signals[s.key] = s
    for part in chunks(sorted(requests)):
        for s in _rows(conn, SIGNAL, f"request_id IN ({_in(part)})", tuple(part)):
            signals[s.key] = s
    return ThreadFacts(
        thread_id=t,
        interrupts=tuple(interrupts),
        tool_calls=tuple(_rows(conn, CALL, _AFTER, (t, cut))),
        runs=tuple(_rows(conn, RUN, _AFTER, (t, cut))),
        answers=tuple(_rows(conn, ANSWER, _AFTER, (t, cut))),
        tool_results=tuple(_rows(conn, RESULT, _AFTER, (t, cut))),
        signals=tuple(signals.values()),
        heartbeats=tuple(_spans(conn, t, cut)),
        legacy_resumes=tuple(_rows(conn, LEGACY, _AFTER, (t, cut))),
        findings=tuple(_rows(conn, FINDING, _AFTER, (t, cut))),
        subagents=tuple(_rows(conn, SUBAGENT, _AFTER, (t, cut))),
    )


def _spans(conn: Connection, thread: str, cut: int) -> list[HeartbeatFact]:
    """The thread's stored heartbeats of the suffix (core.checkpoint.split): its spans from
    the cut on, and every thread-wide one (spans: one a pause or a handle change, not one a
    beat)."""
    spans = _rows(conn, HEARTBEAT, _AFTER, (thread, cut))
    # The thread-wide spans before the cut by the (thread, run, at) index: not the prefix's.
    spans += _rows(conn, HEARTBEAT, "thread_id = ? AND at < ? AND run_id IS NULL", (thread, cut))
    return spans


def run_beats(conn: Connection, thread: str, runs: Collection[str]) -> list[HeartbeatFact]:
    """The thread's stored heartbeats (spans) of these runs, whenever they were timed, read
    by (thread, run)."""
    beats: list[HeartbeatFact] = []
    for part in chunks(sorted(runs)):
        where = f"thread_id = ? AND run_id IN ({_in(part)})"
        beats += _rows(conn, HEARTBEAT, where, (thread, *part))
    return beats


def _early(conn: Connection, thread: str) -> int | None:
    """The earliest time the facts that arrived since the thread's dirty mark was set
    concern (repo.UnitWriter._mark_dirty); None: no mark, or set by no fact."""
    row = conn.exec_driver_sql(
        driver_sql(conn, "SELECT early FROM dirty_thread WHERE thread_id = ?"), (thread,)
    ).first()
    return None if row is None or row[0] is None else int(row[0])


def _count(conn: Connection, cp: Checkpoint) -> int:
    """The prefix's facts as far as a late one can change them. A fact arrived since the
    checkpoint was taken is in the thread's dirty mark, which the auditor clears only once a
    tick evaluated every fact that set it: a mark no earlier than the cut (or none) says
    no fact came late, in one look at the mark, read after the suffix (a fact committed
    since is then after this evaluation as well). An earlier one may be a fact that came
    late, or one evaluated already (a unit came during the tick that took the checkpoint,
    and the mark stayed): then the prefix is counted, which tells them apart."""
    early = _early(conn, cp.thread_id)
    return cp.count if early is None or early >= cp.cut else _prefix_count(conn, cp)


def _prefix_count(conn: Connection, cp: Checkpoint) -> int:
    """core.checkpoint.prefix_count, counted by the database over the prefix's time range."""
    before = "thread_id = ? AND at < ?"
    tables = (*_RUN_TABLES, "subagent")
    parts = [f"SELECT count(*) FROM {t} WHERE {before}" for t in tables]  # noqa: S608
    # Thread-wide heartbeats are the suffix's, whatever their time (core.checkpoint.split).
    parts.append(f"SELECT count(*) FROM heartbeat WHERE {before} AND run_id IS NOT NULL")  # noqa: S608
    parts.append(f"SELECT count(*) FROM finding WHERE {before} AND seq <> 0")  # noqa: S608
    parts.append(f"SELECT count(*) FROM signal WHERE {before} AND request_id IS NULL")  # noqa: S608
    parts.append(
        "SELECT count(*) FROM signal WHERE request_id IN "
        "(SELECT request_id FROM wait_state WHERE thread_id = ? AND requested_at < ?)"
    )
    sql = driver_sql(conn, "SELECT " + " + ".join(f"({p})" for p in parts))
    return int(conn.exec_driver_sql(sql, (cp.thread_id, cp.cut) * len(parts)).scalar_one())


# (table, column) with an index that begins (thread_id, column): the prefix's rows of a few
# ids are looked up in it. The others (a finding's run, a tool call's id in tool_call) have
# none: their rows of the thread before the cut are read by time.
_KEYED = frozenset(
    {
        *((t, "run_id") for t in (*_RUN_TABLES, "heartbeat", "subagent")),
        ("subagent", "subagent_run_id"),
        ("tool_result", "tool_call_id"),
        ("interrupt", "tool_call_id"),
        ("interrupt", "interrupt_id"),
    }
)


def _held(
    conn: Connection, cp: Checkpoint, asks: list[tuple[str, str, str, list[str]]]
) -> dict[str, set[str]]:
    """Which of the ids each ask names the prefix's rows hold: (label, table, column, ids),
    asked in one statement (one round trip: a tick on PostgreSQL pays per statement)."""
    out: dict[str, set[str]] = {label: set() for label, _, _, _ in asks}
    parts: list[str] = []
    args: list[Any] = []
    for label, table, column, ids in asks:
        for part in chunks(ids):
            # `+at`: read by the ids' index, not the prefix's range (which SQLite prefers).
            at = "+at" if (table, column) in _KEYED else "at"
            parts.append(
                f"SELECT '{label}', {column} FROM {table} "  # noqa: S608
                f"WHERE thread_id = ? AND {column} IN ({_in(part)}) AND {at} < ?"
            )
            args += [cp.thread_id, *part, cp.cut]
    if parts:
        sql = driver_sql(conn, " UNION ".join(parts))
        for label, value in conn.exec_driver_sql(sql, tuple(args)):
            out[str(label)].add(str(value))
    return out


def seen(conn: Connection, cp: Checkpoint, used: Uses, requests: Collection[str]) -> Seen:
    """What the prefix holds of the ids the suffix uses (`used`: core.checkpoint.uses), and
    of the requestIds its waits may have (`requests`: core.checkpoint.refs), asked by those
    ids only."""
    runs, calls, iids = sorted(used.runs), sorted(used.calls), sorted(used.interrupts)
    asks = [
        ("r", table, "run_id", runs) for table in (*_RUN_TABLES, "heartbeat", "subagent", "finding")
    ]
    # (Findings the auditor wrote, seq 0, are asked too: a doubt, never a miss.)
    asks += [("c", "tool_call", "tool_call_id", calls), ("t", "tool_result", "tool_call_id", calls)]
    asks += [("g", "interrupt", "tool_call_id", calls), ("i", "interrupt", "interrupt_id", iids)]
    asks.append(("s", "subagent", "subagent_run_id", sorted(used.subagents)))
    held = _held(conn, cp, asks)
    known: set[str] = set()
    for part in chunks(sorted(requests)):
        sql = driver_sql(
            conn,
            "SELECT request_id FROM wait_state "  # noqa: S608
            f"WHERE thread_id = ? AND request_id IN ({_in(part)}) AND requested_at < ?",
        )
        known.update(str(r[0]) for r in conn.exec_driver_sql(sql, (cp.thread_id, *part, cp.cut)))
    return Seen(
        count=_count(conn, cp),
        runs=frozenset(held["r"]),
        interrupts=frozenset(held["i"]),
        calls=frozenset(held["c"] | held["t"] | held["g"]),
        requests=frozenset(known),
        gated=frozenset(held["g"]),
        results=frozenset(held["t"]),
        subagents=frozenset(held["s"]),
    )
