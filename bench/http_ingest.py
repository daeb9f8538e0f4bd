"""HTTP ingest throughput with 5,000-line bodies, beside the in-process ingest of the same
bodies measured in the same run (the floor: what the store and interpreter cost without HTTP);
with `--replicas N`, also N replicas on one PostgreSQL database (a throw-away one on the
running server), the clients posting to them in turn, beside the single SQLite replica.

    .venv/bin/python bench/http_ingest.py [--bodies 60] [--clients 2] [--replicas 3]

Target: at least 100,000 lines/s over HTTP on the 2-core machine.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from ingest import stream
from pgdb import pg_database

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

LINES_PER_BODY = 5000


def bodies(n: int) -> list[bytes]:
    lines = stream(n * LINES_PER_BODY // 218 + 2).split(b"\n")
    out = []
    for k in range(n):
        chunk = lines[k * LINES_PER_BODY : (k + 1) * LINES_PER_BODY]
        out.append(b"\n".join(chunk) + b"\n")
    return out


def in_process(units: list[bytes]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_store(f"sqlite:///{tmp}/floor.db")
        ingest = Ingest(Store(engine), ref_protector(engine, Config()), Config())
        start = time.perf_counter()
        for n, body in enumerate(units):
            ingest.body(f"unit-{n}", body, 0)
        elapsed = time.perf_counter() - start
        engine.dispose()
    return len(units) * LINES_PER_BODY / elapsed


def _replica(db: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sidewatch", "serve", "--db", db, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"sidewatch serve on {db} did not start")


def over_http(units: list[bytes], clients: int, db: str, replicas: int = 1) -> float:
    started = [_replica(db) for _ in range(replicas)]
    urls = [url for _, url in started]
    try:

        def post(job: tuple[int, bytes]) -> int:
            n, body = job
            with httpx.Client(timeout=60) as c:
                r = c.post(
                    f"{urls[n % len(urls)]}/v1/events",
                    content=body,
                    headers={"content-type": "application/x-ndjson"},
                )
                r.raise_for_status()
                return int(r.json()["accepted"]) + int(r.json()["skipped"])

        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            lines = sum(pool.map(post, enumerate(units)))
        elapsed = time.perf_counter() - start
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            proc.wait(timeout=30)
    return lines / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bodies", type=int, default=60)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument(
        "--replicas", type=int, default=0, help="also N replicas on PostgreSQL (0: skip)"
    )
    args = ap.parse_args()
    units = bodies(args.bodies)
    floor = in_process(units)
    with tempfile.TemporaryDirectory() as tmp:
        http = over_http(units, args.clients, f"sqlite:///{tmp}/http.db")
    print(f"{args.bodies} bodies of {LINES_PER_BODY} lines, {args.clients} clients")
    print(f"in-process ingest (floor)   : {floor:12,.0f} lines/s")
    print(
        f"HTTP ingest (sidewatch serve): {http:12,.0f} lines/s  ratio {http / floor:.2f}  "
        f"(target >= 100,000 lines/s: {'ok' if http >= 100_000 else 'BELOW TARGET'})"
    )
    if args.replicas:
        with pg_database() as db:
            pg = over_http(units, max(args.clients, args.replicas), db, args.replicas)
        print(
            f"HTTP ingest, {args.replicas} replicas on PostgreSQL: {pg:12,.0f} lines/s  "
            f"beside 1 replica on SQLite: ratio {pg / http:.2f}"
        )


if __name__ == "__main__":
    main()
