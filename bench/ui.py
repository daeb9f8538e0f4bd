"""One wait's page with a 1,000-item timeline, beside the JSON read API of the same wait in the
same run: both through the daemon's app (in process, a real SQLite store). The API is the floor
(the same store read and classification); the page adds its rendering, also timed alone
(`render_detail` on the API's answer). The target: the page (the whole GET) in under 100 ms;
the load average is printed with the figures, as they vary with it.

    .venv/bin/python bench/ui.py [--items 1000] [--runs 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sidewatch.app.read import Read
from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon
from sidewatch.daemon.ui import render_detail
from tests.daemon.test_http import NDJSON, heartbeat, ndjson, requested, route

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that it falls back to httpx
    from starlette.testclient import TestClient

TARGET_MS = 100
THREAD, INTERRUPT = "thread-long", "int-long"


def timed(client: TestClient, path: str, runs: int) -> tuple[float, int]:
    """The median milliseconds of `runs` GETs of `path`, and the answer's size."""
    times, size = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert r.status_code == 200, r.text[:200]
        size = len(r.content)
    return statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    now = int(time.time()) * 1000
    start = now - args.items * 1000 - 60_000
    lines = requested(THREAD, INTERRUPT, "deploy", start, now + 3_600_000)
    for i in range(args.items):  # routes and heartbeats, alternating, one a second
        at = start + 1000 * (i + 1)
        lines.append(route(THREAD, INTERRUPT, at) if i % 2 else heartbeat(THREAD, at))
    with tempfile.TemporaryDirectory() as tmp:
        config = dataclasses.replace(
            Config(), db_url=f"sqlite:///{Path(tmp) / 'ui.db'}", allowed_hosts=("testserver",)
        )
        daemon = Daemon(config)
        client = TestClient(daemon.app)
        assert client.post("/v1/events", content=ndjson(lines), headers=NDJSON).status_code == 200
        daemon.auditor.tick(now)
        rid = f"{THREAD}/{INTERRUPT}"
        timeline = len(client.get(f"/v1/waits/{rid}").json()["timeline"])
        api, api_size = timed(client, f"/v1/waits/{rid}", args.runs)
        page, page_size = timed(client, f"/ui/waits/{rid}", args.runs)
        detail = Read(daemon.store, daemon.auditor.policy_for).wait(rid, now)
        assert detail is not None
        renders = []
        for _ in range(args.runs):
            t = time.perf_counter()
            render_detail(detail)
            renders.append((time.perf_counter() - t) * 1000)
        alone = statistics.median(renders)
        daemon.engine.dispose()
    load = f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after"
    print(f"one wait, {timeline:,} timeline items, median of {args.runs} GETs ({load})")
    print(f"  JSON read API /v1/waits/{{id}} : {api:7.1f} ms  {api_size / 1e3:7.1f} kB")
    print(f"  wait page     /ui/waits/{{id}} : {page:7.1f} ms  {page_size / 1e3:7.1f} kB")
    print(f"  page - API (rendering)       : {page - api:7.1f} ms")
    print(f"  render_detail alone          : {alone:7.1f} ms")
    verdict = "ok" if page < TARGET_MS else "OVER"
    print(f"  target: the page under {TARGET_MS} ms: {verdict}")


if __name__ == "__main__":
    main()
