"""File-ingest throughput beside the `orjson.loads` rate of the same bytes, in one run.

The stream is what agents really send: one event per model token (reasoning and text), a few
graph steps with state deltas, the gated tool call's arguments streamed in chunks, one
interrupt per run, and a route and a heartbeat per wait. The floor splits the same bytes
into lines and `orjson.loads` each. Target: sidewatch ingests (and stores) at least half as
many lines per second as that floor.

    .venv/bin/python bench/ingest.py [--runs 3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import orjson

from sidewatch.config import Config
from sidewatch.daemon.pipeline import ingest_unit, ref_protector
from sidewatch.store.db import open_store
from sidewatch.store.repo import Store

T0 = 1_785_081_600_000


# One agent run as AG-UI producers stream it: every model token is its own event.
REASONING_TOKENS = 60
TEXT_TOKENS = 120
ARG_CHUNKS = 20
GRAPH_STEPS = 3


def stream(runs: int) -> bytes:
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
            for k in range(REASONING_TOKENS)
        )
        add(f'{{"type":"REASONING_MESSAGE_END","messageId":"{r}-r"}}')
        add(f'{{"type":"REASONING_END","messageId":"{r}-r"}}')
        add(f'{{"type":"TEXT_MESSAGE_START","messageId":"{r}-m","role":"assistant"}}')
        lines.extend(
            f'{{"type":"TEXT_MESSAGE_CONTENT","messageId":"{r}-m","delta":" token{k}"}}'
            for k in range(TEXT_TOKENS)
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


def orjson_rate(body: bytes) -> float:
    """The floor: split the same bytes into lines and orjson.loads every one of them."""
    start = time.perf_counter()
    n = 0
    for line in body.split(b"\n"):
        if line:
            orjson.loads(line)
            n += 1
    return n / (time.perf_counter() - start)


def sidewatch_rate(body: bytes, lines: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.ndjson"
        path.write_bytes(body)
        engine = open_store(f"sqlite:///{Path(tmp) / 'bench.db'}")
        store, protect = Store(engine), ref_protector(engine, Config())
        start = time.perf_counter()
        summary = ingest_unit(store, str(path), path.read_bytes(), T0, protect)
        elapsed = time.perf_counter() - start
        engine.dispose()
    assert not summary.rejects, summary.rejects[:3]
    assert summary.accepted + summary.skipped == lines
    return lines / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3000, help="agent runs (about 230 lines each)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for each side")
    args = ap.parse_args()
    body = stream(args.runs)
    lines = body.count(b"\n")
    ours = max(sidewatch_rate(body, lines) for _ in range(args.repeat))
    floor = max(orjson_rate(body) for _ in range(args.repeat))
    ratio = ours / floor
    print(
        f"stream: {lines} lines, {len(body) / 1e6:.1f} MB, {args.runs} runs; per run "
        f"{REASONING_TOKENS} reasoning + {TEXT_TOKENS} text token deltas, {GRAPH_STEPS} graph "
        f"steps, {ARG_CHUNKS} argument chunks, one interrupt, a route and a heartbeat"
    )
    print(f"orjson.loads of the same lines : {floor:12,.0f} lines/s")
    print(f"sidewatch file ingest (SQLite) : {ours:12,.0f} lines/s")
    print(
        f"ratio                          : {ratio:12.2f}  (target >= 0.50) "
        f"{'ok' if ratio >= 0.5 else 'BELOW TARGET'}"
    )


if __name__ == "__main__":
    main()
