"""The totals a restarted daemon continues from: the recorded verdicts' running totals (by
`wait_key`), the transitions and latencies of the records kept, the lines, rejects and
findings ever counted, and what retention pruned (pruned_total)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, func, select

from sidewatch.core.model import CLOSED_STATES
from sidewatch.store.models import PrunedTotal, WaitState, table_of
from sidewatch.store.sql import driver_sql, running_totals
from sidewatch.store.transitions import count_moves


@dataclass(frozen=True, slots=True)
class Totals:
    """What a restarted daemon's counters and gauges continue from."""

    open_waits: Counter[tuple[str, str]]  # (state, policy) -> open waits
    unreported: Counter[tuple[str, str, str]]  # (state, policy, unreported) -> open waits
    closed: Counter[tuple[str, str]]  # (state, policy) -> transitions into a closed state
    transitions: Counter[tuple[str, str]]  # (from, to) -> transitions
    decision_latencies: list[tuple[str, float]]  # (policy, seconds)
    resume_latencies: list[tuple[str, float]]
    ingested: Counter[str]  # kind -> lines
    rejected: Counter[str]  # reason -> lines
    findings: Counter[str]  # rule -> findings
    # The latency observations of pruned wait records (store.retention): ("decision",
    # "policy\0bucket index") -> count, ("decision_ms", policy) -> their sum; "resume" alike.
    pruned_latencies: dict[tuple[str, str], int] = field(default_factory=dict)


# The running totals (`running_total`) of the recorded verdicts, by wait_key: every write of
# wait_state adds its moves in its transaction (AuditState.save; retention's deletes).
WAITS = "waits"


def wait_key(state: str, uncertain: bool, policy: str) -> str:
    """The key of a recorded verdict's total: `state|0|policy` (1: uncertain)."""
    return f"{state}|{int(bool(uncertain))}|{policy}"


def split_wait_key(key: str) -> tuple[str, bool, str]:
    state, unsure, policy = key.split("|", 2)
    return state, unsure == "1", policy


# The recorded verdicts of a set of rows, by wait_key's parts (our own SQL).
WAIT_GROUPS = "SELECT state, uncertain, policy, count(*) FROM wait_state WHERE {} GROUP BY 1, 2, 3"


def uncount(conn: Connection, where: str, params: Sequence[Any]) -> Counter[tuple[str, str]]:
    """The moves of the totals when the rows of wait_state matching `where` are deleted (to
    add with add_totals in the same transaction, before the delete is committed)."""
    out: Counter[tuple[str, str]] = Counter()
    sql = driver_sql(conn, WAIT_GROUPS.format(where))
    for state, unsure, policy, n in conn.exec_driver_sql(sql, tuple(params)):
        out[(WAITS, wait_key(state, unsure, policy))] -= int(n)
    return out


def read_totals(conn: Connection) -> Totals:
    ws = table_of(WaitState)
    open_waits: Counter[tuple[str, str]] = Counter()
    unreported: Counter[tuple[str, str, str]] = Counter()
    for state, policy, missing, n in conn.execute(
        select(ws.c.state, ws.c.policy, ws.c.unreported, func.count())
        .where(ws.c.closed.is_(False))
        .group_by(ws.c.state, ws.c.policy, ws.c.unreported)
    ):
        open_waits[(state, policy)] += n
        if missing:
            unreported[(state, policy, missing)] = n
    closed: Counter[tuple[str, str]] = Counter()
    transitions: Counter[tuple[str, str]] = Counter()
    for (frm, to, policy), n in count_moves(conn).items():
        transitions[(frm or "none", to)] += n
        if to in CLOSED_STATES:
            closed[(to, policy)] += n
    pruned = pruned_totals(conn)
    for (counter, key), n in pruned.items():
        if counter == "transitions":
            frm, to, policy = key.split("\x1f")
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
    ingested, rejected = ingest_totals(conn)
    findings = Counter(finding_totals(conn))
    return Totals(
        open_waits,
        unreported,
        closed,
        transitions,
        decisions,
        resumes,
        ingested,
        rejected,
        findings,
        {
            k: n
            for k, n in pruned.items()
            if k[0] in ("decision", "decision_ms", "resume", "resume_ms")
        },
    )


def pruned_totals(c: Connection, *counters: str) -> dict[tuple[str, str], int]:
    """The counts of pruned rows (store.retention), by (counter, key): of `counters` only."""
    pt = table_of(PrunedTotal)
    query = select(pt.c.counter, pt.c.key, pt.c.value)
    if counters:
        query = query.where(pt.c.counter.in_(counters))
    return {(str(k), str(key)): int(v) for k, key, v in c.execute(query)}


def ingest_totals(conn: Connection) -> tuple[Counter[str], Counter[str]]:
    """Lines by kind and rejects by reason, ever (pruned ones too), from the store's totals:
    a fixed set of rows, not the line_count and reject rows of every unit."""
    ingested: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    for (counter, key), n in running_totals(conn, "lines", "rejects").items():
        (ingested if counter == "lines" else rejected)[key] += n
    return ingested, rejected


def finding_totals(conn: Connection) -> dict[str, int]:
    return {rule: n for (_, rule), n in running_totals(conn, "findings").items()}
