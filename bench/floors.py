"""The floors of ingest, the parts of its work no change of sidewatch's own code makes shorter,
measured in the same run as sidewatch (issue 33):

- parse: `orjson.loads` of every non-blank line of the same bytes;
- write: the database alone writing exactly the rows sidewatch stored for that input (read
  back from sidewatch's store), into a new store of the same schema and settings, in the same
  transactions (a transaction per unit sidewatch committed): plain `sqlite3` with the store's
  pragmas, or `psycopg` COPY on PostgreSQL.

A ratio is sidewatch's rate over the rate of parse + write: 1.0 would be sidewatch costing
nothing beside them.
"""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from sidewatch.store.repo import SEQ_SHIFT
from sidewatch.store.sqlite_schema import SCHEMA, statements

# Written when a store is created, not by ingest.
_NOT_INGEST = ("alembic_version", "meta", "lease")
# The store's own per-connection settings (store.db._sqlite_pragmas).
PRAGMAS = (
    "auto_vacuum=INCREMENTAL",
    "journal_mode=WAL",
    "synchronous=FULL",
    "busy_timeout=5000",
    "foreign_keys=ON",
)

Rows = dict[str, list[tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class Written:
    """A write floor: wall and CPU seconds of writing `rows` rows in `transactions`."""

    seconds: float
    cpu: float
    rows: int
    transactions: int


def parse_seconds(body: bytes) -> float:
    """Wall seconds of splitting `body` into lines and `orjson.loads` of every non-blank one."""
    start = time.perf_counter()
    loads = orjson.loads
    for line in body.split(b"\n"):
        if line.strip():
            loads(line)
    return time.perf_counter() - start


def by_unit(tables: list[str], columns: dict[str, list[str]], rows: Rows) -> list[Rows]:
    """Every table's rows grouped by the unit (transaction) that wrote them: a fact by its
    `seq`, a unit's counts and rejects by `unit_id`, a unit by its `id`; rows of no unit (the
    dirty marks, the running totals, upserted on every unit) go with the last one."""
    units: dict[int, Rows] = defaultdict(lambda: defaultdict(list))
    loose: Rows = defaultdict(list)
    for table in tables:
        cols = columns[table]
        at = (
            ("id", 0)
            if table == "unit"
            else ("unit_id", 0)
            if "unit_id" in cols
            else ("seq", SEQ_SHIFT)
            if "seq" in cols
            else None
        )
        if at is None:
            loose[table] = rows[table]
            continue
        i, shift = cols.index(at[0]), at[1]
        for row in rows[table]:
            units[row[i] >> shift][table].append(row)
    groups = [units[k] for k in sorted(units)] or [defaultdict(list)]
    for table, its in loose.items():
        groups[-1][table].extend(its)
    return groups


def _sqlite_rows(stored: Path) -> tuple[list[str], dict[str, list[str]], Rows]:
    with sqlite3.connect(stored) as old:
        tables = [
            str(r[0])
            for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if r[0] not in _NOT_INGEST
        ]
        tables.sort(key=lambda t: t != "unit")  # the units first: the rest refer to them
        columns = {t: [r[1] for r in old.execute(f'PRAGMA table_info("{t}")')] for t in tables}
        rows = {t: old.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    return tables, columns, rows


def sqlite_write(stored: Path, new: Path) -> Written:
    """Plain `sqlite3` writing every row ingest stored in `stored` into a new store `new`: the
    same schema and pragmas, a transaction (one executemany a table) per unit stored."""
    tables, columns, rows = _sqlite_rows(stored)
    groups = by_unit(tables, columns, rows)
    _, schema = statements(SCHEMA.read_text(encoding="utf-8"))
    conn = sqlite3.connect(new, isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("BEGIN")
    for statement in schema:
        conn.execute(statement)
    conn.execute("COMMIT")
    sql = {t: f'INSERT INTO "{t}" VALUES ({", ".join("?" for _ in columns[t])})' for t in tables}
    start, cpu = time.perf_counter(), time.process_time()
    for group in groups:
        conn.execute("BEGIN")
        for table in tables:
            if its := group.get(table):
                conn.executemany(sql[table], its)
        conn.execute("COMMIT")
    written = Written(
        time.perf_counter() - start,
        time.process_time() - cpu,
        sum(map(len, rows.values())),
        len(groups),
    )
    conn.close()
    return written


def pg_write(stored_url: str, new_url: str) -> Written:
    """`psycopg` COPY of every row ingest stored in the PostgreSQL store `stored_url` into the
    new, empty store `new_url` (created by sidewatch: the same schema), a transaction per
    unit stored."""
    import psycopg  # noqa: PLC0415 (PostgreSQL benches only)

    def dsn(url: str) -> str:
        return url.replace("postgresql+psycopg://", "postgresql://")

    with psycopg.connect(dsn(stored_url)) as old:
        tables = [
            str(r[0])
            for r in old.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
            if r[0] not in _NOT_INGEST
        ]
        tables.sort(key=lambda t: t != "unit")
        columns = {
            t: [
                str(r[0])
                for r in old.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = %s ORDER BY ordinal_position",
                    (t,),
                )
            ]
            for t in tables
        }
        rows = {t: old.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    groups = by_unit(tables, columns, rows)
    with psycopg.connect(dsn(new_url), autocommit=True) as conn:
        for table in tables:  # what creating the store wrote in them (none of ingest's rows)
            conn.execute(f'TRUNCATE "{table}" CASCADE')
        cols = {t: ", ".join(f'"{c}"' for c in columns[t]) for t in tables}
        start, cpu = time.perf_counter(), time.process_time()
        for group in groups:
            with conn.transaction():
                for table in tables:
                    if its := group.get(table):
                        with conn.cursor().copy(f'COPY "{table}" ({cols[table]}) FROM STDIN') as cp:
                            for row in its:
                                cp.write_row(row)
        return Written(
            time.perf_counter() - start,
            time.process_time() - cpu,
            sum(map(len, rows.values())),
            len(groups),
        )


def ratio_line(label: str, lines: int, ours: float, parse: float, write: Written) -> str:
    """One line of figures: sidewatch's seconds and rate beside its floor's, and the ratio."""
    floor = parse + write.seconds
    return (
        f"{label}: sidewatch {ours:6.2f} s {lines / ours:11,.0f} lines/s | floor: parse "
        f"{parse:.2f} s + write {write.seconds:.2f} s ({write.rows:,} rows, "
        f"{write.transactions} transactions) = {floor:.2f} s {lines / floor:11,.0f} lines/s | "
        f"ratio {floor / ours:.2f}"
    )
