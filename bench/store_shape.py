"""The write floor of a full audit under shapes of the auditor's tables, side by side in one
run: N waits' `wait_state` rows and their ~2.7 transition rows (the shape bench/audit.py's
audit writes: one recording a wait, its thresholds and evidence JSON on its last transition
only), written into each variant of the tables with the store's plain bulk insert (SQLite:
executemany; PostgreSQL: COPY), in the audit's batches (BATCH waits, one transaction each,
SQLite at synchronous=FULL as the store opens it). Each variant is a new database (SQLite) or
schema (PostgreSQL); the first row of each part is the shape of today's store.

    .venv/bin/python bench/store_shape.py [--waits 100000] [--pg] [--closed 0.0]

`--closed` makes that share of the waits closed (no `due_at`): the store after a while,
where the partial indexes leave those rows out.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pgdb import pg_database
from sqlalchemy import Engine, create_engine

from sidewatch.app.audit import BATCH
from sidewatch.store.db import open_store
from sidewatch.store.sql import bulk_insert

NOW = 1_785_083_400_000
THRESHOLDS = '{"resumeGraceSeconds":300,"heartbeatFreshnessSeconds":600,"routeGraceSeconds":120}'
EVIDENCE = (
    '{"requestedAt":"%s","expiresAt":"2026-07-27T16:30:00Z","actionDigest":"sha256:'
    + "ab" * 32
    + '","digestChanged":false,"route":"delivered","approverRef":"role:release-owner",'
    '"resumeHandle":true,"lastHeartbeatAt":"2026-07-26T16:29:30Z","decision":null,'
    '"decidedAt":null,"receiptAt":null,"continuationFailed":false,"continuationFailure":null,'
    '"actionEdited":false,"subagent":null}'
)
STATE_COLS = (
    "thread_id, request_id, policy, state, closed, since, due_at, requested_at, decided_at, "
    "receipt_at, evaluated_at, unreported"
)
_STATE_TABLE = (
    "CREATE TABLE wait_state (thread_id VARCHAR(256) NOT NULL, request_id VARCHAR(640) NOT NULL, "
    "policy VARCHAR(128) NOT NULL, state VARCHAR(32) NOT NULL, closed BOOLEAN NOT NULL, "
    "since BIGINT NOT NULL, due_at BIGINT, requested_at BIGINT NOT NULL, decided_at BIGINT, "
    "receipt_at BIGINT, evaluated_at BIGINT NOT NULL, unreported VARCHAR(32) DEFAULT '' NOT NULL, "
    "PRIMARY KEY (thread_id, request_id)){rowid}"
)
_IX_REQUEST = "CREATE INDEX ix_wait_state_request_id ON wait_state (request_id)"
_IX_DUE = "CREATE INDEX ix_wait_state_due ON wait_state (due_at)"
_IX_OPEN = "CREATE INDEX ix_wait_state_open_since ON wait_state (closed, state, since)"
_IX_DUE_PART = "CREATE INDEX ix_wait_state_due ON wait_state (due_at) WHERE due_at IS NOT NULL"
_IX_OPEN_PART = (
    "CREATE INDEX ix_wait_state_open_since ON wait_state (state, since) WHERE NOT closed"
)

# wait_state variants ("(cost)": today's less one index). "!" marks a WITHOUT ROWID table,
# SQLite's only (PostgreSQL has no clustered table: there it is a plain one).
STATES: list[tuple[str, list[str], bool]] = [  # (name, statements, SQLite only)
    (
        "today: rowid + key + request_id, due, open_since",
        [_STATE_TABLE, _IX_REQUEST, _IX_DUE, _IX_OPEN],
        False,
    ),
    (
        "WITHOUT ROWID + the same 3 indexes",
        [_STATE_TABLE + "!", _IX_REQUEST, _IX_DUE, _IX_OPEN],
        True,
    ),
    (
        "partial due/open_since (rowid)",
        [_STATE_TABLE, _IX_REQUEST, _IX_DUE_PART, _IX_OPEN_PART],
        False,
    ),
    (
        "WITHOUT ROWID + partial due/open_since",
        [_STATE_TABLE + "!", _IX_REQUEST, _IX_DUE_PART, _IX_OPEN_PART],
        True,
    ),
    ("(cost) without ix request_id", [_STATE_TABLE, _IX_DUE, _IX_OPEN], False),
    ("(cost) without ix due", [_STATE_TABLE, _IX_REQUEST, _IX_OPEN], False),
    ("(cost) without ix open_since", [_STATE_TABLE, _IX_REQUEST, _IX_DUE], False),
    ("(floor) the key alone (its B-tree, no index)", [_STATE_TABLE + "!"], False),
]

TRANSITION_COLS = (
    "request_id, thread_id, from_state, to_state, at, recorded_at, policy, thresholds, evidence"
)
_TRANSITION = (
    "CREATE TABLE transition (id {id}, request_id VARCHAR(640) NOT NULL, "
    "from_state VARCHAR(32), to_state VARCHAR(32) NOT NULL, at BIGINT NOT NULL, "
    "recorded_at BIGINT NOT NULL, policy VARCHAR(128) NOT NULL, thresholds {thresholds}, "
    "evidence VARCHAR(4096), thread_id VARCHAR(256) NOT NULL, PRIMARY KEY (id))"
)
_IX_WAIT = "CREATE INDEX ix_transition_wait ON transition (request_id, thread_id)"
# One row per recording: its last move, the earlier ones packed as JSON [[from, to, at], ...]
# (NULL when it made one).
_RECORDING = _TRANSITION.replace("PRIMARY KEY", "earlier VARCHAR(4096), PRIMARY KEY")
TRANSITIONS: list[tuple[str, list[str], str]] = [  # (name, statements, row shape)
    ("today: a row a move, thresholds text on the last", [_TRANSITION, _IX_WAIT], "text"),
    ("thresholds by reference (an int per policy version)", [_TRANSITION, _IX_WAIT], "ref"),
    ("(cost) without ix_transition_wait", [_TRANSITION], "text"),
    ("one row a recording: its last move, the earlier as JSON", [_RECORDING, _IX_WAIT], "packed"),
]


def states(n: int, closed: float) -> list[tuple[Any, ...]]:
    shut = int(n * closed)
    rows = []
    for k in range(n):
        t = f"thread-{k:07d}"
        since = NOW - 60_000 - (k % 3_600) * 1000
        done = k * 7919 % n < shut  # spread over the batches
        rows.append(
            (
                t,
                f"{t}/approve",
                "default",
                "RESUMED" if done else "WAITING",
                done,
                since,
                None if done else since + 630_001,
                since,
                since + 5000 if done else None,
                since + 6000 if done else None,
                NOW,
                "",
            )
        )
    return rows


def transitions(rows: Sequence[tuple[Any, ...]], shape: str) -> list[list[tuple[Any, ...]]]:
    """Each wait's transition rows (a list a wait), as the audit records them."""
    out = []
    thresholds: Any = 1 if shape == "ref" else THRESHOLDS
    for k, s in enumerate(rows):
        t, rid, since = s[0], s[1], s[5]
        evidence = EVIDENCE % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since // 1000))
        moves = (
            [(None, "WAITING", since)]
            if k % 6 == 0
            else [
                (None, "WAITING", since),
                ("WAITING", "ORPHANED", since),
                ("ORPHANED", "WAITING", since),
            ]
        )
        a, b, c = moves[-1]
        if shape == "packed":
            early = None
            if len(moves) > 1:
                early = "[" + ",".join(f'[{_j(x)},"{y}",{z}]' for x, y, z in moves[:-1]) + "]"
            out.append([(rid, t, a, b, c, NOW, "default", thresholds, evidence, early)])
            continue
        wait = [(rid, t, x, y, z, NOW, "default", None, None) for x, y, z in moves[:-1]]
        wait.append((rid, t, a, b, c, NOW, "default", thresholds, evidence))
        out.append(wait)
    return out


def _j(x: str | None) -> str:
    return "null" if x is None else f'"{x}"'


def _copy(conn: Any, table: str, cols: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    sql = f"COPY {table} ({', '.join(cols)}) FROM STDIN"
    with conn.connection.driver_connection.cursor() as cur, cur.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def write(engine: Engine, table: str, cols: str, batches: list[list[tuple[Any, ...]]]) -> float:
    insert: Callable[..., None] = _copy if engine.dialect.name == "postgresql" else bulk_insert
    names = [c.strip() for c in cols.split(",")]
    start = time.perf_counter()
    for rows in batches:
        with engine.begin() as conn:
            insert(conn, table, names, rows)
    return time.perf_counter() - start


def _ddl(engine: Engine, statements: list[str]) -> None:
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for statement in statements:
            sql = statement.removesuffix("!").format(
                rowid=" WITHOUT ROWID" if statement.endswith("!") and not pg else "",
                id="SERIAL" if pg else "INTEGER",  # the store's: Integer, its key
                thresholds="VARCHAR(512)",
            )
            conn.exec_driver_sql(sql)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _case(
    make: Callable[[str], Engine], name: str, ddl: list[str], table: str, cols: str, batches: Any
) -> float:
    engine = make(name)
    _ddl(engine, ddl)
    spent = write(engine, table, cols, batches)
    engine.dispose()
    return spent


def run(
    kind: str, make: Callable[[str], Engine], n: int, closed: float, repeat: int, parts: str
) -> None:
    """Every variant once a round, `repeat` rounds, the best of each: the load of a shared
    machine drifts, and a round gives it to every variant alike."""
    rows = states(n, closed)
    state_batches = [rows[k : k + BATCH] for k in range(0, n, BATCH)]
    print(
        f"{kind}: {n:,} waits, {closed:.0%} closed, batches of {BATCH}, best of {repeat} "
        f"rounds (load {_load()})"
    )
    cases: list[tuple[str, str, list[str], str, str, Any, int]] = []
    if "states" in parts:
        for name, ddl, sqlite_only in STATES:
            if not (sqlite_only and kind != "SQLite"):
                cases.append(("wait_state", name, ddl, "wait_state", STATE_COLS, state_batches, n))
    if "transitions" in parts:
        for name, ddl, shape in TRANSITIONS:
            waits = transitions(rows, shape)
            batches = [[r for w in waits[j : j + BATCH] for r in w] for j in range(0, n, BATCH)]
            cols = TRANSITION_COLS + (", earlier" if shape == "packed" else "")
            stmts = [
                s.replace("thresholds {thresholds}", "thresholds INTEGER") if shape == "ref" else s
                for s in ddl
            ]
            count = sum(len(b) for b in batches)
            cases.append(("transition", name, stmts, "transition", cols, batches, count))
    best = [float("inf")] * len(cases)
    for r in range(repeat):
        for k, (_, _, ddl, table, cols, batches, _) in enumerate(cases):
            best[k] = min(best[k], _case(make, f"v{k}_{r}", ddl, table, cols, batches))
    base: dict[str, float] = {}
    for (part, name, _, _, _, _, count), spent in zip(cases, best, strict=True):
        base.setdefault(part, spent)
        print(
            f"  {part:<11} {name:<56} {spent / n * 1e6:7.2f} us a wait ({count / n:.2f} rows, "
            f"{spent / count * 1e6:5.2f} us a row) {spent:7.2f} s {spent / base[part]:5.2f}x"
        )
    spent = _case(
        make, "c", ["CREATE TABLE c (x INTEGER)!"], "c", "x", [[(1,)]] * len(state_batches)
    )
    print(f"  (floor of floors) {len(state_batches)} commits of one row: {spent:6.2f} s")
    print(f"  (load {_load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waits", type=int, default=100_000)
    ap.add_argument("--pg", action="store_true", help="also on PostgreSQL")
    ap.add_argument("--closed", type=float, default=0.0)
    ap.add_argument("--repeat", type=int, default=2, help="rounds of every variant (best taken)")
    ap.add_argument("--part", choices=("both", "states", "transitions"), default="both")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(
            "SQLite",
            lambda name: open_store(f"sqlite:///{Path(tmp) / name}.db", migrate=False),
            args.waits,
            args.closed,
            args.repeat,
            "states transitions" if args.part == "both" else args.part,
        )
    if args.pg:
        with pg_database() as url:
            admin = create_engine(url)

            def schema(name: str) -> Engine:
                with admin.begin() as conn:
                    conn.exec_driver_sql(f"CREATE SCHEMA {name}")
                return open_store(f"{url}?options=-csearch_path%3D{name}", migrate=False)

            run(
                "PostgreSQL",
                schema,
                args.waits,
                args.closed,
                args.repeat,
                "states transitions" if args.part == "both" else args.part,
            )
            admin.dispose()


if __name__ == "__main__":
    main()
