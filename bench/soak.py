"""Soak: a real `sidewatch serve` under mixed load with injected faults, for `--duration`.

Clients post valid bodies of varying sizes (NDJSON, gzip, SSE, JSON arrays) with bad lines
mixed in, bad bodies (400, 413, 415), and stalled or trickling requests (408), and read the
waits and the metrics, while the auditor ticks every 2 s. Faults: another process holds the
store's write lock for a few seconds now and then (SQLite; on PostgreSQL the daemon's
connections are terminated instead): ingest answers 503, stores nothing, and the client
retries; and the daemon is killed with SIGKILL once and restarted (a body in flight is
retried; one that was committed before its answer is counted as such).

At the end the lines the answers accepted, skipped and rejected are compared with what the
store holds (they must agree), and the daemon's resident memory over time is shown; its
growth from the first minute after warm-up to the last minute (the floor, measured in the
same run) must stay under `--growth`. The exit status is 1 when counts disagree, an answer
was unexpected, the daemon died by itself, or memory was not flat.

    .venv/bin/python bench/soak.py [--duration 600] [--clients 3] [--db URL] [--json FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

BAD_LINES = (
    b"{not json",  # not_json
    b"[1, 2]",  # not_object
    b'{"type":"NO_SUCH_EVENT"}',  # unknown_type
    b'{"type":"CUSTOM","name":"sidewatch.nope","value":{}}',  # unknown_evidence
)
LOCK_SECONDS = 3.0
REQUEST_TIMEOUT = 2  # server.requestTimeout in the soak's config, seconds
MAX_LINES = 5000  # server.maxLinesPerUnit
MAX_BODY = 1024 * 1024  # server.maxBodyBytes


# -- the daemon ----------------------------------------------------------------------------


class Daemon:
    """`sidewatch serve` in a child process, restartable on the same port and store."""

    def __init__(self, tmp: Path, db_url: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_url = db_url
        self.config = tmp / "soak.yaml"
        self.config.write_text(
            f"store: {{url: '{db_url}', busyTimeout: 500ms}}\n"
            f"server: {{listen: '127.0.0.1:{self.port}', requestTimeout: {REQUEST_TIMEOUT}s, "
            f"maxBodyBytes: {MAX_BODY}, maxLinesPerUnit: {MAX_LINES}}}\n"
            "auditor: {interval: 2s}\n"
            "reports: {schedule: null}\n"
        )
        self.log = tmp / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.up = threading.Event()
        self.generation = 0  # incremented by each kill: a cut connection is then expected

    def start(self) -> None:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sidewatch", "serve", "--config", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    self.up.set()
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise SystemExit(f"sidewatch serve did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        assert self.proc is not None
        self.up.clear()
        self.generation += 1
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM and wait; the return code (uvicorn ends by the signal, so -15)."""
        assert self.proc is not None
        self.up.clear()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# -- bodies ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Body:
    kind: str
    content: bytes
    headers: dict[str, str]
    expect: int  # the status this body must get
    marker: str  # the body's own thread id: found in the store once the body is stored
    lines: int = 0
    bad: int = 0  # bad lines mixed in (each must be a reject)


def _events(marker: str, content_lines: int, rng: random.Random) -> list[dict[str, Any]]:
    run, ts = f"{marker}-run", int(time.time() * 1000)
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": marker, "runId": run, "timestamp": ts - 5000},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "deploy_service"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"service":"checkout"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
    ]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f" token{k}"}
        for k in range(content_lines)
    ]
    events.append(
        {
            "type": "RUN_FINISHED",
            "threadId": marker,
            "runId": run,
            "timestamp": ts,
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "i",
                        "reason": "tool_call",
                        "toolCallId": "c",
                        "metadata": {"resumeHandle": f"ckpt:{marker}"},
                    }
                ],
            },
        }
    )
    ref = {"threadId": marker, "interruptId": "i"}
    events.append(
        {
            "type": "CUSTOM",
            "name": "sidewatch.route",
            "timestamp": ts + 10,
            "value": {**ref, "delivered": True, "approverRef": "role:release-owner"},
        }
    )
    events.append(
        {
            "type": "CUSTOM",
            "name": "sidewatch.heartbeat",
            "timestamp": ts + 20,
            "value": {"threadId": marker, "resumeHandle": f"ckpt:{marker}"},
        }
    )
    if rng.random() < 0.5:  # half of the waits close, half stay open for the auditor
        events.append(
            {
                "type": "CUSTOM",
                "name": "sidewatch.decision",
                "timestamp": ts + 30,
                "value": {**ref, "decision": "decline"},
            }
        )
    return events


def _lines(marker: str, rng: random.Random) -> tuple[list[bytes], int]:
    """A unit's lines (sizes spread from a dozen to a few thousand), bad ones mixed in."""
    content = int(rng.choice((5, 50, 500, 3000)) * rng.random())
    lines = [json.dumps(e, separators=(",", ":")).encode() for e in _events(marker, content, rng)]
    bad = rng.choice((0, 0, 1, 2, 3))
    for _ in range(bad):
        lines.insert(rng.randrange(1, len(lines)), rng.choice(BAD_LINES))
    return lines, bad


def make_body(n: int, rng: random.Random) -> Body:
    """Body number `n` of a client, of a kind drawn from the mix."""
    marker = f"soak-{n}"
    kind = rng.choices(
        ("ndjson", "gzip", "sse", "array", "400", "413", "415"),
        weights=(45, 20, 12, 8, 5, 5, 5),
    )[0]
    nd = {"content-type": "application/x-ndjson"}
    if kind in ("ndjson", "gzip", "sse"):
        lines, bad = _lines(marker, rng)
        if kind == "sse":
            content = b"".join(b"data: " + line + b"\n\n" for line in lines)
            return Body(
                kind, content, {"content-type": "text/event-stream"}, 200, marker, len(lines), bad
            )
        content = b"\n".join(lines) + b"\n"
        if kind == "gzip":
            return Body(
                kind,
                gzip.compress(content, 1),
                {**nd, "content-encoding": "gzip"},
                200,
                marker,
                len(lines),
                bad,
            )
        return Body(kind, content, nd, 200, marker, len(lines), bad)
    if kind == "array":
        events = _events(marker, rng.randrange(200), rng)
        return Body(
            kind,
            json.dumps(events).encode(),
            {"content-type": "application/json"},
            200,
            marker,
            len(events),
        )
    if kind == "400":
        broken = json.dumps(_events(marker, 3, rng)).encode()[:-20]  # a JSON array cut short
        return Body(kind, broken, {"content-type": "application/json"}, 400, marker)
    if kind == "413":
        lines, _ = _lines(marker, rng)
        if rng.random() < 0.5:  # too many lines
            lines += [b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}'] * MAX_LINES
            return Body(kind, b"\n".join(lines), nd, 413, marker)
        # too many bytes (the declared length is refused before reading)
        return Body(kind, b"\n".join(lines) + b"\n" + b" " * (MAX_BODY + 1), nd, 413, marker)
    lines, _ = _lines(marker, rng)
    return Body(
        kind, b"\n".join(lines), {"content-type": "application/x-www-form-urlencoded"}, 415, marker
    )


# -- the clients -----------------------------------------------------------------------------


@dataclass
class Tally:
    answers: Counter[str] = field(default_factory=Counter)  # "kind status" -> n
    accepted: int = 0
    skipped: int = 0
    rejected: int = 0
    units: int = 0
    acked: set[str] = field(default_factory=set)  # markers of bodies answered 200
    refused: set[str] = field(default_factory=set)  # markers of bodies refused for good
    retries_503: int = 0
    in_flight_at_kill: int = 0
    # Bodies committed before the daemon died, whose answer was lost: counted from the answer
    # to their retry (sending a body again stores the same lines again, as a new unit).
    unanswered: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    reads: Counter[str] = field(default_factory=Counter)

    def merge(self, other: Tally) -> None:
        self.answers += other.answers
        self.unanswered += other.unanswered
        self.reads += other.reads
        for name in ("accepted", "skipped", "rejected", "units", "retries_503"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.in_flight_at_kill += other.in_flight_at_kill
        self.acked |= other.acked
        self.refused |= other.refused
        self.unexpected += other.unexpected


def stored_marker(db_url: str, marker: str) -> bool:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            q = text("SELECT count(*) FROM interrupt WHERE thread_id = :t")
            return bool(conn.execute(q, {"t": marker}).scalar_one())
    finally:
        engine.dispose()


def post_until_answered(daemon: Daemon, client: httpx.Client, body: Body, tally: Tally) -> None:
    """Post a body until it has a final answer: 503 is retried; so is a body whose connection
    the daemon's death cut (after asking the store whether it was committed first)."""
    lost = False
    while True:
        daemon.up.wait()
        generation = daemon.generation
        try:
            r = client.post(f"{daemon.url}/v1/events", content=body.content, headers=body.headers)
        except httpx.TransportError:
            if generation == daemon.generation and daemon.alive():
                tally.unexpected.append(f"{body.kind}: connection failed while the daemon ran")
                return
            tally.in_flight_at_kill += 1
            daemon.up.wait()
            lost = stored_marker(daemon.db_url, body.marker)
            continue
        tally.answers[f"{body.kind} {r.status_code}"] += 1
        if r.status_code == 503:
            tally.retries_503 += 1
            if "nothing of this body was stored" not in r.json().get("error", ""):
                tally.unexpected.append(f"503 without its promise: {r.text[:200]}")
            time.sleep(0.2)
            continue
        break
    if r.status_code != body.expect:
        tally.unexpected.append(f"{body.kind}: {r.status_code} {r.text[:200]}")
        return
    if r.status_code != 200:
        if "error" not in r.json():
            tally.unexpected.append(f"{body.kind}: {r.status_code} without an error")
        tally.refused.add(body.marker)
        return
    answer = r.json()
    accepted, skipped, rejected = answer["accepted"], answer["skipped"], len(answer["rejected"])
    if rejected != body.bad or accepted + skipped + rejected != body.lines:
        tally.unexpected.append(f"{body.kind}: {answer} for {body.lines} lines, {body.bad} bad")
    tally.accepted += accepted
    tally.skipped += skipped
    tally.rejected += rejected
    tally.units += 1
    tally.acked.add(body.marker)
    if lost:
        tally.unanswered.update(accepted=accepted, skipped=skipped, rejected=rejected, units=1)


def read_some(daemon: Daemon, client: httpx.Client, rng: random.Random, tally: Tally) -> None:
    daemon.up.wait()
    path = rng.choice(("/v1/waits?limit=50", "/v1/waits?open=true&limit=20", "/metrics", "/readyz"))
    try:
        r = client.get(f"{daemon.url}{path}")
    except httpx.TransportError:
        return  # the daemon was killed meanwhile
    tally.reads[f"{path.split('?')[0]} {r.status_code}"] += 1
    # 503 is an answer of the read API too while the store is away (a PostgreSQL fault).
    if r.status_code != 200 and not (r.status_code == 503 and path != "/metrics"):
        tally.unexpected.append(f"GET {path}: {r.status_code}")


def client_loop(
    daemon: Daemon, seed: int, until: float, stop: threading.Event, tally: Tally
) -> None:
    rng = random.Random(seed)
    n = 0
    with httpx.Client(timeout=120) as client:
        while time.monotonic() < until and not stop.is_set():
            if rng.random() < 0.2:
                read_some(daemon, client, rng, tally)
                continue
            n += 1
            post_until_answered(daemon, client, make_body(seed * 10_000_000 + n, rng), tally)


def slow_loop(daemon: Daemon, until: float, stop: threading.Event, tally: Tally) -> None:
    """One stalled or trickling request after another: each must end in a 408."""
    rng = random.Random(0)
    n = 0
    while time.monotonic() < until and not stop.is_set():
        daemon.up.wait()
        generation = daemon.generation
        n += 1
        marker = f"soak-slow-{n}"
        lines, _ = _lines(marker, rng)
        partial = b"\n".join(lines) + b"\n"
        how = rng.choice(("stalled head", "stalled body", "trickling body"))
        head = (
            f"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
            f"Content-Type: application/x-ndjson\r\nContent-Length: {len(partial) + 1000}\r\n"
        ).encode()
        try:
            with socket.create_connection(("127.0.0.1", daemon.port), timeout=60) as s:
                s.sendall(head if how == "stalled head" else head + b"\r\n" + partial)
                s.settimeout(0.25 if how == "trickling body" else 60)
                data = b""
                while True:
                    try:
                        chunk = s.recv(65536)
                    except TimeoutError:
                        s.sendall(b" ")  # a byte now and then: alive, never finished
                        continue
                    except ConnectionResetError:
                        # A byte that reached the daemon after its answer makes the close a
                        # reset; the answer read before it stands.
                        if not data:
                            raise
                        break
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            if generation == daemon.generation and daemon.alive():
                tally.unexpected.append(f"{how}: {sys.exc_info()[1]!r}")
            continue
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "none"
        tally.answers[f"{how} {status}"] += 1
        if status == "408":
            tally.refused.add(marker)
        elif generation == daemon.generation:
            tally.unexpected.append(f"{how}: {data[:200]!r}")


# -- faults and memory ------------------------------------------------------------------------


def hold_store(db_url: str) -> None:
    """Another process's hold on the store for LOCK_SECONDS."""
    if db_url.startswith("sqlite:///"):
        other = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        time.sleep(LOCK_SECONDS)
        other.execute("ROLLBACK")
        other.close()
        return
    engine = create_engine(db_url)
    with engine.begin() as conn:  # cut every connection of the daemon, mid-transaction or not
        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    engine.dispose()


def faults(
    daemon: Daemon, until: float, kill_at: float, every: float, stop: threading.Event
) -> dict[str, Any]:
    done: dict[str, Any] = {"store_holds": 0, "kills": 0}
    next_hold = time.monotonic() + every / 2
    while not stop.wait(0.2) and time.monotonic() < until:
        if kill_at and not done["kills"] and time.monotonic() >= kill_at:
            daemon.kill()
            done["kills"] += 1
            daemon.start()
        if time.monotonic() >= next_hold:
            hold_store(daemon.db_url)
            done["store_holds"] += 1
            next_hold = time.monotonic() + every
    return done


def rss_kib(pid: int) -> tuple[int, int] | None:
    """VmRSS (KiB) and open descriptors of a process, or None when it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]), fds
    return None


def sampler(
    daemon: Daemon, every: float, start: float, stop: threading.Event, out: list[Any]
) -> None:
    while not stop.wait(every):
        proc = daemon.proc
        got = rss_kib(proc.pid) if proc is not None and daemon.up.is_set() else None
        if got is not None and proc is not None:
            out.append((time.monotonic() - start, proc.pid, *got))


def memory_verdict(
    samples: list[Any], warmup: float, window: float, growth: float
) -> dict[str, Any]:
    """Growth from the first window after warm-up (the floor) to the last window, for the
    last daemon process; judged only when the run leaves at least three windows."""
    if not samples:
        return {"judged": False, "flat": None, "why": "no samples"}
    last_pid = samples[-1][1]
    mine = [s for s in samples if s[1] == last_pid]
    begin = mine[0][0] + warmup
    judged = [s for s in mine if s[0] >= begin]
    if not judged or judged[-1][0] - begin < 3 * window:
        return {"judged": False, "flat": None, "why": "run too short to judge"}
    first = statistics.median(s[2] for s in judged if s[0] < begin + window)
    last = statistics.median(s[2] for s in judged if s[0] > judged[-1][0] - window)
    ratio = (last - first) / first
    return {
        "judged": True,
        "flat": ratio < growth,
        "first_window_kib": first,
        "last_window_kib": last,
        "growth": ratio,
        "fds_first": judged[0][3],
        "fds_last": judged[-1][3],
    }


# -- the store's own count ---------------------------------------------------------------------


def store_counts(db_url: str, since_ms: int) -> dict[str, Any]:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        units, accepted, skipped, rejected = conn.execute(
            text(
                "SELECT count(*), coalesce(sum(accepted), 0), coalesce(sum(skipped), 0), "
                "coalesce(sum(rejected), 0) FROM unit WHERE received_at >= :t"
            ),
            {"t": since_ms},
        ).one()
        reject_rows = conn.execute(
            text(
                "SELECT count(*) FROM reject JOIN unit ON unit.id = reject.unit_id "
                "WHERE unit.received_at >= :t"
            ),
            {"t": since_ms},
        ).scalar_one()
        by_kind = conn.execute(
            text(
                "SELECT coalesce(sum(lines), 0) FROM line_count JOIN unit "
                "ON unit.id = line_count.unit_id WHERE unit.received_at >= :t"
            ),
            {"t": since_ms},
        ).scalar_one()
        markers = {
            str(r[0])
            for r in conn.execute(
                text("SELECT DISTINCT thread_id FROM interrupt WHERE thread_id LIKE 'soak-%'")
            )
        }
    engine.dispose()
    return {
        "units": int(units),
        "accepted": int(accepted),
        "skipped": int(skipped),
        "rejected": int(rejected),
        "reject_rows": int(reject_rows),
        "line_count_rows": int(by_kind),
        "markers": markers,
    }


# -- the run -------------------------------------------------------------------------------------


def soak(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    db_url = args.db or f"sqlite:///{tmp}/soak.db"
    daemon = Daemon(tmp, db_url)
    since_ms = int(time.time() * 1000) - 1000
    daemon.start()
    start = time.monotonic()
    until = start + args.duration
    stop = threading.Event()
    tallies = [Tally() for _ in range(args.clients + 1)]
    samples: list[Any] = []
    workers = [
        threading.Thread(target=client_loop, args=(daemon, k + 1, until, stop, tallies[k]))
        for k in range(args.clients)
    ]
    workers.append(threading.Thread(target=slow_loop, args=(daemon, until, stop, tallies[-1])))
    watch = threading.Thread(target=sampler, args=(daemon, args.sample, start, stop, samples))
    for t in [*workers, watch]:
        t.start()
    kill_at = start + args.kill_at * args.duration if args.kill_at else 0.0
    try:
        injected = faults(daemon, until, kill_at, args.hold_every, stop)
        for t in workers:
            t.join(timeout=max(0.0, until - time.monotonic()) + 300)
        died = not daemon.alive()
    finally:
        stop.set()
        watch.join()
        code = daemon.stop() if daemon.proc is not None else None
    tally = Tally()
    for t in tallies:
        tally.merge(t)
    stored = store_counts(db_url, since_ms)
    answered = {
        "units": tally.units,
        "accepted": tally.accepted,
        "skipped": tally.skipped,
        "rejected": tally.rejected,
    }
    expected = {k: v + tally.unanswered[k] for k, v in answered.items()}
    missing = sorted(tally.acked - stored["markers"])
    refused_but_stored = sorted(tally.refused & stored["markers"] - tally.acked)
    agree = (
        all(expected[k] == stored[k] for k in expected)
        and stored["reject_rows"] == stored["rejected"]
        and stored["line_count_rows"] == stored["accepted"] + stored["skipped"]
        and not missing
        and not refused_but_stored
    )
    memory = memory_verdict(samples, args.warmup, args.window, args.growth)
    return {
        "duration_s": args.duration,
        "clients": args.clients,
        "store": "SQLite" if db_url.startswith("sqlite") else "PostgreSQL",
        "faults": injected,
        "answers": dict(sorted(tally.answers.items())),
        "reads": dict(sorted(tally.reads.items())),
        "retries_503": tally.retries_503,
        "in_flight_at_kill": tally.in_flight_at_kill,
        "answered": answered,
        "unanswered_stored": dict(tally.unanswered),
        "stored": {k: v for k, v in stored.items() if k != "markers"},
        "acked_missing": missing[:20],
        "refused_but_stored": refused_but_stored[:20],
        "agree": agree,
        "unexpected": tally.unexpected[:20],
        "died_by_itself": died,
        "exit_code": code,
        "samples": samples,
        "memory": memory,
    }


def report(r: dict[str, Any]) -> None:
    f = r["faults"]
    held = (
        f"store write lock held {LOCK_SECONDS:.0f} s"
        if r["store"] == "SQLite"
        else "daemon's store connections terminated"
    )
    print(
        f"soak: {r['duration_s']:.0f} s, {r['clients']} clients and a slow one, {r['store']}; "
        f"faults: {held} x{f['store_holds']}, {f['kills']} SIGKILL and restart"
    )
    posts = Counter[str]()
    for key, n in r["answers"].items():
        posts[key.rsplit(" ", 1)[1]] += n
    print("answers: " + ", ".join(f"{s}: {n:,}" for s, n in sorted(posts.items())))
    print(f"  by kind: {', '.join(f'{k}: {n:,}' for k, n in r['answers'].items())}")
    print(f"reads: {', '.join(f'{k}: {n:,}' for k, n in r['reads'].items())}")
    print(
        f"503 retried: {r['retries_503']:,}; in flight at the kill: {r['in_flight_at_kill']} "
        f"(committed before their answer: {r['unanswered_stored'].get('units', 0)})"
    )
    print()
    print(f"{'':10} {'answered':>12} {'+ unanswered':>13} {'stored':>12}  agree")
    for key in ("units", "accepted", "skipped", "rejected"):
        a, u, s = r["answered"][key], r["unanswered_stored"].get(key, 0), r["stored"][key]
        print(f"{key:10} {a:12,} {u:13,} {s:12,}  {'yes' if a + u == s else 'NO'}")
    s = r["stored"]
    print(
        f"reject rows {s['reject_rows']:,} (= rejected: {s['reject_rows'] == s['rejected']}); "
        f"lines by kind {s['line_count_rows']:,} (= accepted + skipped: "
        f"{s['line_count_rows'] == s['accepted'] + s['skipped']})"
    )
    print(
        f"acknowledged bodies missing from the store: {len(r['acked_missing'])}; "
        f"refused bodies found in it: {len(r['refused_but_stored'])}"
    )
    print(f"counts agree: {'yes' if r['agree'] else 'NO'}")
    for line in r["unexpected"]:
        print(f"unexpected: {line}")
    print()
    print("daemon memory (VmRSS) and open descriptors:")
    step = max(1, len(r["samples"]) // 20)
    for t, pid, kib, fds in r["samples"][::step]:
        print(f"  {t:6.0f} s  pid {pid:7}  {kib / 1024:7.1f} MiB  {fds:4} fds")
    m = r["memory"]
    if m["judged"]:
        print(
            f"first window after warm-up (floor) {m['first_window_kib'] / 1024:.1f} MiB, last "
            f"window {m['last_window_kib'] / 1024:.1f} MiB: growth {m['growth']:+.1%} "
            f"(threshold {r['growth_limit']:.0%}): {'flat' if m['flat'] else 'NOT FLAT'}; "
            f"fds {m['fds_first']} -> {m['fds_last']}"
        )
    else:
        print(f"memory not judged: {m['why']}")
    print(f"daemon died by itself: {'YES' if r['died_by_itself'] else 'no'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600, help="seconds of load")
    ap.add_argument("--clients", type=int, default=3, help="posting clients (and one slow one)")
    ap.add_argument("--db", help="a store URL (an empty PostgreSQL database); default SQLite")
    ap.add_argument("--kill-at", type=float, default=0.1, help="SIGKILL at this fraction; 0: no")
    ap.add_argument("--hold-every", type=float, default=40, help="seconds between store holds")
    ap.add_argument("--sample", type=float, default=5, help="seconds between memory samples")
    ap.add_argument("--warmup", type=float, default=60, help="seconds before memory is judged")
    ap.add_argument("--window", type=float, default=60, help="seconds of each memory window")
    ap.add_argument("--growth", type=float, default=0.10, help="allowed memory growth")
    ap.add_argument("--json", help="also write the summary as JSON to this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sidewatch-soak-") as tmp:
        result = soak(args, Path(tmp))
    result["growth_limit"] = args.growth
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    memory_ok = result["memory"]["flat"] is not False
    ok = result["agree"] and not result["unexpected"] and not result["died_by_itself"]
    return 0 if ok and memory_ok else 1


if __name__ == "__main__":
    sys.exit(main())
