"""A month of traffic into an SQLite store pruned to `store.retention` (issue 19's targets),
time passed in, no sleeping: the file's size on day 30 beside day 8; a tick while pruning
runs beside a tick without it; ingest while pruning runs (no store error, which would be a
503); and the verdicts of the open waits before and after pruning.

    .venv/bin/python bench/retention.py [--threads 10000] [--beats-per-day 48] [--waits 5000]

The heartbeat rate is scaled (the issue's 30 s is 2,880 beats a day per thread): every beat
is a row, so the shape of growth is the same, only the rows a day fewer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import ingest_unit, ref_protector
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.errors import StoreError
from sidewatch.exporters.snapshot import DECISION_BUCKETS, RESUME_BUCKETS
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.retention import Retention

DAY = 86_400_000
SEC = 1000
T0 = 1_785_024_000_000  # 2026-07-26T00:00:00Z
SIZE_TARGET, TICK_TARGET = 1.2, 2.0
UNIT_LINES = 5_000


def custom(name: str, at: int, **value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": name, "value": value, "timestamp": at}


def wait_lines(thread: str, at: int, closes: bool) -> list[dict[str, Any]]:
    """A run stops on an interrupt, is routed; when `closes`, accepted and resumed a minute on."""
    ask = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "tool_call"}]}
    lines = [
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
    if closes:
        answer = {"interruptId": "i", "status": "resolved", "payload": "approve"}
        lines += [
            {"threadId": thread, "runId": "r2", "timestamp": at + 60 * SEC, "resume": [answer]},
            {"type": "RUN_STARTED", "threadId": thread, "runId": "r2", "timestamp": at + 61 * SEC},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": "r2", "timestamp": at + 62 * SEC},
        ]
    return lines


def day_lines(day: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One day: every thread beats `beats_per_day` times (threads with no wait), and
    `waits` waits are asked on threads of their own, one in `open_every` left open."""
    start = T0 + day * DAY
    out: list[dict[str, Any]] = []
    step = DAY // args.beats_per_day
    for b in range(args.beats_per_day):
        at = start + b * step
        out += [
            custom("sidewatch.heartbeat", at + k, threadId=f"t{k}", resumeHandle=f"ckpt:t{k}")
            for k in range(args.threads)
        ]
    wstep = DAY // args.waits
    for w in range(args.waits):
        out += wait_lines(f"w{day}-{w}", start + w * wstep, closes=w % args.open_every != 0)
    return out


def ingest(store: Store, lines: list[dict[str, Any]], received_at: int) -> None:
    protect = ref_protector(store.engine, Config())
    for k in range(0, len(lines), UNIT_LINES):
        body = b"\n".join(orjson.dumps(x) for x in lines[k : k + UNIT_LINES])
        ingest_unit(store, "bench", body, received_at, protect)


def size(path: Path, store: Store) -> int:
    with store.engine.connect() as c:
        c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def open_verdicts(store: Store, auditor: Auditor, now: int) -> dict[str, Any]:
    with store.engine.connect() as c:
        threads = [
            str(r[0])
            for r in c.exec_driver_sql("SELECT thread_id FROM wait_state WHERE NOT closed")
        ]
    return {
        f.thread_id: [w.verdict for w in evaluate(f, auditor.policy_for, now).waits]
        for f in store.threads(threads)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--beats-per-day", type=int, default=48)
    parser.add_argument("--waits", type=int, default=5_000, help="waits a day")
    parser.add_argument("--open-every", type=int, default=50, help="one wait in N stays open")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--retention-days", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sidewatch.db"
        store = Store(open_store(f"sqlite:///{path}"))
        auditor = Auditor(store, Config().policies)
        retention = Retention(
            store.engine,
            args.retention_days * DAY,
            {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS},
        )
        sizes: dict[int, int] = {}
        backlog_from = args.days - 3  # the last days not pruned: the backlog pruned on the last
        for day in range(args.days - 1):
            now = T0 + (day + 1) * DAY
            ingest(store, day_lines(day, args), now)
            auditor.tick(now)
            if day < backlog_from:
                while not retention.prune(now, budget_s=5.0).done:
                    pass
            sizes[day + 1] = size(path, store)
            print(f"day {day + 1:2d}: {sizes[day + 1] / 1e6:7.1f} MB", file=sys.stderr)

        # The last day: a tick alone, then a tick (of as much new traffic) while pruning runs,
        # with ingest going on beside it.
        day = args.days - 1
        now = T0 + (day + 1) * DAY
        lines = day_lines(day, args)
        half = len(lines) // 2
        ingest(store, lines[:half], now)
        t = time.perf_counter()
        auditor.tick(now)
        alone = time.perf_counter() - t
        before = open_verdicts(store, auditor, now)

        errors: list[str] = []
        ingested = [0]
        stop = threading.Event()
        pruned: list[Any] = []

        def prune() -> None:
            while not stop.is_set():
                p = retention.prune(now, budget_s=0.5)
                pruned.append(p)
                if p.done:
                    return

        def ingest_beside() -> None:
            for k in range(0, 20):
                try:
                    ingest(store, [custom("sidewatch.heartbeat", now + k, threadId="t0")], now)
                    ingested[0] += 1
                except StoreError as e:
                    errors.append(str(e))

        ingest(store, lines[half:], now)
        pruner = threading.Thread(target=prune)
        writer = threading.Thread(target=ingest_beside)
        pruner.start()
        writer.start()
        t = time.perf_counter()
        auditor.tick(now)
        during = time.perf_counter() - t
        writer.join()
        pruner.join()
        while not retention.prune(now, budget_s=5.0).done:
            pass
        after = {t: v for t, v in open_verdicts(store, auditor, now).items() if t in before}
        sizes[args.days] = size(path, store)
        store.engine.dispose()

    day8 = sizes[min(8, args.days)]
    ratio = sizes[args.days] / day8
    print(
        f"{args.threads} threads, {args.beats_per_day} beats a day each, {args.waits} waits a "
        f"day (1 in {args.open_every} open), {args.days} days, retention {args.retention_days} days"
    )
    print(
        f"size on day {args.days}: {sizes[args.days] / 1e6:.1f} MB; day 8: {day8 / 1e6:.1f} MB "
        f"(ratio {ratio:.2f}, target <= {SIZE_TARGET}): "
        f"{'met' if ratio <= SIZE_TARGET else 'NOT met'}"
    )
    print(
        f"tick during pruning: {during:.3f} s; without: {alone:.3f} s (ratio {during / alone:.2f}, "
        f"target <= {TICK_TARGET}): {'met' if during <= TICK_TARGET * alone else 'NOT met'}"
    )
    print(
        f"ingest during pruning: {ingested[0]} units stored, {len(errors)} store errors (503): "
        f"{'met' if not errors else 'NOT met'}; {len(pruned)} pruning passes ran beside"
    )
    same = before == after
    print(
        f"verdicts of {len(before)} open waits before and after pruning: "
        f"{'identical' if same else 'DIFFERENT'}"
    )


if __name__ == "__main__":
    main()
