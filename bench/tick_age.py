"""What a tick and a request cost as the store ages (issue 13: "cost must not grow with
history"): an idle tick, a tick after one new event, and `GET /v1/waits?limit=...` (every
state, as the API's default), on a young store and an old one, side by side in one run, with
their ratio and the `SELECT 1` floor measured in the same run.

    .venv/bin/python bench/tick_age.py [--young 1000] [--old 200000] [--pg] [--repeat 15]

Each store holds `--young` or `--old` closed waits, closed long ago (five days before the
ticks, within the 30-day retention: not pruned), each with an answer naming an interrupt its
thread never raised (a protocol finding of the auditor's) and a rejected line; they were
ingested in units of `--unit` waits (so line_count and reject grow with the store) and
audited. Both stores then hold the same live traffic: `--open` open waits asked an hour
before the ticks, and one long-lived thread whose new event (a heartbeat) the busy tick
evaluates. The figures are medians of `--repeat` runs.

Also printed, beside them: the statements a tick ran before (the finding, line_count and
reject counts), timed on the same stores, so the growth they had is seen in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.read import Read
from sidewatch.config import Config
from sidewatch.core.model import State
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

SEC, MIN, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000
T0 = 1_785_024_000_000  # 2026-07-26T00:00:00Z: the closed waits
NOW = T0 + 5 * DAY  # the ticks
LIVE = "t-live"
ALL_STATES = {s.value for s in State}
# What a tick counted before the store kept its totals (running_total).
OLD_COUNTS = (
    "SELECT rule, count(*) FROM finding GROUP BY rule",
    "SELECT kind, sum(lines) FROM line_count GROUP BY kind",
    "SELECT reason, count(*) FROM reject GROUP BY reason",
    # GET /v1/waits's choice of recorded waits (AuditState.select), every state, limit 100
    "SELECT request_id, thread_id FROM wait_state WHERE state IN ("
    + ", ".join(f"'{s.value}'" for s in State)
    + ") ORDER BY since, request_id LIMIT 100",
)


def custom(name: str, at: int, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": name, "value": value, "timestamp": at}


def asked(thread: str, at: int) -> list[dict[str, Any]]:
    """A run stops on an interrupt and is routed."""
    ask = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "tool_call"}]}
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r1", "timestamp": at - 10 * SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r1",
            "outcome": ask,
            "timestamp": at,
        },
        custom("sidewatch.route", at + SEC, threadId=thread, interruptId="i", delivered=True),
    ]


def closed(thread: str, at: int) -> list[dict[str, Any]]:
    """Asked, accepted and resumed a minute on; the answer also names an interrupt the thread
    never raised (a finding)."""
    answers = [
        {"interruptId": "i", "status": "resolved", "payload": "approve"},
        {"interruptId": "nope", "status": "resolved", "payload": "approve"},
    ]
    return [
        *asked(thread, at),
        {
            "threadId": thread,
            "runId": "r2",
            "messages": [],
            "timestamp": at + MIN,
            "resume": answers,
        },
        {"type": "RUN_STARTED", "threadId": thread, "runId": "r2", "timestamp": at + MIN + SEC},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": "r2",
            "timestamp": at + MIN + 2 * SEC,
        },
    ]


def ingest(store: Store, lines: list[dict[str, Any]], at: int, bad: int = 0) -> None:
    body = b"\n".join([*(orjson.dumps(x) for x in lines), *([b"{not json"] * bad)])
    Ingest(store, ref_protector(store.engine, Config()), Config()).body("bench", body, at)


def build(url: str, waits: int, unit: int, live: int) -> tuple[Store, Auditor, float]:
    """A store of `waits` closed waits and the live traffic, audited; and how long that took."""
    start = time.perf_counter()
    store = Store(open_store(url))
    auditor = Auditor(store, Config().policies)
    for k in range(0, waits, unit):
        lines = [x for n in range(k, min(k + unit, waits)) for x in closed(f"t-{n}", T0 + n)]
        ingest(store, lines, T0 + k + 3 * MIN, bad=1)
        if k % (50 * unit) == 0:
            auditor.tick(T0 + k + 4 * MIN)
    auditor.tick(T0 + waits + 5 * MIN)
    ingest(store, [x for n in range(live) for x in asked(f"t-open-{n}", NOW - HOUR)], NOW - HOUR)
    ingest(store, asked(LIVE, NOW - DAY), NOW - DAY)
    auditor.tick(NOW - HOUR + MIN)
    return store, auditor, time.perf_counter() - start


def median_ms(
    run: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def floor_ms(engine: Engine, repeat: int) -> float:
    def one() -> None:
        with engine.connect() as c:
            c.execute(text("SELECT 1")).scalar_one()

    return median_ms(one, repeat)


def measure(store: Store, auditor: Auditor, repeat: int, limit: int) -> dict[str, float]:
    clock = iter(range(NOW, NOW + 10_000 * SEC, SEC))  # a new tick time each run
    beat = iter(range(NOW, NOW + 10_000 * SEC, SEC))
    read = Read(store, auditor.policy_for)
    auditor.tick(next(clock))
    out = {
        "SELECT 1": floor_ms(store.engine, repeat),
        "idle tick": median_ms(lambda: auditor.tick(next(clock)), repeat),
        "tick, one new event": median_ms(
            lambda: auditor.tick(next(clock)),
            repeat,
            before=lambda: ingest(
                store, [custom("sidewatch.heartbeat", next(beat), threadId=LIVE)], NOW
            ),
        ),
        f"GET /v1/waits?limit={limit}": median_ms(
            lambda: read.waits(ALL_STATES, limit, NOW + 20_000 * SEC), repeat
        ),
    }
    with store.engine.connect() as c:
        for sql in OLD_COUNTS:
            out[f"(before) {sql.split(' FROM ')[1].split()[0]} read"] = median_ms(
                lambda sql=sql: c.execute(text(sql)).all(), repeat
            )
    return out


@contextlib.contextmanager
def urls(pg: bool) -> Iterator[tuple[str, str]]:
    if pg:
        from bench.pgdb import pg_database  # noqa: PLC0415

        with pg_database() as young, pg_database() as old:
            yield young, old
    else:
        with tempfile.TemporaryDirectory() as d:
            yield f"sqlite:///{d}/young.db", f"sqlite:///{d}/old.db"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--young", type=int, default=1_000, help="closed waits of the young store")
    ap.add_argument("--old", type=int, default=200_000, help="closed waits of the old store")
    ap.add_argument("--unit", type=int, default=100, help="closed waits per ingested unit")
    ap.add_argument("--open", type=int, default=50, help="open waits of the live traffic")
    ap.add_argument("--limit", type=int, default=100, help="GET /v1/waits?limit=")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--pg", action="store_true", help="on PostgreSQL (the running server)")
    args = ap.parse_args()
    with urls(args.pg) as (young_url, old_url):
        stores = {}
        for name, url, n in (("young", young_url, args.young), ("old", old_url, args.old)):
            store, auditor, took = build(url, n, args.unit, args.open)
            with store.engine.connect() as c:
                rows = {
                    t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                    for t in ("wait_state", "finding", "line_count", "reject", "transition")
                }
            print(f"{name}: {n} closed waits, built in {took:.1f} s; rows {rows}", flush=True)
            stores[name] = (store, auditor)
        figures = {name: measure(s, a, args.repeat, args.limit) for name, (s, a) in stores.items()}
    load = os.getloadavg()
    print(f"\n{'SQLite' if not args.pg else 'PostgreSQL'}, medians of {args.repeat} runs, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    print(f"{'':34} {'young':>10} {'old':>10} {'old/young':>10}")
    for key in figures["young"]:
        y, o = figures["young"][key], figures["old"][key]
        print(f"{key:34} {y:8.2f}ms {o:8.2f}ms {o / y:10.2f}")


if __name__ == "__main__":
    main()
