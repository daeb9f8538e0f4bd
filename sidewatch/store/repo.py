"""Writing a unit's facts (natural-key upserts, one transaction a unit) and reading them back
per thread, converted at this edge into core facts."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import orjson
from sqlalchemy import Connection, Engine, Table, func, insert, select

from sidewatch.core.facts import (
    AnswerFact,
    Fact,
    FindingFact,
    HeartbeatFact,
    InterruptFact,
    LegacyResumeFact,
    RunFact,
    RunTraceFact,
    ServiceBeatFact,
    ServiceBindFact,
    SignalFact,
    SubagentFact,
    ThreadFacts,
    ToolCallFact,
    ToolResultFact,
)
from sidewatch.core.vocab import FindingRule, LineKind
from sidewatch.store.db import QUERY_REFUSED, classified, refused
from sidewatch.store.heartbeats import write_heartbeats
from sidewatch.store.load import (
    announced_refs,
    entries_json,
    load_threads,
    recorded_refs,
    threads_of_refs,
)
from sidewatch.store.models import (
    AnswerRow,
    FindingRow,
    InterruptRow,
    LegacyResumeRow,
    LineCount,
    RejectRow,
    RunRow,
    RunTraceRow,
    SignalRow,
    SubagentRow,
    ToolCallRow,
    ToolResultRow,
    Unit,
    table_of,
)
from sidewatch.store.retime import retime_inputs
from sidewatch.store.services import Bound, bound_to, write_beats, write_bindings
from sidewatch.store.sql import (
    MARK_DIRTY_SINCE,
    add_totals,
    chunks,
    driver_sql,
    finding_key,
    insert_sql,
    key_lookups,
)

if TYPE_CHECKING:  # the auditor's modules: a unit's writer (`sidewatch ingest`) needs none
    from sidewatch.store.stats import RetentionState

SEQ_SHIFT = 32  # seq = unit id << 32 | line number: arrival order across units and lines


_TABLES: dict[type, Table] = {
    InterruptFact: table_of(InterruptRow),
    ToolCallFact: table_of(ToolCallRow),
    RunFact: table_of(RunRow),
    AnswerFact: table_of(AnswerRow),
    ToolResultFact: table_of(ToolResultRow),
    LegacyResumeFact: table_of(LegacyResumeRow),
    SignalFact: table_of(SignalRow),
    FindingFact: table_of(FindingRow),
    SubagentFact: table_of(SubagentRow),
    RunTraceFact: table_of(RunTraceRow),
}
_FIELDS = {t: tuple(f.name for f in fields(t)) for t in _TABLES}


@dataclass(frozen=True, slots=True)
class RejectedLine:
    line: int
    reason: str
    error: str


# The line kind of a unit whose facts were all stored already (its lines are not new).
REDELIVERED = LineKind.REDELIVERED
UNKNOWN_THREAD = FindingRule.EVIDENCE_UNKNOWN_THREAD


class UnitWriter:
    """The open transaction of one unit: its id fixes the `seq` of every fact it writes.
    `totals` gathers what its rows add to the store's totals (findings inserted, lines by
    kind, rejects by reason), added once by the transaction's owner (`Store`) before commit."""

    def __init__(
        self,
        conn: Connection,
        unit_id: int,
        heartbeat_gap_ms: int = 0,
        totals: Counter[tuple[str, str]] | None = None,
    ) -> None:
        self.conn = conn
        self.unit_id = unit_id
        self.seq_base = unit_id << SEQ_SHIFT
        self.heartbeat_gap_ms = heartbeat_gap_ms
        self.totals: Counter[tuple[str, str]] = Counter() if totals is None else totals

    def write(
        self,
        facts: Sequence[Fact],
        rejects: Sequence[RejectedLine],
        kinds: Mapping[str, int],
        accepted: int,
        skipped: int,
        retimes: Sequence[tuple[str, str, int]] = (),
    ) -> bool:
        """Stores the unit's facts and counts, and retimes the untimed inputs of earlier units
        whose run (thread, run, start time) started in it (store.retime); True when every fact
        was already stored and none retimed (a unit delivered again): its lines are then
        counted as kind `redelivered`, not as new."""
        rows: dict[type, list[tuple[Any, ...]]] = defaultdict(list)
        inserted = 0
        beats: list[ServiceBeatFact] = []
        bindings: list[ServiceBindFact] = []
        heartbeats: list[HeartbeatFact] = []
        try:
            # Its look-up is the unit's first statement: a value the driver refuses is refused
            # there, as the unit's, like any other of its values.
            facts = [*facts, *self._unannounced(facts)]
            for fact in facts:
                kind = type(fact)
                row = _ROW.get(kind)  # a fact of a table: most of them, one look-up each
                if row is not None:
                    rows[kind].append(row(fact))
                elif isinstance(fact, HeartbeatFact):
                    heartbeats.append(fact)
                elif isinstance(fact, ServiceBeatFact):
                    beats.append(fact)
                elif isinstance(fact, ServiceBindFact):
                    bindings.append(fact)
                else:
                    raise TypeError(f"no table stores a {kind.__name__}")
            for kind, batch in rows.items():
                if kind is FindingFact:
                    inserted += self._write_findings(batch)
                    continue
                # Straight to the driver's executemany: the hot path of ingest.
                inserted += self.conn.exec_driver_sql(_insert_sql(self.conn, kind), batch).rowcount
            # A beat inside a span of its kind (a re-delivery) changes nothing: not new.
            inserted += write_heartbeats(self.conn, heartbeats, self.heartbeat_gap_ms)
            write_bindings(self.conn, bindings)
            write_beats(self.conn, beats)
            # A service's beat is news whenever it comes (its latest beat is upserted), so a
            # unit holding one is never a re-delivery.
            inserted += len(beats)
            moved = retime_inputs(self.conn, retimes) if retimes else []
            inserted += len(moved)
            self._mark_dirty(facts, moved)
        except (OverflowError, UnicodeError) as e:
            # The driver's own refusal, before the database: an integer over 64 bits (SQLite),
            # a lone surrogate in a string. The unit's, not the store's.
            raise refused("the store refused the unit's data", e) from None
        if rejects:
            self.totals.update(("rejects", r.reason) for r in rejects)
            self.conn.execute(
                insert(table_of(RejectRow)),
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
        redelivered = bool(facts) and inserted == 0
        if redelivered:
            kinds = {REDELIVERED: accepted + skipped}
        if kinds:
            self.totals.update({("lines", k): n for k, n in kinds.items()})
            self.conn.execute(
                insert(table_of(LineCount)),
                [{"unit_id": self.unit_id, "kind": k, "lines": n} for k, n in kinds.items()],
            )
        unit = table_of(Unit)
        self.conn.execute(
            unit.update()
            .where(unit.c.id == self.unit_id)
            .values(accepted=accepted, skipped=skipped, rejected=len(rejects))
        )
        return redelivered

    def _unannounced(self, facts: Sequence[Fact]) -> list[FindingFact]:
        """A finding for each wait that evidence names by threadId and interruptId in a thread
        no interrupt announced, in this unit or before: a notifier or tap naming the wrong
        thread. The evidence is kept all the same (sources are not ordered with each other: its
        interrupt may still come, and then it applies). Heartbeats are not evidence of a wait:
        a requester beats before it ever pauses."""
        announced = {f.thread_id for f in facts if isinstance(f, InterruptFact)}
        named: dict[tuple[str, str | None], SignalFact] = {}
        for s in (f for f in facts if isinstance(f, SignalFact)):
            if s.thread_id is not None and s.thread_id not in announced:
                named.setdefault((s.thread_id, s.interrupt_id), s)
        if not named:
            return []
        known: set[str] = set()
        for part in chunks(sorted({thread for thread, _ in named})):
            marks = ", ".join("?" for _ in part)
            found = self.conn.exec_driver_sql(
                driver_sql(
                    self.conn,
                    f"SELECT DISTINCT thread_id FROM interrupt WHERE thread_id IN ({marks})",  # noqa: S608
                ),
                tuple(part),
            )
            known.update(row[0] for row in found)
        return [
            FindingFact(
                rule=UNKNOWN_THREAD, at=f.at, seq=f.seq, thread_id=thread, interrupt_id=interrupt
            )
            for (thread, interrupt), f in named.items()
            if thread not in known
        ]

    def _write_findings(self, rows: list[tuple[Any, ...]]) -> int:
        """Insert finding rows (a finding already stored is not stored again), a statement per
        rule: its row count is what that rule's total gains, also when another writer stored
        the same finding first (its conflict is no row)."""
        by_rule: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        for row in rows:
            by_rule[row[_RULE_AT]].append(row)
        sql = _insert_sql(self.conn, FindingFact)
        inserted = 0
        for rule, part in by_rule.items():
            n = self.conn.exec_driver_sql(sql, part).rowcount
            self.totals[("findings", rule)] += n
            inserted += n
        return inserted

    def _mark_dirty(self, facts: Sequence[Fact], moved: Sequence[tuple[str, int]] = ()) -> None:
        """Tell the auditor which threads have new evidence, in the unit's own transaction,
        with the earliest time each thread's new facts concern (a signal naming a recorded
        wait concerns that wait's time; `moved`: (thread, time) of stored facts retimed): a
        long thread's checkpoint tells a late fact by it."""
        early: dict[str, int] = {}
        refs: dict[str, int] = {}

        def note(thread: str, at: int) -> None:
            early[thread] = min(at, early.get(thread, at))

        for moved_thread, moved_at in moved:
            note(moved_thread, moved_at)
        for f in facts:
            at = getattr(f, "at", 0)
            if isinstance(f, SignalFact) and f.request_id is not None:
                refs[f.request_id] = min(at, refs.get(f.request_id, at))
                if f.thread_id is None:
                    continue
            thread = getattr(f, "thread_id", None)
            if thread is not None:
                note(thread, at)
        if refs:
            # The threads the requestIds name (load.threads_of_refs): a producer's requestId,
            # else the auditor's record of the wait, which also gives the wait's time. A wait
            # not recorded yet is on a dirty thread already: its default forms need no look.
            lowest = min(refs.values())
            named: set[str] = set()
            for ref, thread in announced_refs(self.conn, refs):
                named.add(ref)
                note(thread, lowest)
            for ref, thread, at in recorded_refs(self.conn, refs):
                note(thread, at if ref in named else min(at, lowest))
        if not early:
            return
        self.conn.exec_driver_sql(driver_sql(self.conn, MARK_DIRTY_SINCE), sorted(early.items()))
        threads = set(early)
        # A thread that announced no wait has nothing to classify: its evidence waits for its
        # interrupt, whose own unit marks it. Unmarked after the mark, not instead of it: on
        # PostgreSQL the mark waits for a concurrent unit's mark of the same thread, so the
        # look that follows sees that unit's interrupt (evidence never missed by a race).
        announced = {f.thread_id for f in facts if isinstance(f, InterruptFact)}
        rest = sorted(threads - announced)
        for part in chunks(rest):
            marks = ", ".join("?" for _ in part)
            self.conn.exec_driver_sql(
                driver_sql(
                    self.conn,
                    f"DELETE FROM dirty_thread WHERE thread_id IN ({marks}) AND NOT EXISTS ("  # noqa: S608
                    "SELECT 1 FROM interrupt i WHERE i.thread_id = dirty_thread.thread_id)",
                ),
                tuple(part),
            )


_RULE_AT = _FIELDS[FindingFact].index("rule")


def _finding_row(f: Any) -> tuple[Any, ...]:
    return (*_plain(FindingFact)(f), finding_key(f.rule, f.thread_id, f.run_id, f.interrupt_id))


def _plain(kind: type) -> Callable[[Any], tuple[Any, ...]]:
    return attrgetter(*_FIELDS[kind])


_ENTRIES_AT = _FIELDS[LegacyResumeFact].index("entries")
_LEGACY_FIELDS = attrgetter(*_FIELDS[LegacyResumeFact])


def _legacy_row(f: Any) -> tuple[Any, ...]:
    """The map's entries kept as one JSON text (`load.entries_json`)."""
    row = _LEGACY_FIELDS(f)
    return (*row[:_ENTRIES_AT], entries_json(f.entries), *row[_ENTRIES_AT + 1 :])


_IDS_AT = _FIELDS[SubagentFact].index("interrupt_ids")
_SUBAGENT_FIELDS = attrgetter(*_FIELDS[SubagentFact])


def _subagent_row(f: Any) -> tuple[Any, ...]:
    """The interrupts a suspended subagent raised kept as one JSON list (`load`)."""
    row = _SUBAGENT_FIELDS(f)
    ids = orjson.dumps(list(f.interrupt_ids)).decode()
    return (*row[:_IDS_AT], ids, *row[_IDS_AT + 1 :])


_ROW: dict[type, Callable[[Any], tuple[Any, ...]]] = {k: _plain(k) for k in _TABLES}
_ROW[SubagentFact] = _subagent_row
_ROW[FindingFact] = _finding_row
_ROW[LegacyResumeFact] = _legacy_row
_COLUMNS = {k: (*_FIELDS[k], "key") if k is FindingFact else _FIELDS[k] for k in _TABLES}


def _insert_sql(conn: Connection, kind: type) -> str:
    """INSERT … ON CONFLICT DO NOTHING in the driver's own parameter style (natural keys)."""
    return insert_sql(conn, _TABLES[kind].name, _COLUMNS[kind], "ON CONFLICT DO NOTHING")


def _insert_unit(conn: Connection, source: str, received_at: int, key: str | None) -> int | None:
    """The new unit's id, or None when a unit with `key` is already stored."""
    unit = table_of(Unit)
    if key is None:
        pk = conn.execute(
            insert(unit).values(source=source, received_at=received_at)
        ).inserted_primary_key
        assert pk is not None
        return int(pk[0])
    # The dialect's own INSERT … ON CONFLICT (PostgreSQL's module loads only on PostgreSQL).
    upsert: Any
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as upsert  # noqa: PLC0415
    else:
        from sqlalchemy.dialects.postgresql import insert as upsert  # noqa: PLC0415
    row = conn.execute(
        upsert(unit)
        .values(source=source, received_at=received_at, key=key)
        .on_conflict_do_nothing(index_elements=["key"])
        .returning(unit.c.id)
    ).one_or_none()
    return None if row is None else int(row[0])


class UnitBatch:
    """The open transaction of a batch of units (`Store.units`)."""

    def __init__(self, conn: Connection, heartbeat_gap_ms: int = 0) -> None:
        self.conn = conn
        self.heartbeat_gap_ms = heartbeat_gap_ms
        self.totals: Counter[tuple[str, str]] = Counter()  # of every unit of the batch
        self.shard: int | None = None  # the first unit's id

    def unit(self, source: str, received_at: int, key: str | None = None) -> UnitWriter | None:
        """The next unit's writer, or None when its `key` is already stored."""
        unit_id = _insert_unit(self.conn, source[:512], received_at, key)
        if unit_id is None:
            return None
        if self.shard is None:
            self.shard = unit_id
        return UnitWriter(self.conn, unit_id, self.heartbeat_gap_ms, self.totals)


class Store:
    """The facts of the store of `engine`. `heartbeat_gap_ms`: the compaction gap of
    heartbeats (config `heartbeat_gap_ms`; 0 keeps every beat of another time)."""

    def __init__(self, engine: Engine, heartbeat_gap_ms: int = 0) -> None:
        self.engine = engine
        self.heartbeat_gap_ms = heartbeat_gap_ms

    @contextmanager
    def unit(
        self, source: str, received_at: int, key: str | None = None
    ) -> Iterator[UnitWriter | None]:
        """A unit is stored whole or not at all: one transaction from its row to its facts.
        With a `key` already stored (a unit delivered again) it yields None and stores nothing;
        a concurrent writer of the same key waits for the first one's commit, then sees it."""
        # A data, integrity or programming error comes back with the same unit: taken for an
        # outage and retried, it would block the units behind it for ever.
        with (
            classified(
                f"store unavailable, nothing of {source} was stored",
                f"the store refused the data of {source}, nothing of it was stored",
            ),
            self.engine.begin() as conn,
        ):
            unit_id = _insert_unit(conn, source[:512], received_at, key)
            if unit_id is None:
                yield None
                return
            writer = UnitWriter(conn, unit_id, self.heartbeat_gap_ms)
            yield writer
            add_totals(conn, writer.totals, unit_id)  # last: see add_totals

    @contextmanager
    def units(self) -> Iterator[UnitBatch]:
        """Many units in one transaction: every one of them is stored, or none (any error
        rolls back all of them). Keys work as in `unit`."""
        with (
            classified(
                "store unavailable, nothing of the batch was stored",
                "the store refused the data of a unit of the batch, nothing of it was stored",
            ),
            self.engine.begin() as conn,
        ):
            batch = UnitBatch(conn, self.heartbeat_gap_ms)
            yield batch
            add_totals(conn, batch.totals, batch.shard or 0)  # once, last: see add_totals

    def findings(self) -> list[tuple[str, int]]:
        """(rule, at) of every protocol finding recorded."""
        table = table_of(FindingRow)
        with self.engine.connect() as conn:
            return [(str(r[0]), int(r[1])) for r in conn.execute(select(table.c.rule, table.c.at))]

    def ingest_health(self, start: int, end: int) -> tuple[int, int, int, dict[str, int], int, int]:
        """Units received in (start, end]: how many, lines accepted and skipped, rejected
        lines by reason, and of those units how many were delivered again and their lines
        (already stored: not in the accepted and skipped)."""
        unit, reject, count = table_of(Unit), table_of(RejectRow), table_of(LineCount)
        window = (unit.c.received_at > start) & (unit.c.received_at <= end)
        with self.engine.connect() as conn:
            n, accepted, skipped = conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(unit.c.accepted), 0),
                    func.coalesce(func.sum(unit.c.skipped), 0),
                ).where(window)
            ).one()
            rejected = {
                str(reason): int(count)
                for reason, count in conn.execute(
                    select(reject.c.reason, func.count())
                    .select_from(reject.join(unit, reject.c.unit_id == unit.c.id))
                    .where(window)
                    .group_by(reject.c.reason)
                )
            }
            again, again_accepted, again_skipped = conn.execute(
                select(
                    func.count(),
                    func.coalesce(func.sum(unit.c.accepted), 0),
                    func.coalesce(func.sum(unit.c.skipped), 0),
                )
                .select_from(count.join(unit, count.c.unit_id == unit.c.id))
                .where(window & (count.c.kind == REDELIVERED))
            ).one()
        return (
            int(n),
            int(accepted - again_accepted),
            int(skipped - again_skipped),
            rejected,
            int(again),
            int(again_accepted + again_skipped),
        )

    def retention(self) -> RetentionState:
        """What was pruned to store.retention, and the evidence for unknown waits kept."""
        from sidewatch.store.stats import retention_state  # noqa: PLC0415 (auditor's)

        return retention_state(self.engine)

    def pruned_before(self) -> int | None:
        """The latest cutoff pruned to (ms), None when nothing was pruned yet."""
        from sidewatch.store.pruning import pruned_before  # noqa: PLC0415 (auditor's)

        return pruned_before(self.engine)

    def bound_to(self, thread: str, run: str | None) -> list[Bound]:
        """The service instances holding the waits of `thread`'s `run` (store.services)."""
        with classified("store unavailable", QUERY_REFUSED), self.engine.connect() as conn:
            return bound_to(conn, thread, run)

    def threads_of(self, request_id: str) -> set[str]:
        """The threads whose waits may have this requestId (see load.threads_of_refs)."""
        with classified("store unavailable", QUERY_REFUSED), self.engine.connect() as conn:
            return threads_of_refs(conn, [request_id])

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """One read session: every read through one connection and its one transaction (one
        snapshot of the store), by indexed keys (sql.key_lookups). A batch's evaluation reads
        its checkpoints, suffixes and threads through it (app.evaluate)."""
        with classified("store unavailable", QUERY_REFUSED), self.engine.connect() as conn:
            key_lookups(conn)
            yield conn

    def threads(self, thread_ids: Collection[str] | None = None) -> list[ThreadFacts]:
        """Every thread (or the named ones) that has announced a wait, with all its facts."""
        with classified("store unavailable", QUERY_REFUSED), self.engine.connect() as conn:
            return load_threads(conn, thread_ids)
