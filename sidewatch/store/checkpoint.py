"""A long thread's checkpoint rows: its checkpoint (thread_checkpoint: the cut, the prefix's
count, the dangling ids) and what is kept of the waits it settles (settled_wait: core.settled's
`Kept`, packed), read and written. What a checkpoint means, and whether it still holds, is the
app's (app.evaluate, core.checkpoint).

Checkpoints are written by the auditor in the transaction of the verdicts they rest on
(AuditState.save), with the settled waits; a dropped checkpoint takes its settled waits with
it (`write`).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

import orjson
from sqlalchemy import Connection

from sidewatch.core.checkpoint import Checkpoint
from sidewatch.core.model import (
    ActionChange,
    Code,
    Decision,
    Heartbeat,
    Receipt,
    Route,
    RunEvent,
    RunStep,
    SubagentState,
    SubagentStep,
    SubagentTrace,
    WaitEvidence,
)
from sidewatch.core.settled import Kept
from sidewatch.store.sql import chunks, driver_sql

T = TypeVar("T")
log = logging.getLogger("sidewatch.store")


def checkpoints(conn: Connection, thread_ids: Collection[str]) -> dict[str, Checkpoint]:
    """The checkpoints of these threads that have one."""
    out: dict[str, Checkpoint] = {}
    for part in chunks(list(thread_ids)):
        marks = ", ".join("?" for _ in part)
        sql = driver_sql(
            conn,
            "SELECT thread_id, cut, count, dangling FROM thread_checkpoint "  # noqa: S608
            f"WHERE thread_id IN ({marks})",
        )
        for thread, cut, count, loose in conn.exec_driver_sql(sql, tuple(part)):
            out[thread] = Checkpoint(thread, int(cut), int(count), frozenset(orjson.loads(loose)))
    return out


def write(
    conn: Connection,
    keep: Sequence[Checkpoint],
    drop: Iterable[str],
    settled: Sequence[tuple[str, str, int, bytes]] = (),
    renewed: Iterable[str] = (),
) -> None:
    """Store `keep` (replacing the threads' old ones) and delete the checkpoints of `drop`,
    with their settled waits. `settled` (thread, requestId, at, packed: `pack`) are the
    waits before a kept cut, stored beside those kept already, but for the threads `renewed`
    (evaluated whole): their old ones are deleted first."""
    cleared = {*drop, *renewed}
    if cleared:
        conn.exec_driver_sql(
            driver_sql(conn, "DELETE FROM settled_wait WHERE thread_id = ?"),
            [(t,) for t in cleared],
        )
    if settled:
        # A wait before a later cut (the checkpoint moved on) may have been stored already.
        conn.exec_driver_sql(
            driver_sql(conn, "DELETE FROM settled_wait WHERE thread_id = ? AND request_id = ?"),
            [(t, r) for t, r, *_ in settled],
        )
        conn.exec_driver_sql(
            driver_sql(
                conn,
                "INSERT INTO settled_wait (thread_id, request_id, at, evidence) "
                "VALUES (?, ?, ?, ?)",
            ),
            list(settled),
        )
    gone = [(t,) for t in {*drop, *(c.thread_id for c in keep)}]
    if gone:
        conn.exec_driver_sql(
            driver_sql(conn, "DELETE FROM thread_checkpoint WHERE thread_id = ?"), gone
        )
    if keep:
        conn.exec_driver_sql(
            driver_sql(
                conn,
                "INSERT INTO thread_checkpoint (thread_id, cut, count, dangling) "
                "VALUES (?, ?, ?, ?)",
            ),
            [
                (c.thread_id, c.cut, c.count, orjson.dumps(sorted(c.dangling)).decode())
                for c in keep
            ],
        )


# A settled wait as stored: its kept evidence (core.settled.Kept) as compressed JSON, every
# record by its fields' names (a field added later is read back by name, or left at its
# default by an older row), each timeline item tagged with its type.
_ITEM_TYPES: dict[str, type[Any]] = {
    t.__name__: t for t in (Route, Decision, ActionChange, Heartbeat, Receipt, RunEvent)
}
_ENUMS: dict[str, Callable[[Any], Any]] = {"code": Code, "step": RunStep, "state": SubagentState}


def _named(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _record(kind: type[T], values: dict[str, Any]) -> T:
    return kind(**{k: _ENUMS[k](v) if k in _ENUMS else v for k, v in values.items()})


def pack(k: Kept) -> bytes:
    """A settled wait's kept evidence as stored: compressed JSON."""
    ev = k.evidence
    doc = _named(ev)
    doc["items"] = [[type(i).__name__, _named(i)] for i in ev.items]
    if ev.subagent is not None:
        doc["subagent"] = {
            "run_id": ev.subagent.run_id,
            "steps": [_named(s) for s in ev.subagent.steps],
        }
    return zlib.compress(orjson.dumps({"evidence": doc, "again": k.again}), 1)


def unpack(data: bytes) -> Kept:
    """`pack` read back."""
    doc = orjson.loads(zlib.decompress(data))
    ev = dict(doc["evidence"])
    ev["items"] = tuple(_record(_ITEM_TYPES[kind], v) for kind, v in ev["items"])
    ev["findings"] = tuple(ev["findings"])
    sub = ev.get("subagent")
    if sub is not None:
        steps = tuple(_record(SubagentStep, s) for s in sub["steps"])
        ev["subagent"] = SubagentTrace(sub["run_id"], steps)
    again = tuple((str(r), int(at), int(seq)) for r, at, seq in doc["again"])
    return Kept(WaitEvidence(**ev), again)


def settled_of(
    conn: Connection, thread: str, request_ids: Collection[str], now: int
) -> dict[str, Kept]:
    """The stored settled waits of the thread with these requestIds, stored at or before
    `now` (one that cannot be read back is left out: its thread is evaluated whole)."""
    out: dict[str, Kept] = {}
    for part in chunks(sorted(request_ids)):
        marks = ", ".join("?" for _ in part)
        sql = driver_sql(
            conn,
            "SELECT request_id, at, evidence FROM settled_wait "  # noqa: S608
            f"WHERE thread_id = ? AND request_id IN ({marks})",
        )
        for rid, at, data in conn.exec_driver_sql(sql, (thread, *part)):
            if int(at) > now:
                continue
            try:
                out[str(rid)] = unpack(data)
            except Exception:  # only a speed-up: the thread is evaluated whole instead
                log.exception("settled wait %s of thread %s could not be read", rid, thread)
    return out
