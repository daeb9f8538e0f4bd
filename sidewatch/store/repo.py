"""Writing a unit's facts (natural-key upserts, one transaction a unit) and reading them back
per thread, converted at this edge into core facts."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, Engine, Table, func, insert, select
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from sidewatch.core.facts import (
    AnswerFact,
    Fact,
    FindingFact,
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
from sidewatch.errors import StoreError
from sidewatch.store.models import (
    AnswerRow,
    FindingRow,
    HeartbeatRow,
    InterruptRow,
    LineCount,
    RejectRow,
    RunRow,
    SignalRow,
    ToolCallRow,
    ToolResultRow,
    Unit,
)

SEQ_SHIFT = 32  # seq = unit id << 32 | line number: arrival order across units and lines


def _table(model: Any) -> Table:
    table: Table = model.__table__
    return table


_TABLES: dict[type, Table] = {
    InterruptFact: _table(InterruptRow),
    ToolCallFact: _table(ToolCallRow),
    RunFact: _table(RunRow),
    AnswerFact: _table(AnswerRow),
    ToolResultFact: _table(ToolResultRow),
    SignalFact: _table(SignalRow),
    HeartbeatFact: _table(HeartbeatRow),
    FindingFact: _table(FindingRow),
}
_FIELDS = {t: tuple(f.name for f in fields(t)) for t in _TABLES}


@dataclass(frozen=True, slots=True)
class RejectedLine:
    line: int
    reason: str
    error: str


class UnitWriter:
    """The open transaction of one unit: its id fixes the `seq` of every fact it writes."""

    def __init__(self, conn: Connection, unit_id: int) -> None:
        self.conn = conn
        self.unit_id = unit_id
        self.seq_base = unit_id << SEQ_SHIFT

    def write(
        self,
        facts: Sequence[Fact],
        rejects: Sequence[RejectedLine],
        kinds: Mapping[str, int],
        accepted: int,
        skipped: int,
    ) -> None:
        rows: dict[type, list[tuple[Any, ...]]] = defaultdict(list)
        for fact in facts:
            rows[type(fact)].append(_ROW[type(fact)](fact))
        for kind, batch in rows.items():
            # Straight to the driver's executemany: the hot path of ingest.
            self.conn.exec_driver_sql(_insert_sql(self.conn, kind), batch)
        if rejects:
            self.conn.execute(
                insert(_table(RejectRow)),
                [
                    {
                        "unit_id": self.unit_id,
                        "line": r.line,
                        "reason": r.reason,
                        "error": r.error[:300],
                    }
                    for r in rejects
                ],
            )
        if kinds:
            self.conn.execute(
                insert(_table(LineCount)),
                [{"unit_id": self.unit_id, "kind": k, "lines": n} for k, n in kinds.items()],
            )
        unit = _table(Unit)
        self.conn.execute(
            unit.update()
            .where(unit.c.id == self.unit_id)
            .values(accepted=accepted, skipped=skipped, rejected=len(rejects))
        )


def _finding_row(f: Any) -> tuple[Any, ...]:
    ident = f"{f.rule}\0{f.thread_id}\0{f.run_id}\0{f.interrupt_id}"
    return (*_plain(FindingFact)(f), hashlib.sha256(ident.encode()).hexdigest()[:32])


def _plain(kind: type) -> Callable[[Any], tuple[Any, ...]]:
    return attrgetter(*_FIELDS[kind])


_ROW: dict[type, Callable[[Any], tuple[Any, ...]]] = {k: _plain(k) for k in _TABLES}
_ROW[FindingFact] = _finding_row
_COLUMNS = {k: (*_FIELDS[k], "key") if k is FindingFact else _FIELDS[k] for k in _TABLES}
_SQL: dict[tuple[str, type], str] = {}


def _insert_sql(conn: Connection, kind: type) -> str:
    """INSERT … ON CONFLICT DO NOTHING in the driver's own parameter style (natural keys)."""
    key = (conn.dialect.name, kind)
    if key not in _SQL:
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        cols = _COLUMNS[kind]
        # Table and column names come from our own models, never from input.
        _SQL[key] = (
            f"INSERT INTO {_TABLES[kind].name} ({', '.join(cols)}) "  # noqa: S608
            f"VALUES ({', '.join(mark for _ in cols)}) ON CONFLICT DO NOTHING"
        )
    return _SQL[key]


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def unit(self, source: str, received_at: int) -> Iterator[UnitWriter]:
        """A unit is stored whole or not at all: one transaction from its row to its facts."""
        try:
            with self.engine.begin() as conn:
                key = conn.execute(
                    insert(_table(Unit)).values(source=source[:512], received_at=received_at)
                ).inserted_primary_key
                assert key is not None
                unit_id = key[0]
                yield UnitWriter(conn, int(unit_id))
        except OperationalError as e:
            raise StoreError(f"store unavailable, nothing of {source} was stored: {e.orig}") from e
        except SQLAlchemyError as e:
            raise StoreError(f"store write failed, nothing of {source} was stored: {e}") from e

    def counts(self) -> dict[str, int]:
        """Rows per fact table, for summaries and tests."""
        with self.engine.connect() as conn:
            return {
                t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                for t in _TABLES.values()
            }

    def threads(self) -> list[ThreadFacts]:
        """Every thread that has announced a wait, with all of its facts."""
        try:
            with self.engine.connect() as conn:
                return _load_threads(conn)
        except OperationalError as e:
            raise StoreError(f"store unavailable: {e.orig}") from e


def _rows(conn: Connection, model: Any) -> Iterator[Any]:
    return iter(conn.execute(select(_table(model))).mappings())


def _load_threads(conn: Connection) -> list[ThreadFacts]:
    interrupts: dict[str, list[InterruptFact]] = defaultdict(list)
    for r in _rows(conn, InterruptRow):
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
    for r in _rows(conn, RunRow):
        runs[r["thread_id"]].append(
            RunFact(r["run_id"], r["thread_id"], RunMark(r["mark"]), r["at"], r["seq"])
        )
        run_thread.setdefault(r["run_id"], r["thread_id"])
    calls: dict[str, list[ToolCallFact]] = defaultdict(list)
    for r in _rows(conn, ToolCallRow):
        call_thread = run_thread.get(r["run_id"])
        if call_thread is not None and call_thread in interrupts:
            calls[call_thread].append(
                ToolCallFact(
                    r["tool_call_id"], r["run_id"], r["name"], r["digest"], r["at"], r["seq"]
                )
            )
    answers: dict[str, list[AnswerFact]] = defaultdict(list)
    for r in _rows(conn, AnswerRow):
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
    for r in _rows(conn, ToolResultRow):
        results[r["thread_id"]].append(
            ToolResultFact(r["thread_id"], r["run_id"], r["tool_call_id"], r["at"], r["seq"])
        )
    signals: dict[str, list[SignalFact]] = defaultdict(list)
    for r in _rows(conn, SignalRow):
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
    for r in _rows(conn, HeartbeatRow):
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
