"""The scheduled auditor at scale, each figure beside its floor measured in the same run:

- a full audit of N open waits, every thread new (a first audit of waits never evaluated),
  beside the floor the store alone costs for it: reading the facts it reads (a plain DB-API
  `SELECT` of exactly those rows: sqlite3, or psycopg on PostgreSQL) and writing the states
  and transitions it wrote (read back from it, then written with plain `executemany` into a
  fresh store of the same schema and pragmas, one transaction a batch of threads as the
  audit commits them; on PostgreSQL, with COPY), and the audit's peak resident memory (the
  child process's ru_maxrss, read before the floors run in it);
- a tick with nothing due beside one `SELECT 1` round trip;
- a `/metrics` render beside rendering the process collector alone.

    .venv/bin/python bench/audit.py [--waits 200000 1000000] [--pg] [--profile]

With `--pg`, each full audit is also run on PostgreSQL (a throw-away database on the running
server) beside its own floors. With `--profile`, the audit runs under cProfile and the
functions of most own time are printed (the audit's figures are then cProfile's, not its
own; its floors are not profiled).

Targets (issue 33): a full audit at most 2.5 times its read + write floor, at 200,000 and
1,000,000 waits, on SQLite and PostgreSQL, under 1 GiB; a tick with nothing due under 50 ms;
a scrape under 50 ms.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from pgdb import pg_database
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from sqlalchemy import make_url

from sidewatch.app.audit import BATCH, Auditor
from sidewatch.config import Config
from sidewatch.core.facts import (
    HeartbeatFact,
    InterruptFact,
    RunFact,
    RunMark,
    SignalFact,
    SignalKind,
)
from sidewatch.exporters.prometheus import SnapshotCollector
from sidewatch.exporters.snapshot import IngestCounters
from sidewatch.store import load
from sidewatch.store.auditstate import STATE_COLS
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.transitions import TRANSITION_ROW_COLS

NOW = 1_785_083_400_000
DIGEST = "sha256:" + "ab" * 32
TARGET_RATIO, TARGET_MIB = 2.5, 1024


def populate(url: str, n: int) -> None:
    """N open waits, one per thread: an interrupt, its run's end, a delivery, a heartbeat."""
    engine = open_store(url)
    store = Store(engine)
    per_unit = 50_000
    for base in range(0, n, per_unit):
        with store.unit(f"generated-{base}", NOW) as w:
            assert w is not None  # no key: every unit is new
            facts: list[object] = []
            for k in range(base, min(n, base + per_unit)):
                t, r, at = f"thread-{k:07d}", f"run-{k:07d}", NOW - 60_000 - (k % 3_600) * 1000
                seq = w.seq_base + 4 * (k - base)
                facts += [
                    RunFact(run_id=r, thread_id=t, mark=RunMark.INTERRUPTED, at=at, seq=seq),
                    InterruptFact(
                        thread_id=t,
                        run_id=r,
                        interrupt_id="approve",
                        at=at,
                        seq=seq,
                        reason="tool_call",
                        tool_call_id=f"call-{k}",
                        expires_at=NOW + 86_400_000,
                        digest=DIGEST,
                        handle=True,
                        request_id=None,
                        action="deploy_service",
                    ),
                    SignalFact(
                        kind=SignalKind.ROUTE,
                        at=at + 1000,
                        seq=seq + 1,
                        request_id=None,
                        thread_id=t,
                        interrupt_id="approve",
                        approver_ref="role:release-owner",
                        delivered=True,
                        key=f"route-{k}",
                    ),
                    HeartbeatFact(
                        thread_id=t,
                        at=NOW - 30_000,
                        seq=seq + 2,
                        run_id=None,
                        handle=True,
                        key=f"beat-{k}",
                    ),
                ]
            w.write(facts, [], {}, 0, 0)  # type: ignore[arg-type]
    engine.dispose()


def measure(url: str, profile: bool) -> dict[str, Any]:
    """Runs in a fresh process, so that its peak memory is the audit's own."""
    engine = open_store(url)
    auditor = Auditor(Store(engine), Config().policies)
    prof = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    report = auditor.tick(NOW)
    if prof is not None:
        prof.disable()
    full, full_cpu = time.perf_counter() - start, time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the floors run
    start = time.perf_counter()
    idle = auditor.tick(NOW + 1000)
    quiet = time.perf_counter() - start
    start = time.perf_counter()
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1").fetchall()
    ping = time.perf_counter() - start
    registry = CollectorRegistry()
    registry.register(SnapshotCollector(lambda: auditor.snapshot, IngestCounters()))
    ProcessCollector(registry=registry)
    bare = CollectorRegistry()
    ProcessCollector(registry=bare)
    scrape = _best(lambda: generate_latest(registry))
    scrape_floor = _best(lambda: generate_latest(bare))
    engine.dispose()
    cpu = time.process_time()
    read, read_rows = _read_floor(url)
    read_cpu = time.process_time() - cpu
    write, write_cpu, states, moves = _write_floor(url)
    out: dict[str, Any] = {
        "waits": report.waits,
        "full": full,
        "full_cpu": full_cpu,  # this process's CPU: on a shared machine, wall counts the others
        "read_floor": read,
        "read_floor_cpu": read_cpu,  # this process's: SQLite's work, not PostgreSQL's
        "read_rows": read_rows,
        "write_floor": write,
        "write_floor_cpu": write_cpu,
        "states": states,
        "moves": moves,
        "rss_mib": rss,
        "quiet": quiet,
        "quiet_threads": idle.threads,
        "ping": ping,
        "scrape": scrape,
        "scrape_floor": scrape_floor,
    }
    if prof is not None:
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
        out["profile"] = text.getvalue()
    return out


# The fact readers of a full audit (store.load.load_threads): their tables and columns.
READERS = (
    load.INTERRUPT,
    load.RUN,
    load.CALL,
    load.ANSWER,
    load.RESULT,
    load.SIGNAL,
    load.LEGACY,
    load.FINDING,
    load.HEARTBEAT,
    load.SUBAGENT,
)


@contextmanager
def _plain(url: str) -> Iterator[Any]:
    """A plain DB-API connection (sqlite3 with the store's pragmas, or psycopg) to `url`,
    committing only when told (sqlite3: no implicit transactions)."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        conn: Any = sqlite3.connect(u.database or "", isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "foreign_keys=ON"):
            conn.execute(f"PRAGMA {pragma}")
    else:
        conn = psycopg.connect(
            host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
        )
    try:
        yield conn
    finally:
        conn.close()


def _read_floor(url: str) -> tuple[float, int]:
    """Reading the rows a full audit reads (every fact row of the tables it reads, the
    columns it reads) with the plain driver, each fetched at once: (seconds, rows)."""
    with _plain(url) as conn:
        rows = 0
        start = time.perf_counter()
        for r in READERS:
            rows += len(conn.execute(f"SELECT {r.columns} FROM {r.table}").fetchall())
        return time.perf_counter() - start, rows


def _write_floor(url: str) -> tuple[float, float, int, int]:
    """Writing the states and transition rows the audit wrote (read back from its store) into
    a fresh store of the same schema and pragmas with the plain driver: executemany of a
    plain INSERT on SQLite, COPY on PostgreSQL; one transaction per BATCH threads, as the
    audit commits. Returns (seconds, this process's CPU seconds, state rows, transition
    rows); only the writes are timed (the batches are cut before)."""
    cols, tcols = ", ".join(STATE_COLS), ", ".join(TRANSITION_ROW_COLS)
    with _plain(url) as conn:
        states = conn.execute(f"SELECT {cols} FROM wait_state ORDER BY thread_id").fetchall()
        moves = conn.execute(f"SELECT {tcols} FROM transition ORDER BY id").fetchall()
    by_thread: dict[str, list[Any]] = {}
    for s in states:
        by_thread.setdefault(s[STATE_COLS.index("thread_id")], [])
    for m in moves:
        by_thread.setdefault(m[TRANSITION_ROW_COLS.index("thread_id")], []).append(m)
    of_thread: dict[str, list[Any]] = {}
    for s in states:
        of_thread.setdefault(s[STATE_COLS.index("thread_id")], []).append(s)
    threads = list(by_thread)
    batches = [
        (
            [x for t in threads[b : b + BATCH] for x in of_thread.get(t, ())],
            [m for t in threads[b : b + BATCH] for m in by_thread[t]],
        )
        for b in range(0, len(threads), BATCH)
    ]
    del by_thread, of_thread
    with _fresh(url) as fresh, _plain(fresh) as conn:
        pg = not isinstance(conn, sqlite3.Connection)
        state_sql = _insert("wait_state", STATE_COLS)
        move_sql = _insert("transition", TRANSITION_ROW_COLS)
        start, cpu = time.perf_counter(), time.process_time()
        for part, its in batches:
            if pg:
                with conn.transaction():
                    _copy(conn, "wait_state", cols, part)
                    _copy(conn, "transition", tcols, its)
            else:
                conn.execute("BEGIN")
                conn.executemany(state_sql, part)
                conn.executemany(move_sql, its)
                conn.execute("COMMIT")
        spent = time.perf_counter() - start, time.process_time() - cpu
        return *spent, len(states), len(moves)


def _insert(table: str, cols: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"


def _copy(conn: Any, table: str, cols: str, rows: list[Any]) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


@contextmanager
def _fresh(url: str) -> Iterator[str]:
    """A new, empty store of the same kind as `url`, made by sidewatch (its schema)."""
    if make_url(url).get_backend_name() == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            fresh = f"sqlite:///{Path(tmp) / 'floor.db'}"
            open_store(fresh).dispose()
            yield fresh
    else:
        with pg_database() as fresh:
            open_store(fresh).dispose()
            yield fresh


def _best(fn: object, n: int = 20) -> float:
    best = float("inf")
    for _ in range(n):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waits", type=int, nargs="+", default=[200_000, 1_000_000])
    ap.add_argument("--pg", action="store_true", help="also on PostgreSQL, side by side")
    ap.add_argument("--profile", action="store_true", help="the audit under cProfile")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.profile)))
        return
    for n in args.waits:
        with tempfile.TemporaryDirectory() as tmp:
            made, m = _run(f"sqlite:///{Path(tmp) / 'audit.db'}", n, args.profile)
        load_avg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"{n:>9,} open waits (generated in {made:.0f}s; load average {load_avg})")
        _print_full("SQLite", n, m)
        print(
            f"  idle tick      : {m['quiet'] * 1000:8.1f} ms  floor (SELECT 1): "
            f"{m['ping'] * 1000:6.2f} ms   threads touched {m['quiet_threads']} "
            f"(target < 50 ms)"
        )
        print(
            f"  /metrics render: {m['scrape'] * 1000:8.2f} ms  floor (process metrics): "
            f"{m['scrape_floor'] * 1000:6.2f} ms (target < 50 ms)"
        )
        if args.pg:
            with pg_database() as url:
                pg_made, pg = _run(url, n, args.profile)
            _print_full(f"PostgreSQL (generated in {pg_made:.0f}s)", n, pg)
            print(
                f"  PostgreSQL idle tick {pg['quiet'] * 1000:6.1f} ms; its full audit beside "
                f"SQLite's: {pg['full'] / m['full']:4.2f}"
            )


def _print_full(store: str, n: int, m: dict[str, Any]) -> None:
    floor = m["read_floor"] + m["write_floor"]
    ratio = m["full"] / floor
    met = "met" if ratio <= TARGET_RATIO and m["rss_mib"] < TARGET_MIB else "NOT met"
    print(f"  full audit on {store}:")
    print(
        f"    sidewatch    : {m['full']:8.2f} s ({m['full'] / n * 1e6:5.1f} us a wait, CPU "
        f"{m['full_cpu']:6.2f} s), peak RSS {m['rss_mib']:5.0f} MiB"
    )
    print(
        f"    floor        : {floor:8.2f} s = read {m['read_floor']:6.2f} s "
        f"({m['read_rows']:,} fact rows) + write {m['write_floor']:6.2f} s "
        f"({m['states']:,} states, {m['moves']:,} transition rows)"
    )
    print(
        f"    ratio        : {ratio:8.2f} x the floor (target <= {TARGET_RATIO} x, "
        f"< {TARGET_MIB} MiB: {met})"
    )
    if "read_floor_cpu" in m:  # this process's CPU: steadier than wall time on a shared machine
        cpu_floor = m["read_floor_cpu"] + m["write_floor_cpu"]
        print(
            f"    CPU          : sidewatch {m['full_cpu']:6.2f} s beside the floor's driver side "
            f"{cpu_floor:6.2f} s (read {m['read_floor_cpu']:5.2f} + write "
            f"{m['write_floor_cpu']:5.2f}): {m['full_cpu'] / max(cpu_floor, 1e-9):5.2f} x"
            + ("" if store.startswith("SQLite") else " (the server's own work not counted)")
        )
    if "profile" in m:
        print(m["profile"])


def _run(url: str, n: int, profile: bool = False) -> tuple[float, dict[str, Any]]:
    """Populate `url` with n open waits, then measure in a fresh process."""
    start = time.perf_counter()
    populate(url, n)
    made = time.perf_counter() - start
    argv = [sys.executable, __file__, "--measure", url, *(["--profile"] if profile else [])]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return made, json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
