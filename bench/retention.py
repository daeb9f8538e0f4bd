"""A month of traffic into an SQLite store pruned to `store.retention` (issue 19's targets),
time passed in, no sleeping: the file's size on day 30 beside day 8; a tick while another
process prunes beside a tick without it, in the same run; ingest from a third process while
pruning runs (no store error, which would be a 503); and the verdicts of the open waits
before and after pruning.

    .venv/bin/python bench/retention.py [--threads 10000] [--beats-per-day 48] [--waits 5000]

The heartbeat rate is scaled (the issue's 30 s is 2,880 beats a day per thread): every beat
is a row, so the shape of growth is the same, only the rows a day fewer. `--long` threads
live the whole month: each asks every day, reusing its interrupt id, the day before's wait
accepted and resumed by the run that asks again, so their closed waits are pruned beside an
open one. The daemon prunes after its tick, never beside it; what runs beside pruning is
another process (a second replica ingesting, a `sidewatch` command), so the tick during
pruning and the ingest during pruning run in processes of their own, pruning in passes of
the daemon's budget (2 s).

With `--walk`, instead: one pass of pruning over heartbeats at two store sizes (`--sizes`,
threads), beside a pass over an empty store in the same run. Half the threads asked once
and beat on before the cutoff (kept for their open wait), half never asked and beat after it
(not old yet); before the pass measured, 100 threads that never asked beat before the cutoff
(pruned by it). The pass should cost what it prunes, not the size of the table (`--pg`: on
PostgreSQL).

With `--closing`, instead: one pass of pruning by the closing time at two store sizes
(`--sizes`, threads), beside a pass over an empty store in the same run. Half the threads
keep an old closed wait beside an open one (kept: no look inside without the policies), half
closed a day ago (not old yet); before each pass measured, 100 threads closed 60 days ago are
ingested and audited (a backfill: pruned by the pass, found by their recording), and 100
closed a week ago come due (found by their closing time). The pass should cost what it
prunes, not the closed waits the store keeps (`--pg`: on PostgreSQL).

The figures of docs/internals/performance.md are of `--threads 1000 --beats-per-day 48
--waits 1000 --long 100` (scaled down from the issue's 10,000 threads beating every 30 s
and 5,000 waits a day, so that 30 days fit the time of a run on a shared 2-core machine;
the output says so).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.app.prune import Retention
from sidewatch.config import Config
from sidewatch.core.engine import evaluate
from sidewatch.errors import StoreError
from sidewatch.exporters.snapshot import DECISION_BUCKETS, RESUME_BUCKETS
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

PRUNE_BUDGET_S = 2.0  # sidewatch.daemon.serve's: the longest pruning after one tick

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


def long_lines(thread: str, day: int, at: int) -> list[dict[str, Any]]:
    """Day `day` of a long-lived thread: a run answers the day before's wait (accepted, and
    resumed), and the next stops on the same interrupt id again (a new wait, its requestId
    `{thread}/i@{run}`)."""
    ask = {"type": "interrupt", "interrupts": [{"id": "i", "reason": "tool_call"}]}
    lines: list[dict[str, Any]] = []
    if day:
        answer = {"interruptId": "i", "status": "resolved", "payload": "approve"}
        run = f"a{day}"
        lines += [
            {"threadId": thread, "runId": run, "messages": [], "timestamp": at, "resume": [answer]},
            {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at + SEC},
            {"type": "RUN_FINISHED", "threadId": thread, "runId": run, "timestamp": at + 2 * SEC},
        ]
    run, at = f"q{day}", at + 60 * SEC
    return [
        *lines,
        {"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at},
        {
            "type": "RUN_FINISHED",
            "threadId": thread,
            "runId": run,
            "outcome": ask,
            "timestamp": at + SEC,
        },
        custom("sidewatch.route", at + 2 * SEC, threadId=thread, interruptId="i", delivered=True),
        custom("sidewatch.heartbeat", at + 3 * SEC, threadId=thread, resumeHandle="ckpt"),
    ]


def day_lines(day: int, args: argparse.Namespace, part: int | None = None) -> list[dict[str, Any]]:
    """One day: every thread beats `beats_per_day` times (threads with no wait), and
    `waits` waits are asked on threads of their own, one in `open_every` left open; `part`
    (0 or 1): the threads of even or odd number only, half the day's work."""
    start = T0 + day * DAY
    out: list[dict[str, Any]] = []
    step = DAY // args.beats_per_day

    def mine(k: int) -> bool:
        return part is None or k % 2 == part

    for b in range(args.beats_per_day):
        at = start + b * step
        out += [
            custom("sidewatch.heartbeat", at + k, threadId=f"t{k}", resumeHandle=f"ckpt:t{k}")
            for k in range(args.threads)
            if mine(k)
        ]
    wstep = DAY // args.waits
    for w in range(args.waits):
        if mine(w):
            out += wait_lines(f"w{day}-{w}", start + w * wstep, closes=w % args.open_every != 0)
    for k in range(args.long):
        if mine(k):
            out += long_lines(f"long{k}", day, start + 3_600_000 + k)
    return out


def ingest(store: Store, lines: list[dict[str, Any]], received_at: int) -> None:
    door = Ingest(store, ref_protector(store.engine, Config()), Config())
    for k in range(0, len(lines), UNIT_LINES):
        body = b"\n".join(orjson.dumps(x) for x in lines[k : k + UNIT_LINES])
        door.body("bench", body, received_at)


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
    out = {}
    for f in store.threads(threads):
        for w in evaluate(f, auditor.policy_for, now).waits:
            if w.verdict is not None and not w.verdict.closed:
                out[w.evidence.request_id] = (w.evidence, w.verdict)
    return out


def retention_of(store: Store, auditor: Auditor, days: int) -> Retention:
    """As the daemon's auditor makes it."""
    buckets = {"decision": DECISION_BUCKETS, "resume": RESUME_BUCKETS}
    return Retention(store.engine, days * DAY, buckets, policy_for=auditor.policy_for)


def worker(kind: str, path: str, now: int, days: int, stop: str) -> None:
    """A process of its own beside the tick: `prune` passes of the daemon's budget until
    nothing is left, or `ingest` units of one heartbeat until `stop` exists."""
    store = Store(open_store(f"sqlite:///{path}", migrate=False))
    out: dict[str, Any] = {"passes": 0, "units": 0, "errors": [], "waits": 0, "threads": 0}
    retention = retention_of(store, Auditor(store, Config().policies), days)
    print("ready", flush=True)
    if kind == "prune":
        while not os.path.exists(stop):
            p = retention.prune(now, budget_s=PRUNE_BUDGET_S)
            out["passes"] += 1
            out["waits"] += p.waits
            out["threads"] += p.threads
            if p.done:
                break
    else:
        k = 0
        while not os.path.exists(stop):
            try:
                ingest(store, [custom("sidewatch.heartbeat", now + k, threadId="t0")], now)
                out["units"] += 1
            except StoreError as e:
                out["errors"].append(str(e))
            k += 1
            time.sleep(0.05)  # 20 units a second
    store.engine.dispose()
    print(json.dumps(out))


def spawn(kind: str, path: Path, now: int, days: int, stop: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, __file__, "--worker", kind, str(path), str(now), str(days), str(stop)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def redo(store: Store, cutoff: int) -> None:
    """Mark dirty every thread that keeps a wait past the cutoff (pruning leaves them)."""
    with store.engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO dirty_thread (thread_id, mark) SELECT DISTINCT thread_id, 1 "
            f"FROM wait_state WHERE NOT closed OR since >= {int(cutoff)} "
            "ON CONFLICT (thread_id) DO NOTHING"
        )


def ready(p: subprocess.Popen[str]) -> None:
    """Wait until the worker is under way (interpreter, imports, store)."""
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"


STEPS = [0]  # --walk: SQLite's VM steps so far, in thousands


def walk_store(url: str, threads: int, now: int) -> tuple[Store, Retention]:
    """A store of `threads` threads as `--walk` says, pruned to the end twice over."""
    store = Store(open_store(url))
    if store.engine.dialect.name == "sqlite":  # every statement's VM steps, by the thousand
        event.listen(
            store.engine,
            "checkout",
            lambda dbapi, *_: dbapi.set_progress_handler(
                lambda: STEPS.__setitem__(0, STEPS[0] + 1) or 0, 1000
            ),
        )
    retention = Retention(store.engine, 7 * DAY)
    old = now - 8 * DAY
    lines: list[dict[str, Any]] = []
    for k in range(threads // 2):
        lines += wait_lines(f"kept{k}", old, closes=False)
        beat = f"kept{k}"
        lines += [
            custom("sidewatch.heartbeat", old + b * 3_600_000, threadId=beat) for b in range(4)
        ]
        beat = f"young{k}"
        lines += [
            custom("sidewatch.heartbeat", now - b * 3_600_000, threadId=beat) for b in range(4)
        ]
    ingest(store, lines, now)
    for _ in range(2):
        while not retention.prune(now, budget_s=600).done:
            pass
    return store, retention


def closing_store(url: str, threads: int, now: int) -> tuple[Store, Retention]:
    """A store of `threads` threads as `--closing` says, with the waits that come due at
    each pass measured, pruned to the end twice over."""
    store = walk_store(url, 0, now)[0]
    auditor = Auditor(store, Config().policies)
    lines: list[dict[str, Any]] = []
    for k in range(threads // 2):  # kept: a wait closed, the next asked (long_lines)
        lines += long_lines(f"kept{k}", 0, now - 30 * DAY) + long_lines(
            f"kept{k}", 1, now - 29 * DAY
        )
        lines += wait_lines(f"young{k}", now - DAY, closes=True)
    for k in range(PASSES * 100):  # 100 come due at each pass (an hour apart)
        lines += wait_lines(f"due{k}", now - 7 * DAY + (k // 100) * 3_600_000 + 1, closes=True)
    ingest(store, lines, now)
    auditor.tick(now + 5 * 60 * SEC)
    AUDITORS[id(store)] = auditor
    retention = Retention(store.engine, 7 * DAY)
    for _ in range(2):
        while not retention.prune(now, budget_s=600).done:
            pass
    return store, retention


def closing_pass(store: Store, retention: Retention, now: int, k: int) -> dict[str, float]:
    """100 threads closed 60 days ago ingested and audited, then one pass measured an hour
    after the last (100 waits closed a week ago come due)."""
    now += (k + 1) * 3_600_000
    lines = [x for n in range(100) for x in wait_lines(f"old{k}-{n}", now - 60 * DAY, True)]
    ingest(store, lines, now)
    AUDITORS[id(store)].tick(now + 1)
    return measured(store, retention, now + 2, "threads", "wait_state WHERE closed")


def walk_pass(store: Store, retention: Retention, now: int, k: int) -> dict[str, float]:
    """100 ghosts' beats from before the cutoff, then one pass measured."""
    old = now - 8 * DAY + 5 * 3_600_000
    ingest(
        store, [custom("sidewatch.heartbeat", old, threadId=f"ghost{k}") for k in range(100)], now
    )
    return measured(store, retention, now + k, "unknown", "heartbeat")


AUDITORS: dict[int, Auditor] = {}  # --closing: each store's auditor, by the store's id


def measured(
    store: Store, retention: Retention, now: int, pruned: str, rows: str
) -> dict[str, float]:
    """One pass at `now`: its CPU, wall time, SQLite VM steps, rows read (`examined`) and
    `pruned` (a field of Pruned); the `rows` (a table, our own SQL) after it."""
    before = STEPS[0]
    cpu, wall = time.process_time(), time.perf_counter()
    done = retention.prune(now, budget_s=600)
    out = {
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "steps": (STEPS[0] - before) * 1000,
        "pruned": getattr(done, pruned),
        "read": retention.examined,
    }
    with store.engine.connect() as c:
        out["rows"] = c.exec_driver_sql(f"SELECT count(*) FROM {rows}").scalar() or 0
    return out


PASSES = 5  # measured at each size; the median shown


def walk(sizes: list[int], pg: bool, closing: bool) -> None:
    from pgdb import pg_database  # noqa: PLC0415 - only with --pg's server

    now = T0 + 30 * DAY
    make, one = (closing_store, closing_pass) if closing else (walk_store, walk_pass)
    results: list[tuple[int, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [0, *sizes]:
            with contextlib.ExitStack() as stack:
                url = (
                    stack.enter_context(pg_database())
                    if pg
                    else f"sqlite:///{Path(tmp) / f'walk{n}.db'}"
                )
                store, retention = make(url, n, now)
                passes = [one(store, retention, now, k) for k in range(PASSES)]
                store.engine.dispose()
            results.append((n, sorted(passes, key=lambda p: p["cpu"])[PASSES // 2]))
    floor = results[0][1]
    db = "PostgreSQL" if pg else "SQLite"
    if closing:
        print(
            "a pass of pruning that prunes 100 threads closed 60 days ago (recorded since the "
            f"last pass) and 100 closed a week ago (come due since), {db}, median of {PASSES} "
            f"(load {os.getloadavg()[0]:.1f})"
        )
        rows = "closed waits kept"
    else:
        print(
            f"a pass of pruning that prunes 100 heartbeats of threads with no wait, {db}, "
            f"median of {PASSES} (load {os.getloadavg()[0]:.1f})"
        )
        rows = "heartbeat rows"
    for n, r in results:
        print(
            f"  {n:6,d} threads, {r['rows']:7,.0f} {rows}: pruned {r['pruned']:3.0f}, "
            f"rows read {r['read']:4.0f}, CPU {r['cpu'] * 1000:7.1f} ms, "
            f"wall {r['wall'] * 1000:7.1f} ms"
            + (f", {r['steps'] / 1e6:6.2f} M VM steps" if r["steps"] else "")
            + f"  (x{r['cpu'] / floor['cpu']:.2f} the empty store's CPU)"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, path, now, days, stop = sys.argv[2:7]
        worker(kind, path, int(now), int(days), stop)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--beats-per-day", type=int, default=48)
    parser.add_argument("--waits", type=int, default=5_000, help="waits a day")
    parser.add_argument("--open-every", type=int, default=50, help="one wait in N stays open")
    parser.add_argument("--long", type=int, default=100, help="long-lived threads")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--retention-days", type=int, default=7)
    parser.add_argument("--walk", action="store_true", help="the pass over heartbeats alone")
    parser.add_argument("--closing", action="store_true", help="the pass by closing time alone")
    parser.add_argument("--sizes", default="2000,20000", help="--walk: threads, two sizes")
    parser.add_argument("--pg", action="store_true", help="--walk, --closing: on PostgreSQL")
    args = parser.parse_args()
    if args.walk or args.closing:
        walk([int(n) for n in args.sizes.split(",")], args.pg, args.closing)
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sidewatch.db"
        store = Store(open_store(f"sqlite:///{path}"))
        auditor = Auditor(store, Config().policies)
        retention = retention_of(store, auditor, args.retention_days)
        sizes: dict[int, int] = {}
        backlog_from = args.days - 3  # the last days not pruned: the backlog pruned on the last
        started = time.perf_counter()
        for day in range(args.days - 1):
            now = T0 + (day + 1) * DAY
            ingest(store, day_lines(day, args), now)
            auditor.tick(now)
            if day < backlog_from:
                while not retention.prune(now, budget_s=PRUNE_BUDGET_S).done:
                    pass
            sizes[day + 1] = size(path, store)
            print(
                f"day {day + 1:2d}: {sizes[day + 1] / 1e6:7.1f} MB "
                f"({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
            )

        # The last day: its traffic ingested and audited, then the same work audited twice, a
        # tick re-auditing every thread pruning leaves (all marked dirty): once alone, once
        # while another process prunes the backlog of three days; a third process ingests
        # beside both.
        day = args.days - 1
        now = T0 + (day + 1) * DAY
        ingest(store, day_lines(day, args), now)
        auditor.tick(now)
        before = open_verdicts(store, auditor, now)
        stop = Path(tmp) / "stop"
        writer = spawn("ingest", path, now, args.retention_days, stop)
        ready(writer)
        cutoff = now - args.retention_days * DAY
        redo(store, cutoff)
        t = time.perf_counter()
        report = auditor.tick(now)
        alone = time.perf_counter() - t
        load_alone = os.getloadavg()[0]

        pruner = spawn("prune", path, now, args.retention_days, stop)
        ready(pruner)
        redo(store, cutoff)
        t = time.perf_counter()
        auditor.tick(now)
        during = time.perf_counter() - t
        load_during = os.getloadavg()[0]
        pruning_left = pruner.poll() is None
        stop.touch()
        pruned = json.loads(pruner.communicate()[0])
        ingested = json.loads(writer.communicate()[0])
        while not retention.prune(now, budget_s=PRUNE_BUDGET_S).done:
            pass
        auditor.tick(now)
        after = {k: v for k, v in open_verdicts(store, auditor, now).items() if k in before}
        sizes[args.days] = size(path, store)
        with store.engine.connect() as c:
            long_waits = c.exec_driver_sql(
                "SELECT count(*), sum(closed) FROM wait_state WHERE thread_id LIKE 'long%'"
            ).one()
            long_kept = c.exec_driver_sql(
                "SELECT count(*) FROM interrupt WHERE thread_id LIKE 'long%' AND pruned"
            ).scalar()
        store.engine.dispose()

    day8 = sizes[min(8, args.days)]
    ratio = sizes[args.days] / day8
    print(
        f"{args.threads} threads, {args.beats_per_day} beats a day each, {args.waits} waits a "
        f"day (1 in {args.open_every} open), {args.long} long-lived threads (a wait a day, the "
        f"id reused), {args.days} days, retention {args.retention_days} days"
    )
    if (args.threads, args.beats_per_day, args.waits) != (10_000, 2_880, 5_000):
        print(
            "scaled down from the issue's 10,000 threads beating every 30 s (2,880 a day) and "
            "5,000 waits a day: every row is a row, so growth has the same shape, fewer a day"
        )
    print(
        f"size on day {args.days}: {sizes[args.days] / 1e6:.1f} MB; day 8: {day8 / 1e6:.1f} MB "
        f"(ratio {ratio:.2f}, target <= {SIZE_TARGET}): "
        f"{'met' if ratio <= SIZE_TARGET else 'NOT met'}"
    )
    print(
        f"a tick re-auditing {report.threads} threads while another process prunes: "
        f"{during:.3f} s (load {load_during:.1f}); "
        f"tick without: {alone:.3f} s (load {load_alone:.1f}); ratio {during / alone:.2f}, "
        f"target <= {TICK_TARGET}: {'met' if during <= TICK_TARGET * alone else 'NOT met'}"
        f"{'' if pruning_left else ' (pruning ended before the tick did)'}"
    )
    print(
        f"ingest from a third process during pruning: {ingested['units']} units stored, "
        f"{len(ingested['errors'])} store errors (503): "
        f"{'met' if not ingested['errors'] else 'NOT met'}; the pruning process ran "
        f"{pruned['passes']} passes of {PRUNE_BUDGET_S:g} s at most, {pruned['threads']} "
        f"threads and {pruned['waits']} waits pruned"
    )
    print(
        f"long-lived threads after {args.days} days: {long_waits[0]} waits recorded "
        f"({long_waits[1] or 0} closed, the rest open); {long_kept} interrupts of pruned waits "
        "kept (marked pruned)"
    )
    same = before == after
    print(
        f"verdicts of {len(before)} open waits before and after pruning (evidence, state, "
        f"since, requestId, findings, uncertain, missing): "
        f"{'identical' if same else 'DIFFERENT'}"
    )


if __name__ == "__main__":
    main()
