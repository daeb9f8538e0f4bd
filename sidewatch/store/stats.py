"""What the store holds, for `sidewatch db stats` and reports: each table's rows and oldest
row, the size on disk, what retention pruned (kept as counts) and the evidence naming no
wait it keeps; and the newest evidence stored (app.prune's bound on a clock ahead)."""

# ruff: noqa: S608 - every statement here is built of our own table and column names.
from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Engine

from sidewatch.store.aged import EVIDENCE_TABLES, NO_WAIT, SIGNAL_NO_WAIT
from sidewatch.store.db import classified
from sidewatch.store.pruning import FINDINGS, LINES, PRUNED_BEFORE, REJECTS, TRANSITIONS, UNKNOWN

# The newest evidence, by the producers' clocks: the latest rows of each table by id (ids
# follow arrival), and the spans' and services' latest beats (a span grows in place). Each
# an index range of a few rows, whatever the store's size. Findings are the auditor's (its
# clock), units' received_at this host's: neither is here.
_RECENT = 100
_NEWEST = " UNION ALL ".join(
    [
        *(
            f"SELECT max(at) AS x FROM (SELECT at FROM {t} ORDER BY id DESC LIMIT {_RECENT}) "
            f"AS r{k}"
            for k, t in enumerate(
                (
                    "interrupt",
                    "tool_call",
                    "run_fact",
                    "answer",
                    "legacy_resume",
                    "tool_result",
                    "signal",
                    "subagent",
                    "service_binding",
                    "service_heartbeat_change",
                )
            )
        ),
        f"SELECT max(last_at) AS x FROM (SELECT last_at FROM heartbeat ORDER BY id DESC "
        f"LIMIT {_RECENT}) AS hb",
        "SELECT max(at) AS x FROM heartbeat",
        "SELECT max(last_at) AS x FROM service_heartbeat",
    ]
)


def newest_evidence(engine: Engine) -> int | None:
    """The newest evidence stored, by the producers' clocks (ms; None: none)."""
    with engine.connect() as c:
        newest = c.exec_driver_sql(f"SELECT max(x) FROM ({_NEWEST}) AS n").scalar()
    return None if newest is None else int(newest)


# The column that dates a table's rows (ms since the epoch); tables not named have none.
_DATED = {
    "unit": "received_at",
    "interrupt": "at",
    "tool_call": "at",
    "run_fact": "at",
    "answer": "at",
    "legacy_resume": "at",
    "tool_result": "at",
    "signal": "at",
    "heartbeat": "at",
    "service_heartbeat": "first_at",
    "service_heartbeat_change": "at",
    "service_binding": "at",
    "finding": "at",
    "subagent": "at",
    "run_trace": "at",
    "wait_state": "requested_at",
    "transition": "at",  # a recording's last transition's (0020): its earlier ones' are not
}


@dataclass(frozen=True, slots=True)
class TableStats:
    name: str
    rows: int
    oldest: int | None  # ms since the epoch; None: no row, or no column dates its rows


@dataclass(frozen=True, slots=True)
class StoreStats:
    tables: tuple[TableStats, ...]
    size_bytes: int  # SQLite: the file and its WAL; PostgreSQL: the schema's tables and indexes
    free_bytes: int | None  # SQLite: pages free inside the file; None on PostgreSQL
    auto_vacuum: str | None  # SQLite: none, full or incremental
    pruned: dict[str, int]  # lines, rejects, transitions, findings, unknown_evidence pruned


def store_stats(engine: Engine, tables: Sequence[str]) -> StoreStats:
    """Rows and the oldest row of each of `tables`, and the store's size on disk."""
    out = []
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        for name in tables:
            rows = int(c.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar() or 0)
            column = _DATED.get(name)
            oldest = (
                c.exec_driver_sql(f"SELECT min({column}) FROM {name}").scalar() if column else None
            )
            out.append(TableStats(name, rows, None if oldest is None else int(oldest)))
        pruned: Counter[str] = Counter()
        for counter, n in c.exec_driver_sql("SELECT counter, value FROM pruned_total"):
            pruned[str(counter)] += int(n)
        free: int | None = None
        mode: str | None = None
        if c.dialect.name == "sqlite":
            page = int(c.exec_driver_sql("PRAGMA page_size").scalar() or 0)
            size = page * int(c.exec_driver_sql("PRAGMA page_count").scalar() or 0)
            free = page * int(c.exec_driver_sql("PRAGMA freelist_count").scalar() or 0)
            av = int(c.exec_driver_sql("PRAGMA auto_vacuum").scalar() or 0)
            mode = ("none", "full", "incremental")[av]
            database = engine.url.database or ""
            for path in (f"{database}-wal",):
                with contextlib.suppress(OSError):
                    size += os.path.getsize(path)
        else:
            size = int(
                c.exec_driver_sql(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                ).scalar()
                or 0
            )
    shown = (LINES, REJECTS, TRANSITIONS, FINDINGS, UNKNOWN)
    return StoreStats(tuple(out), size, free, mode, {k: pruned[k] for k in shown if pruned[k]})


@dataclass(frozen=True, slots=True)
class RetentionState:
    """For reports: the cutoff pruned to (None: nothing pruned yet), the pruned rows' counts
    (lines, rejects, transitions, findings) and evidence for unknown waits by table, pruned
    and kept (naming no wait seen yet)."""

    pruned_before: int | None
    pruned: dict[str, int]
    unknown_pruned: dict[str, int]
    unknown_kept: dict[str, int]


def retention_state(engine: Engine) -> RetentionState:
    with classified("store unavailable", "the store refused a query"), engine.connect() as c:
        pruned: Counter[str] = Counter()
        unknown: dict[str, int] = {}
        before: int | None = None
        for counter, key, n in c.exec_driver_sql("SELECT counter, key, value FROM pruned_total"):
            if counter == PRUNED_BEFORE:
                before = int(n)
            elif counter == UNKNOWN:
                unknown[str(key)] = int(n)
            elif counter in (LINES, REJECTS, TRANSITIONS, FINDINGS):
                pruned[str(counter)] += int(n)
        kept = {}
        for table in EVIDENCE_TABLES:
            if table == "finding":
                continue  # a finding of a thread is the thread's, not evidence of a wait
            no_wait = SIGNAL_NO_WAIT if table == "signal" else NO_WAIT
            n = int(
                c.exec_driver_sql(f"SELECT count(*) FROM {table} t WHERE {no_wait}").scalar() or 0
            )
            if n:
                kept[table] = n
    return RetentionState(before, dict(pruned), unknown, kept)
