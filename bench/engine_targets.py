"""The evaluation engine's targets on a long thread (issue 13), each figure beside its
comparison measured in the same run:

- the full audit of one thread of R runs with a wait every 10 runs, beside the same traffic
  spread over R/10 threads of 10 runs (target: ratio <= 1.5);
- a tick after one new event on that long thread, beside the same tick after one new event on
  one of the short threads (target < 50 ms);
- `GET /v1/waits/{requestId}` of a wait on the long thread through the daemon's HTTP app,
  beside the same request for a wait on a short thread (target < 50 ms); its latest (open)
  wait, and its oldest (settled before the checkpoint's cut: served from its stored body).

    .venv/bin/python bench/engine_targets.py [--runs 10000] [--pg] [--shape SHAPE]
    .venv/bin/python bench/engine_targets.py --ages 2000,10000 [--pg]

With `--ages`, instead: the per-tick and per-request costs of one long thread at each age
(runs), side by side, each beside the same on a short thread of the same store (the floor):
a tick after one new event, `GET /v1/waits/{requestId}` of its open wait, and the list of
open waits (`GET /v1/waits?open=true`) while the thread has new evidence; medians of 5.

Every wait but the last of each thread is approved and resumed; the last is left open. The
traffic is AG-UI, ingested as a producer posts it. With `--pg`, on PostgreSQL (a throw-away
database on the running server) instead of SQLite. `--shape`: `plain` (an interrupt id per
wait), `crewai` (every wait's interrupt id is the thread's id, as ag-ui-crewai sends it),
`scripted` (every run also calls an ungated tool under one scripted tool-call id), `beats`
(every run that raises a wait also sends a thread-wide heartbeat, stored in spans with the
compaction gap `--gap`, by default the daemon's: 60 s; `--gap 0` keeps a span a beat),
`runbound` (every run that raises a wait binds it to a runtime service, `billing`, by a
service heartbeat naming the run; the new event is a beat of the service).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from pgdb import pg_database

from sidewatch.app.audit import Auditor
from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.core.policy import DEFAULT_POLICY, Need
from sidewatch.daemon.serve import Daemon
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store
from sidewatch.store.sql import driver_sql

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's TestClient prefers httpx2
    from starlette.testclient import TestClient

EVERY = 10  # runs per wait
PER_UNIT = 2_000  # runs per ingested unit
# The traffic reports no route, handle or heartbeat: a policy that needs none.
QUIET = replace(
    DEFAULT_POLICY, name="default", route=Need.IGNORED, handle=Need.IGNORED, heartbeat=Need.IGNORED
)


SHAPES = ("plain", "crewai", "scripted", "beats", "runbound")


def _run_lines(
    thread: str, i: int, at: int, last: int, shape: str = "plain"
) -> list[dict[str, Any]]:
    """Run i of a thread: every EVERY-th run proposes a gated call and stops on its interrupt;
    the next run answers it (approved), runs the call and finishes; the last stays open."""
    run = f"run-{i}"
    lines: list[dict[str, Any]] = []
    resume = []
    ask = thread if shape == "crewai" else f"approve-{i - 1}"
    if i % EVERY == 1 and i > 1:
        resume = [{"interruptId": ask, "status": "resolved", "payload": {}}]
    lines.append(
        {"threadId": thread, "runId": run, "messages": [], "resume": resume, "timestamp": at}
    )
    lines.append({"type": "RUN_STARTED", "threadId": thread, "runId": run, "timestamp": at})
    if resume:
        lines.append(
            {
                "type": "TOOL_CALL_RESULT",
                "toolCallId": f"call-{i - 1}",
                "messageId": f"m-{i}",
                "content": "ok",
                "threadId": thread,
                "runId": run,
                "timestamp": at + 1,
            }
        )
    if i % EVERY == 0 or i == last:
        call = f"call-{i}"
        lines += [
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call,
                "toolCallName": "deploy",
                "timestamp": at,
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": "{}", "timestamp": at},
            {"type": "TOOL_CALL_END", "toolCallId": call, "timestamp": at + 1},
        ]
        iid = thread if shape == "crewai" else f"approve-{i}"
        if shape == "beats":  # for every wait of the thread: a beat, no run
            lines.append(_beat(thread, at + 1))
        if shape == "runbound":
            lines.append(_service(at + 1, threadId=thread, runId=run))
        interrupt = {"id": iid, "reason": "tool_call", "toolCallId": call}
        outcome = {"type": "interrupt", "interrupts": [interrupt]}
        lines.append(
            {
                "type": "RUN_FINISHED",
                "threadId": thread,
                "runId": run,
                "outcome": outcome,
                "timestamp": at + 2,
            }
        )
    else:
        if shape == "scripted":  # an ungated call, its id the same in every run
            tool = {"toolCallId": "lookup-1", "timestamp": at + 1}
            lines += [
                {"type": "TOOL_CALL_START", "toolCallName": "lookup", **tool},
                {"type": "TOOL_CALL_END", **tool},
                {"type": "TOOL_CALL_RESULT", "messageId": f"l-{i}", "content": "ok", **tool},
            ]
        lines.append(
            {"type": "RUN_FINISHED", "threadId": thread, "runId": run, "timestamp": at + 2}
        )
    return lines


def _beat(thread: str, at: int) -> dict[str, Any]:
    value = {"threadId": thread, "resumeHandle": "ckpt"}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value, "timestamp": at}


def _service(at: int, **bound: str) -> dict[str, Any]:
    """A beat of the runtime service `billing` (instance A, durable); with `threadId` and
    `runId`, it binds that run's waits to the service."""
    value = {**bound, "service": "billing", "instance": "A", "durable": True}
    return {"type": "CUSTOM", "name": "sidewatch.heartbeat", "value": value, "timestamp": at}


def _populate(
    url: str, threads: list[str], runs: int, end: int, shape: str = "plain", gap: int = 0
) -> None:
    """`runs` runs on each of `threads`, one second apart, the last ending before `end`;
    heartbeats compacted with the gap `gap` (ms)."""
    engine = open_store(url)
    store = Store(engine, gap)
    # Units of PER_UNIT runs: more lines than a unit may hold by default.
    ingest = Ingest(store, ref_protector(engine, Config()), Config(max_lines_per_unit=10**7))
    start = end - (runs + 10) * 1000
    body: list[bytes] = []
    count = 0
    for thread in threads:
        for i in range(1, runs + 1):
            body += [
                orjson.dumps(line) for line in _run_lines(thread, i, start + i * 1000, runs, shape)
            ]
            count += 1
            if count % PER_UNIT == 0:
                ingest.body("bench", b"\n".join(body), end)
                body = []
    if body:
        ingest.body("bench", b"\n".join(body), end)
    engine.dispose()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _measure(url: str, thread: str, now: int, shape: str) -> dict[str, float]:
    """Full audit; then a tick after one new event on `thread` (`scripted`: a new run's call
    under the scripted id); then GET of its open wait."""
    engine = open_store(url)
    store = Store(engine)
    auditor = Auditor(store, (QUIET,))
    full, report = _timed(lambda: auditor.tick(now))
    start = {"type": "RUN_STARTED", "threadId": thread, "runId": "run-new", "timestamp": now}
    events = [start]
    if shape == "beats":
        events.append(_beat(thread, now))
    if shape == "runbound":
        events.append(_service(now))
    if shape == "scripted":  # the new run calls the tool under the scripted id again
        tool = {"toolCallId": "lookup-1", "timestamp": now}
        events += [
            {"type": "TOOL_CALL_START", "toolCallName": "lookup", **tool},
            {"type": "TOOL_CALL_END", **tool},
        ]
    body = b"\n".join(map(orjson.dumps, events))
    Ingest(store, ref_protector(engine, Config()), Config()).body("bench", body, now)
    tick, _ = _timed(lambda: auditor.tick(now + 1000))
    daemon = Daemon(replace(Config(), db_url=url, allowed_hosts=("testserver",), policies=(QUIET,)))
    client = TestClient(daemon.app)
    client.get("/healthz")  # the app's first request, not the one measured
    with engine.connect() as c:
        kept = c.exec_driver_sql("SELECT count(*) FROM thread_checkpoint").scalar_one()
        spans = c.exec_driver_sql(
            driver_sql(c, "SELECT count(*) FROM heartbeat WHERE thread_id = ? AND run_id IS NULL"),
            (thread,),
        ).scalar_one()
    with engine.connect() as c:  # the thread's latest wait (a reused id has `@run`)
        (ref,) = c.exec_driver_sql(
            driver_sql(
                c,
                "SELECT request_id FROM wait_state WHERE thread_id = ? "
                "ORDER BY requested_at DESC LIMIT 1",
            ),
            (thread,),
        ).one()
        (first,) = c.exec_driver_sql(  # its oldest wait: settled before a cut, if kept
            driver_sql(
                c,
                "SELECT request_id FROM wait_state WHERE thread_id = ? "
                "ORDER BY requested_at LIMIT 1",
            ),
            (thread,),
        ).one()
    engine.dispose()
    rid = quote(str(ref), safe="")
    get, response = _timed(lambda: client.get(f"/v1/waits/{rid}"))
    assert response.status_code == 200, response.text
    old = quote(str(first), safe="")
    old_get = _median(lambda k: client.get(f"/v1/waits/{old}"))
    response = client.get(f"/v1/waits/{old}")
    assert response.status_code == 200, response.text
    old_state = response.json()["state"]
    daemon.engine.dispose()
    return {
        "full": full,
        "waits": report.waits,
        "tick": tick,
        "get": get,
        "old": old_get,
        "old state": old_state,
        "kept": kept,
        "spans": spans,
    }


@contextmanager
def _store(pg: bool, tmp: Path, name: str) -> Iterator[str]:
    if pg:
        with pg_database() as url:
            yield url
    else:
        yield f"sqlite:///{tmp / name}"


def _median(fn: Callable[[int], Any], n: int = 5) -> float:
    return sorted(_timed(lambda k=k: fn(k))[0] for k in range(n))[n // 2]


def _at_age(url: str, runs: int, now: int) -> dict[str, float]:
    """A long thread of `runs` runs beside a short one, audited whole once (checkpoints);
    then the tick, the GET and the list of open waits of each, timed."""
    _populate(url, ["thread-long"], runs, now)
    _populate(url, ["thread-short"], EVERY, now)
    engine = open_store(url)
    store = Store(engine)
    auditor = Auditor(store, (QUIET,))
    auditor.tick(now)
    daemon = Daemon(replace(Config(), db_url=url, allowed_hosts=("testserver",), policies=(QUIET,)))
    client = TestClient(daemon.app)
    client.get("/healthz")
    out: dict[str, float] = {}
    ingest = Ingest(store, ref_protector(engine, Config()), Config())
    for name, thread, last in (("long", "thread-long", runs), ("short", "thread-short", EVERY)):

        def event(k: int, thread: str = thread) -> None:
            line = {
                "type": "RUN_STARTED",
                "threadId": thread,
                "runId": f"new-{k}",
                "timestamp": now,
            }
            ingest.body("bench", orjson.dumps(line), now)

        def tick(k: int) -> None:
            event(k)
            auditor.tick(now + 1000 * (k + 1))

        out[f"tick {name}"] = _median(tick)  # the ingest of the one event included
        out[f"event {name}"] = _median(lambda k: event(100 + k))  # ... its floor
        rid = quote(f"{thread}/approve-{last}", safe="")
        out[f"get {name}"] = _median(lambda k, rid=rid: client.get(f"/v1/waits/{rid}"))
        event(200)  # the thread has new evidence: each of its waits is a candidate
        out[f"list {name}"] = _median(lambda k: client.get("/v1/waits?open=true"))
        auditor.tick(now + 10_000)
    daemon.engine.dispose()
    engine.dispose()
    return out


def ages(runs: list[int], pg: bool) -> None:
    now = int(time.time() * 1000)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in runs:
            with _store(pg, Path(tmp), f"age{n}.db") as url:
                results.append((n, _at_age(url, n - n % EVERY, now)))
    print(
        f"one long thread at {len(runs)} ages, beside a short thread ({EVERY} runs) of the same "
        f"store, {'PostgreSQL' if pg else 'SQLite'}, medians of 5 (load {os.getloadavg()[0]:.1f})"
    )
    for label, key in (
        ("tick after 1 event", "tick"),
        ("GET one wait", "get"),
        ("GET open waits", "list"),
    ):
        cells = "   ".join(
            f"{n:6,d} runs: {r[f'{key} long'] * 1000:6.1f} ms "
            f"(short {r[f'{key} short'] * 1000:5.1f})"
            for n, r in results
        )
        print(f"  {label:18s}: {cells}")
    print(
        "  (a tick includes ingesting its event: "
        + ", ".join(f"{r['event long'] * 1000:.1f} ms at {n:,d}" for n, r in results)
        + ")"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000, help="runs of the long thread")
    ap.add_argument("--pg", action="store_true", help="on PostgreSQL instead of SQLite")
    ap.add_argument("--ages", help="runs of the long thread at each age, e.g. 2000,10000")
    ap.add_argument("--shape", choices=SHAPES, default="plain", help="the threads' dialect")
    ap.add_argument("--gap", type=int, help="heartbeat compaction gap, ms (default: daemon's)")
    args = ap.parse_args()
    if args.ages:
        ages([int(n) for n in args.ages.split(",")], args.pg)
        return
    runs = args.runs - args.runs % EVERY or EVERY
    now = int(time.time() * 1000)
    gap = replace(Config(), policies=(QUIET,)).heartbeat_gap_ms if args.gap is None else args.gap
    short = [f"thread-{k:05d}" for k in range(runs // EVERY)]
    with tempfile.TemporaryDirectory() as tmp:
        with _store(args.pg, Path(tmp), "long.db") as url:
            made, _ = _timed(lambda: _populate(url, ["thread-long"], runs, now, args.shape, gap))
            long = _measure(url, "thread-long", now, args.shape)
        with _store(args.pg, Path(tmp), "spread.db") as url:
            _populate(url, short, EVERY, now, args.shape, gap)
            spread = _measure(url, short[0], now, args.shape)
    store = "PostgreSQL" if args.pg else "SQLite"
    print(
        f"one thread of {runs:,} runs, a wait every {EVERY} ({long['waits']:.0f} waits), "
        f"beside {len(short):,} threads of {EVERY} runs ({spread['waits']:.0f} waits), "
        f"{store}, shape {args.shape} (generated in {made:.0f}s)"
    )
    print(
        f"  full audit     : {long['full']:8.2f} s   spread over threads: {spread['full']:8.2f} s"
        f"   ratio {long['full'] / spread['full']:6.1f} (target <= 1.5)"
    )
    print(
        f"  load average {os.getloadavg()[0]:.2f}; the long thread keeps a checkpoint: "
        f"{'yes' if long['kept'] else 'no'}"
        + (
            f"; its thread-wide heartbeat spans: {long['spans']:,} (gap {gap} ms)"
            if long["spans"]
            else ""
        )
    )
    print(
        f"  tick, 1 event  : {long['tick'] * 1000:8.1f} ms  on a short thread: "
        f"{spread['tick'] * 1000:8.1f} ms  (target < 50 ms)"
    )
    print(
        f"  GET one wait   : {long['get'] * 1000:8.1f} ms  on a short thread: "
        f"{spread['get'] * 1000:8.1f} ms  (target < 50 ms)"
    )
    print(
        f"  GET oldest wait: {long['old'] * 1000:8.1f} ms  on a short thread: "
        f"{spread['get'] * 1000:8.1f} ms  (target < 50 ms; median of 5, {long['old state']}; "
        f"load {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
