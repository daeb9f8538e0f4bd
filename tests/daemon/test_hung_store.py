"""A PostgreSQL store behind a proxy that stops forwarding (a frozen network or server, where
nothing ever answers and nothing is closed): ingest, reads and /readyz answer within their
bounds instead of hanging, concurrent posts do not wait on an exhausted pool, and SIGTERM ends
the process within server.shutdownTimeout."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.daemon.test_e2e import _start
from tests.daemon.test_pgbouncer import _body
from tests.frozen import FrozenProxy

SHUTDOWN_S = 6
STORE = ", connectTimeout: 2s, statementTimeout: 1s, poolSize: 4, poolTimeout: 1s"


def test_a_frozen_store_answers_503_fast_and_sigterm_ends_within_the_bound(
    tmp_path: Path, pg_url: str
) -> None:
    proxy = FrozenProxy("127.0.0.1", 5432).start()
    url = pg_url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/")
    server = _start(tmp_path, url, "1s", store=STORE, server=f", shutdownTimeout: {SHUTDOWN_S}s")
    try:
        with httpx.Client(timeout=30) as client:
            ok = client.post(
                f"{server.url}/v1/events",
                content=_body(0),
                headers={"content-type": "application/x-ndjson"},
            )
            assert ok.status_code == 200, server.log.read_text()
            assert client.get(f"{server.url}/readyz").status_code == 200

            def post(n: int) -> tuple[int, float]:
                start = time.monotonic()
                r = httpx.post(
                    f"{server.url}/v1/events",
                    content=_body(n),
                    headers={"content-type": "application/x-ndjson"},
                    timeout=30,
                )
                return r.status_code, time.monotonic() - start

            # Connections open in the pool, each to be checked out (and pinged) after the freeze
            with ThreadPoolExecutor(max_workers=8) as pool:
                warm = list(pool.map(post, range(100, 108)))
            assert warm and all(code == 200 for code, _ in warm)

            proxy.freeze()
            began = time.monotonic()
            ready = client.get(f"{server.url}/readyz")
            assert ready.status_code == 503
            assert time.monotonic() - began < 4  # bounded at 2 s, whatever the store does
            assert "did not answer" in " ".join(ready.json()["problems"])

            with ThreadPoolExecutor(max_workers=20) as pool:
                answers = list(pool.map(post, range(1, 21)))
            assert [code for code, _ in answers] == [503] * 20
            # each within its bounds (a ping, a reconnection, the pool), far below 30 s
            assert max(took for _, took in answers) < 15

            began = time.monotonic()
            waits = client.get(f"{server.url}/v1/waits")
            assert waits.status_code == 503 and "error" in waits.json()
            assert time.monotonic() - began < 15

        stopping = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=SHUTDOWN_S + 10)
        assert time.monotonic() - stopping < SHUTDOWN_S + 2
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        proxy.close()
