"""The lists at any size (issue 29): `/ui/waits` and `GET /v1/waits` on a store of `--small`
waits beside one of `--large`, in the same run, with their ratio: through the daemon's app (in
process), on real stores built as a deployment fills them (ingested, then audited). The target:
the page under 100 ms at 100,000 waits; the ratio shows that a request reads a page and the
counts, not the store. The load average is printed with the figures, as they vary with it.

    .venv/bin/python bench/lists.py [--small 1000] [--large 100000] [--pg] [--runs 15]

Each store holds its waits closed (asked, accepted and resumed) over the five days before
the measurement, and the same `--open` open waits asked an hour before; the auditor has
recorded them at the wall clock's time, as a running daemon's would have (nothing due or
dirty): a request then evaluates the page's waits only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.tick_age import DAY, HOUR, MIN, asked, closed, ingest
from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that it falls back to httpx
    from starlette.testclient import TestClient

TARGET_MS = 100
UNIT = 1000  # closed waits per ingested unit


def build(url: str, waits: int, live: int, now: int) -> tuple[Daemon, float]:
    """A daemon on a store of `waits` closed waits and `live` open ones, audited at `now`."""
    start = time.perf_counter()
    config = dataclasses.replace(Config(), db_url=url, allowed_hosts=("testserver",))
    daemon = Daemon(config)
    first = now - 5 * DAY
    step = max(1, (4 * DAY) // max(waits, 1))
    for k in range(0, waits, UNIT):
        lines = [
            x for n in range(k, min(k + UNIT, waits)) for x in closed(f"t-{n}", first + n * step)
        ]
        ingest(daemon.store, lines, first + k * step + 3 * MIN)
        if k % (50 * UNIT) == 0:
            daemon.auditor.tick(now - HOUR - 2 * MIN)
    ingest(daemon.store, [x for n in range(live) for x in asked(f"t-open-{n}", now - HOUR)], now)
    daemon.auditor.tick(int(time.time() * 1000))
    return daemon, time.perf_counter() - start


def paths(client: TestClient) -> dict[str, str]:
    second = client.get("/v1/waits?state=RESUMED&limit=100").json()["next"]
    return {
        "/ui/waits": "/ui/waits",
        "/ui/waits?state=RESUMED": "/ui/waits?state=RESUMED",
        "/v1/waits (limit 100)": "/v1/waits",
        "/v1/waits?open=true": "/v1/waits?open=true",
        "/v1/waits?state=RESUMED, 2nd page": f"/v1/waits?state=RESUMED&cursor={second}",
    }


def measure(daemons: dict[str, Daemon], runs: int) -> dict[str, dict[str, float]]:
    """The median milliseconds of `runs` GETs of each path on each store, the stores taking
    turns (so a change of the machine's load falls on both)."""
    clients = {name: TestClient(d.app) for name, d in daemons.items()}
    for d in daemons.values():
        d.auditor.tick(int(time.time() * 1000))  # what a running daemon has recorded
    chosen = {name: paths(c) for name, c in clients.items()}
    times: dict[str, dict[str, list[float]]] = {n: {} for n in daemons}
    for key in chosen["small"]:
        for _ in range(runs):
            for name, client in clients.items():
                t = time.perf_counter()
                r = client.get(chosen[name][key])
                times[name].setdefault(key, []).append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, r.text[:200]
    return {n: {k: statistics.median(v) for k, v in ts.items()} for n, ts in times.items()}


def totals(daemon: Daemon) -> dict[str, int]:
    client = TestClient(daemon.app)
    return {
        "total": client.get("/v1/waits?limit=1").json()["total"],
        "open": client.get("/v1/waits?open=true&limit=1").json()["total"],
    }


@contextlib.contextmanager
def urls(pg: bool) -> Iterator[tuple[str, str]]:
    if pg:
        from bench.pgdb import pg_database  # noqa: PLC0415

        with pg_database() as small, pg_database() as large:
            yield small, large
    else:
        with tempfile.TemporaryDirectory() as d:
            yield f"sqlite:///{d}/small.db", f"sqlite:///{d}/large.db"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1_000, help="closed waits of the small store")
    ap.add_argument("--large", type=int, default=100_000, help="closed waits of the large one")
    ap.add_argument("--open", type=int, default=150, help="open waits of both")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--pg", action="store_true", help="on PostgreSQL (the running server)")
    args = ap.parse_args()
    now = int(time.time() * 1000)
    logging.disable(logging.WARNING)  # the store's note on its hash key, once a unit
    with urls(args.pg) as (small_url, large_url):
        daemons = {}
        for name, url, n in (("small", small_url, args.small), ("large", large_url, args.large)):
            daemons[name], took = build(url, n, args.open, now)
            print(
                f"{name}: {n:,} closed + {args.open} open waits, built in {took:.1f} s", flush=True
            )
        figures = measure(daemons, args.runs)
        counted = {name: totals(d) for name, d in daemons.items()}
        for d in daemons.values():
            d.engine.dispose()
    load = os.getloadavg()
    print(f"\n{'PostgreSQL' if args.pg else 'SQLite'}, medians of {args.runs} GETs in turn, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")  # fmt: skip
    small, large = (f"{counted[k]['total']:,} waits" for k in ("small", "large"))
    print(f"{'':36} {small:>12} {large:>14} {'ratio':>7}")
    for key in figures["small"]:
        s, g = figures["small"][key], figures["large"][key]
        print(f"{key:36} {s:10.1f}ms {g:12.1f}ms {g / s:7.2f}")
    for name in ("small", "large"):
        t = counted[name]
        print(f"  {name}: total {t['total']:,}, open {t['open']:,} (as the store counts them)")
    page = figures["large"]["/ui/waits"]
    verdict = "ok" if page < TARGET_MS else "OVER"
    print(f"  target: /ui/waits under {TARGET_MS} ms at {counted['large']['total']:,}: {verdict}")


if __name__ == "__main__":
    main()
