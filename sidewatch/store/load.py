"""Reading facts back, all threads or a chosen few, converted at this edge into core facts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator
from typing import Any

from sqlalchemy import Connection, Table, or_, select

from sidewatch.core.facts import (
    AnswerFact,
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code
from sidewatch.store.models import (
    AnswerRow,
    HeartbeatRow,
    InterruptRow,
    RunRow,
    SignalRow,
    ToolCallRow,
    ToolResultRow,
)

CHUNK = 500  # ids per IN (...) list


def _t(model: Any) -> Table:
    table: Table = model.__table__
    return table


def _rows(
    conn: Connection, model: Any, column: str | None = None, ids: Collection[str] | None = None
) -> Iterator[Any]:
    table = _t(model)
    if ids is None or column is None:
        yield from conn.execute(select(table)).mappings()
        return
    ordered = list(ids)
    for k in range(0, len(ordered), CHUNK):
        part = ordered[k : k + CHUNK]
        yield from conn.execute(select(table).where(table.c[column].in_(part))).mappings()


def load_threads(conn: Connection, thread_ids: Collection[str] | None) -> list[ThreadFacts]:
    """The facts of every thread that announced a wait (or of the named threads only)."""
    interrupts: dict[str, list[InterruptFact]] = defaultdict(list)
    for r in _rows(conn, InterruptRow, "thread_id", thread_ids):
        interrupts[r["thread_id"]].append(
            InterruptFact(
                r["thread_id"],
                r["run_id"],
                r["interrupt_id"],
                r["at"],
                r["seq"],
                r["reason"],
                r["tool_call_id"],
                r["expires_at"],
                r["digest"],
                r["handle"],
                r["request_id"],
                r["action"],
            )
        )
    if not interrupts:
        return []
    by_ref: dict[str, str] = {}  # every requestId a wait may have -> its thread
    run_thread: dict[str, str] = {}
    for thread, its in interrupts.items():
        for i in its:
            run_thread[i.run_id] = thread
            for ref in (
                i.request_id,
                f"{thread}/{i.interrupt_id}",
                f"{thread}/{i.interrupt_id}@{i.run_id}",
            ):
                if ref is not None:
                    by_ref[ref] = thread

    runs: dict[str, list[RunFact]] = defaultdict(list)
    threads = list(interrupts) if thread_ids is not None else None
    for r in _rows(conn, RunRow, "thread_id", threads):
        runs[r["thread_id"]].append(
            RunFact(r["run_id"], r["thread_id"], RunMark(r["mark"]), r["at"], r["seq"])
        )
        run_thread.setdefault(r["run_id"], r["thread_id"])
    calls: dict[str, list[ToolCallFact]] = defaultdict(list)
    call_runs = list(run_thread) if threads is not None else None
    for r in _rows(conn, ToolCallRow, "run_id", call_runs):
        call_thread = run_thread.get(r["run_id"])
        if call_thread is not None and call_thread in interrupts:
            calls[call_thread].append(
                ToolCallFact(
                    r["tool_call_id"], r["run_id"], r["name"], r["digest"], r["at"], r["seq"]
                )
            )
    answers: dict[str, list[AnswerFact]] = defaultdict(list)
    for r in _rows(conn, AnswerRow, "thread_id", threads):
        answers[r["thread_id"]].append(
            AnswerFact(
                r["thread_id"],
                r["run_id"],
                r["interrupt_id"],
                Code(r["code"]),
                r["at"],
                r["seq"],
                r["digest"],
            )
        )
    results: dict[str, list[ToolResultFact]] = defaultdict(list)
    for r in _rows(conn, ToolResultRow, "thread_id", threads):
        results[r["thread_id"]].append(
            ToolResultFact(r["thread_id"], r["run_id"], r["tool_call_id"], r["at"], r["seq"])
        )
    signals: dict[str, list[SignalFact]] = defaultdict(list)
    for r in _signal_rows(conn, threads, list(by_ref)):
        owner = by_ref.get(r["request_id"]) if r["request_id"] else r["thread_id"]
        if owner is None:
            continue  # names a wait not seen yet: kept, applied when it appears
        signals[owner].append(
            SignalFact(
                SignalKind(r["kind"]),
                r["at"],
                r["seq"],
                r["request_id"],
                r["thread_id"],
                r["interrupt_id"],
                r["approver_ref"],
                r["delivered"],
                r["acknowledged"],
                Code(r["code"]) if r["code"] else None,
                r["digest"],
                r["key"],
            )
        )
    beats: dict[str, list[HeartbeatFact]] = defaultdict(list)
    for r in _rows(conn, HeartbeatRow, "thread_id", threads):
        beats[r["thread_id"]].append(
            HeartbeatFact(r["thread_id"], r["at"], r["seq"], r["run_id"], r["handle"], r["key"])
        )
    return [
        ThreadFacts(
            thread_id=thread,
            interrupts=tuple(its),
            tool_calls=tuple(calls[thread]),
            runs=tuple(runs[thread]),
            answers=tuple(answers[thread]),
            tool_results=tuple(results[thread]),
            signals=tuple(signals[thread]),
            heartbeats=tuple(beats[thread]),
        )
        for thread, its in interrupts.items()
    ]


def _signal_rows(conn: Connection, threads: list[str] | None, refs: list[str]) -> Iterator[Any]:
    """Signals naming the threads' waits, by thread and interrupt id or by requestId."""
    if threads is None:
        yield from _rows(conn, SignalRow)
        return
    table = _t(SignalRow)
    seen: set[int] = set()
    for k in range(0, max(len(threads), len(refs)), CHUNK):
        cond = or_(
            table.c.thread_id.in_(threads[k : k + CHUNK]),
            table.c.request_id.in_(refs[k : k + CHUNK]),
        )
        for r in conn.execute(select(table).where(cond)).mappings():
            if r["id"] not in seen:
                seen.add(r["id"])
                yield r
