"""The auditor's records in the store: which threads are dirty or due, the latest verdict of
every wait, transitions, and the totals a restarted daemon continues from."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, fields
from typing import Any

from sqlalchemy import Connection, Engine, Table, delete, func, select
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from sidewatch.errors import StoreError
from sidewatch.store.models import (
    DirtyThread,
    FindingRow,
    LineCount,
    RejectRow,
    TransitionRow,
    WaitState,
)


def _t(model: Any) -> Table:
    table: Table = model.__table__
    return table


@dataclass(frozen=True, slots=True)
class StoredState:
    request_id: str
    thread_id: str
    policy: str
    state: str
    closed: bool
    since: int
    due_at: int | None
    requested_at: int
    decided_at: int | None
    receipt_at: int | None
    evaluated_at: int


@dataclass(frozen=True, slots=True)
class StoredTransition:
    request_id: str
    from_state: str | None
    to_state: str
    at: int
    recorded_at: int
    policy: str
    thresholds: str
    evidence: str


@dataclass(frozen=True, slots=True)
class Totals:
    """What a restarted daemon's counters and gauges continue from."""

    open_waits: Counter[tuple[str, str]]  # (state, policy) -> open waits
    closed: Counter[tuple[str, str]]  # (state, policy) -> transitions into a closed state
    transitions: Counter[tuple[str, str]]  # (from, to) -> transitions
    decision_latencies: list[tuple[str, float]]  # (policy, seconds)
    resume_latencies: list[tuple[str, float]]
    ingested: Counter[str]  # kind -> lines
    rejected: Counter[str]  # reason -> lines
    findings: Counter[str]  # rule -> findings


_STATE_COLS = tuple(f.name for f in fields(StoredState))
_TRANSITION_COLS = tuple(f.name for f in fields(StoredTransition))
CLOSED_STATES = ("CLOSED_BY_DECLINE", "RESUMED", "CANCELLED")


class AuditState:
    """Reads and writes of the auditor; every write is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _conn(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except OperationalError as e:
            raise StoreError(f"store unavailable: {e.orig}") from e

    def dirty(self) -> list[tuple[str, int]]:
        """(thread, mark) of every thread with unclassified evidence."""
        table = _t(DirtyThread)
        with self._conn() as c:
            return [(r[0], int(r[1])) for r in c.execute(select(table.c.thread_id, table.c.mark))]

    def due(self, now: int) -> list[str]:
        """Threads with an open wait whose verdict time alone has changed by `now`."""
        table = _t(WaitState)
        query = select(table.c.thread_id).where(table.c.due_at <= now).distinct()
        with self._conn() as c:
            return [str(r[0]) for r in c.execute(query)]

    def states(self, thread_ids: Collection[str]) -> dict[str, StoredState]:
        table = _t(WaitState)
        ids = list(thread_ids)
        out: dict[str, StoredState] = {}
        with self._conn() as conn:
            for k in range(0, len(ids), 500):
                query = select(table).where(table.c.thread_id.in_(ids[k : k + 500]))
                for r in conn.execute(query):
                    s = StoredState(*(r._mapping[c] for c in _STATE_COLS))
                    out[s.request_id] = s
        return out

    def save(
        self,
        states: Sequence[StoredState],
        transitions: Sequence[StoredTransition],
        findings: Iterable[tuple[str, str, int]],
        cleared: Sequence[tuple[str, int]],
    ) -> None:
        """Record one batch of verdicts at once: states, transitions, verdict findings
        (rule, requestId, at), and clear the dirty marks that were read before the batch."""
        try:
            with self.engine.begin() as conn:
                table = _t(WaitState)
                ids = [s.request_id for s in states]
                for k in range(0, len(ids), 500):
                    conn.execute(delete(table).where(table.c.request_id.in_(ids[k : k + 500])))
                if states:
                    conn.execute(
                        table.insert(),
                        [dict(zip(_STATE_COLS, astuple(s), strict=True)) for s in states],
                    )
                if transitions:
                    conn.execute(
                        _t(TransitionRow).insert(),
                        [dict(zip(_TRANSITION_COLS, astuple(t), strict=True)) for t in transitions],
                    )
                rows = [
                    (f"{rule}\0{request_id}"[:64], rule, at, request_id)
                    for rule, request_id, at in findings
                ]
                if rows:
                    _insert_findings(conn, rows)
                dirty = _t(DirtyThread)
                for thread, mark in cleared:
                    conn.execute(
                        delete(dirty).where(dirty.c.thread_id == thread, dirty.c.mark == mark)
                    )
        except OperationalError as e:
            raise StoreError(
                f"store unavailable, the tick's verdicts were not saved: {e.orig}"
            ) from e
        except SQLAlchemyError as e:
            raise StoreError(f"saving verdicts failed: {e}") from e

    def select(self, states: Collection[str], limit: int) -> list[tuple[str, str]]:
        """(requestId, thread) of up to `limit` waits whose last verdict is in `states`,
        longest in their state first."""
        table = _t(WaitState)
        query = (
            select(table.c.request_id, table.c.thread_id)
            .where(table.c.state.in_(list(states)))
            .order_by(table.c.since, table.c.request_id)
            .limit(limit)
        )
        with self._conn() as c:
            return [(str(r[0]), str(r[1])) for r in c.execute(query)]

    def thread_of(self, request_id: str) -> str | None:
        table = _t(WaitState)
        query = select(table.c.thread_id).where(table.c.request_id == request_id)
        with self._conn() as c:
            found = c.execute(query).scalar_one_or_none()
        return None if found is None else str(found)

    def oldest_since(self) -> dict[str, int]:
        """When the oldest open wait of each state entered it (index-only lookups)."""
        table = _t(WaitState)
        out: dict[str, int] = {}
        with self._conn() as conn:
            for state in ("WAITING", "STALE", "UNROUTABLE", "ORPHANED", "STUCK_AFTER_DECISION"):
                query = select(func.min(table.c.since)).where(
                    table.c.closed.is_(False), table.c.state == state
                )
                value = conn.execute(query).scalar_one_or_none()
                if value is not None:
                    out[state] = int(value)
        return out

    def finding_counts(self) -> dict[str, int]:
        """Protocol findings by rule: noticed at ingest, or recorded from verdicts (each
        (rule, wait) once)."""
        fd = _t(FindingRow)
        query = select(fd.c.rule, func.count()).group_by(fd.c.rule)
        with self._conn() as c:
            return {str(k): int(n) for k, n in c.execute(query)}

    def totals(self) -> Totals:
        with self._conn() as c:
            return _totals(c)

    def transitions_of(self, request_id: str) -> list[StoredTransition]:
        table = _t(TransitionRow)
        query = select(table).where(table.c.request_id == request_id).order_by(table.c.id)
        with self._conn() as c:
            return [
                StoredTransition(*(r._mapping[k] for k in _TRANSITION_COLS))
                for r in c.execute(query)
            ]


def _insert_findings(conn: Connection, rows: list[tuple[str, str, int, str]]) -> None:
    values = [
        {
            "key": hashlib.sha256(key.encode()).hexdigest()[:32],
            "rule": rule,
            "at": at,
            "seq": 0,
            "thread_id": None,
            "run_id": None,
            "interrupt_id": request_id[:256],
        }
        for key, rule, at, request_id in rows
    ]
    table = _t(FindingRow)
    existing = {
        r[0]
        for r in conn.execute(
            select(table.c.key).where(table.c.key.in_([v["key"] for v in values]))
        )
    }
    fresh = [v for v in values if v["key"] not in existing]
    if fresh:
        conn.execute(table.insert(), fresh)


def _totals(conn: Connection) -> Totals:
    ws, tr = _t(WaitState), _t(TransitionRow)
    open_waits: Counter[tuple[str, str]] = Counter()
    for state, policy, n in conn.execute(
        select(ws.c.state, ws.c.policy, func.count())
        .where(ws.c.closed.is_(False))
        .group_by(ws.c.state, ws.c.policy)
    ):
        open_waits[(state, policy)] = n
    closed: Counter[tuple[str, str]] = Counter()
    transitions: Counter[tuple[str, str]] = Counter()
    for frm, to, policy, n in conn.execute(
        select(tr.c.from_state, tr.c.to_state, tr.c.policy, func.count()).group_by(
            tr.c.from_state, tr.c.to_state, tr.c.policy
        )
    ):
        transitions[(frm or "none", to)] += n
        if to in CLOSED_STATES:
            closed[(to, policy)] += n
    decisions = [
        (p, (d - r) / 1000)
        for p, r, d in conn.execute(
            select(ws.c.policy, ws.c.requested_at, ws.c.decided_at).where(
                ws.c.decided_at.is_not(None)
            )
        )
    ]
    resumes = [
        (p, (rc - d) / 1000)
        for p, d, rc in conn.execute(
            select(ws.c.policy, ws.c.decided_at, ws.c.receipt_at).where(
                ws.c.decided_at.is_not(None), ws.c.receipt_at.is_not(None)
            )
        )
    ]
    lc, rj, fd = _t(LineCount), _t(RejectRow), _t(FindingRow)
    ingested = Counter(
        {
            k: int(n)
            for k, n in conn.execute(select(lc.c.kind, func.sum(lc.c.lines)).group_by(lc.c.kind))
        }
    )
    rejected = Counter(
        {
            k: int(n)
            for k, n in conn.execute(select(rj.c.reason, func.count()).group_by(rj.c.reason))
        }
    )
    findings = Counter(
        {k: int(n) for k, n in conn.execute(select(fd.c.rule, func.count()).group_by(fd.c.rule))}
    )
    return Totals(open_waits, closed, transitions, decisions, resumes, ingested, rejected, findings)
