"""Reading facts back, all threads or a chosen few, converted at this edge into core facts.

Rows are read through the driver as plain tuples in the facts' own field order: a full audit
reads several rows per wait, and this is its hot path."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from dataclasses import fields
from typing import Any

from sqlalchemy import Connection, or_, select

from sidewatch.core.facts import (
    AnswerFact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.model import Code
from sidewatch.store.auditstate import key_lookups
from sidewatch.store.models import DirtyThread, InterruptRow, WaitState, table_of

CHUNK = 500  # ids per IN (...) list

_MARKS = {m.value: m for m in RunMark}
_CODES = {c.value: c for c in Code}
_KINDS = {k.value: k for k in SignalKind}


def _cols(fact: type) -> str:
    return ", ".join(f.name for f in fields(fact))


def _select(conn: Connection, table: str, fact: type, where: str, ids: list[str]) -> Iterator[Any]:
    """Rows of `fact`'s columns whose `where` column is in `ids` (all rows when `where` is
    empty), in chunks that every driver accepts."""
    if not where:
        yield from conn.exec_driver_sql(f"SELECT {_cols(fact)} FROM {table}")  # noqa: S608
        return
    if conn.dialect.name == "postgresql":
        # One array parameter: the same statement every time, prepared once by the server,
        # where an IN list of 500 placeholders is parsed again by the driver at every call.
        sql = f"SELECT {_cols(fact)} FROM {table} WHERE {where} = ANY(%s)"  # noqa: S608
        for k in range(0, len(ids), CHUNK):
            yield from conn.exec_driver_sql(sql, (ids[k : k + CHUNK],))
        return
    for k in range(0, len(ids), CHUNK):
        part = ids[k : k + CHUNK]
        marks = ", ".join("?" for _ in part)
        sql = f"SELECT {_cols(fact)} FROM {table} WHERE {where} IN ({marks})"  # noqa: S608
        yield from conn.exec_driver_sql(sql, tuple(part))


def _grouped(rows: Iterator[Any], key: int, build: Callable[[Any], Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        out[r[key]].append(build(r))
    return out


def _bool(v: Any) -> bool | None:
    return None if v is None else bool(v)  # SQLite answers 0/1


def load_threads(conn: Connection, thread_ids: Collection[str] | None) -> list[ThreadFacts]:
    """The facts of every thread that announced a wait (or of the named threads only)."""
    chosen = list(thread_ids) if thread_ids is not None else []
    where = "thread_id" if thread_ids is not None else ""
    if where:
        key_lookups(conn)
    interrupts = _grouped(
        _select(conn, "interrupt", InterruptFact, where, chosen),
        0,
        lambda r: InterruptFact(
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            _bool(r[9]),
            r[10],
            r[11],
            bool(r[12]),
        ),
    )
    if not interrupts:
        return []
    threads = list(interrupts)
    where_ids = threads if thread_ids is not None else []
    by_ref: dict[str, str] = {}  # every requestId a wait may have -> its thread
    for thread, its in interrupts.items():
        for i in its:
            by_ref[f"{thread}/{i.interrupt_id}"] = thread
            by_ref[f"{thread}/{i.interrupt_id}@{i.run_id}"] = thread
            if i.request_id is not None:
                by_ref[i.request_id] = thread

    runs: dict[str, list[RunFact]] = defaultdict(list)
    for r in _select(conn, "run_fact", RunFact, where, where_ids):
        runs[r[1]].append(RunFact(r[0], r[1], _MARKS[r[2]], r[3], r[4]))
    calls = _grouped(
        _select(conn, "tool_call", ToolCallFact, where, where_ids), 0, lambda r: ToolCallFact(*r)
    )
    answers = _grouped(
        _select(conn, "answer", AnswerFact, where, where_ids),
        0,
        lambda r: AnswerFact(r[0], r[1], r[2], _CODES[r[3]], r[4], r[5], r[6], r[7]),
    )
    results = _grouped(
        _select(conn, "tool_result", ToolResultFact, where, where_ids),
        0,
        lambda r: ToolResultFact(*r),
    )
    signals: dict[str, list[SignalFact]] = defaultdict(list)
    for r in _signal_rows(conn, where_ids if thread_ids is not None else None, list(by_ref)):
        owner = by_ref.get(r[3]) if r[3] else r[4]
        if owner is None:
            continue  # names a wait not seen yet: kept, applied when it appears
        signals[owner].append(
            SignalFact(
                _KINDS[r[0]],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                bool(r[7]),
                bool(r[8]),
                _CODES[r[9]] if r[9] else None,
                r[10],
                r[11],
            )
        )
    legacy = _grouped(
        _select(conn, "legacy_resume", LegacyResumeFact, where, where_ids),
        0,
        lambda r: LegacyResumeFact(r[0], r[1], _CODES[r[2]], r[3], r[4], r[5], r[6]),
    )
    found = _grouped(
        _select(conn, "finding", FindingFact, where, where_ids),
        3,
        lambda r: FindingFact(r[0], r[1], r[2], r[3], r[4], r[5]),
    )
    beats = _grouped(
        _select(conn, "heartbeat", HeartbeatFact, where, where_ids),
        0,
        lambda r: HeartbeatFact(r[0], r[1], r[2], r[3], _bool(r[4]), r[5]),
    )
    return [
        ThreadFacts(
            thread_id=thread,
            interrupts=tuple(its),
            tool_calls=tuple(calls.get(thread, ())),
            runs=tuple(runs.get(thread, ())),
            answers=tuple(answers.get(thread, ())),
            tool_results=tuple(results.get(thread, ())),
            signals=tuple(signals.get(thread, ())),
            heartbeats=tuple(beats.get(thread, ())),
            legacy_resumes=tuple(legacy.get(thread, ())),
            findings=tuple(found.get(thread, ())),
        )
        for thread, its in interrupts.items()
    ]


def _signal_rows(conn: Connection, threads: list[str] | None, refs: list[str]) -> Iterator[Any]:
    """Signals naming the threads' waits, by thread and interrupt id or by requestId."""
    if threads is None:
        yield from _select(conn, "signal", SignalFact, "", [])
        return
    seen: set[str] = set()
    for rows in (
        _select(conn, "signal", SignalFact, "thread_id", threads),
        _select(conn, "signal", SignalFact, "request_id", refs),
    ):
        for r in rows:
            if r[11] not in seen:  # the natural key: a signal may match both ways
                seen.add(r[11])
                yield r


def threads_of_refs(conn: Connection, refs: Collection[str], unrecorded: bool = True) -> set[str]:
    """The threads whose waits these requestIds name, looked up and never parsed (ids may hold
    `/` and `@`): a producer's `metadata.requestId`, else the auditor's record of the wait,
    else (`unrecorded`) the default forms `{threadId}/{interruptId}[@{runId}]` of the
    interrupts on threads the auditor has not classified since: every wait is recorded, or
    its thread is dirty."""
    interrupt, state, dirty = table_of(InterruptRow), table_of(WaitState), table_of(DirtyThread)
    rest = set(refs)
    out: set[str] = set()
    for column, thread in (
        (interrupt.c.request_id, interrupt.c.thread_id),
        (state.c.request_id, state.c.thread_id),
    ):
        for part in _chunks(sorted(rest)):
            for ref, owner in conn.execute(select(column, thread).where(column.in_(part))):
                rest.discard(ref)
                out.add(owner)
    default = interrupt.c.thread_id + "/" + interrupt.c.interrupt_id
    for part in _chunks(sorted(rest) if unrecorded else []):
        query = (
            select(interrupt.c.thread_id)
            .join(dirty, dirty.c.thread_id == interrupt.c.thread_id)
            .where(or_(default.in_(part), (default + "@" + interrupt.c.run_id).in_(part)))
        )
        out.update(str(r[0]) for r in conn.execute(query))
    return out


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for k in range(0, len(ids), CHUNK):
        yield ids[k : k + CHUNK]
