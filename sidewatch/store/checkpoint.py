"""A long thread's checkpoint in the store (core.checkpoint): read it, load only the facts
after its cut, ask the store what the prefix holds of the suffix's ids, and evaluate.

Every question asked of the prefix names the suffix's own ids and is answered from an index
((thread, run), (thread, interrupt id), (thread, tool call), the prefix's time range), so a
resumed evaluation reads what the suffix holds, not the thread's history. A fact timed
before the cut that arrived since shows in the thread's dirty mark (its earliest time); only
then is the prefix counted (a range count, in the database), and a changed count makes the
thread evaluated whole (`_count`). Checkpoints are written by the auditor in the transaction
of the verdicts they rest on (AuditState.save), with what is kept of the waits they settle
(`settled_wait`, core.settled: the evidence without its heartbeats): a GET of such a wait,
once the suffix shows that the checkpoint still holds (`evaluate_threads`, `want`), reads it
back with the beats that reach it now and classifies it, without reading the history; a
dropped checkpoint takes its settled waits with it (`write`).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

import orjson
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
from sidewatch.core.facts import HeartbeatFact, SignalFact, ThreadFacts
from sidewatch.core.health import classify
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
from sidewatch.core.settled import Kept, restored
from sidewatch.store.load import (
    _ANSWER,
    _CALL,
    _FINDING,
    _HEARTBEAT,
    _INTERRUPT,
    _LEGACY,
    _RESULT,
    _RUN,
    _SIGNAL,
    _SUBAGENT,
    CHUNK,
    _Reader,
    load_threads,
)
from sidewatch.store.services import expand_runs
from sidewatch.store.sql import driver_sql

T = TypeVar("T")
log = logging.getLogger("sidewatch.store")
# The tables of a thread's own facts (run-scoped, with `thread_id`, `run_id`, `at`).
_RUN_TABLES = ("interrupt", "tool_call", "run_fact", "answer", "legacy_resume", "tool_result")


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


def checkpoints(conn: Connection, thread_ids: Collection[str]) -> dict[str, Checkpoint]:
    """The checkpoints of these threads that have one."""
    ids = list(thread_ids)
    out: dict[str, Checkpoint] = {}
    for k in range(0, len(ids), CHUNK):
        part = ids[k : k + CHUNK]
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
    ids = sorted(request_ids)
    out: dict[str, Kept] = {}
    for k in range(0, len(ids), CHUNK):
        part = ids[k : k + CHUNK]
        sql = driver_sql(
            conn,
            "SELECT request_id, at, evidence FROM settled_wait "  # noqa: S608
            f"WHERE thread_id = ? AND request_id IN ({_in(part)})",
        )
        for rid, at, data in conn.exec_driver_sql(sql, (thread, *part)):
            if int(at) > now:
                continue
            try:
                out[str(rid)] = unpack(data)
            except Exception:  # only a speed-up: the thread is evaluated whole instead
                log.exception("settled wait %s of thread %s could not be read", rid, thread)
    return out


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
    runs = sorted({r for kept in stored.values() for r in kept.runs})
    beats = [h for h in part.heartbeats if h.run_id is None]
    for n in range(0, len(runs), CHUNK):
        ps = runs[n : n + CHUNK]
        beats += _rows(conn, _HEARTBEAT, f"thread_id = ? AND run_id IN ({_in(ps)})", (thread, *ps))
    beats += expand_runs(conn, thread, runs, whole=False)  # the thread's: in the suffix
    out: dict[str, Evaluated] = {}
    try:
        for rid, kept in stored.items():
            ev = restored(kept, beats)
            out[rid] = Evaluated(ev, classify(ev, policy_for(ev.action, ev.reason), now))
    except Exception:  # evaluated whole, where a failure is reported
        return None
    return out


def _rows(conn: Connection, reader: _Reader[T], where: str, args: tuple[Any, ...]) -> list[T]:
    sql = driver_sql(conn, f"SELECT {reader.columns} FROM {reader.table} WHERE {where}")  # noqa: S608
    return list(map(reader.read, conn.exec_driver_sql(sql, args)))


def _in(ids: Collection[str]) -> str:
    return ", ".join("?" for _ in ids)


def suffix(conn: Connection, cp: Checkpoint) -> ThreadFacts:
    """The facts of the thread timed at or after the cut, and the signals naming a requestId
    one of its interrupts may have, the thread-wide heartbeats and the beats of the services
    bound to the thread or to the suffix's runs (whenever they were timed), as load_threads
    gives them (core.checkpoint.split)."""
    t, cut = cp.thread_id, cp.cut
    after = "thread_id = ? AND at >= ?"
    interrupts = _rows(conn, _INTERRUPT, after, (t, cut))
    shell = ThreadFacts(thread_id=t, interrupts=tuple(interrupts))
    wanted = sorted(refs(shell))
    signals: dict[str, SignalFact] = {}
    for s in _rows(conn, _SIGNAL, after + " AND request_id IS NULL", (t, cut)):
        signals[s.key] = s
    for k in range(0, len(wanted), CHUNK):
        part = wanted[k : k + CHUNK]
        for s in _rows(conn, _SIGNAL, f"request_id IN ({_in(part)})", tuple(part)):
            signals[s.key] = s
    facts = ThreadFacts(
        thread_id=t,
        interrupts=tuple(interrupts),
        tool_calls=tuple(_rows(conn, _CALL, after, (t, cut))),
        runs=tuple(_rows(conn, _RUN, after, (t, cut))),
        answers=tuple(_rows(conn, _ANSWER, after, (t, cut))),
        tool_results=tuple(_rows(conn, _RESULT, after, (t, cut))),
        signals=tuple(signals.values()),
        heartbeats=tuple(_spans(conn, t, cut)),
        legacy_resumes=tuple(_rows(conn, _LEGACY, after, (t, cut))),
        findings=tuple(_rows(conn, _FINDING, after, (t, cut))),
        subagents=tuple(_rows(conn, _SUBAGENT, after, (t, cut))),
    )
    # The beats of the services bound to the thread or to one of the suffix's runs
    # (store.services.expand: the first and latest of each instance), whatever their time.
    bound = expand_runs(conn, t, uses(facts).runs)
    return replace(facts, heartbeats=facts.heartbeats + tuple(bound)) if bound else facts


def _spans(conn: Connection, thread: str, cut: int) -> list[HeartbeatFact]:
    """The thread's stored heartbeats of the suffix (core.checkpoint.split): its spans from
    the cut on, and every thread-wide one (spans: one a pause or a handle change, not one a
    beat)."""
    spans = _rows(conn, _HEARTBEAT, "thread_id = ? AND at >= ?", (thread, cut))
    # The thread-wide spans before the cut by the (thread, run, at) index: not the prefix's.
    spans += _rows(conn, _HEARTBEAT, "thread_id = ? AND at < ? AND run_id IS NULL", (thread, cut))
    return spans


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
        for k in range(0, len(ids), CHUNK):
            part = ids[k : k + CHUNK]
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


def seen(conn: Connection, cp: Checkpoint, part: ThreadFacts) -> Seen:
    """What the prefix holds of the ids `part` (the suffix) uses, and of the requestIds its
    waits may have (`refs`), asked by those ids only."""
    u = uses(part)
    rids = refs(part)
    runs, calls, iids = sorted(u.runs), sorted(u.calls), sorted(u.interrupts)
    asks = [
        ("r", table, "run_id", runs) for table in (*_RUN_TABLES, "heartbeat", "subagent", "finding")
    ]
    # (Findings the auditor wrote, seq 0, are asked too: a doubt, never a miss.)
    asks += [("c", "tool_call", "tool_call_id", calls), ("t", "tool_result", "tool_call_id", calls)]
    asks += [("g", "interrupt", "tool_call_id", calls), ("i", "interrupt", "interrupt_id", iids)]
    asks.append(("s", "subagent", "subagent_run_id", sorted(u.subagents)))
    held = _held(conn, cp, asks)
    requests: set[str] = set()
    wanted = sorted(rids)
    for k in range(0, len(wanted), CHUNK):
        ps = wanted[k : k + CHUNK]
        sql = driver_sql(
            conn,
            "SELECT request_id FROM wait_state "  # noqa: S608
            f"WHERE thread_id = ? AND request_id IN ({_in(ps)}) AND requested_at < ?",
        )
        requests.update(str(r[0]) for r in conn.exec_driver_sql(sql, (cp.thread_id, *ps, cp.cut)))
    return Seen(
        count=_count(conn, cp),
        runs=frozenset(held["r"]),
        interrupts=frozenset(held["i"]),
        calls=frozenset(held["c"] | held["t"] | held["g"]),
        requests=frozenset(requests),
        gated=frozenset(held["g"]),
        results=frozenset(held["t"]),
        subagents=frozenset(held["s"]),
    )


def _size(facts: ThreadFacts) -> int:
    """How many facts the thread holds, of every kind."""
    return sum(len(getattr(facts, name)) for name in _KINDS)


_KINDS = tuple(f.name for f in fields(ThreadFacts) if f.name != "thread_id")


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
        part = suffix(conn, cp)
        known = seen(conn, cp, part)
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
