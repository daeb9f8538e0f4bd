"""Heartbeat compaction (issue 19): a simulated day of beats every 30 s, one unit a tick with a
beat of every thread, written into the compacted spans (store.heartbeats, the default gap of
60 s) and, in the same run, by the previous path (a row per beat, INSERT … ON CONFLICT DO
NOTHING on its natural key) into a table of the previous shape: rows per thread, file size,
and the ingest seconds of the beats (wall and CPU) of each. Time is passed in, no sleeping.

    .venv/bin/python bench/heartbeats.py [--threads 200] [--hours 24] [--db URL]

Without --db both stores are new SQLite files; with a PostgreSQL URL both write there (the
previous shape as table `heartbeat_v0`, dropped at the end).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, text

from sidewatch.core.facts import HeartbeatFact
from sidewatch.store.db import open_store
from sidewatch.store.heartbeats import write_heartbeats
from sidewatch.store.sql import driver_sql

SEC = 1000
T0 = 1_785_024_000_000  # 2026-07-26T00:00:00Z
GAP = 60 * SEC  # store.heartbeatCompaction's default
_V0 = (
    "CREATE TABLE heartbeat_v0 (id INTEGER PRIMARY KEY, key VARCHAR(64) NOT NULL UNIQUE, "
    "thread_id VARCHAR(256) NOT NULL, run_id VARCHAR(256), handle BOOLEAN, "
    "at BIGINT NOT NULL, seq BIGINT NOT NULL)"
)
_V0_INDEX = "CREATE INDEX ix_heartbeat_v0_thread_id ON heartbeat_v0 (thread_id)"
_V0_INSERT = (
    "INSERT INTO heartbeat_v0 (key, thread_id, run_id, handle, at, seq) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def ticks(threads: int, hours: int) -> list[list[HeartbeatFact]]:
    """One unit every 30 s: a beat (with its handle) of every thread."""
    out = []
    for k in range(hours * 120):
        at = T0 + k * 30 * SEC
        out.append(
            [
                HeartbeatFact(
                    thread_id=f"thread-{n:05d}",
                    at=at + n % 1000,
                    seq=(k + 1) << 32 | n,
                    handle=True,
                    key=f"hb-{k}-{n}",
                )
                for n in range(threads)
            ]
        )
    return out


def spans(engine: Engine, units: list[list[HeartbeatFact]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for unit in units:
        with engine.begin() as c:
            write_heartbeats(c, unit, GAP)
    return time.perf_counter() - wall, time.process_time() - cpu


def rows(engine: Engine, units: list[list[HeartbeatFact]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for unit in units:
        with engine.begin() as c:
            c.exec_driver_sql(
                driver_sql(c, _V0_INSERT),
                [(b.key, b.thread_id, b.run_id, b.handle, b.at, b.seq) for b in unit],
            )
    return time.perf_counter() - wall, time.process_time() - cpu


def count(engine: Engine, table: str) -> int:
    with engine.connect() as c:
        return int(c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=200)
    p.add_argument("--hours", type=int, default=24)
    p.add_argument("--db", help="a PostgreSQL URL (default: new SQLite files)")
    args = p.parse_args()
    units = ticks(args.threads, args.hours)
    beats = sum(len(u) for u in units)
    with tempfile.TemporaryDirectory(prefix="hbeat-bench-", dir="/tmp") as tmp:
        if args.db:
            new = old = open_store(args.db)
            with old.begin() as c:
                c.exec_driver_sql("DROP TABLE IF EXISTS heartbeat_v0")
                c.exec_driver_sql("DELETE FROM heartbeat")
        else:
            new = open_store(f"sqlite:///{tmp}/spans.db")
            old = open_store(f"sqlite:///{tmp}/rows.db")
        with old.begin() as c:
            c.exec_driver_sql(
                _V0.replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
                if old.dialect.name == "postgresql"
                else _V0
            )
            c.exec_driver_sql(_V0_INDEX)
        print(f"{args.threads} threads, {args.hours} h of beats every 30 s: {beats:,} beats")
        print(f"load average before: {os.getloadavg()}")
        old_wall, old_cpu = rows(old, units)
        new_wall, new_cpu = spans(new, units)
        old_rows, new_rows = count(old, "heartbeat_v0"), count(new, "heartbeat")
        print(f"load average after: {os.getloadavg()}")
        print(
            f"rows per thread: {old_rows / args.threads:,.0f} a row per beat (previous), "
            f"{new_rows / args.threads:,.1f} spans"
        )
        print(
            f"ingest of the beats: previous {old_wall:.1f} s wall, {old_cpu:.1f} s CPU "
            f"({beats / old_wall:,.0f} beats/s); spans {new_wall:.1f} s wall, "
            f"{new_cpu:.1f} s CPU ({beats / new_wall:,.0f} beats/s): "
            f"{new_wall / old_wall:.2f}x the previous path's time"
        )
        if not args.db:
            for name in ("rows", "spans"):
                mb = Path(f"{tmp}/{name}.db").stat().st_size / 1e6
                print(f"SQLite file ({name}): {mb:.1f} MB")
        else:
            with old.begin() as c:
                c.exec_driver_sql("DROP TABLE heartbeat_v0")
        new.dispose()
        old.dispose()


if __name__ == "__main__":
    main()
