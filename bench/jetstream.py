"""JetStream consumption: messages/s with each fetched batch committed in one transaction,
beside one transaction a message (the consumer before batches), in the same run, on the
running NATS server and a throw-away PostgreSQL database each.

    .venv/bin/python bench/jetstream.py [--messages 2000] [--batch 64]

Each message is a ten-line unit (one wait); the stream is filled before the consumer starts,
and the time runs from its start to the last message's outcome. Target: batched at least 3x
the one-per-transaction rate (the issue measured ~160 msg/s one per transaction).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import nats
from nats.aio.msg import Msg
from starlette.concurrency import run_in_threadpool

sys.path.insert(0, str(Path(__file__).parent))
from pgdb import pg_database

from sidewatch.config import Config, NatsSource
from sidewatch.daemon.jetstream import JetStreamIngest, Outcome, handle, unit_key
from sidewatch.daemon.serve import Daemon

NATS_URL = "nats://127.0.0.1:4222"
FLOOR = 3.0  # batched / one-per-transaction


def message(n: int) -> bytes:
    """Ten lines: a run whose tool call is gated by an interrupt."""
    t, r, c = f"js-thread-{n}", f"js-run-{n}", f"js-call-{n}"
    lines = [
        {"type": "RUN_STARTED", "threadId": t, "runId": r},
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{r}-m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{r}-m", "delta": "deploying"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{r}-m"},
        {"type": "TOOL_CALL_START", "toolCallId": c, "toolCallName": "deploy_service"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": c, "delta": '{"service":"checkout"}'},
        {"type": "TOOL_CALL_END", "toolCallId": c},
        {"type": "STEP_FINISHED", "stepName": "plan"},
        {
            "type": "RUN_FINISHED",
            "threadId": t,
            "runId": r,
            "outcome": {"type": "interrupt", "interrupts": [{"id": f"int-{n}"}]},
        },
    ]
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


class OnePerTransaction(JetStreamIngest):
    """The consumer before batches: each message through `handle`, its own transaction."""

    async def _batch(self, msgs: list[Msg], created: datetime | None) -> None:
        src = self.source
        for msg in msgs:
            meta = msg.metadata
            outcome = await run_in_threadpool(
                handle,
                self.ingest,
                f"nats:{src.stream}",
                msg.data,
                msg.headers,
                int(meta.timestamp.timestamp() * 1000),
                unit_key(src.stream, created, meta.sequence.stream),
            )
            self.outcomes[outcome] += 1
            await (msg.ack() if outcome is Outcome.STORED else msg.term())


async def fill(stream: str, subject: str, n: int) -> None:
    nc = await nats.connect(NATS_URL)
    try:
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[f"{subject}.>"])
        futures = [await js.publish_async(f"{subject}.a", message(k)) for k in range(n)]
        await asyncio.gather(*futures)
    finally:
        await nc.close()


async def drop(stream: str) -> None:
    nc = await nats.connect(NATS_URL)
    try:
        await nc.jetstream().delete_stream(stream)
    finally:
        await nc.close()


async def consume(kind: type[JetStreamIngest], n: int, batch: int) -> tuple[float, int]:
    """Seconds to consume `n` messages with the consumer `kind`, and how many were stored."""
    stream = f"SWBENCH_{uuid.uuid4().hex[:10]}"
    subject = f"swbench.{stream.lower()}"
    await fill(stream, subject, n)
    try:
        with pg_database() as db_url:
            source = NatsSource(NATS_URL, stream, subject=f"{subject}.>", batch=batch)
            daemon = Daemon(Config(db_url=db_url, nats=source))
            consumer = kind(daemon.ingest, source)
            started = time.perf_counter()
            consumer.start()
            while sum(consumer.outcomes.values()) < n:
                await asyncio.sleep(0.01)
            seconds = time.perf_counter() - started
            await consumer.stop()
            daemon.lease.release()
            daemon.engine.dispose()
            return seconds, consumer.outcomes[Outcome.STORED]
    finally:
        await drop(stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    n = args.messages
    one_s, one_stored = asyncio.run(consume(OnePerTransaction, n, args.batch))
    batch_s, batch_stored = asyncio.run(consume(JetStreamIngest, n, args.batch))
    one, batched = n / one_s, n / batch_s
    print(f"{n} ten-line messages, fetched {args.batch} at a time, PostgreSQL store")
    for name, rate, seconds, stored in (
        ("one transaction a message", one, one_s, one_stored),
        ("one transaction a batch  ", batched, batch_s, batch_stored),
    ):
        print(f"  {name} : {rate:8.0f} msg/s ({seconds:.2f} s, {stored} stored)")
    verdict = "ok" if batched >= FLOOR * one and batch_stored == one_stored == n else "BELOW"
    print(f"  ratio {batched / one:.1f}x (floor {FLOOR:.0f}x): {verdict}")
    if verdict != "ok":
        sys.exit(1)


if __name__ == "__main__":
    main()
