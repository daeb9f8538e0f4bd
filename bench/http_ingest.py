"""HTTP ingest throughput with 5,000-line bodies, beside the in-process ingest of the same
bodies measured in the same run (the floor: what the store and interpreter cost without HTTP);
with `--replicas N`, also N replicas on one PostgreSQL database (a throw-away one on the
running server), the clients posting to them in turn, beside the single SQLite replica.

The client is not the bottleneck (issue 33): `--clients` processes, each posting its share of
the bodies on one keep-alive `http.client` connection, the bodies built before the clock
starts. Beside sidewatch, the same client feeds a bare Starlette endpoint under the same
uvicorn (it reads each body whole and answers a small JSON): what HTTP itself costs here, and
the most this client can measure.

    .venv/bin/python bench/http_ingest.py [--bodies 60] [--clients 2] [--replicas 3]

Target: at least 100,000 lines/s over HTTP on the 2-core machine, and at least 0.7 of the
in-process ingest.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

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


BARE = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def events(request):
    body = await request.body()
    return JSONResponse({"accepted": body.count(b"\\n"), "skipped": 0})

async def health(request):
    return JSONResponse({"ok": True})

app = Starlette(routes=[Route("/v1/events", events, methods=["POST"]), Route("/healthz", health)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _started(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            conn.close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{argv} did not start")


def _replica(db: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    argv = [sys.executable, "-m", "sidewatch", "serve", "--db", db, "--listen", f"127.0.0.1:{port}"]
    return _started(argv, port), port


_UNITS: list[bytes] = []  # the bodies, inherited by the forked clients


def _client(job: tuple[list[int], list[int]]) -> int:
    """One client process: its bodies (by index) posted in turn on one keep-alive connection
    to each port; the lines the server says it took."""
    indices, ports = job
    conns = {p: http.client.HTTPConnection("127.0.0.1", p, timeout=120) for p in ports}
    lines = 0
    for k, n in enumerate(indices):
        conn = conns[ports[k % len(ports)]]
        conn.request("POST", "/v1/events", _UNITS[n], {"content-type": "application/x-ndjson"})
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200:
            raise SystemExit(f"HTTP {answer.status}: {data[:200]!r}")
        got = orjson.loads(data)
        lines += int(got["accepted"]) + int(got["skipped"])
    for conn in conns.values():
        conn.close()
    return lines


def drive(units: list[bytes], clients: int, ports: list[int]) -> float:
    """Lines a second of `clients` forked client processes posting every body once."""
    _UNITS[:] = units
    jobs = [(list(range(c, len(units), clients)), ports) for c in range(clients)]
    with multiprocessing.get_context("fork").Pool(clients) as pool:
        pool.map(_client, [([], ports)] * clients)  # forked and connected before the clock
        start = time.perf_counter()
        lines = sum(pool.map(_client, jobs))
        elapsed = time.perf_counter() - start
    return lines / elapsed


def over_http(units: list[bytes], clients: int, db: str, replicas: int = 1) -> float:
    started = [_replica(db) for _ in range(replicas)]
    try:
        return drive(units, clients, [port for _, port in started])
    finally:
        for proc, _ in started:
            proc.terminate()
        for proc, _ in started:
            proc.wait(timeout=30)


def bare(units: list[bytes], clients: int) -> float:
    """The same client against a bare Starlette endpoint under uvicorn."""
    port = _free_port()
    proc = _started([sys.executable, "-c", BARE, str(port)], port)
    try:
        return drive(units, clients, [port])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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
    endpoint = bare(units, args.clients)
    print(
        f"{args.bodies} bodies of {LINES_PER_BODY} lines ({len(units[0]) / 1000:.0f} KB), "
        f"{args.clients} client processes (http.client, keep-alive)"
    )
    print(f"in-process ingest (floor)    : {floor:12,.0f} lines/s")
    print(
        f"HTTP ingest (sidewatch serve): {http:12,.0f} lines/s  ratio {http / floor:.2f} "
        f"(target >= 0.70: {'ok' if http / floor >= 0.7 else 'BELOW TARGET'}; >= 100,000 "
        f"lines/s: {'ok' if http >= 100_000 else 'BELOW TARGET'})"
    )
    print(
        f"bare Starlette endpoint      : {endpoint:12,.0f} lines/s  (the same client; "
        f"sidewatch is {http / endpoint:.2f} of it)"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.replicas:
        with pg_database() as db:
            pg = over_http(units, max(args.clients, args.replicas), db, args.replicas)
        print(
            f"HTTP ingest, {args.replicas} replicas on PostgreSQL: {pg:12,.0f} lines/s  "
            f"beside 1 replica on SQLite: ratio {pg / http:.2f}"
        )


if __name__ == "__main__":
    main()
