"""Ingest throughput beside its floor, measured in the same run (issue 33): parsing every
line (`orjson.loads` of the same bytes) plus the database alone writing exactly the rows
sidewatch stored for that input, with the same schema, settings and transactions
(`floors.py`). Target: sidewatch's lines per second at least 0.75 of the floor's.

The stream is what agents really send: one event per model token (reasoning and text), a few
graph steps with state deltas, the gated tool call's arguments streamed in chunks, one
interrupt per run, and a route and a heartbeat per wait.

    .venv/bin/python bench/ingest.py [--runs 3000] [--repeat 3] [--kinds agui,route,heartbeat]
    .venv/bin/python bench/ingest.py --process [--lines 1000000]
    add --pg to either: PostgreSQL stores (throw-away databases), the write floor by COPY

Without `--process`, the stream is one unit ingested in this process (`Ingest.body`), the
write floor one transaction. With `--process`, both sides are whole processes on a file of
about `--lines` lines with one interrupt per 50 lines: `sidewatch ingest FILE` (start-up,
reading, storing a unit of up to 50,000 lines at a time, exit) beside a process that only
runs `orjson.loads` on every line of the same file, plus the write floor in as many
transactions as sidewatch committed units; with the peak resident memory of each (target
under 200 MB). Beside them: `sidewatch ingest` of a one-line file into a new store (start-up
and the store's creation), a process that only imports SQLAlchemy, and the CPU seconds of
each side, steadier than wall time when the machine is shared; the sides run interleaved.

With `--kinds`, the same stream is also read as from a token narrowed to those kinds (the
stream holds agui, route and heartbeat lines: name them all), interleaved with the reading
of a token of every kind: what the check of a token's `kinds` costs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from floors import Written, parse_seconds, pg_write, ratio_line, sqlite_write
from pgdb import pg_database

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

T0 = 1_785_081_600_000


# One agent run as AG-UI producers stream it: every model token is its own event.
REASONING_TOKENS = 60
TEXT_TOKENS = 120
ARG_CHUNKS = 20
GRAPH_STEPS = 3


def stream(runs: int, reasoning: int = REASONING_TOKENS, text: int = TEXT_TOKENS) -> bytes:
    lines: list[str] = []
    add = lines.append
    for n in range(runs):
        t, r, ts = f"thread-{n}", f"run-{n}", T0 + n * 1000
        add(_j({"type": "RUN_STARTED", "threadId": t, "runId": r, "timestamp": ts}))
        for step in range(GRAPH_STEPS):
            add(f'{{"type":"STEP_STARTED","stepName":"node-{step}"}}')
            add(
                f'{{"type":"STATE_DELTA","delta":[{{"op":"replace","path":"/step","value":{step}}}]}}'
            )
            add(f'{{"type":"STEP_FINISHED","stepName":"node-{step}"}}')
        add(f'{{"type":"REASONING_START","messageId":"{r}-r"}}')
        add(f'{{"type":"REASONING_MESSAGE_START","messageId":"{r}-r","role":"reasoning"}}')
        lines.extend(
            f'{{"type":"REASONING_MESSAGE_CONTENT","messageId":"{r}-r","delta":" thought{k}"}}'
            for k in range(reasoning)
        )
        add(f'{{"type":"REASONING_MESSAGE_END","messageId":"{r}-r"}}')
        add(f'{{"type":"REASONING_END","messageId":"{r}-r"}}')
        add(f'{{"type":"TEXT_MESSAGE_START","messageId":"{r}-m","role":"assistant"}}')
        lines.extend(
            f'{{"type":"TEXT_MESSAGE_CONTENT","messageId":"{r}-m","delta":" token{k}"}}'
            for k in range(text)
        )
        add(f'{{"type":"TEXT_MESSAGE_END","messageId":"{r}-m"}}')
        add(f'{{"type":"TOOL_CALL_START","toolCallId":"c-{n}","toolCallName":"deploy_service"}}')
        args = _j({"service": "checkout", "version": f"2026.07.{n}", "regions": ["eu", "us"]})
        step = -(-len(args) // ARG_CHUNKS)
        for k in range(0, len(args), step):
            add(_j({"type": "TOOL_CALL_ARGS", "toolCallId": f"c-{n}", "delta": args[k : k + step]}))
        add(f'{{"type":"TOOL_CALL_END","toolCallId":"c-{n}"}}')
        add(
            _j(
                {
                    "type": "RUN_FINISHED",
                    "threadId": t,
                    "runId": r,
                    "timestamp": ts + 500,
                    "outcome": {
                        "type": "interrupt",
                        "interrupts": [
                            {
                                "id": f"i-{n}",
                                "reason": "tool_call",
                                "toolCallId": f"c-{n}",
                                "message": "Deploy checkout?",
                                "expiresAt": "2026-07-27T16:00:00Z",
                                "metadata": {"resumeHandle": f"ckpt:{t}"},
                            }
                        ],
                    },
                }
            )
        )
        add(
            _j(
                {
                    "type": "CUSTOM",
                    "name": "sidewatch.route",
                    "timestamp": ts + 600,
                    "value": {
                        "threadId": t,
                        "interruptId": f"i-{n}",
                        "delivered": True,
                        "approverRef": "role:release-owner",
                    },
                }
            )
        )
        add(
            _j(
                {
                    "type": "CUSTOM",
                    "name": "sidewatch.heartbeat",
                    "timestamp": ts + 700,
                    "value": {"threadId": t, "resumeHandle": f"ckpt:{t}"},
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


def _j(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def sidewatch_run(
    body: bytes, lines: int, allowed: frozenset[str] | None = None, pg: bool = False
) -> tuple[float, Written]:
    """Seconds of sidewatch ingesting `body` as one unit into a new store (SQLite, or a
    throw-away PostgreSQL database), and the write floor of the rows it stored, measured
    right after it: the database alone writing them into another new store."""
    with tempfile.TemporaryDirectory() as tmp, _stores(tmp, pg) as (url, floor_url):
        path = Path(tmp) / "stream.ndjson"
        path.write_bytes(body)
        engine = open_store(url)
        # The whole stream is one unit: more lines than a unit may hold by default.
        config = Config(max_lines_per_unit=10**9)
        ingest = Ingest(Store(engine), ref_protector(engine, config), config)
        start = time.perf_counter()
        with _timed_parts() as parts:
            summary = ingest.body(str(path), path.read_bytes(), T0, allowed=allowed)
        elapsed = time.perf_counter() - start
        PARTS.append(parts)
        engine.dispose()
        if pg:
            open_store(floor_url).dispose()  # the same schema, by sidewatch's migrations
            written = pg_write(url, floor_url)
        else:
            written = sqlite_write(Path(tmp) / "bench.db", Path(tmp) / "floor.db")
    assert not summary.rejects, summary.rejects[:3]
    assert summary.accepted + summary.skipped == lines
    return elapsed, written


# Where sidewatch's time went in each in-process run: framing, reading, writing the rows.
PARTS: list[dict[str, float]] = []


@contextmanager
def _timed_parts() -> Iterator[dict[str, float]]:
    """Seconds spent in framing the unit (`framed_unit`), reading it (`Interpreter.read`) and
    writing its rows (`UnitWriter.write`), the rest being the transaction around them."""
    from sidewatch.app import ingest as app  # noqa: PLC0415
    from sidewatch.ingest.agui import Interpreter  # noqa: PLC0415
    from sidewatch.store.repo import UnitWriter  # noqa: PLC0415

    parts = {"framing": 0.0, "reading": 0.0, "writing rows": 0.0}
    wrapped = [
        (app, "framed_unit", "framing"),
        (Interpreter, "read", "reading"),
        (UnitWriter, "write", "writing rows"),
    ]
    originals = [getattr(owner, name) for owner, name, _ in wrapped]

    def timer(func: Any, part: str) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                parts[part] += time.perf_counter() - start

        return timed

    for (owner, name, part), func in zip(wrapped, originals, strict=True):
        setattr(owner, name, timer(func, part))
    try:
        yield parts
    finally:
        for (owner, name, _), func in zip(wrapped, originals, strict=True):
            setattr(owner, name, func)


@contextmanager
def _stores(tmp: str, pg: bool) -> Iterator[tuple[str, str]]:
    """The URLs of sidewatch's store and of the floor's, both new."""
    if not pg:
        yield f"sqlite:///{Path(tmp) / 'bench.db'}", ""
        return
    with pg_database() as ours, pg_database() as floor:
        yield ours, floor


FLOOR = """
import sys, orjson
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        if line.strip():
            orjson.loads(line)
"""


def timed(argv: list[str]) -> tuple[float, float, float]:
    """(seconds, peak resident MB, CPU seconds) of a whole process. GNU time starts it: a
    child forked from this process would count this one's pages in its peak."""
    with tempfile.NamedTemporaryFile("r") as out:
        start = time.perf_counter()
        subprocess.run(
            ["/usr/bin/time", "-o", out.name, "-f", "%M %U %S", *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            # bytecode cached, as an installed copy runs (the first of the runs writes it)
            env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        )
        elapsed = time.perf_counter() - start
        peak_kib, user, system = out.read().split()[-3:]
        return elapsed, int(peak_kib) / 1024, float(user) + float(system)


def process_bench(lines_wanted: int, repeat: int, pg: bool) -> None:
    # 50 lines a run: 3 reasoning and 6 text token deltas beside the fixed 41 lines.
    body = stream(max(1, lines_wanted // 50), reasoning=3, text=6)
    lines = body.count(b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.ndjson"
        path.write_bytes(body)
        # What every `sidewatch ingest` pays beside its lines: start-up (imports) and a new
        # store (its migrations), measured on a file of one line.
        one = Path(tmp) / "one-line.ndjson"
        one.write_bytes(b'{"type":"STEP_STARTED","stepName":"plan"}\n')
        ingest = [sys.executable, "-m", "sidewatch", "ingest"]
        floor, ours, fixed, imports, written = [], [], [], [], []
        for n in range(repeat):  # interleaved: a change of load hits every side alike
            floor.append(timed([sys.executable, "-c", FLOOR, str(path)]))
            with _stores(tmp, pg) as (pg_url, floor_url):
                url = pg_url if pg else f"sqlite:///{Path(tmp) / f'bench-{n}.db'}"
                ours.append(timed([*ingest, "--db", url, str(path)]))
                if pg:
                    open_store(floor_url).dispose()
                    written.append(pg_write(url, floor_url))
                else:
                    written.append(
                        sqlite_write(Path(tmp) / f"bench-{n}.db", Path(tmp) / f"floor-{n}.db")
                    )
            db = f"sqlite:///{Path(tmp) / f'one-{n}.db'}"
            fixed.append(timed([*ingest, "--db", db, str(one)]))
            imports.append(timed([sys.executable, "-c", "import sqlalchemy"]))
    (floor_s, floor_mb, _), (our_s, our_mb, _), (fixed_s, _, _) = min(floor), min(ours), min(fixed)
    floor_cpu, our_cpu, fixed_cpu = (min(t[2] for t in side) for side in (floor, ours, fixed))
    write = min(written, key=lambda w: w.seconds)
    runs = body.count(b'"RUN_STARTED"')
    store = "PostgreSQL (COPY)" if pg else "SQLite"
    print(
        f"stream: {lines} lines, {len(body) / 1e6:.1f} MB, "
        f"an interrupt per {lines / runs:.0f} lines; store {store}"
    )
    print(f"orjson.loads every line : {lines / floor_s:12,.0f} lines/s, peak {floor_mb:4.0f} MB")
    print(f"sidewatch ingest FILE   : {lines / our_s:12,.0f} lines/s, peak {our_mb:4.0f} MB")
    print(
        f"whole processes: parse floor {floor_s:.2f} s, sidewatch {our_s:.2f} s, of which "
        f"{fixed_s:.2f} s start-up and a new store (ingest of a one-line file)"
    )
    print(
        f"CPU seconds (user + sys): parse floor {floor_cpu:.2f}, sidewatch {our_cpu:.2f}, "
        f"one-line file {fixed_cpu:.2f}; the write floor {write.cpu:.2f}; by CPU, ratio "
        f"{(floor_cpu + write.cpu) / our_cpu:.2f}"
    )
    import_cpu = min(t[2] for t in imports)
    print(f"beside them, CPU seconds of a process importing SQLAlchemy alone {import_cpu:.2f}")
    print(ratio_line("process, wall", lines, our_s, floor_s, write))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ratio = (floor_s + write.seconds) / our_s
    print(
        f"ratio to parse + write {ratio:.2f} (target >= 0.75) "
        f"{'ok' if ratio >= 0.75 else 'BELOW TARGET'}; "
        f"peak {our_mb:.0f} MB (target < 200) {'ok' if our_mb < 200 else 'OVER TARGET'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--process", action="store_true", help="whole processes on a file")
    ap.add_argument("--lines", type=int, default=1_000_000, help="with --process")
    ap.add_argument("--runs", type=int, default=3000, help="agent runs (about 230 lines each)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for each side")
    ap.add_argument("--kinds", help="also as a token of these kinds: agui,route,heartbeat")
    ap.add_argument("--pg", action="store_true", help="PostgreSQL stores; the floor by COPY")
    args = ap.parse_args()
    if args.process:
        process_bench(args.lines, args.repeat, args.pg)
        return
    body = stream(args.runs)
    lines = body.count(b"\n")
    allowed = frozenset(args.kinds.split(",")) if args.kinds else None
    runs = [
        (sidewatch_run(body, lines, None, args.pg), allowed and sidewatch_run(body, lines, allowed))
        for _ in range(args.repeat)  # interleaved: a change of load hits both alike
    ]
    ours, write = min((r for r, _ in runs), key=lambda r: r[0])
    parse = min(parse_seconds(body) for _ in range(args.repeat))
    print(
        f"stream: {lines} lines, {len(body) / 1e6:.1f} MB, {args.runs} runs; per run "
        f"{REASONING_TOKENS} reasoning + {TEXT_TOKENS} text token deltas, {GRAPH_STEPS} graph "
        f"steps, {ARG_CHUNKS} argument chunks, one interrupt, a route and a heartbeat"
    )
    print(f"orjson.loads of the same lines : {lines / parse:12,.0f} lines/s")
    store = "PostgreSQL, floor by COPY" if args.pg else "SQLite"
    print(f"sidewatch ingest ({store}) : {lines / ours:12,.0f} lines/s")
    if allowed:
        narrowed = lines / min(k[0] for _, k in runs if k)
        print(
            f"  as a token of kinds {','.join(sorted(allowed))} : {narrowed:12,.0f} lines/s "
            f"({narrowed * ours / lines:.2f} of a token of every kind)"
        )
    print(ratio_line("in-process, one unit", lines, ours, parse, write))
    best = min(range(len(runs)), key=lambda i: runs[i][0][0])  # the run `ours` is of
    parts = PARTS[best * (2 if allowed else 1)]
    rest = ours - sum(parts.values())
    print(
        "  sidewatch's time: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        + f", the transaction around them {max(rest, 0):.2f} s"
    )
    ratio = (parse + write.seconds) / ours
    print(
        f"ratio to parse + write : {ratio:.2f}  (target >= 0.75) "
        f"{'ok' if ratio >= 0.75 else 'BELOW TARGET'}"
    )


if __name__ == "__main__":
    main()
