"""The daemon's memory after a large body sent without a token to every route, beside its idle
memory: what anyone who can reach the port can make it hold (server.maxBodyBytes bounds it).

    .venv/bin/python bench/limits.py [--mib 64]

A real `sidewatch serve` (a token configured, the default limits: maxBodyBytes 16 MiB,
requestTimeout 30 s) on a throw-away SQLite store. Every route of the application, each
method it takes, gets the body twice: declared by Content-Length (refused before a byte is
read) and chunked (read up to the limit, then cut). The daemon's peak resident memory while
each was sent (VmHWM, reset before each) and its RSS after are printed beside its idle RSS.
Target: no route takes the daemon more than maxBodyBytes + 4 MiB over idle, whatever is sent.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from sidewatch.config import Config
from sidewatch.daemon.serve import Daemon

MiB = 1024 * 1024
SLACK_MIB = 4


def routes() -> list[tuple[str, str]]:
    """(method, path) for every route of the application and every method it takes."""
    logging.disable(logging.WARNING)  # the throw-away store's notices are not the bench's
    probe = Daemon(dataclasses.replace(Config(), db_url="sqlite://"))
    logging.disable(logging.NOTSET)
    pairs = [
        (method, re.sub(r"\{[^}]+\}", "x", route.path))
        for route in probe.app.routes
        for method in sorted(getattr(route, "methods", None) or ())
    ]
    probe.engine.dispose()
    return pairs


def status(pid: int, key: str) -> int:
    """A /proc/<pid>/status figure (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} for {pid}")


def peak_reset(pid: int) -> None:
    """Starts VmHWM afresh at the current RSS (Linux' clear_refs 5)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def send(port: int, method: str, path: str, mib: int, chunked: bool) -> int:
    """Sends `mib` MiB as the body (as long as the daemon takes it); the answer's status
    (0: none came)."""
    piece = b"x" * MiB
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {mib * MiB}"
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n"
    ).encode()
    if chunked:
        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
    with socket.create_connection(("127.0.0.1", port)) as sock:

        def body() -> None:
            try:
                sock.sendall(head)
                for _ in range(mib):
                    sock.sendall(piece)
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
            except OSError:
                return  # the daemon answered and closed

        sender = threading.Thread(target=body)
        sender.start()
        sock.settimeout(60)
        answer = b""
        try:
            while b"\r\n" not in answer and (chunk := sock.recv(65536)):
                answer += chunk
        except OSError:
            pass
        sender.join()
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64, help="body size in MiB (default 64)")
    mib = ap.parse_args().mib
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="sidewatch-bench-") as tmp:
        cfg = Path(tmp) / "sidewatch.yaml"
        cfg.write_text(
            f"store: {{url: 'sqlite:///{tmp}/s.db'}}\n"
            f"server: {{listen: '127.0.0.1:{port}', tokens: "
            "[{name: reader, token: bench-read-secret-0123456789, scopes: [read]}]}\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "sidewatch", "serve", "--config", str(cfg)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            time.sleep(1)
            idle = status(proc.pid, "VmRSS")
            print(
                f"idle RSS {idle / MiB:.1f} MiB. A {mib} MiB body without a token to each route: "
                "its answer, the daemon's peak RSS while it was sent and its RSS after"
            )
            print(f"{'route':26} {'declared: peak, after':>30} {'chunked: peak, after':>30}")
            worst = after = 0
            for method, path in routes():
                cells = []
                for chunked in (False, True):
                    peak_reset(proc.pid)
                    code = send(port, method, path, mib, chunked)
                    time.sleep(0.2)
                    peak, rss = status(proc.pid, "VmHWM"), status(proc.pid, "VmRSS")
                    worst, after = max(worst, peak - idle), max(after, rss - idle)
                    cells.append(f"{code} {peak / MiB:7.1f} {rss / MiB:7.1f} MiB")
                print(f"{method + ' ' + path:26} {cells[0]:>30} {cells[1]:>30}")
            print(
                f"at most {worst / MiB:+.1f} MiB over idle while a body came (target: under "
                f"maxBodyBytes, 16 MiB, + {SLACK_MIB} MiB), {after / MiB:+.1f} MiB after"
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
