"""What trace context costs at ingest: lines per second of the same agent stream with and
without each run's W3C trace context, side by side in one run.

The stream is bench/ingest.py's (one event per model token, a streamed tool call, one
interrupt per run, a route and a heartbeat per wait), each run preceded by its
`RunAgentInput`. The traced side's input and `RUN_STARTED` carry `traceparent` and a
`tracestate` of two members, as the tap sends them; the plain side carries none. Each side
is ingested (and stored) whole into a new SQLite store, the sides interleaved, best of
`--repeat`, by wall time and by CPU time (steadier when the machine is shared). Target: the
traced side within 5 % of the plain one.

    .venv/bin/python bench/trace_ingest.py [--runs 3000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from ingest import T0, stream

from sidewatch.app.ingest import Ingest, ref_protector
from sidewatch.config import Config
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

TARGET = 0.95  # the traced side's lines per second over the plain side's, at least


def with_inputs(body: bytes, traced: bool) -> bytes:
    """`body` with each run's `RunAgentInput` before its `RUN_STARTED`; with `traced`, the
    input and the `RUN_STARTED` carry the run's trace context."""
    out: list[bytes] = []
    for n, raw in enumerate(body.splitlines()):
        line = raw
        if line.startswith(b'{"type":"RUN_STARTED"'):
            event = json.loads(line)
            trace = {}
            if traced:
                trace = {
                    "traceparent": f"00-{n + 1:032x}-{n + 1:016x}-01",
                    "tracestate": f"vendor=t{n},other=s{n}",
                }
            run = {
                "threadId": event["threadId"],
                "runId": event["runId"],
                "messages": [],
                "timestamp": T0,
                **trace,
            }
            out.append(json.dumps(run, separators=(",", ":")).encode())
            if traced:
                event.update({"traceparent": trace["traceparent"]})
            line = json.dumps(event, separators=(",", ":")).encode()
        out.append(line)
    return b"\n".join(out) + b"\n"


def rates(body: bytes, lines: int) -> tuple[float, float]:
    """(lines per wall second, lines per CPU second) of ingesting `body` into a new store."""
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        config = Config(max_lines_per_unit=10**9)  # the whole stream is one unit
        ingest = Ingest(Store(engine), ref_protector(engine, config), config)
        wall, cpu = time.perf_counter(), time.process_time()
        summary = ingest.body("bench", body, T0)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        engine.dispose()
    assert not summary.rejects, summary.rejects[:3]
    assert summary.accepted + summary.skipped == lines
    return lines / wall, lines / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5, help="best of N for each side")
    args = ap.parse_args()
    base = stream(args.runs)
    plain, traced = with_inputs(base, False), with_inputs(base, True)
    lines = plain.count(b"\n")
    assert lines == traced.count(b"\n")
    got: dict[str, list[tuple[float, float]]] = {"plain": [], "traced": []}
    for _ in range(args.repeat):  # interleaved: a change of load hits both sides alike
        got["plain"].append(rates(plain, lines))
        got["traced"].append(rates(traced, lines))
    print(f"{lines} lines, {args.runs} runs, best of {args.repeat}")
    for k, what in enumerate(("wall", "CPU")):
        best = {side: max(r[k] for r in v) for side, v in got.items()}
        ratio = best["traced"] / best["plain"]
        print(
            f"  by {what:<4} without trace context {best['plain']:>9,.0f} lines/s, "
            f"with {best['traced']:>9,.0f} lines/s: traced/plain {ratio:.3f} "
            f"(target >= {TARGET}: {'met' if ratio >= TARGET else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
